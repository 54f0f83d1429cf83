"""Every page of the built book, as a reader sees it in a real browser (headless Chromium), at 1280 px and 390 px.

After MathJax has finished typesetting, each page must show:

- no MathJax error and no raw TeX (``\\(``, ``$...$``, ``\\frac``...) in the text, the sidebar or the tab title;
- at 1280 px, no display equation, table or code block wider than the content column;
- real alt text (not a file name) on every image, and a numbered caption on every chapter figure;
- none of the project's internal words (see ``INTERNAL``) in the page text;
- no raw pandas tables, no stray ``False``/``None`` output lines, no tqdm progress bars;
- every figure at its true shape: rendered aspect ratio within 3% of the image file's, at both widths;
- no whole sentence in bold in running text (more than ``BOLD_WORDS`` words of a bold run or glued value);
- no blank figure panel: a framed panel of a figure's PNG with (almost) nothing inside it (``figure_panels``);
- no table rendered inside a caption (``<figcaption>``: small, muted caption text);
- no page wider than the window (a page that scrolls sideways as a whole, at either width);
- no "scroll sideways" hint above a figure that fits its box (the hint only where the figure overflows);
- figure text readable at every width: the book style's smallest font, scaled as the figure is shown, is at
  least ``MIN_FIGURE_TEXT_PX`` pixels;
- at 390 px, no inline math or text cut at the right edge of a theorem, proof, exercise or note box;
- no number written with a hyphen-minus outside code and math ("-0.05" instead of "−0.05"; the count per page is
  listed);
- no build artefacts (``ARTEFACTS``: tracebacks, file names of the build, version banners, bare notes);
- every interactive figure has drawn, and no page requests anything from the network;
- a page that says it was built in quick mode (or at full scale) says so in a mode note computed in the build
  (``.qkg-mode-note``), whose mode is the build's own (``<meta name="qkgeometry-build">``).

The check reads ``_build/html`` (built by ``python -m tools.notebooks build --quick``; ``make test`` runs it
right after that build). It needs Debian's ``chromium`` and ``chromium-driver`` (``/usr/bin/chromedriver``; the
Makefile installs them) and ``selenium``; nothing is downloaded. Without them, or without a built book, the tests
are skipped, unless ``QKG_REQUIRE_BROWSER=1`` (set by ``make test``), which turns a skip into a failure.

Run it by hand, with failure counts per kind and optional screenshots::

    python tests/test_rendered_pages.py [--html _build/html] [--screenshots DIR] [PAGE ...]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from qkgeometry.formatting import MINUS_SIGN

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the helpers of tests/ when run as a script
from figure_panels import MIN_FIGURE_TEXT_PX, blank_panels, figure_text_px, figure_text_px_per_pt

ROOT = Path(__file__).resolve().parents[2]
HTML = ROOT / "_build" / "html"
CHROMIUM = Path(os.environ.get("QKG_CHROMIUM", "/usr/bin/chromium"))
CHROMEDRIVER = Path(os.environ.get("QKG_CHROMEDRIVER", "/usr/bin/chromedriver"))
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
                  "--disable-dev-shm-usage")
WIDTHS = (1280, 390)
#: Width at which nothing may be wider than the content column.
WIDE = 1280
HEIGHT = 900

#: Words that belong to how the project is run, never to the reader's text. Word boundaries everywhere, so that
#: "decision" does not match CI and "seeds" (random seeds, which the book reports) does not match "the seed".
INTERNAL = {
    "seed (source text)": re.compile(r"\bseed(?:'s| text| formula)\b|\bthe seed\b(?!s|\s*(?:=|\d|value|of|for|\)))",
                                     re.IGNORECASE),
    "pilot": re.compile(r"\bpilots?\b", re.IGNORECASE),
    "DESIGN.md": re.compile(r"\bDESIGN\.md\b", re.IGNORECASE),
    # the project's working sessions ("a later session continues..."), not a course's or Colab's sessions
    "session": re.compile(r"\b(?:this|that|a later|later|earlier|previous|next|same|another|each|work(?:ing)?|"
                          r"build|coding|agent|helper) sessions?\b", re.IGNORECASE),
    # continuous integration, not a confidence interval ("95% CI", "CI low", "CI includes 0")
    "CI": re.compile(r"(?<!% )\bCI\b(?!\s*(?:low|high|lower|upper|includes|excludes|width|\d|\[|=|:))"),
    "README": re.compile(r"\bREADME\b", re.IGNORECASE),
    "tests/": re.compile(r"(?<![\w.-])tests/"),
}
#: Traces of the build machinery on a reader's page: how the book was made, not what it says.
ARTEFACTS = {
    "error message": re.compile(r"\bfailed: [^\n]{0,160}?\b\w*Error\b|Traceback \(most recent call"),
    "build file name": re.compile(r"\bprovenance\.json\b|(?<![\w.-])_build/|\bglued? (?:numbers?|values?)\b"),
    "version banner": re.compile(r"\bqkgeometry \d+\.\d+(?:\.\d+)?\S*, (?:quick|full) mode\b",
                                 re.IGNORECASE),
    "empty statement": re.compile(r"\bfill 0 rows\b|\b0 rows in this build\b"),
}
#: A sentence that says how this page was built; it must sit in a mode note computed by the build.
MODE_CLAIM = re.compile(r"\b(?:built|run|ran|computed|come[s]?|numbers) (?:in|at|from) (quick mode|full scale)\b|"
                        r"\bBuilt in (quick mode)\b|\bthis page is a (smoke test)\b", re.IGNORECASE)
#: Rendered aspect ratio ÷ the image's own: allowed deviation.
ASPECT_TOLERANCE = 0.03

#: Internal words that a page may use in their ordinary sense (the course module's teaching sessions).
ALLOWED = {"book/course_module.html": {"session"}}

# Raw TeX left in visible text after MathJax ran: math delimiters or a backslash command.
RAW_TEX = re.compile(r"\\[()\[\]]|\$[^$\s][^$]{0,80}?\$|\\(?:frac|top|mathbb|mathrm|operatorname|sum|sqrt|left|"
                     r"right|begin|end|alpha|beta|tau|ell|lVert|rVert|tfrac|dfrac|text|cdot|times|le|ge|ne)\b")
TQDM = re.compile(r"\d+%\|[^|\n]{0,80}\||\d+(?:\.\d+)?\s*(?:it/s|s/it)\]")
# a Python warning printed into a page: "<path>.py:<line>: SomethingWarning: ..." (and its local path)
PY_WARNING = re.compile(r"\.py:\d+: \w*Warning\b")
IMAGE_FILE = re.compile(r"\.(?:png|svg|jpe?g|gif|webp)$|^_images/|^[0-9a-f]{16,}$|/", re.IGNORECASE)
SCIENTIFIC = re.compile(r"\b\d\.\d+e[-+]\d\d\b")

#: A "scroll sideways" hint is noise above an image at most this much wider than the room in its figure (its width
#: less its padding): the image could show at the room's width, its text barely smaller (qkgeometry.js, SLACK).
HINT_SLACK = 1.05
#: The smallest text an interactive figure may show, in CSS px (its text does not shrink with the column).
MIN_CHART_TEXT_PX = 10

#: Bold text longer than this many words is a whole sentence in bold.
BOLD_WORDS = 10

# Collects everything on the page that the checks need, in one round trip.
PROBE = f"const BOLD_WORDS = {BOLD_WORDS};\n" + r"""
// Collapsed boxes (long proofs, solutions) are opened first: what they hold must fit as well.
document.querySelectorAll('details').forEach(d => { d.open = true; });
const article = document.querySelector('article.bd-article') || document.querySelector('main') || document.body;
const column = article.clientWidth;
const describe = (el) => {
  const text = (el.getAttribute('aria-label') || el.textContent || '').replace(/\s+/g, ' ').trim();
  const tag = el.tagName.toLowerCase() + (el.id ? '#' + el.id : '');
  return tag + ' "' + text.slice(0, 70) + '"';
};
const width = (el) => Math.max(el.scrollWidth, Math.ceil(el.getBoundingClientRect().width));
const visibleText = (root) => {
  if (!root) return '';
  const clone = root.cloneNode(true);
  clone.querySelectorAll('mjx-container, script, style, pre, code, .highlight, mjx-assistive-mml')
       .forEach(e => e.remove());
  return clone.textContent;
};
const wide = [];
// A display equation is a block as wide as the box it sits in (the column, a callout, a proof...): it is too wide
// when its content is wider than that box. Inline math is judged against the column.
article.querySelectorAll('mjx-container').forEach(el => {
  const math = el.querySelector('mjx-math') || el;
  const w = Math.ceil(math.getBoundingClientRect().width);
  if (el.getAttribute('display') === 'true') {
    const box = el.parentElement.clientWidth;
    if (Math.max(w, el.scrollWidth) > Math.min(box, el.clientWidth || box) + 1)
      wide.push({kind: 'display math', width: Math.max(w, el.scrollWidth), column: Math.min(box, el.clientWidth || box),
                 what: describe(el)});
  } else if (w > column + 1) {
    wide.push({kind: 'inline math', width: w, column: column, what: describe(el)});
  }
});
article.querySelectorAll('table').forEach(el => {
  const box = el.closest('.cell_output, .table-wrapper, .pst-scrollable-table-container') || el.parentElement;
  const avail = Math.min(column, box.clientWidth);
  if (width(el) > avail + 1)
    wide.push({kind: 'table', width: width(el), column: avail, what: describe(el)});
});
article.querySelectorAll('pre').forEach(el => {
  if (el.scrollWidth > el.clientWidth + 1)
    wide.push({kind: 'code block', width: el.scrollWidth, column: el.clientWidth, what: describe(el)});
});
const images = [...article.querySelectorAll('img')].map(img => ({
  src: img.getAttribute('src') || '', alt: img.getAttribute('alt') || '',
  naturalWidth: img.naturalWidth, naturalHeight: img.naturalHeight,
  shownWidth: img.getBoundingClientRect().width, shownHeight: img.getBoundingClientRect().height,
  caption: !!(img.closest('figure') && img.closest('figure').querySelector('figcaption')),
  numbered: !!(img.closest('figure') && img.closest('figure').querySelector('figcaption .caption-number')),
  // the "scroll sideways" hint above a figure, and the room inside the figure's box (its width less its padding)
  scrollHint: !!img.closest('figure') && /scroll sideways/.test(getComputedStyle(img.closest('figure'), '::before').content),
  figureRoom: img.closest('figure') ? img.closest('figure').clientWidth
    - parseFloat(getComputedStyle(img.closest('figure')).paddingLeft || 0)
    - parseFloat(getComputedStyle(img.closest('figure')).paddingRight || 0) : 0,
}));
const rawTables = [...article.querySelectorAll('table.dataframe')].map(describe);
// A table inside <figcaption> renders as caption text (small, muted): a numbered table must sit beside its caption.
const tablesInCaptions = [...article.querySelectorAll('figcaption table')].map(t => describe(t.closest('figure') || t));
const tableText = [...article.querySelectorAll('table')].map(t => t.textContent).join('\n');
const outputs = [...article.querySelectorAll('.cell_output pre, .output pre')].map(p => p.textContent);
// Boxes (theorems, proofs, exercises, notes): inline math or text that reaches past the box's inner right edge
// is cut off or forces a sideways scroll on a phone.
const cut = [];
article.querySelectorAll('div.proof, div.admonition, div.exercise, div.solution, details').forEach(box => {
  const r = box.getBoundingClientRect();
  if (r.width === 0) return;  // collapsed
  const style = getComputedStyle(box);
  const inner = r.right - parseFloat(style.paddingRight || 0) - parseFloat(style.borderRightWidth || 0);
  box.querySelectorAll('mjx-container:not([display="true"])').forEach(m => {
    const mr = m.getBoundingClientRect();
    if (mr.width > 0 && mr.right > inner + 1)
      cut.push({what: describe(m), box: describe(box), over: Math.round(mr.right - inner)});
  });
  if (box.scrollWidth > box.clientWidth + 1 && !box.querySelector('mjx-container[display="true"], pre, table'))
    cut.push({what: 'content', box: describe(box), over: box.scrollWidth - box.clientWidth});
});
// A note box with (almost) nothing in it ("Note: Full scale.") is a leftover of the build, not a note.
const bareNotes = [...article.querySelectorAll('div.admonition')].filter(box => {
  const body = box.cloneNode(true);
  body.querySelectorAll('.admonition-title').forEach(e => e.remove());
  return body.textContent.trim().split(/\s+/).filter(Boolean).length < 4 && !body.querySelector('img, mjx-container');
}).map(describe);
const modeNotes = [...article.querySelectorAll('.qkg-mode-note')].map(e => ({
  mode: e.getAttribute('data-mode') || '', text: e.textContent.replace(/\s+/g, ' ').trim()}));
