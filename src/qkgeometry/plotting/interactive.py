"""Interactive figures for the book's HTML pages (Plotly), each with the static matplotlib figure as its fallback.

An :class:`InteractiveFigure` displays in a notebook or on a page as a Plotly chart (hover, zoom, a legend that
hides and shows its entries) and carries a PNG of the same data for print, for readers without JavaScript and for
the book's page check. On a book page its HTML never loads anything from the network: it calls the ``Plotly``
object of the page, which the book serves from its own files (like MathJax). On Colab, which has no such object,
it loads Plotly from the Plotly CDN; in any other session without it, the static image shows instead.

Every chart here shares one layout (:func:`chart_layout`): the title on the left and the toolbar standing on the right
edge, so that the toolbar never covers the title; the legend under the plot, so that it never narrows the plot on
a phone; no text smaller than 11 px.

Book: chapter 1, "The two parts on a sentence" (:func:`interactive_attention_parts`); chapter 2, "Per head or per
layer?", and chapter 4, "Encoders against decoders" (:func:`interactive_score_plane`); chapter 5, "The controls at
the recorded horizon" (:func:`interactive_init_curves`).
"""

from __future__ import annotations

import base64
import html
import io
import json
import sys
import uuid
from typing import Any

from ..formatting import format_number
from .style import (
    FAMILY_COLORS,
    INIT_COLORS,
    INIT_STYLES,
    STACK_COLORS,
    STACK_WORDS,
    STACKED_WIDTH,
    require_rows,
)

__all__ = ["InteractiveFigure", "interactive_attention_parts", "interactive_init_curves", "interactive_score_plane"]

#: The smallest text of a chart, in px (tick labels, legend, buttons).
SMALL_FONT = 11
#: How the survey plane's legend words a stack (besides ``STACK_WORDS``).
PLANE_WORDS = {"cross": "cross-attention"}


class InteractiveFigure:
    """A Plotly figure (``figure``) with its static fallback (``fallback``, a matplotlib Figure) and alt text.

    Displays as HTML (the chart, with the fallback image inside it, hidden once the chart draws) and, for formats
    without HTML, as the PNG alone.
    """

    def __init__(self, figure: Any, fallback: Any, alt: str):
        if not alt.strip():
            raise ValueError("alt: describe the figure in words (what is drawn and where to look).")
        self.figure, self.fallback, self.alt = figure, fallback, alt
        self._png: bytes | None = None

    def png(self) -> bytes:
        """The fallback figure as a 2× PNG."""
        if self._png is None:
            buffer = io.BytesIO()
            self.fallback.savefig(buffer, format="png", dpi=200, bbox_inches="tight")
            self._png = buffer.getvalue()
        return self._png

    def _repr_html_(self) -> str:
        key = f"qkg-plotly-{uuid.uuid4().hex[:12]}"
        plotted = self.figure.to_plotly_json()
        spec = json.dumps({"data": plotted["data"], "layout": plotted["layout"]},
                          default=_jsonable).replace("</", "<\\/")
        image = base64.b64encode(self.png()).decode("ascii")
        source = json.dumps(_plotly_cdn())
        # The chart is shown before it draws (the class qkg-live), so that it takes the width of its column: a
        # chart drawn in a hidden box keeps Plotly's default width, wider than a phone. A chart whose plot keeps
        # its shape (a heatmap of square cells) says how its height follows that width (layout.meta
        # height_from_width: [slope, offset] px), so that a phone shows no empty band above and below it. The
        # chart follows its column when the column changes width without the window doing so (a sidebar that
        # opens or closes).
        return (f'<div class="qkg-interactive">'
                f'<div id="{key}" class="qkg-plotly" role="img" aria-label="{html.escape(self.alt)}"></div>'
                f'<img class="qkg-fallback" src="data:image/png;base64,{image}" alt="{html.escape(self.alt)}">'
                f"<script>(function () {{ var el = document.getElementById('{key}'); var spec = {spec};"
                f" var cdn = {source};"
                f" function draw() {{ if (!window.Plotly || !el) return; var box = el.parentElement;"
                f" box.classList.add('qkg-live'); var fit = (spec.layout.meta || {{}}).height_from_width;"
                f" if (fit) spec.layout.height = Math.min(spec.layout.height,"
                f" Math.round(fit[0] * el.clientWidth + fit[1]));"
                f" window.Plotly.newPlot(el, spec.data, spec.layout, {{responsive: true, displaylogo: false,"
                f" modeBarButtonsToRemove: ['toImage', 'sendDataToCloud'], typesetMath: false}})"
                f".then(function () {{ if (window.ResizeObserver) new ResizeObserver(function () {{"
                f" window.Plotly.Plots.resize(el); }}).observe(box); }},"
                f" function () {{ box.classList.remove('qkg-live'); }}); }}"
                f" if (window.Plotly || !cdn) {{ draw(); return; }}"
                f" var s = document.createElement('script'); s.src = cdn; s.onload = draw;"
                f" document.head.appendChild(s); }})();</script></div>")

    def _repr_png_(self) -> bytes:
        return self.png()

    def __repr__(self) -> str:
        return f"InteractiveFigure({self.alt[:60]!r})"


