"""qkgeometry.plotting.interactive: a Plotly chart that needs no network, with its static fallback."""

import json
import re
import sys
import types

import matplotlib
import pandas as pd
import pytest

matplotlib.use("Agg")
pytest.importorskip("plotly")

from qkgeometry.plotting import interactive_attention_parts, interactive_init_curves, interactive_score_plane


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


def _spec(page: str) -> dict:
    """The chart's data and layout, as the page hands them to Plotly, with numeric arrays as lists (Plotly 6 and
    later write them as typed arrays, ``{"dtype", "bdata", "shape"}``)."""
    import base64

    import numpy as np

    def plain(value):
        if isinstance(value, dict) and "bdata" in value:
            array = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
            shape = value.get("shape")
            return array.reshape([int(k) for k in str(shape).split(",")] if shape else -1).tolist()
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, list):
            return [plain(v) for v in value]
        return value

    return plain(json.loads(re.search(r"var spec = (\{.*?\}); var cdn", page, re.S).group(1).replace("<\\/", "</")))


def test_every_chart_keeps_the_title_clear_of_the_toolbar_and_the_legend_under_the_plot():
    pytest.importorskip("plotly")
    for fig in (interactive_score_plane(_frame()), interactive_score_plane(_survey(), by="stack"),
                interactive_attention_parts(None, [[0.0, 1.0], [-1.0, 2.0]], ["a", "b"]),
                interactive_init_curves(_logs())):
        layout = _spec(fig._repr_html_())["layout"]
        assert layout["title"]["xanchor"] == "left" and layout["modebar"]["orientation"] == "v"
        if layout.get("showlegend", True):
            assert layout["legend"]["orientation"] == "h" and layout["legend"]["y"] < 0
            assert layout["legend"]["yanchor"] == "top"
        assert "width" not in layout  # the chart takes its column's width
        sizes = re.findall(r'"size": (\d+(?:\.\d+)?)', json.dumps(layout))
        assert min(float(s) for s in sizes) >= 10  # no text under 10 px


def test_the_chart_is_shown_before_it_draws_and_loads_plotly_from_the_cdn_only_on_colab(monkeypatch):
    page = interactive_score_plane(_frame())._repr_html_()
    # drawn in a visible box, so that it takes the column's width (a hidden box gives Plotly's default width)
    assert page.index("classList.add('qkg-live')") < page.index("Plotly.newPlot")
    assert "var cdn = null;" in page and "cdn.plot.ly" not in page
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    colab = interactive_score_plane(_frame())._repr_html_()
    assert re.search(r'var cdn = "https://cdn\.plot\.ly/plotly-\d+\.\d+\.\d+\.min\.js";', colab)


def _survey() -> pd.DataFrame:
    rows = [{"model": m + (" (random init)" if init == "random" else ""), "family": fam, "stack": stack,
             "init": init, "layer": layer, "head": None, "symmetry": 0.1 * layer, "directionality": -0.05}
            for m, fam, stack in (("bert", "encoder", "encoder"), ("gpt", "decoder", "decoder"),
                                  ("t5", "encoder-decoder", "cross"))
            for init in ("pretrained", "random") for layer in range(2)]
    return pd.DataFrame(rows)


def test_survey_plane_colours_by_stack_and_keeps_the_twins_apart():
    page = interactive_score_plane(_survey(), by="stack", names={"bert": "BERT-base"})._repr_html_()
    data = _spec(page)["data"]
    assert [t["name"] for t in data] == ["random-init twins", "encoder", "decoder", "cross-attention"]
    assert [t["marker"]["color"] for t in data] == ["#7f7f7f", "#1f77b4", "#d62728", "#9467bd"]
    # model, stack, layer and both scores on hover, with true minus signs
    assert data[1]["text"][0] == "<b>BERT-base</b><br>encoder, layer 0<br>symmetry 0.000<br>directionality −0.050"
    assert any(t.startswith("<b>gpt (random init)</b><br>decoder, layer 1<br>") for t in data[0]["text"])
    assert any(t.startswith("<b>t5</b><br>cross-attention, layer 1<br>") for t in data[3]["text"])
    assert "Every layer of 3 models" in page  # trained models, not their twins
    with pytest.raises(KeyError, match="stack"):
        interactive_score_plane(_frame(), by="stack")


