"""Interactive figures for the book's HTML pages (Plotly), each with the static matplotlib figure as its fallback.

An :class:`InteractiveFigure` displays in a notebook or on a page as a Plotly chart (hover for the model, layer and
head of every point) and carries a PNG of the same data for print, for readers without JavaScript and for the
book's page check. Its HTML never loads anything from the network: it calls the ``Plotly`` object of the page, which
the book serves from its own files (like MathJax); where there is none (a plain Jupyter session without it), the
static image shows instead.

Book: chapter 2, "Per head or per layer?".
"""

from __future__ import annotations

import base64
import html
import io
import json
import uuid
from typing import Any

from .style import FAMILY_COLORS, require_rows

__all__ = ["InteractiveFigure", "interactive_score_plane"]


class InteractiveFigure:
    """A Plotly figure (``figure``) with its static fallback (``fallback``, a matplotlib Figure) and alt text.

    Displays as HTML (the chart, with the fallback image inside it, hidden once the chart has drawn) and, for
    formats without HTML, as the PNG alone.
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
        spec = json.dumps({"data": self.figure.to_plotly_json()["data"],
                           "layout": self.figure.to_plotly_json()["layout"]},
                          default=_jsonable).replace("</", "<\\/")
        image = base64.b64encode(self.png()).decode("ascii")
        return (f'<div class="qkg-interactive">'
                f'<div id="{key}" class="qkg-plotly" role="img" aria-label="{html.escape(self.alt)}"></div>'
                f'<img class="qkg-fallback" src="data:image/png;base64,{image}" alt="{html.escape(self.alt)}">'
                f"<script>(function () {{ var el = document.getElementById('{key}'); var spec = {spec};"
                f" if (!window.Plotly || !el) return;"
                f" window.Plotly.newPlot(el, spec.data, spec.layout, {{responsive: true, displaylogo: false,"
                f" modeBarButtonsToRemove: ['toImage', 'sendDataToCloud'], typesetMath: false}})"
                f".then(function () {{ el.parentElement.classList.add('qkg-live'); }}); }})();</script></div>")

    def _repr_png_(self) -> bytes:
        return self.png()

    def __repr__(self) -> str:
        return f"InteractiveFigure({self.alt[:60]!r})"


def _jsonable(value: Any) -> Any:
    import numpy as np

    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot write {type(value).__name__} into a figure")


def interactive_score_plane(frame, names: dict[str, str] | None = None, title: str | None = None,
                            alt: str | None = None) -> InteractiveFigure:
    """Symmetry (x) against directionality (y) for every row of ``frame`` (heads or layers), one colour per family,
    with the model, layer and head of each point on hover.

    ``frame``: tidy scores (``qkgeometry.score_model``: columns ``model, family, layer, symmetry,
    directionality`` and, per head, ``head``); ``names`` maps a model's name to the name shown. The fallback is
    the same scatter drawn with matplotlib.
    """
    import matplotlib.pyplot as plt
    import plotly.graph_objects as go

    require_rows(frame, "frame", "pass the tidy scores of at least one model (qkgeometry.score_model)")
    missing = [c for c in ("model", "family", "layer", "symmetry", "directionality") if c not in frame.columns]
    if missing:
        raise KeyError(f"frame: missing columns {missing}; pass the output of qkgeometry.score_model.")
    names = dict(names or {})
    per_head = "head" in frame.columns and frame["head"].notna().any()
    figure = go.Figure()
    fallback, ax = plt.subplots(figsize=(6.4, 4.8))
    for model, sub in frame.groupby("model", sort=False):
        family = str(sub["family"].iloc[0])
        color = FAMILY_COLORS.get(family, "#333333")
        shown = names.get(model, model)
        where = [f"layer {int(layer)}" + (f", head {int(head)}" if per_head else "")
                 for layer, head in zip(sub["layer"], sub["head"] if per_head else sub["layer"])]
        figure.add_trace(go.Scatter(
            x=sub["symmetry"].to_numpy(), y=sub["directionality"].to_numpy(), mode="markers", name=f"{shown} ({family})",
            marker={"color": color, "size": 7, "opacity": 0.75, "line": {"color": "white", "width": 0.5}},
            text=where, hovertemplate=f"<b>{html.escape(shown)}</b><br>%{{text}}<br>symmetry %{{x:.3f}}"
                                      f"<br>directionality %{{y:.3f}}<extra></extra>"))
        ax.scatter(sub["symmetry"], sub["directionality"], s=14, color=color, alpha=0.75, linewidths=0,
                   label=f"{shown} ({family})")
    what = "head" if per_head else "layer"
    figure.update_layout(
        # the title on the left and the toolbar standing on the right edge, so that the toolbar never covers it
        title={"text": title or f"Every {what} of {frame['model'].nunique()} models", "font": {"size": 14},
               "x": 0.01, "xanchor": "left"},
        modebar={"orientation": "v"},
        xaxis={"title": {"text": "symmetry score s (+1 symmetric, −1 skew)"}, "range": [-1.05, 1.05],
               "zeroline": True},
        yaxis={"title": {"text": "directionality score d"}, "range": [-1.05, 1.05], "zeroline": True},
        legend={"orientation": "h", "y": -0.22, "x": 0.5, "xanchor": "center"},
        margin={"l": 60, "r": 20, "t": 50, "b": 40}, height=520, template="plotly_white", hovermode="closest")
    ax.axhline(0, color="0.6", lw=0.8, zorder=0)
    ax.axvline(0, color="0.6", lw=0.8, zorder=0)
    ax.set(xlim=(-1.05, 1.05), ylim=(-1.05, 1.05), xlabel="symmetry score $s$ (+1 symmetric, −1 skew)",
           ylabel="directionality score $d$",
           title=title or f"Every {what} of {frame['model'].nunique()} models")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, fontsize=9)
    fallback.tight_layout()
    plt.close(fallback)
    text = alt or (f"Scatter of symmetry score against directionality score, one dot per {what}, coloured by "
                   f"family; hovering a dot names its model, layer{' and head' if per_head else ''}.")
    return InteractiveFigure(figure, fallback, text)