const outside = article.cloneNode(true);
outside.querySelectorAll('.qkg-mode-note, script, style').forEach(e => e.remove());
// Interactive figures must have drawn (Plotly from the book's own files), and nothing may come from the network.
// Each must fit its column (a chart drawn while hidden keeps Plotly's default 700 px), keep its title clear of the
// toolbar, and show no text under 10 px.
const interactive = [...article.querySelectorAll('.qkg-plotly')].map(el => {
  const box = el.getBoundingClientRect();
  const svg = el.querySelector('svg.main-svg');
  const shown = (e) => e && e.getBoundingClientRect().width > 0 ? e.getBoundingClientRect() : null;
  const title = shown(el.querySelector('.gtitle')), bar = shown(el.querySelector('.modebar'));
  const past = [...el.querySelectorAll('.nsewdrag, .legend, .updatemenu-container, .gtitle, .xtitle, .ytitle, .colorbar')]
    .filter(e => { const r = shown(e); return r && (r.right > box.right + 1 || r.left < box.left - 1); })
    .map(e => (e.getAttribute('class') || '').split(' ')[0]);
  const sizes = [...el.querySelectorAll('svg text')].filter(t => shown(t) && t.textContent.trim())
    .map(t => parseFloat(getComputedStyle(t).fontSize));
  const figure = el.closest('figure');
  return {id: el.id, rendered: !!svg, width: svg ? Math.round(svg.getBoundingClientRect().width) : 0,
          box: Math.round(box.width), past: past, smallestText: sizes.length ? Math.min(...sizes) : null,
          scrollHint: !!(figure && figure.classList.contains('qkg-figure-scrolls')),
          titleCovered: !!(title && bar && title.left < bar.right && bar.left < title.right
                           && title.top < bar.bottom && bar.top < title.bottom)};
});
const network = performance.getEntriesByType('resource').map(e => e.name)
  .filter(u => !/^(?:file|data|blob|about):/.test(u));