def test_attention_parts_switch_between_the_logits_and_their_two_parts():
    import numpy as np

    logits = np.array([[1.0, 2.0, 0.0], [0.0, 1.0, -1.0], [3.0, 1.0, 0.5]])
    pattern = np.full((3, 3), 1 / 3)
    fig = interactive_attention_parts(pattern, logits, ["[CLS]", "the", "the"], title="A head")
    spec = _spec(fig._repr_html_())
    z = [np.array(t["z"]) for t in spec["data"]]
    assert np.allclose(z[0], logits) and np.allclose(z[1], z[1].T) and np.allclose(z[2], -z[2].T)
    assert np.allclose(z[1] + z[2], logits) and np.allclose(np.diag(z[2]), 0)
    assert [t["visible"] for t in spec["data"]] == [True, False, False]
    assert spec["layout"]["meta"]["height_from_width"][0] == 1.0  # square cells: the height follows the width
    assert "fit[0] * el.clientWidth" in fig._repr_html_()
    buttons = spec["layout"]["updatemenus"][0]["buttons"]
    assert [b["label"] for b in buttons] == ["logits", "symmetric", "skew"]
    assert [b["args"][0]["visible"] for b in buttons] == [[True, False, False], [False, True, False],
                                                          [False, False, True]]
    # the same colour scale for every view, centred at 0; repeated tokens keep their own row and column
    assert {(t["zmin"], t["zmax"]) for t in spec["data"]} == {(-3.0, 3.0)}
    assert spec["layout"]["xaxis"]["ticktext"] == ["[CLS]", "the", "the"]
    # hover: the two tokens, the three values (a true minus sign) and the attention weight
    assert spec["data"][0]["text"][1][2] == ("query 1 “the” → key 2 “the”<br>logit −1.00 = symmetric 0.00 + skew "
                                              "−1.00<br>attention weight 0.33")
    assert "attention weight" not in _spec(interactive_attention_parts(None, logits, "abc")._repr_html_())[
        "data"][0]["text"][0][0]
    with pytest.raises(ValueError, match="logits: expected"):
        interactive_attention_parts(pattern, logits[:2], ["a", "b", "c"])


def _logs() -> pd.DataFrame:
    rows = [{"step": step, "seed": seed, "init": init, "arch": "encoder",
             "val_loss": 9.0 - step / 2500 + 0.1 * seed + (0.05 if init == "symmetric" else 0.0)}
            for init in ("default", "symmetric") for seed in range(3) for step in range(0, 10001, 1000)]
    return pd.DataFrame(rows)


def test_init_curves_toggle_each_arm_with_its_band_and_zoom_on_the_late_steps():
    fig = interactive_init_curves(_logs(), ylabel="validation loss (nats/token)", hline=7.5,
                                  hline_label="unigram plateau", zoom_from=5000)
    assert "/" not in fig.alt  # alt text with a slash reads as a file name
    spec = _spec(fig._repr_html_())
    means = [t for t in spec["data"] if t.get("showlegend", True) and t["name"] != "unigram plateau"]
    assert [t["name"] for t in means] == ["default (n=3)", "symmetric (n=3)"]
    for trace in means:  # the band belongs to its arm's legend entry: hiding the arm hides the band
        group = [t for t in spec["data"] if t.get("legendgroup") == trace["legendgroup"]]
        assert len(group) == 3 and sum(t.get("fill") == "tonexty" for t in group) == 1
    default = means[0]
    assert default["y"][0] == pytest.approx(9.1) and default["text"][0] == "default: 9.100 (seeds 9.000 to 9.200)"
    assert default["line"]["color"] == "#000000" and means[1]["line"]["dash"] == "dash"
    zoom = spec["layout"]["updatemenus"][0]["buttons"]
    assert [b["label"] for b in zoom] == ["all steps", "from step 5,000"]
    low, high = zoom[1]["args"][0]["yaxis.range"]
    assert 4.8 < low < 5.0 < 7.25 < high < 7.5  # the late steps' lowest and highest seed, padded
    assert spec["layout"]["hovermode"] == "x unified"
    with pytest.raises(ValueError, match="one architecture"):
        interactive_init_curves(pd.concat([_logs(), _logs().assign(arch="decoder")]))
    with pytest.raises(KeyError, match="val_loss"):
        interactive_init_curves(_logs().drop(columns="val_loss"))
