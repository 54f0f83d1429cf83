"""qkgeometry.plotting.interactive: a Plotly chart that needs no network, with its static fallback."""

import re

import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")
pytest.importorskip("plotly")

from qkgeometry.plotting import interactive_score_plane


def _frame(per_head: bool = True) -> pd.DataFrame:
    rows = [{"model": m, "family": fam, "layer": layer, "head": head, "symmetry": 0.1 * layer, "directionality": -0.05}
            for m, fam in (("enc", "encoder"), ("dec", "decoder")) for layer in range(3) for head in range(2)]
    frame = pd.DataFrame(rows)
    return frame if per_head else frame.drop(columns="head").drop_duplicates(["model", "layer"])


def test_interactive_figure_loads_nothing_from_the_network_and_carries_its_fallback():
    fig = interactive_score_plane(_frame(), names={"enc": "MiniLM"})
    page = fig._repr_html_()
    assert not re.search(r"""<script[^>]+src=|https?://""", page)  # Plotly comes from the page, never a CDN
    assert "window.Plotly.newPlot" in page and 'class="qkg-fallback"' in page
    assert "data:image/png;base64," in page and fig._repr_png_()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "MiniLM" in page and "layer 2, head 1" in page  # human names and the hover text
    assert "encoder" in page and "#1f77b4" in page  # the book's one colour per family


def test_interactive_figure_per_layer_and_bad_input():
    page = interactive_score_plane(_frame(per_head=False))._repr_html_()
    assert "layer 1" in page and "head" not in page.split("hovertemplate")[0][-200:]
    with pytest.raises(KeyError, match="frame: missing columns"):
        interactive_score_plane(pd.DataFrame({"model": ["a"], "symmetry": [0.1]}))
    with pytest.raises(ValueError, match="frame"):
        interactive_score_plane(_frame().iloc[:0])