// A whole sentence set in bold in running text (a glued verdict, a bold lead sentence): emphasis is for words.
const boldSentences = [...article.querySelectorAll('p strong, p b, li strong, li b, p span.pasted-text, li span.pasted-text')]
  .filter(e => parseInt(getComputedStyle(e).fontWeight, 10) >= 600 && !e.closest('h1, h2, h3, h4, caption, figcaption, th, summary, .admonition-title, dt, table')
          && e.textContent.trim().split(/\s+/).length > BOLD_WORDS)
  .map(describe);
const buildMeta = document.querySelector('meta[name="qkgeometry-build"]');
const sidebar = document.querySelector('.bd-sidebar-primary, #bd-docs-nav, nav.bd-links');
// Slide decks (slides/session-N.html): list markers shown, no raw Markdown, nothing past the slide's edge,
// titles whole.
const deck = document.querySelector('section.slide') ? {
  hiddenMarkers: [...document.querySelectorAll('section.slide li')].filter(li => {
    const st = getComputedStyle(li);
    return st.listStyleType === 'none' || st.overflowX !== 'visible' || st.overflowY !== 'visible'
      || getComputedStyle(li.parentElement).listStylePosition === 'outside'
         && parseFloat(getComputedStyle(li.parentElement).paddingLeft) < 8;
  }).map(describe).slice(0, 5),
  clipped: [...document.querySelectorAll('section.slide *')].filter(el => {
    const r = el.getBoundingClientRect();
    if (r.width === 0) return false;
    for (let p = el.parentElement; p; p = p.parentElement) {  // inside a box that scrolls sideways: not clipped
      if (getComputedStyle(p).overflowX !== 'visible') return false;
    }
    return r.right > window.innerWidth + 1 || r.left < -1;
  }).map(describe).slice(0, 5),
  titles: [...document.querySelectorAll('section.slide h1, section.slide h2')].map(h => h.textContent.trim()),
  text: visibleText(document.body),
} : null;
return {
  deck,
  title: document.title,
  text: visibleText(article),
  fullText: article.innerText,
  sidebar: visibleText(sidebar),
  errors: [...document.querySelectorAll('mjx-merror, .MathJax_Error, [data-mjx-error]')].map(describe),
  wide: wide, images: images, rawTables: rawTables, tablesInCaptions: tablesInCaptions,
  pageWidth: document.documentElement.scrollWidth, windowWidth: document.documentElement.clientWidth, tableText: tableText, outputs: outputs,
  mathjax: !!window.MathJax, cut: cut, bareNotes: bareNotes, interactive: interactive, network: network, modeNotes: modeNotes,
  textOutsideModeNotes: outside.textContent.replace(/\s+/g, ' '),
  build: buildMeta ? buildMeta.getAttribute('content') : 'unknown',
  boldSentences: boldSentences,
};
"""

# Resolves when MathJax (if the page loads it) has typeset everything.
WAIT_MATHJAX = r"""
const done = arguments[arguments.length - 1];
const finish = () => setTimeout(() => done(true), 50);
if (document.readyState !== 'complete') { window.addEventListener('load', () => step()); } else { step(); }
function step() {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    MathJax.startup.promise.then(() => (MathJax.typesetPromise ? MathJax.typesetPromise() : null))
      .then(finish, finish);
  } else if (document.querySelector('script[src*="mathjax"]')) {
    setTimeout(step, 50);   // the script tag is there but MathJax has not started yet
  } else { finish(); }
}
"""


#: Findings whose kind starts with this are listed by the command line but do not fail the test.
NOTE = "note: "


@dataclass(frozen=True)
class Finding:
    """One problem on one page at one window width."""

    page: str
    width: int
    kind: str
    detail: str

    def __str__(self) -> str:
        return f"{self.page} @ {self.width}px: {self.kind}: {self.detail}"


def pages(html: Path) -> list[str]:
    """Every reader-facing page of the built book, relative to ``html`` (no ``_static``/``_sources`` copies)."""
    return sorted(str(p.relative_to(html)) for p in html.rglob("*.html")
                  if not any(part.startswith("_") for part in p.relative_to(html).parts))


def is_chapter(page: str) -> bool:
    return page.startswith("notebooks/") or page == "book/intro.html"


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines()]


def aspect_ratio(img: dict) -> float | None:
    """Rendered aspect ratio ÷ the image file's own, or None for an image not shown or not loaded."""
    w, h = img.get("shownWidth") or 0, img.get("shownHeight") or 0
    nw, nh = img.get("naturalWidth") or 0, img.get("naturalHeight") or 0
    if min(w, h, nw, nh) < 8:  # hidden (collapsed), not loaded, or an icon
        return None
    return (w / h) / (nw / nh)


