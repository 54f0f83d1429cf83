"""qkgeometry.plotting as the chapters use it: every name a notebook calls is exported, and every figure function
reports an empty frame by its argument's name instead of failing inside matplotlib."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from qkgeometry import plotting

ROOT = Path(__file__).resolve().parents[2]


def test_every_name_the_notebooks_use_is_exported():
    used = set()
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] == "code":
                used |= set(re.findall(r"\bplotting\.(\w+)", "".join(cell["source"])))
                used |= {n.strip() for m in re.findall(r"from qkgeometry\.plotting import ([\w, ]+)",
                                                        "".join(cell["source"])) for n in m.split(",")}
    assert used, "no notebook uses qkgeometry.plotting"
    assert used <= set(plotting.__all__), f"not exported: {sorted(used - set(plotting.__all__))}"


def test_all_lists_every_figure_function_and_each_module_keeps_its_chapter():
    assert set(plotting.FIGURES) | {"survey_figures"} <= set(plotting.__all__)
    assert all(callable(getattr(plotting, name)) for name in plotting.__all__ if name[0].islower() and name != "plt")
    for module in ("decomposition", "objectives", "model_survey", "training"):
        names = getattr(plotting, module).__all__
        assert module not in names and all(getattr(plotting, n) is getattr(getattr(plotting, module), n)
                                           for n in names)
    assert plotting.survey_layer_curves.__module__ == "qkgeometry.plotting.model_survey"


def _empty(*columns: str) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=float) for c in columns})


SURVEY = ("model", "family", "init", "component", "layer", "head", "symmetry", "directionality")
FULL = pd.DataFrame({c: [0.0] for c in ("symmetry", "directionality", "layer", "fraction", "seed", "step")}
                    | {"model": ["m"], "family": ["encoder"], "init": ["default"], "arch": ["encoder"]})

#: figure function -> (arguments with an empty frame, the argument the error must name)
EMPTY_CALLS = {
    "score_plane": ((_empty("model", "family", "symmetry", "directionality"),), "frame"),
    "attention_parts": ((np.zeros((0, 0)), np.zeros((0, 0)), []), "logits"),
    "quadratic_form_and_signed_area": (([], np.zeros((2, 2)), [1.0, 0.0], [0.0, 1.0]), "symmetric"),
    "directionality_bars": ((np.zeros((0, 0)),), "M"),
    "null_spread": ((_empty("d", "r", "symmetry", "directionality"),), "null"),
    "heads_vs_layers": ((_empty(*SURVEY), FULL), "heads"),
    "one_step_distributions": ((_empty("setting", "objective", "symmetry"),), "frame"),
    "objective_trajectories": ((_empty("objective", "seed", "step", "symmetry", "directionality"),), "summary"),
    "objective_losses": ((_empty("objective", "seed", "step", "loss"), {}), "summary"),
    "paper_training_curves": ((_empty("model", "step", "symmetry", "directionality"),), "frame"),
    "survey_layer_curves": ((_empty(*SURVEY),), "frame"),
    "survey_head_heatmaps": ((_empty(*SURVEY),), "frame"),
    "survey_scatter": ((_empty("model", "family", "component", "init", "symmetry_median"),), "summary"),
    "survey_twins": ((_empty(*SURVEY),), "frame"),
    "paired_stacks": ((_empty("model", "group", "stack", "source", "symmetry", "directionality"),), "pairs"),
    "modality_planes": ((_empty("modality", "stack", "symmetry_median", "directionality_median"),), "paper"),
    "survey_figures": ((_empty(*SURVEY),), "frame"),
    "raw_vs_folded": ((_empty("model", "family", "component", "symmetry_raw", "symmetry_folded"),), "forms"),
    "head_pair_terms": ((np.zeros((0, 0)),), "terms"),
    "init_curves": ((_empty("step", "seed", "val_loss", "arch", "init"),), "frame"),
    "survival_grid": ((_empty("arch", "lr_max", "init", "step", "symmetry_mean"),), "frame"),
    "paired_difference_curve": ((_empty("arch", "step", "n", "diff_mean", "ci_low", "ci_high"),), "curve"),
    "trajectories_vs_paper": ((_empty("fraction", "init", "seed", "symmetry"), FULL), "ours"),
    "trajectory_curves": ((_empty("run", "step", "layer", "symmetry", "directionality"),), "frame"),
    "specification_curve": (([],), "claims"),
    "change_snapshots": (([], [], [], []), "patterns"),
    "normalised_trajectories": (({"previous-token": _empty("run", "step", "geometry", "behaviour")}, {}), "curves"),
    "lag_dots": ((_empty("run", "role", "labelled", "geometry_step", "behaviour_step"), {}), "table"),
    "copy_offsets": ((_empty("run", "offset", "attention"), FULL, FULL, 0.1), "per_seed"),
}


def test_the_empty_frame_table_covers_every_figure():
    assert set(EMPTY_CALLS) | {"matrix_triptych"} == set(plotting.FIGURES) | {"survey_figures"}


@pytest.mark.parametrize("name", sorted(EMPTY_CALLS))
def test_an_empty_frame_is_named_not_a_matplotlib_error(name):
    args, argument = EMPTY_CALLS[name]
    with pytest.raises(ValueError, match=rf"^{argument} has no rows: "):
        getattr(plotting, name)(*args)


def test_the_second_frame_is_checked_too():
    with pytest.raises(ValueError, match=r"^layers has no rows"):
        plotting.heads_vs_layers(FULL, _empty(*SURVEY))
    with pytest.raises(ValueError, match=r"^theirs has no rows"):
        plotting.trajectories_vs_paper(FULL, _empty("fraction", "arch", "model", "symmetry"))


def test_modality_planes_draws_ours_alone_when_the_paper_frame_is_empty():
    ours = pd.DataFrame({"model": ["m"], "modality": ["language"], "stack": ["encoder"], "symmetry_median": [0.5],
                         "directionality_median": [-0.1]})
    fig = plotting.modality_planes(_empty("modality", "stack", "symmetry_median", "directionality_median"), ours)
    assert [ax.get_title() for ax in fig.axes] == ["language: 0 of theirs, 1 of ours"]


def test_an_empty_matrix_is_named():
    with pytest.raises(ValueError, match="`M`"):
        plotting.matrix_triptych(np.zeros((0, 0)))


def test_survey_curves_of_rows_without_a_model_name_the_frame_not_a_legend_error():
    """Rows whose model keys are all missing leave nothing to draw (formerly a 0-column legend crash)."""
    rows = pd.DataFrame({"model": [None], "family": [None], "init": [None], "component": [None], "layer": [0],
                         "head": [pd.NA], "symmetry": [0.1], "directionality": [0.0]})
    with pytest.raises(ValueError, match=r"^frame has no row with all of model, family, init, component set"):
        plotting.survey_layer_curves(rows)