def _plotly_cdn() -> str | None:
    """Where Plotly comes from on Colab (the CDN copy of the installed version's plotly.js); None elsewhere."""
    if "google.colab" not in sys.modules:
        return None
    from plotly.offline import get_plotlyjs_version

    return f"https://cdn.plot.ly/plotly-{get_plotlyjs_version()}.min.js"


def chart_numbers(values: Any, decimals: int) -> list[str]:
    """Numbers as the book writes them (a true minus sign, never −0.00) for hover text: Plotly's own formatting
    writes a hyphen-minus."""
    from ..tables import format_number

    return [format_number(float(v), decimals=decimals) for v in values]


def _jsonable(value: Any) -> Any:
    import numpy as np

    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot write {type(value).__name__} into a figure")


def chart_layout(title: str, height: int, top: int = 50, legend: bool = True, **extra: Any) -> dict:
    """The layout every chart shares: the title left, the toolbar upright on the right edge (never over the
    title), the legend under the plot, text of at least :data:`SMALL_FONT` px. ``top``: the top margin (larger
    under a row of buttons)."""
    layout = {
        "title": {"text": title, "font": {"size": 14}, "x": 0.01, "xanchor": "left"},
        "modebar": {"orientation": "v"}, "font": {"size": 12}, "hoverlabel": {"font": {"size": 12}},
        # the right margin holds the upright toolbar, so that it never covers the plot either
        "margin": {"l": 60, "r": 36, "t": top, "b": 40}, "height": height, "template": "plotly_white",
        "showlegend": legend,
    }
    if legend:
        layout["legend"] = {"orientation": "h", "y": -0.2, "yanchor": "top", "x": 0.5, "xanchor": "center",
                            "font": {"size": SMALL_FONT}}
    layout.update(extra)
    return layout


def chart_buttons(labels_args: list[tuple[str, str, Any]], active: int = 0) -> dict:
    """A row of buttons above the plot, under the title: ``(label, method, args)`` each."""
    return {"type": "buttons", "direction": "right", "x": 0, "xanchor": "left", "y": 1.02, "yanchor": "bottom",
            "showactive": True, "active": active, "pad": {"l": 0, "r": 0, "t": 0, "b": 0},
            "font": {"size": 12}, "buttons": [{"label": label, "method": method, "args": args}
                                              for label, method, args in labels_args]}