def visible_of(probe: dict) -> str:
    """The page's prose and cell outputs (not its code cells: code may name files), and its title."""
    return "\n".join([probe["text"], *probe["outputs"], probe["title"]])


#: Markdown or MyST a slide shows as text: emphasis markers, roles, directive fences.
RAW_MARKDOWN = re.compile(r"\*\*\S[^*\n]*\*\*|(?<![\w*])\*(?=[(\w])[^*\n]*\*(?!\w)|\{[\w:-]+\}`|```|^#+ ", re.M)
#: A number written with a hyphen-minus: the one rule by which the build writes true minus signs.
HYPHEN_MINUS_NUMBER = MINUS_SIGN


def findings_for(page: str, width: int, probe: dict, text_scale: tuple[float, float] | None = None) -> list[Finding]:
    """Turn the browser's probe of one page into findings (pure Python, unit-tested below). ``text_scale``:
    :func:`figure_text_px_per_pt` (the figure-text check is skipped without it)."""
    found: list[Finding] = []

    def add(kind: str, detail: str) -> None:
        found.append(Finding(page, width, kind, detail))

    for err in probe["errors"]:
        add("MathJax error", err)
    for where, text in (("title", probe["title"]), ("sidebar", probe["sidebar"]), ("text", probe["text"])):
        for m in list(RAW_TEX.finditer(text))[:5]:
            start = max(0, m.start() - 30)
            add(f"raw TeX in {where}", repr(text[start:m.end() + 30].strip()))
    for w in probe["wide"]:
        if width == WIDE:
            add(f"{w['kind']} wider than the column", f"{w['width']} px > {w['column']} px: {w['what']}")
        elif w["kind"] == "display math":  # on a phone a display may scroll inside its box; listed, not failed
            add(f"{NOTE}display math scrolls at phone width", f"{w['width']} px > {w['column']} px: {w['what']}")
    for img in probe["images"]:
        alt = img["alt"].strip()
        if not alt or IMAGE_FILE.search(alt):
            add("image without real alt text", f"src={img['src']!r} alt={alt!r}")
        if is_chapter(page) and not (img["caption"] and img["numbered"]):
            add("chapter figure without a numbered caption", f"src={img['src']!r}")
        shown = figure_text_px(img, *text_scale) if text_scale else None
        if shown is not None and shown < MIN_FIGURE_TEXT_PX:
            add("figure text too small to read",
                f"its smallest text shows at {shown:.1f} px (< {MIN_FIGURE_TEXT_PX:g}): {img['shownWidth']:.0f} px "
                f"shown of {img['naturalWidth']} px: src={img['src']!r}")
        room = img.get("figureRoom") or 0
        if img.get("scrollHint") and room and img["shownWidth"] <= HINT_SLACK * room:
            add("scroll hint on a figure that fits",
                f"the hint says to scroll sideways, but the image ({img['shownWidth']:.0f} px shown) is at most "
                f"{HINT_SLACK - 1:.0%} wider than the room in its figure ({room:.0f} px): src={img['src']!r}")
        ratio = aspect_ratio(img)
        if ratio is not None and abs(ratio - 1) > ASPECT_TOLERANCE:
            add("figure not at its true shape",
                f"rendered aspect / true aspect = {ratio:.2f} ({img['shownWidth']:.0f} x {img['shownHeight']:.0f} px "
                f"shown, {img['naturalWidth']} x {img['naturalHeight']} px file): src={img['src']!r}")
    for bold in probe.get("boldSentences", [])[:5]:
        add("whole sentence in bold", bold)
    for blank in probe.get("blankPanels", []):
        add("blank figure panel", blank)
    for c in probe.get("cut", []):
        add("cut at the right edge of a box", f"{c['what']} reaches {c['over']} px past {c['box']}")
    deck = probe.get("deck")
    if deck:
        for li in deck["hiddenMarkers"]:
            add("slide list marker hidden", li)
        for el in deck["clipped"]:
            add("slide element past the screen's edge", el)
        for title in deck["titles"]:
            if title.endswith(("…", "(", ",")) or title.count("(") != title.count(")"):
                add("slide title cut", repr(title))
        for m in list(RAW_MARKDOWN.finditer(deck["text"]))[:5]:
            add("raw Markdown on a slide", repr(deck["text"][max(0, m.start() - 20):m.end() + 20].strip()))
    minus = list(HYPHEN_MINUS_NUMBER.finditer(probe["text"]))
    if minus:
        examples = ", ".join(repr(probe["text"][max(0, m.start() - 20):m.end() + 8].strip()) for m in minus[:3])
        add("number with a hyphen-minus (write U+2212)", f"{len(minus)} on the page, e.g. {examples}")
    for name, pattern in ARTEFACTS.items():
        for m in list(pattern.finditer(visible_of(probe)))[:3]:
            text = visible_of(probe)
            start = max(0, m.start() - 40)
            add(f"build artefact ({name})", repr(text[start:m.end() + 40].replace("\n", " ").strip()))
    for fig in probe.get("interactive", []):
        if not fig["rendered"]:
            add("interactive figure did not draw", f"div#{fig['id']} (is Plotly served from _static?)")
            continue
        if fig.get("width", 0) > fig.get("box", 0) + 1 or fig.get("past"):
            add("interactive figure wider than its column",
                f"div#{fig['id']}: {fig.get('width')} px chart in a {fig.get('box')} px column"
                + (f"; past its edge: {', '.join(fig['past'])}" if fig.get("past") else ""))
        if fig.get("scrollHint"):  # the hint and the sideways scroll are for still images too wide for a phone
            add("interactive figure marked as a wide figure", f"div#{fig['id']}: its figure scrolls sideways")
        if fig.get("titleCovered"):
            add("interactive figure's title under its toolbar", f"div#{fig['id']}")
        if fig.get("smallestText") is not None and fig["smallestText"] < MIN_CHART_TEXT_PX:
            add("interactive figure text too small to read",
                f"div#{fig['id']}: {fig['smallestText']:g} px (< {MIN_CHART_TEXT_PX:g})")
    for url in probe.get("network", [])[:5]:
        add("network request", url)
    for box in probe.get("bareNotes", []):
        add("build artefact (bare note)", box)
    build = probe.get("build", "unknown")
    for note in probe.get("modeNotes", []):
        if note["mode"] != build:
            add("mode note contradicts the build",
                f"the note was computed in {note['mode'] or 'no'} mode, the build is {build}: {note['text'][:80]!r}")
    for m in list(MODE_CLAIM.finditer(probe.get("textOutsideModeNotes", "")))[:3]:
        text = probe["textOutsideModeNotes"]
        add("mode claim outside a mode note (typed, not computed)",
            repr(text[max(0, m.start() - 40):m.end() + 60].strip()))
    allowed = ALLOWED.get(page, set())
    visible = probe["fullText"] + "\n" + probe["title"]
    for name, pattern in INTERNAL.items():
        if name.split()[0] in allowed:
            continue
        for m in list(pattern.finditer(visible))[:3]:
            start = max(0, m.start() - 40)
            add(f"internal word {name!r}", repr(visible[start:m.end() + 40].replace("\n", " ").strip()))
    if probe.get("pageWidth", 0) > probe.get("windowWidth", 0) + 1 and probe.get("windowWidth"):
        add("page wider than the window", f"{probe['pageWidth']} px > {probe['windowWidth']} px: the whole page scrolls sideways")
    for table in probe.get("tablesInCaptions", []):
        add("table rendered inside a caption", table)
    for table in probe["rawTables"]:
        add("raw pandas table (use qkgeometry.tables.show_table)", table)
    for m in list(SCIENTIFIC.finditer(probe["tableText"]))[:3]:
        add("unrounded number in a table", m.group(0))
    for out in probe["outputs"]:
        for line in _lines(out):
            if line in ("False", "None"):
                add("stray output line", line)
        if TQDM.search(out):
            add("tqdm progress bar in an output", repr(TQDM.search(out).group(0)))
        if PY_WARNING.search(out):
            add("Python warning in an output", repr(PY_WARNING.search(out).group(0)))
    return found


