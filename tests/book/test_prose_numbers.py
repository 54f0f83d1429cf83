"""Numbers in the chapters' prose read as a reader writes them: a power of ten as "2 × 10⁻⁴" (never "2e-04" or
"5e-05"), thousands with a separator ("20,000"), and no capital after a colon inside a sentence that the code
composes ("… across the specification curve: no difference …").

Without an executed build the chapters' Markdown and the code that glues text are read; with one (the quick build
under ``_build/executed/quick``) its text outputs are read too."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
EXECUTED = ROOT / "_build" / "executed" / "quick"

#: a number in e-notation ("2e-15", "−2.3e−06", "5e-05"), not inside a word ("arXiv:2502.10927" has none)
E_NOTATION = re.compile(r"(?<![\w.])[-−]?\d+(?:\.\d+)?[eE][-−+]?\d+\b")
#: an integer of five digits or more without a thousands separator
NO_SEPARATOR = re.compile(r"(?<![\w.,:/−-])\d{5,}(?![\w,/]|\.\d)")
#: a glued role whose format writes e-notation ({glue:text}`x:.1e`)
E_SPEC = re.compile(r"\{glue(?::text)?\}`[\w.-]+:[^`]*[eEgG]`")
#: a colon inside a sentence followed by an ordinary word with a capital
COLON_CAPITAL = re.compile(r"\w\)?: (?:No|The|A|An|It|Its|This|These|Every|Each|All|Both|Neither|None|Not|Encoders|"
                           r"Decoders|Across|At|In|On|For|With|Suggested)\b")
#: Key results boxes still to be rewritten by hand, and the one glued role there that writes e-notation in the book
#: (the learners' notebooks already write it as a power of ten); the text glues ``exact_max_err_text`` instead.
PENDING_KEY_RESULTS = {("03_gradient_bias.ipynb", "{glue:text}`exact_max_err:.0e`")}


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _prose(text: str) -> str:
    """Markdown without what is not prose: code blocks and spans, math, links' targets, citations and labels."""
    text = re.sub(r"^(`{3,}|~{3,})(?!\{)[^\n]*\n.*?^\1[ \t]*$", " ", text, flags=re.S | re.M)
    text = re.sub(r"\$\$.*?\$\$|\$[^$\n]+\$", " ", text, flags=re.S)
    text = re.sub(r"\{(?:glue[\w:]*|cite[\w:]*|numref|ref|prf:ref|doc|eq)\}`[^`]*`|`[^`\n]*`", " ", text)
    return re.sub(r"\]\([^)\n]*\)|^:[\w-]+:.*$|arXiv:\S+", " ", text, flags=re.M)


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.name[:2] for p in CHAPTERS])
def test_the_chapters_markdown_writes_no_e_notation(path: Path):
    found = []
    for cell in _cells(path):
        if cell["cell_type"] != "markdown":
            continue
        text = "".join(cell["source"])
        found += [m.group(0) for m in E_SPEC.finditer(text) if (path.name, m.group(0)) not in PENDING_KEY_RESULTS]
        found += [m.group(0) for m in E_NOTATION.finditer(_prose(text))]
        found += [m.group(0) for m in NO_SEPARATOR.finditer(_prose(text))]
    assert not found, f"{path.name}: numbers a reader would not write: {found}"


def _formatted_values(node: ast.AST) -> list[ast.FormattedValue]:
    return [v for v in ast.walk(node) if isinstance(v, ast.FormattedValue) and v.format_spec is not None]


def _spec(value: ast.FormattedValue) -> str:
    return "".join(str(p.value) for p in value.format_spec.values if isinstance(p, ast.Constant))


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.name[:2] for p in CHAPTERS])
def test_text_the_code_writes_goes_through_the_number_formatter(path: Path):
    """A value that a chapter glues, prints or shows as text gets its power of ten from ``format_number`` (an
    f-string's own ``:.1e`` or ``:g`` writes ``1.4e-15`` and ``5e-05``)."""
    from IPython.core.inputtransformer2 import TransformerManager

    found = []
    for cell in _cells(path):
        if cell["cell_type"] != "code":
            continue
        tree = ast.parse(TransformerManager().transform_cell("".join(cell["source"])))
        for call in ast.walk(tree):
            name = getattr(call.func, "id", getattr(call.func, "attr", None)) if isinstance(call, ast.Call) else None
            if name not in ("glue", "print", "Markdown", "display"):
                continue
            found += [ast.unparse(v) for arg in call.args for v in _formatted_values(arg)
                      if _spec(v)[-1:] in ("e", "E", "g", "G")]
    assert not found, f"{path.name}: text written with e-notation formats: {found}"


def _text_outputs(path: Path) -> list[tuple[str, str]]:
    """``(what, text)`` for every text a reader sees from the executed chapter: printed output, Markdown and HTML
    outputs (not figures' JSON), and glued strings (a glued number is formatted where the text quotes it)."""
    out = []
    for k, cell in enumerate(_cells(path)):
        for output in cell.get("outputs", []):
            name = output.get("metadata", {}).get("scrapbook", {}).get("name")
            if output.get("output_type") == "stream":
                out.append((f"cell {k}", "".join(output.get("text", ""))))
            for mime, value in output.get("data", {}).items():
                text = "".join(value) if isinstance(value, list) else str(value)
                if mime.endswith("text/markdown") or (mime.endswith("text/html") and "plotly" not in text):
                    out.append((f"cell {k} {name or ''}".strip(), re.sub(r"<style.*?</style>", " ", text, flags=re.S)))
                elif name and mime.endswith("text/plain") and text[:1] in "'\"":
                    out.append((name, text))
    return out


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.name[:2] for p in CHAPTERS])
def test_the_executed_chapters_text_writes_numbers_as_a_reader_does(path: Path):
    executed = EXECUTED / path.name
    if not executed.is_file():
        pytest.skip(f"no executed copy of {path.name} under _build/executed/quick")
    found = [(what, m.group(0)) for what, text in _text_outputs(executed)
             for pattern in (E_NOTATION, COLON_CAPITAL) for m in pattern.finditer(text)]
    assert not found, f"{path.name}: e-notation or a capital after a colon in the text a reader sees: {found}"


def test_the_checks_catch_what_they_look_for():
    assert E_NOTATION.findall("errors of 2e-15 and −2.3e−06; arXiv:2502.10927; x2e5") == ["2e-15", "−2.3e−06"]
    assert NO_SEPARATOR.findall("20000 steps, 20,000 steps, 0.00012, step 12345") == ["20000", "12345"]
    assert E_SPEC.findall("to {glue:text}`err:.0e`, {glue:text}`share:.0%`") == ["{glue:text}`err:.0e`"]
    assert COLON_CAPITAL.search("Across the specification curve: No difference") is not None
    assert COLON_CAPITAL.search("the rank: Spearman ρ") is None