# ------------------------------------------------------------------------------------------- the score plane
def interactive_score_plane(frame, names: dict[str, str] | None = None, title: str | None = None,
                            alt: str | None = None, by: str = "model") -> InteractiveFigure:
    """Symmetry (x) against directionality (y) for every row of ``frame`` (heads or layers), with the model,
    layer and head of each point on hover.

    ``frame``: tidy scores (``qkgeometry.score_model`` or ``qkgeometry.survey``: columns ``model, family,
    layer, symmetry, directionality`` and, per head, ``head``); ``names`` maps a model's name to the name shown.
    ``by="model"``: one legend entry per model, coloured by its family (chapter 2). ``by=<column>`` (chapter 4:
    ``"stack"``): one legend entry per value of that column, coloured as the book colours stacks and families,
    and the rows of random-init twins (``init == "random"``) in one grey entry of their own. The fallback is the
    same scatter drawn with matplotlib.
    """
    import matplotlib.pyplot as plt
    import numpy as np
    import plotly.graph_objects as go

    require_rows(frame, "frame", "pass the tidy scores of at least one model (qkgeometry.score_model)")
    needed = ("model", "family", "layer", "symmetry", "directionality") + (() if by == "model" else (by,))
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise KeyError(f"frame: missing columns {missing}; pass the output of qkgeometry.score_model.")
    names = dict(names or {})
    per_head = "head" in frame.columns and frame["head"].notna().any()
    what = "head" if per_head else "layer"

    def where(sub) -> list[str]:
        heads = sub["head"] if per_head else sub["layer"]
        stacks = ([html.escape(_stack_words(v)) + ", " for v in sub[by]] if by != "model" else [""] * len(sub))
        return [f"{stack}layer {int(layer)}" + (f", head {int(head)}" if per_head else "")
                for stack, layer, head in zip(stacks, sub["layer"], heads)]

    # (legend entry, colour, rows, hover lines, marker size, opacity)
    groups = []
    if by == "model":
        for model, sub in frame.groupby("model", sort=False):
            family = str(sub["family"].iloc[0])
            shown = html.escape(names.get(model, model))
            groups.append((f"{shown} ({family})", FAMILY_COLORS.get(family, "#333333"), sub,
                           [f"<b>{shown}</b><br>{w}" for w in where(sub)], 7, 0.75))
        n_models = frame["model"].nunique()
    else:
        twin = (frame["init"] == "random").to_numpy() if "init" in frame.columns else np.zeros(len(frame), bool)
        trained, twins = frame[~twin], frame[twin]
        if len(twins):
            groups.append(("random-init twins", FAMILY_COLORS["random"], twins,
                           _hover(twins, names, where(twins)), 6, 0.45))
        order = list(STACK_COLORS) + [v for v in dict.fromkeys(trained[by]) if v not in STACK_COLORS]
        for value in [v for v in order if v in set(trained[by])]:
            sub = trained[trained[by] == value]
            words = _stack_words(value)
            groups.append((html.escape(words), STACK_COLORS.get(value, FAMILY_COLORS.get(value, "#333333")), sub,
                           _hover(sub, names, where(sub)), 7, 0.8))
        n_models = trained["model"].nunique()
    heading = title or f"Every {what} of {n_models} models"
    figure = go.Figure()
    fallback, ax = plt.subplots(figsize=(STACKED_WIDTH, 4.0))  # the still image: readable on a phone
    for label, color, sub, hover, size, opacity in groups:
        figure.add_trace(go.Scatter(
            x=sub["symmetry"].to_numpy(), y=sub["directionality"].to_numpy(), mode="markers", name=label,
            marker={"color": color, "size": size, "opacity": opacity, "line": {"color": "white", "width": 0.5}},
            text=[f"{where}<br>symmetry {s}<br>directionality {d}" for where, s, d in
                  zip(hover, chart_numbers(sub["symmetry"], 3), chart_numbers(sub["directionality"], 3))],
            hovertemplate="%{text}<extra></extra>"))
        ax.scatter(sub["symmetry"], sub["directionality"], s=2 * size, color=color, alpha=opacity, linewidths=0,
                   label=html.unescape(label))
    figure.update_layout(**chart_layout(
        heading, 540, hovermode="closest",
        xaxis={"title": {"text": "symmetry s (+1 symmetric, −1 skew)"}, "range": [-1.05, 1.05],
               "zeroline": True},
        yaxis={"title": {"text": "directionality score d"}, "range": [-1.05, 1.05], "zeroline": True}))
    ax.axhline(0, color="0.6", lw=0.8, zorder=0)
    ax.axvline(0, color="0.6", lw=0.8, zorder=0)
    ax.set(xlim=(-1.05, 1.05), ylim=(-1.05, 1.05), xlabel="symmetry score $s$ (+1 symmetric, −1 skew)",
           ylabel="directionality score $d$", title=heading)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, fontsize=9)
    fallback.tight_layout()
    plt.close(fallback)
    colour = "family" if by == "model" else "stack, random-init twins in grey"
    text = alt or (f"Scatter of symmetry score against directionality score, one dot per {what}, coloured by "
                   f"{colour}; hovering a dot names its model, layer{' and head' if per_head else ''}.")
    return InteractiveFigure(figure, fallback, text)


