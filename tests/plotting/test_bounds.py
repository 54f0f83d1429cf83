"""Survey figures stay bounded and drawable whatever the survey holds: thousands of models, a 20 MB model name, a
TeX-like name, and scores that are not scores (refused, by the CLI with one line naming the file)."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest

from bounded import no_hang, one_line_error
from qkgeometry import plotting
from qkgeometry.cli import main
from qkgeometry.surveying.store import SURVEY_COLUMNS


def survey_frame(n_models: int, name=lambda m: f"model-{m}", layers: int = 3, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = [{"model": name(m), "family": "decoder", "init": "pretrained", "component": "self", "layer": layer,
             "head": pd.NA, "symmetry": rng.uniform(-1, 1), "directionality": rng.uniform(-1, 1), "d_model": 8,
             "head_dim": 4, "n_heads": 2, "n_kv_heads": 2}
            for m in range(n_models) for layer in range(layers)]
    frame = pd.DataFrame(rows)
    frame["head"] = frame["head"].astype("Int64")
    return frame


def draw_all(frame, tmp_path) -> dict:
    figs = plotting.survey_figures(frame)
    for stem, fig in figs.items():
        fig.savefig(tmp_path / f"{stem}.png", bbox_inches="tight")
    return figs


def test_label_text_escapes_dollars_cuts_long_names_and_is_idempotent():
    assert plotting.label_text(r"$\frac{$") == r"\$\frac{\$"
    long = plotting.label_text("x" * 10 ** 6)
    assert len(long) == plotting.MAX_LABEL_CHARS and long.endswith("…")
    assert plotting.label_text("a\nb\tc") == "a b c"
    for text in (r"$\frac{$", "y" * 500, "plain"):
        once = plotting.label_text(text)
        assert plotting.label_text(once) == once


def test_thousands_of_models_draw_in_seconds_with_a_bounded_legend(tmp_path):
    frame = survey_frame(3000)
    start = time.perf_counter()
    with no_hang(300):
        figs = draw_all(frame, tmp_path)
    elapsed = time.perf_counter() - start
    legend = figs["layer_curves"].legends[0]
    labels = [t.get_text() for t in legend.get_texts()]
    assert len(labels) == plotting.MAX_LEGEND_ENTRIES and labels[-1] == f"… and {3000 - len(labels) + 1} more"
    assert not figs["scatter"].axes[0].texts  # too many points to name each: none named, the title says so
    assert "too many to name" in figs["scatter"].axes[0].get_title()
    assert elapsed < 120, f"{elapsed:.0f} s for 3000 models"  # about 20 s on two cores; 282 s before the bounds


def test_a_huge_and_a_tex_like_model_name_draw(tmp_path):
    names = {0: "n" * (20 * 2 ** 20), 1: r"$\frac{$", 2: "a $x^2$ model"}
    frame = survey_frame(3, name=names.get)
    with no_hang(60):
        figs = draw_all(frame, tmp_path)
    labels = [t.get_text() for t in figs["layer_curves"].legends[0].get_texts()]
    assert labels[0] == "n" * (plotting.MAX_LABEL_CHARS - 1) + "…"
    assert labels[1] == r"\$\frac{\$" and labels[2] == r"a \$x^2\$ model"


def test_many_per_head_models_show_a_bounded_number_of_panels(tmp_path):
    frame = survey_frame(plotting.MAX_PANELS + 5).assign(head=0)
    frame["head"] = frame["head"].astype("Int64")
    fig = plotting.survey_head_heatmaps(frame)
    assert len(fig.axes) == plotting.MAX_PANELS + 1  # the panels and one colour bar
    assert fig._suptitle.get_text() == f"the first {plotting.MAX_PANELS} of {plotting.MAX_PANELS + 5} models"


@pytest.mark.parametrize("value", [np.nan, np.inf, 1e300, -1.5])
def test_scores_that_are_not_scores_are_refused(value):
    frame = survey_frame(2)
    frame.loc[4, "symmetry"] = value
    with pytest.raises(ValueError, match=r"frame: symmetry = .* for model 'model-1'.* not a score in \[-1, 1\]"):
        plotting.survey_figures(frame)


def test_check_results_file_reads_the_cells_as_written_and_names_the_file(tmp_path):
    from qkgeometry.plotting.model_survey import check_results_file

    frame = survey_frame(2).assign(source="s", revision="r", qkgeometry_version="0", per="layer", num_std=2.0,
                                   qk_norm="folded", input_norm="raw", modality="text")
    path = tmp_path / "results.csv"
    frame[SURVEY_COLUMNS].to_csv(path, index=False)
    check_results_file(path)  # every score in [-1, 1]: nothing to say
    frame.loc[2, "symmetry"] = 1.5  # read_store would keep this row; the figure would draw it off the axes
    frame[SURVEY_COLUMNS].to_csv(path, index=False)
    with pytest.raises(ValueError, match=r"results file .*results\.csv.*symmetry = '1\.5'.*not a score"):
        check_results_file(str(path))


@pytest.mark.parametrize("cell", ["1e300", "inf", "nan", "-2"])
def test_plot_cli_refuses_a_results_file_with_a_bad_score(tmp_path, capsys, cell):
    frame = survey_frame(2).assign(source="s", revision="r", qkgeometry_version="0", per="layer", num_std=2.0,
                                   qk_norm="folded", input_norm="raw", modality="text")
    path = tmp_path / "results.csv"
    frame[SURVEY_COLUMNS].to_csv(path, index=False)
    text = path.read_text().splitlines()
    cells = text[3].split(",")
    cells[SURVEY_COLUMNS.index("directionality")] = cell
    text[3] = ",".join(cells)
    path.write_text("\n".join(text) + "\n")
    with no_hang(120):
        rc = main(["plot", str(path), "--out-dir", str(tmp_path / "figures")])
    one_line_error(capsys, rc, "results.csv", "directionality", "not a score in [-1, 1]")
    assert not (tmp_path / "figures").exists() or not any((tmp_path / "figures").iterdir())
