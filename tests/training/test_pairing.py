"""Runs that a chapter pairs by seed read the same data: the check is code, and it refuses the pairs it must."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import qkgeometry as qg
from qkgeometry.training import pairing
from qkgeometry.training.pairing import RunStart, data_groups, mismatch, paired_seeds, unpaired_note

#: the step-0 records of chapter 5's default and symmetric runs of seeds 3-5 as first recorded, beside their
#: controls: the old runs read other token ids than the controls (kept as the case the check must refuse)
BEFORE_RERUN = Path(__file__).with_name("data") / "expB_seeds3-5_before_rerun.csv"


def _starts_before_rerun() -> list[RunStart]:
    table = pd.read_csv(BEFORE_RERUN, dtype={"tokenizer_sha256": str}).fillna("")
    return [RunStart(f"{r.init}-s{r.seed}", int(r.seed), r.init,
                     {k: v for k, v in (("fingerprint", r.fingerprint), ("tokenizer_sha256", r.tokenizer_sha256)) if v},
                     float(r.val_loss_step0)) for r in table.itertuples()]


def test_the_check_refuses_the_old_runs_of_seeds_3_to_5():
    groups = data_groups(_starts_before_rerun())
    for seed in (3, 4, 5):
        part = groups[groups["seed"] == seed].set_index("arm")["group"]
        assert part["default"] == part["symmetric"], "default and symmetric read one stream"
        assert {part[c] for c in ("skew", "rotated", "indefinite", "norm-matched")} == {1 - part["default"]}
    for control in ("skew", "rotated", "indefinite", "norm-matched"):
        assert paired_seeds(groups, control, "default") == []
        assert paired_seeds(groups, control, "symmetric") == []
    assert paired_seeds(groups, "symmetric", "default") == [3, 4, 5]
    note = unpaired_note(groups, ["skew"], ["default", "symmetric"])
    assert "3, 4 and 5" in note and "default and symmetric" in note


def test_mismatch_reads_every_recorded_fact():
    base = RunStart("a", 0, "default", {"fingerprint": "f", "train_stream_sha256": "x"}, 9.0, (0.1, 0.2))
    assert mismatch(base, base) is None
    assert "train stream sha256" in mismatch(base, RunStart("b", 0, "s", {"train_stream_sha256": "y"}, 9.0))
    assert mismatch(base, RunStart("b", 0, "s", {"fingerprint": "f"}, 9.0 + 5e-5)) is None  # inits' own spread
    assert "step-0 validation losses" in mismatch(base, RunStart("b", 0, "s", {}, 9.0 + 3.7e-4))
    assert "different weights" in mismatch(base, RunStart("b", 0, "s", {}, None, (0.1, 0.25)))
    assert "different layers" in mismatch(base, RunStart("b", 0, "s", {}, None, (0.1,)))
    assert mismatch(base, RunStart("b", 0, "s", {}, None, None)) is None  # nothing recorded to compare


def _expb_starts() -> list[RunStart]:
    rec = qg.recorded("expB-encoder-lr2e-4-10k")
    return pairing.read_starts(rec.runs)


def test_chapter_5_pairs_only_runs_that_read_the_same_data():
    """The main contrast (symmetric − default) pairs runs that read the same data at every seed; every run recorded
    with the hashes of its token streams reads the same data as every run of its seed recorded with the shipped
    tokenizer; and the control contrasts the chapter reports are paired only over seeds where both runs agree."""
    from qkgeometry.analyses import init_controls as ic

    starts = _expb_starts()
    groups = data_groups(starts)
    seeds = sorted(set(groups["seed"]))
    assert paired_seeds(groups, "symmetric", "default") == seeds
    hashed = [s for s in starts if "train_stream_sha256" in s.data]
    for run in hashed:
        for other in starts:
            if other.seed == run.seed and "tokenizer_sha256" in other.data:
                assert mismatch(run, other) is None, (run.name, other.name, mismatch(run, other))
    logs = qg.recorded("expB-encoder-lr2e-4-10k").logs()
    family = ic.control_family(logs[logs["step"] == logs["step"].max()], groups=groups)
    for r in family.itertuples():
        assert r.n == len(paired_seeds(groups, r.treatment, r.baseline)), (r.treatment, r.baseline)


@pytest.mark.parametrize("seed_folder", [f"s{s}" for s in range(12)])
def test_chapter_3_arms_of_a_seed_start_from_one_init_on_one_stream(seed_folder: str):
    folders = {f"{name}/{seed_folder}": qg.recorded(name).path / seed_folder
               for name in ("ch3-objectives-4k", "ch3-objectives-4k-sparse", "ch3-objectives-4k-supervision")
               if (qg.recorded(name).path / seed_folder).is_dir()}
    assert len(folders) == 3
    groups = data_groups(pairing.read_starts(folders, arm_key="objective"))
    assert len(groups) >= 6 and set(groups["group"]) == {0}, groups[groups["group"] > 0].to_dict("records")