def _stack_words(value: Any) -> str:
    return STACK_WORDS.get(value, PLANE_WORDS.get(value, str(value)))


def _hover(sub, names: dict[str, str], where: list[str]) -> list[str]:
    return [f"<b>{html.escape(names.get(model, model))}</b><br>{w}" for model, w in zip(sub["model"], where)]


# ------------------------------------------------------------------------------ a head's logits by part
def interactive_attention_parts(pattern, logits, tokens, title: str | None = None,
                                alt: str | None = None) -> InteractiveFigure:
    """One head on one sentence, with buttons that switch the heatmap between the logits ``logits``
    (``(n, n)``, queries as rows, X M Xᵀ / √d_h), their symmetric part and their skew part, on one zero-centred
    colour scale; ``tokens`` label the axes. Hovering a cell gives its query and key tokens, the three values and,
    with ``pattern`` (the attention weights the model computes, or None), the attention weight. The fallback draws
    the three views side by side. Chapter 1, "The two parts on a sentence".
    """
    import matplotlib.pyplot as plt
    import numpy as np
    import plotly.graph_objects as go

    from ..decomposition import decompose
    from .style import DIVERGING

    logits = np.asarray(logits, dtype=float)
    require_rows(logits, "logits", "pass the (n, n) logits of a sentence of at least one token")
    n = len(tokens)
    if logits.shape != (n, n) or (pattern is not None and np.shape(pattern) != logits.shape):
        raise ValueError(f"logits: expected ({n}, {n}) for {n} tokens, like the pattern; got {logits.shape}"
                         f" and {None if pattern is None else np.shape(pattern)}.")
    sym, skew = (np.asarray(part) for part in decompose(logits))
    vmax = float(np.abs(logits).max()) or 1.0
    words = [html.escape(str(t)) for t in tokens]
    shown = [np.reshape(chart_numbers(np.ravel(m), 2), (n, n)) for m in (logits, sym, skew)]
    weights = None if pattern is None else np.reshape(chart_numbers(np.ravel(np.asarray(pattern, dtype=float)), 2), (n, n))
    cells = [[f"query {i} “{words[i]}” → key {j} “{words[j]}”<br>logit {shown[0][i][j]} = symmetric "
              f"{shown[1][i][j]} + skew {shown[2][i][j]}"
              + ("" if weights is None else f"<br>attention weight {weights[i][j]}") for j in range(n)]
             for i in range(n)]
    # short button labels, so that the row of buttons fits a phone's column
    views = [("logits", logits), ("symmetric", sym), ("skew", skew)]
    figure = go.Figure()
    for k, (label, matrix) in enumerate(views):
        figure.add_trace(go.Heatmap(
            z=matrix, x=list(range(n)), y=list(range(n)), zmin=-vmax, zmax=vmax, zmid=0, colorscale="RdBu",
            reversescale=True, name=label, visible=k == 0, text=cells, hovertemplate="%{text}<extra></extra>",
            xgap=1, ygap=1, colorbar={"orientation": "h", "y": -0.3, "yanchor": "top", "len": 0.7,
                                      "thickness": 10, "title": {"text": "logit", "side": "top"},
                                      "tickfont": {"size": SMALL_FONT}}))
    ticks = {"tickmode": "array", "tickvals": list(range(n)), "ticktext": words, "tickfont": {"size": SMALL_FONT},
             "showgrid": False, "zeroline": False}
    heading = title or "One head on one sentence"
    figure.update_layout(**chart_layout(
        heading, 640, top=90, legend=False,
        updatemenus=[chart_buttons([(label, "update", [{"visible": [j == k for j in range(len(views))]}])
                               for k, (label, _) in enumerate(views)])],
        xaxis={**ticks, "title": {"text": "key token j"}, "tickangle": -90, "constrain": "domain"},
        yaxis={**ticks, "title": {"text": "query token i"}, "autorange": "reversed", "scaleanchor": "x",
               "constrain": "domain"}))
    # the cells stay square: the plot is as tall as it is wide, so the chart's height follows its width
    figure.update_layout(margin={"l": 10, "r": 36, "t": 90, "b": 30}, meta={"height_from_width": [1.0, 150]})
    fallback, axes = plt.subplots(1, 3, figsize=(11.0, 4.2), constrained_layout=True)
    for ax, (label, matrix) in zip(axes, views):
        im = ax.imshow(matrix, cmap=DIVERGING, vmin=-vmax, vmax=vmax, interpolation="nearest")
        ax.set_title(label if label == "logits" else f"{label} part", fontsize=10)
        ax.set_xticks(range(n), tokens, rotation=90, fontsize=8)
        ax.set_yticks(range(n), tokens, fontsize=8)
        ax.grid(False)
    fallback.colorbar(im, ax=list(axes), shrink=0.8, label="logit")
    fallback.suptitle(heading, fontweight="bold")
    plt.close(fallback)
    text = alt or (f"Heatmap of one head's logits on a sentence of {n} tokens, queries as rows and keys as "
                   "columns, with buttons that switch between the logits, their symmetric part (a mirror image "
                   "across the diagonal) and their skew part (opposite signs across it, zero on the diagonal); "
                   "hovering a cell gives its two tokens and the values of the three views.")
    return InteractiveFigure(figure, fallback, text)