def browser_available() -> str | None:
    """None when the browser check can run here, else the reason it cannot."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if missing:
        return f"{', '.join(missing)} not installed (Debian: apt-get install chromium chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[dev]')"
    return None


def make_driver(width: int):
    """Headless Chromium at ``width`` px, driven through the system chromedriver (no driver download)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--window-size={width},{HEIGHT}")
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    driver.set_script_timeout(30)
    driver.set_page_load_timeout(60)
    set_width(driver, width)
    return driver


def set_width(driver, width: int) -> None:
    """Make the layout viewport exactly ``width`` px wide (``--window-size`` sets the outer window only)."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": width < 600})


def blank_panels_of(html: Path, page: str, images: list[dict], cache: dict) -> list[str]:
    """``"src: panel ..."`` for every blank panel of the page's images (files read once, whatever the width)."""
    found = []
    for img in images:
        src = img.get("src", "")
        path = (html / page).parent / src.split("?")[0].split("#")[0]
        if not src or src.startswith(("data:", "http:", "https:")) or path.suffix.lower() != ".png":
            continue
        if path not in cache:
            cache[path] = [str(p) for p in blank_panels(path)] if path.is_file() else []
        found += [f"src={src!r}: {p}" for p in cache[path]]
    return found


def check_pages(html: Path, widths=WIDTHS, only: list[str] | None = None,
                screenshots: Path | None = None) -> list[Finding]:
    """Load every page at every width and return all findings."""
    found: list[Finding] = []
    names = [p for p in pages(html) if not only or p in only]
    blank_cache: dict = {}
    text_scale = figure_text_px_per_pt()
    driver = make_driver(widths[0])  # one browser for every width: starting Chromium is the slow part
    try:
        for width in widths:
            set_width(driver, width)
            for page in names:
                driver.get((html / page).resolve().as_uri())
                driver.execute_async_script(WAIT_MATHJAX)
                probe = driver.execute_script(PROBE)
                probe["blankPanels"] = blank_panels_of(html, page, probe["images"], blank_cache)
                found += findings_for(page, width, probe, text_scale)
                if screenshots is not None:
                    screenshots.mkdir(parents=True, exist_ok=True)
                    driver.save_screenshot(str(screenshots / f"{page.replace('/', '__')[:-5]}-{width}.png"))
    finally:
        driver.quit()
    return found


