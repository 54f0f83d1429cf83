"""The page's tables of the fair test (qkgeometry.analyses.fair_test): the family table and the trajectory rows."""

from __future__ import annotations

import types

import numpy as np
import pandas as pd
import pytest

from qkgeometry.analyses import fair_test as ft
from qkgeometry.training import objectives as ob

SPARSE = "causal-sparse"


def _family():
    rng = np.random.default_rng(1)
    rows = [{"objective": objective, "seed": seed, "directionality_change": shift + rng.normal(0, 0.02),
             "symmetry_change": 0.01 * seed}
            for objective, shift in (("mlm", -0.15), ("causal", -0.45), (SPARSE, -0.3), (ob.AUTHORS_DECODER, -0.15))
            for seed in range(6)]
    return ft.contrast_family(pd.DataFrame(rows), pairs=ft.FAMILY[:3])


def test_the_family_table_has_one_row_per_contrast_with_its_signs_holm_and_outcome():
    family = _family()
    table = ft.family_table(family)
    assert list(table.columns) == ["contrast", "score", "layer", "signs", "holm", "outcome"]
    assert len(table) == len(family) == 6
    for c, row in zip(family.values(), table.itertuples()):
        assert row.contrast == f"{ft.OBJECTIVE_SHORT[c.treated]} − {ft.OBJECTIVE_SHORT[c.baseline]}"
        assert row.score == f"Δ{c.score[0]}" and row.layer == c.difference.interval.format()
        assert row.signs == f"{c.difference.n_positive} + / {c.difference.n_negative} −"
        assert row.outcome == ft.OUTCOME_WORDS[c.verdict.outcome]
    causal_mlm = table[(table["contrast"] == "causal − MLM") & (table["score"] == "Δd")].iloc[0]
    assert causal_mlm.outcome == "difference" and causal_mlm.signs == "0 + / 6 −"  # causal moves 0.3 further
    with_heads = ft.family_table(family, per_head=family)
    assert list(with_heads.columns[-2:]) == ["head", "holm_head"] and (with_heads["head"] == table["layer"]).all()


def test_trajectory_rows_keep_layer_rows_per_objective_and_the_papers_runs():
    scores = pd.DataFrame([{"objective": o, "seed": s, "step": step, "layer": layer, "head": head,
                            "symmetry": 0.1 * step, "directionality": -0.1}
                           for o in ("mlm", "causal") for s in (0, 1, 2) for step in (0, 100)
                           for layer in (0, 1) for head in (-1, 0)])
    cfg = types.SimpleNamespace(d_model=64, head_dim=16, n_heads=4)
    rows = ft.trajectory_rows(scores, cfg)
    assert set(rows["run"]) == {"ours, masked LM (3 seeds)", "ours, causal LM (3 seeds)"}
    assert len(rows) == 2 * 3 * 2 * 2 and rows["head"].isna().all()  # the head rows are left out
    assert (rows["band_unit"] == "seed").all() and set(rows["d_model"]) == {64}
    paper = pd.DataFrame([{"model": f"bert-small-{arch}-{ds}", "step": 10, "layer": 0, "symmetry": 0.5,
                           "directionality": 0.0} for arch in ("encoder", "decoder") for ds in ("wiki", "books")])
    with_paper = ft.trajectory_rows(scores, cfg, paper=paper)
    authors = with_paper[with_paper["run"].str.startswith("authors'")]
    assert set(authors["run"]) == {"authors' bert-small encoder (2 datasets)", "authors' bert-small decoder (2 datasets)"}
    assert (authors["band_unit"] == "dataset").all()
    with pytest.raises(ValueError, match="no bert-small decoder runs"):
        ft.trajectory_rows(scores, cfg, paper=paper[paper["model"].str.contains("encoder")])