# ---------------------------------------------------------------------------------------- training curves
def _dash(style: Any) -> str:
    """A matplotlib line style (``INIT_STYLES``) as Plotly's ``line.dash`` (for a line 2 px wide)."""
    if isinstance(style, str):
        return {"-": "solid", "--": "dash", ":": "dot", "-.": "dashdot"}.get(style, "solid")
    return ",".join(f"{2 * length:g}px" for length in style[1])


def _rgba(color: str, alpha: float) -> str:
    red, green, blue = (int(color.lstrip("#")[k:k + 2], 16) for k in (0, 2, 4))
    return f"rgba({red}, {green}, {blue}, {alpha})"


def interactive_init_curves(frame, y: str = "val_loss", hue: str = "init", ylabel: str | None = None,
                            title: str | None = None, hline: float | None = None, hline_label: str | None = None,
                            zoom_from: int | None = None, alt: str | None = None) -> InteractiveFigure:
    """``y`` against ``step``, one line per value of ``hue`` (an init arm): the mean over seeds with the band
    from the lowest to the highest seed; a legend entry hides or shows its arm, band included, and hovering a
    step lists every arm. ``frame``: the run logs of one architecture (columns ``step, seed, <y>, <hue>``).
    ``hline``: a dashed reference line (``hline_label`` in the legend). ``zoom_from``: two buttons, every step
    or the steps from there on (on a y range of their own). The fallback is :func:`~qkgeometry.plotting.init_curves`
    of the same frame. Chapter 5, "The controls at the recorded horizon".
    """
    import matplotlib.pyplot as plt
    import plotly.graph_objects as go

    from .training import init_curves

    require_rows(frame, "frame", "pass the concatenated run logs of at least one run")
    missing = [c for c in ("step", "seed", y, hue) if c not in frame.columns]
    if missing:
        raise KeyError(f"frame: missing columns {missing}; pass run logs (qkgeometry.recorded(...).logs()).")
    if "arch" in frame.columns and frame["arch"].nunique() > 1:
        raise ValueError(f"frame: one architecture at a time; got {sorted(frame['arch'].unique())}.")
    figure = go.Figure()
    late = []
    arms = [k for k in INIT_COLORS if k in set(frame[hue])]  # the book's order of the inits, then any other
    arms += [k for k in dict.fromkeys(frame[hue]) if k not in arms]
    for key in arms:
        g = frame[frame[hue] == key]
        agg = g.groupby("step")[y].agg(["mean", "min", "max"]).dropna()
        color = INIT_COLORS.get(key, "#333333")
        steps = agg.index.to_numpy()
        band = {"mode": "lines", "line": {"width": 0, "color": color}, "legendgroup": str(key), "showlegend": False,
                "hoverinfo": "skip"}
        figure.add_trace(go.Scatter(x=steps, y=agg["max"].to_numpy(), **band))
        figure.add_trace(go.Scatter(x=steps, y=agg["min"].to_numpy(), fill="tonexty", fillcolor=_rgba(color, 0.18),
                                    **band))
        figure.add_trace(go.Scatter(
            x=steps, y=agg["mean"].to_numpy(), mode="lines", name=f"{key} (n={g['seed'].nunique()})",
            legendgroup=str(key), line={"color": color, "width": 2, "dash": _dash(INIT_STYLES.get(key, "-"))},
            text=[f"{html.escape(str(key))}: {mean} (seeds {low} to {high})" for mean, low, high in
                  zip(chart_numbers(agg["mean"], 3), chart_numbers(agg["min"], 3), chart_numbers(agg["max"], 3))],
            hovertemplate="%{text}<extra></extra>"))
        if zoom_from is not None:
            late.append(agg[agg.index >= zoom_from])
    last = int(frame["step"].max())
    if hline is not None:
        figure.add_trace(go.Scatter(x=[int(frame["step"].min()), last], y=[hline, hline], mode="lines",
                                    name=hline_label or "reference", hoverinfo="skip",
                                    line={"color": "#666666", "width": 1, "dash": "dash"}))
    extra: dict = {}
    late = [part for part in late if len(part)]
    if late:
        low = float(min(part["min"].min() for part in late))
        high = float(max(part["max"].max() for part in late))
        pad = 0.05 * (high - low or 1.0)
        extra["updatemenus"] = [chart_buttons([
            ("all steps", "relayout", [{"xaxis.autorange": True, "yaxis.autorange": True}]),
            (f"from step {format_number(zoom_from)}", "relayout", [{"xaxis.range": [zoom_from, last],
                                                      "yaxis.range": [low - pad, high + pad]}])])]
    words = ylabel or y
    figure.update_layout(**chart_layout(
        title or f"{words} per init", 560, top=90 if late else 50, hovermode="x unified",
        xaxis={"title": {"text": "step"}, "hoverformat": ",d", "tickformat": ",d"},
        yaxis={"title": {"text": words}}, **extra))
    fallback = init_curves(frame, y, ylabel=ylabel, hline=hline, hline_label=hline_label, zoom_from=zoom_from)
    plt.close(fallback)
    # a slash in alt text reads as a file name ("nats/token")
    text = alt or (f"Line plot of {words.replace('/', ' per ')} against training step, one line per init ({', '.join(map(str, arms))}), "
                   "each the mean over "
                   "its seeds with a shaded band from the lowest to the highest seed; clicking a legend entry "
                   "hides or shows its line, and hovering a step lists every line's value there.")
    return InteractiveFigure(figure, fallback, text)