def summarize(found: list[Finding]) -> str:
    counts = Counter(f.kind for f in found)
    pages_hit = Counter(f.page for f in found)
    lines = [f"{len(found)} finding(s) on {len(pages_hit)} page(s)"]
    lines += [f"  {n:4d}  {kind}" for kind, n in counts.most_common()]
    lines += [f"  {n:4d}  {page}" for page, n in pages_hit.most_common()]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------------- tests
def _require_or_skip(reason: str) -> None:
    if os.environ.get("QKG_REQUIRE_BROWSER") == "1":
        pytest.fail(f"browser check cannot run: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser_findings() -> dict[int, list[Finding]]:
    reason = browser_available()
    if reason:
        _require_or_skip(reason)
    if not (HTML / "index.html").exists():
        _require_or_skip(f"no built book at {HTML}; run `python -m tools.notebooks build --quick` first")
    start = time.perf_counter()
    found = check_pages(HTML)
    print(f"browser check: {len(pages(HTML))} pages x {len(WIDTHS)} widths in {time.perf_counter() - start:.1f} s")
    return {w: [f for f in found if f.width == w] for w in WIDTHS}


@pytest.mark.browser
@pytest.mark.parametrize("width", WIDTHS)
def test_rendered_pages(browser_findings, width: int):
    found = [f for f in browser_findings[width] if not f.kind.startswith(NOTE)]
    if found:
        pytest.fail(f"{summarize(found)}\n" + "\n".join(map(str, found)), pytrace=False)


def _probe(**overrides) -> dict:
    probe = {"title": "Two scores", "text": "", "fullText": "", "sidebar": "", "errors": [], "wide": [],
             "images": [], "rawTables": [], "tableText": "", "outputs": [], "mathjax": True, "cut": [],
             "bareNotes": [], "modeNotes": [], "textOutsideModeNotes": "", "build": "quick", "interactive": [],
             "network": []}
    probe.update(overrides)
    return probe


def test_findings_logic_flags_each_kind():
    """The pure part of the check, without a browser: each kind of problem is caught and named."""
    probe = _probe(title=r"Why \(W_{qk}\) is directional", text=r"see $x^\top y$ here",
                   fullText="A factor 2 in the seed text. Offline (here, and in CI). See tests/test_x.py.",
                   errors=['mjx-merror "Undefined control sequence"'],
                   wide=[{"kind": "display math", "width": 900, "column": 700, "what": "mjx-container"}],
                   images=[{"src": "../_images/abc.png", "alt": "../_images/abc.png", "caption": False,
                            "numbered": False}],
                   rawTables=['table "  value 0 1"'], tableText="4.440892e-16",
                   outputs=["done\nFalse\n", "/x/site-packages/tqdm/auto.py:21: TqdmWarning: IProgress not found"])
    kinds = {f.kind for f in findings_for("notebooks/02_scores.html", 1280, probe)}
    assert {"MathJax error", "raw TeX in title", "raw TeX in text", "display math wider than the column",
            "image without real alt text", "chapter figure without a numbered caption", "stray output line",
            "internal word 'seed (source text)'", "internal word 'CI'", "internal word 'tests/'",
            "raw pandas table (use qkgeometry.tables.show_table)", "unrounded number in a table",
            "Python warning in an output"} <= kinds
    narrow = {f.kind for f in findings_for("notebooks/02_scores.html", 390, probe)}
    assert "display math wider than the column" not in narrow  # widths fail at 1280 px only
    assert "note: display math scrolls at phone width" in narrow  # ... and are listed at 390 px


def test_findings_logic_flags_the_presentation_kinds():
    """Squashed figures, math cut in a box, build artefacts and mode notes that do not match the build."""
    squashed = {"src": "../_images/a.png", "alt": "Two violins", "caption": True, "numbered": True,
                "naturalWidth": 2182, "naturalHeight": 682, "shownWidth": 672, "shownHeight": 341}
    probe = _probe(images=[squashed],
                   cut=[{"what": 'mjx-container "M"', "box": 'div#cor-1 "Corollary"', "over": 40}],
                   outputs=["failed: offline:x: SourceError: input_norm='folded' is not available\n"
                            "recorded runs, read from results/ch3/provenance.json\nqkgeometry 0.1.0, full mode.\n"],
                   text="Our values fill 0 rows in this build. See _build/executed/full/03.ipynb.",
                   bareNotes=['div "Note Full scale."'], build="full",
                   modeNotes=[{"mode": "quick", "text": "Built in quick mode"}],
                   interactive=[{"id": "qkg-plotly-1", "rendered": False}], network=["https://cdn.plot.ly/x.js"],
                   textOutsideModeNotes="Built in quick mode, this page is a smoke test.",
                   blankPanels=["src='../_images/a.png': panel at x 10-300, y 5-200 px (290 x 195), 0.00% ink"],
                   boldSentences=['span "Encoders are more symmetric: encoder − decoder median symmetry 0.32"'])
    kinds = Counter(f.kind for f in findings_for("notebooks/06_beyond_the_paper.html", 390, probe))
    assert {"figure not at its true shape", "cut at the right edge of a box", "build artefact (error message)",
            "build artefact (build file name)", "build artefact (version banner)", "build artefact (empty statement)",
            "build artefact (bare note)", "mode note contradicts the build",
            "mode claim outside a mode note (typed, not computed)", "interactive figure did not draw",
            "network request", "blank figure panel", "whole sentence in bold"} <= set(kinds)
    true_shape = dict(squashed, shownWidth=672, shownHeight=672 * 682 / 2182)
    note = {"mode": "full", "text": "This page was built at full scale."}
    fine = _probe(images=[true_shape], build="full", modeNotes=[note], textOutsideModeNotes="Two scores.")
    assert findings_for("notebooks/06_beyond_the_paper.html", 390, fine) == []
    assert aspect_ratio(dict(squashed, shownWidth=0, shownHeight=0)) is None  # a collapsed figure is not judged


def test_findings_logic_flags_interactive_figures_that_do_not_fit_a_phone():
    """A chart wider than its column (drawn while hidden, at Plotly's default 700 px), a title under the toolbar,
    text under 10 px, a figure scrolling sideways for its hidden still image; a chart that fits passes."""
    bad = [{"id": "qkg-plotly-1", "rendered": True, "width": 700, "box": 342, "past": ["modebar"],
            "smallestText": 9, "titleCovered": True, "scrollHint": True},
           {"id": "qkg-plotly-2", "rendered": True, "width": 342, "box": 342, "past": ["legend"],
            "smallestText": 11, "titleCovered": False}]
    kinds = Counter(f.kind for f in findings_for("notebooks/02_scores.html", 390, _probe(interactive=bad)))
    assert kinds == {"interactive figure wider than its column": 2, "interactive figure's title under its toolbar": 1,
                     "interactive figure text too small to read": 1, "interactive figure marked as a wide figure": 1}
    fits = [{"id": "qkg-plotly-3", "rendered": True, "width": 342, "box": 342, "past": [], "smallestText": 11,
             "titleCovered": False}]
    assert findings_for("notebooks/02_scores.html", 390, _probe(interactive=fits)) == []


def test_findings_logic_flags_tables_in_captions_and_unreadable_figure_text():
    """A numbered table rendered as caption text, and a wide figure shrunk to a phone's column."""
    wide = {"src": "../_images/w.png", "alt": "Six strip plots", "caption": True, "numbered": True,
            "naturalWidth": 2200, "naturalHeight": 1400, "shownWidth": 358, "shownHeight": 358 * 1400 / 2200}
    probe = _probe(images=[wide], tablesInCaptions=['figure#tbl-ch2-null-spread "Table 2.1 Both scores"'],
                   pageWidth=662, windowWidth=390)
    scale = figure_text_px_per_pt()
    kinds = {f.kind for f in findings_for("notebooks/07_head_behaviour.html", 390, probe, scale)}
    assert {"table rendered inside a caption", "figure text too small to read", "page wider than the window"} <= kinds
    readable = dict(wide, shownWidth=1210, shownHeight=1210 * 1400 / 2200)  # scrolled at a readable size
    assert findings_for("notebooks/07_head_behaviour.html", 390, _probe(images=[readable]), scale) == []
    px_per_pt, smallest = scale
    assert px_per_pt > 2 and 6 <= smallest <= 14  # a retina PNG; the style's tick and legend sizes


def test_findings_logic_flags_a_scroll_hint_on_a_figure_that_fits():
    """The hint says "scroll sideways" only above a figure wider than its box; above one that fits it is noise,
    and so it is above one that overflows by its box's padding only (16 px of a 358-px image)."""
    stacked = {"src": "../_images/s.png", "alt": "Two stacked panels", "caption": True, "numbered": True,
               "naturalWidth": 960, "naturalHeight": 1300, "shownWidth": 342, "shownHeight": 342 * 1300 / 960,
               "figureRoom": 342, "scrollHint": True}
    by_padding = dict(stacked, naturalWidth=1303, shownWidth=358, shownHeight=358 * 1300 / 1303)
    for noisy in (stacked, by_padding):
        kinds = [f.kind for f in findings_for("notebooks/03_gradient_bias.html", 390, _probe(images=[noisy]))]
        assert kinds == ["scroll hint on a figure that fits"]
    wide = dict(stacked, naturalWidth=2200, shownWidth=600, shownHeight=600 * 1300 / 2200)
    plain = dict(stacked, scrollHint=False)
    for fine in (wide, plain):  # a hint above a figure that scrolls, and no hint above one that fits
        assert findings_for("notebooks/03_gradient_bias.html", 390, _probe(images=[fine])) == []


def test_findings_logic_counts_numbers_written_with_a_hyphen_minus():
    found = findings_for("notebooks/02_scores.html", WIDE, _probe(text="a gap of -0.05 [-0.1, 0.2], layer-3, 2-3, \u22120.4"))
    hits = [f for f in found if f.kind.startswith("number with a hyphen-minus")]
    assert len(hits) == 1 and hits[0].detail.startswith("2 on the page")
    clean = findings_for("notebooks/02_scores.html", WIDE, _probe(text="a gap of \u22120.05, pre-2020, layer-3"))
    assert not [f for f in clean if f.kind.startswith("number with a hyphen-minus")]


def test_findings_logic_flags_what_a_deck_must_not_show():
    deck = {"hiddenMarkers": ['li "a result"'], "clipped": ['img "figure"'], "titles": ["Fig. 3.1: Left (dots", "Whole"],
            "text": "Key results *(Small d.)* and **bold** and {glue:text}`x`"}
    kinds = Counter(f.kind for f in findings_for("slides/session-3.html", 390, _probe(deck=deck)))
    assert kinds["slide list marker hidden"] == 1 and kinds["slide element past the screen's edge"] == 1
    assert kinds["slide title cut"] == 1 and kinds["raw Markdown on a slide"] == 3


def test_findings_logic_spares_ordinary_english():
    text = ("A decision about the CIFAR data; three seeds (seed 0, seed 1); the seed of the generator; "
            "specification; the contests/ folder; Pilotage is French.")
    probe = _probe(fullText=text, images=[{"src": "x.png", "alt": "Symmetry against directionality per layer",
                                           "caption": True, "numbered": True}])
    assert findings_for("notebooks/05_symmetric_init.html", 1280, probe) == []
    teaching = _probe(fullText="Session 1 covers chapter 1; a free Colab session is enough; 95% CI [0.1, 0.2].")
    assert findings_for("book/intro.html", 1280, teaching) == []
    process = _probe(fullText="The runs are resumable: a later session continues them.")
    assert findings_for("book/intro.html", 1280, process)  # the project's working sessions are internal
    assert findings_for("book/course_module.html", 1280, process) == []  # the course module's sessions are teaching


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pages", nargs="*", help="pages relative to --html (default: all)")
    parser.add_argument("--html", type=Path, default=HTML)
    parser.add_argument("--screenshots", type=Path, default=None, help="save a PNG of every page at every width")
    parser.add_argument("--json", type=Path, default=None, help="write the findings as JSON")
    args = parser.parse_args(argv)
    reason = browser_available()
    if reason:
        print(f"ERROR: {reason}", file=sys.stderr)
        return 2
    start = time.perf_counter()
    found = check_pages(args.html, only=args.pages or None, screenshots=args.screenshots)
    seconds = time.perf_counter() - start
    for f in found:
        print(f)
    print(summarize(found))
    print(f"{len(args.pages or pages(args.html))} page(s) x {len(WIDTHS)} widths in {seconds:.1f} s")
    if args.json:
        args.json.write_text(json.dumps([f.__dict__ for f in found], indent=1))
    return 1 if any(not f.kind.startswith(NOTE) for f in found) else 0


if __name__ == "__main__":
    sys.exit(main())
