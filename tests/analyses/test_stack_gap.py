"""Tests for qkgeometry.analyses.stack_gap: the encoder − decoder gap counted by lineage, across its curve."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from qkgeometry import catalogue
from qkgeometry.analyses.stack_gap import stack_gap_claim


def _stacks(gap: float, n: int = 6, seed: int = 0) -> pd.DataFrame:
    """``n`` encoder-only and ``n`` decoder-only lineages (two models each) whose medians differ by ``gap``."""
    rng = np.random.default_rng(seed)
    rows = []
    for k in range(n):
        for stack, shift in (("encoder", gap), ("decoder", 0.0)):
            level = shift + rng.normal(0, 0.02)
            for m in range(2):
                rows.append({"model": f"{stack}{k}-{m}", "lineage": f"{stack}{k}", "family": f"{stack}{k}-{m % 2}",
                             "modality": "language" if k % 2 else "vision", "stack": stack, "gqa": False,
                             "fused_qkv": "", "symmetry_median": level + rng.normal(0, 0.01)})
    return pd.DataFrame(rows)


def test_a_clear_gap_holds_across_every_specification_and_counts_lineages():
    claim = stack_gap_claim(_stacks(0.3), "symmetry", n_resamples=2000)
    assert claim.primary.label == "all 12 lineages" and claim.primary.interval.n == 12
    assert claim.primary.interval.unit == "lineage"
    labels = [s.label for s in claim.curve]
    assert "without encoder0" in labels and "language only" in labels and "24 families as the files name them" in labels
    assert claim.holds and claim.claim.startswith("the encoder stacks are more symmetric")


def test_no_gap_is_not_stated_as_one():
    claim = stack_gap_claim(_stacks(0.0), "symmetry", n_resamples=2000)
    assert claim.reading.outcome == "not established" and not claim.holds
    assert claim.sentence.startswith("At the pre-stated specification (all 12 lineages) no difference is established")


def test_the_authors_lineages_merge_whisper_vit_and_phi():
    models = catalogue.paper_models()
    used = models[~models.random_weights & models["stack"].isin(["encoder", "decoder"])
                  & (models["duplicate_of"] == "")]
    assert used["lineage"].nunique() == 30 and used["family"].nunique() == 35
    assert set(used.loc[used["family"].isin(["whisperv2", "whisperv3"]), "lineage"]) == {"whisper"}
    assert catalogue.paper_lineage("Phi-3.pkl") == "phi" and catalogue.paper_lineage("ViT-21k.pkl") == "vit"


def test_the_key_line_of_the_gap_follows_its_sign():
    up, down = (stack_gap_claim(_stacks(g), "symmetry", n_resamples=2000) for g in (0.3, -0.3))
    assert up.line.startswith("the encoder stacks are more symmetric (encoder − decoder median 0.")
    assert down.line.startswith("the decoder stacks are more symmetric (encoder − decoder median −0.")
    assert "n = 12 lineages" in up.line and len(up.line) < 200


def test_the_key_lines_are_worded_from_the_numbers():
    from qkgeometry import stats
    from qkgeometry.analyses.stack_gap import folded_line, lineage_line, paired_line, separation_words

    assert [separation_words(x) for x in (1.0, 0.9, 0.7, 0.55)] == [
        "separates the stacks almost completely", "separates the stacks well", "separates the stacks only partly",
        "hardly separates the stacks"]
    assert paired_line(21, 22) == "the encoder is the more symmetric stack in 21 of 22 models"
    assert paired_line(2, 22) == "the decoder is the more symmetric stack in 20 of 22 models"
    assert paired_line(20, 22, "directionality") == "the decoder is the more key-dominated stack in 20 of 22 models"
    assert paired_line(1, 22, "directionality") == "the encoder is the more key-dominated stack in 21 of 22 models"
    gap = stats.judge(stats.Interval(-0.2, -0.3, -0.1, 8, unit="model"), "up", "down", "gap")
    assert folded_line(gap, 1, 4) == ("down (gap −0.200 [−0.300, −0.100], models resampled); the median "
                                      "directionality of 1 of 4 stacks moves toward 0.")
    assert "mostly between lineages" in lineage_line(25, 30)
    assert "mostly inside lineages" in lineage_line(5, 30)
    for bad in (lambda: separation_words(1.5), lambda: paired_line(23, 22), lambda: lineage_line(31, 30)):
        with pytest.raises(ValueError):
            bad()
