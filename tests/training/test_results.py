"""The recorded runs that ship with the package (``qkgeometry.recorded``) are what the book says they are: each log
agrees with its provenance.

Chapters 5 and 8 read these files and never recompute them, so a log truncated by hand, a provenance copied from
another run, or a missing file would silently change the book. These checks read the installed package data only.
Each experiment is checked in its own format: chapter 5's training runs (one ``log.csv`` row per logged step, the
layers' scores in columns) and chapter 8's induction runs (``log.csv`` per logged step and head, ``steps.csv`` per
logged step and layer, the intuition figure's snapshots next to them).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import qkgeometry as qg
from qkgeometry.recorded_runs import available
from qkgeometry.training.loop import TrainConfig

#: the recorded experiments in chapter 8's format (:func:`qkgeometry.training.induction_runs.train_induction`);
#: every other experiment's runs are in chapter 5's (:class:`qkgeometry.training.loop.TrainConfig`)
INDUCTION_EXPERIMENTS = ("ch8-induction",)
#: every run of every recorded experiment, found through the accessor (by folder)
ALL_RUNS = sorted(folder for name in available() for folder in qg.recorded(name).runs.values())
#: the runs in chapter 5's format
RUNS = [run for run in ALL_RUNS if run.parent.name not in INDUCTION_EXPERIMENTS]


def test_there_are_recorded_runs():
    assert "expB-encoder-lr2e-4-10k" in available() and "ch3-objectives" in available()
    assert RUNS, f"no recorded runs in {available()}"


def test_every_run_is_checked_in_its_own_format():
    """No run folder escapes the checks: a run in chapter 8's format has a ``steps.csv`` and an
    ``InductionConfig``, every other run neither."""
    from qkgeometry.training.config import InductionConfig

    assert set(INDUCTION_EXPERIMENTS) <= set(available())
    for run in ALL_RUNS:
        config = json.loads((run / "provenance.json").read_text())["config"]
        induction = run.parent.name in INDUCTION_EXPERIMENTS
        assert (run / "steps.csv").is_file() == induction, run
        if induction:
            InductionConfig(**config)
        else:
            TrainConfig(**config)


@pytest.mark.parametrize("run", RUNS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_log_matches_its_provenance(run: Path):
    prov = json.loads((run / "provenance.json").read_text())
    config = TrainConfig(**prov["config"])  # a valid config, with the fields the code knows
    log = pd.read_csv(run / "log.csv")
    steps = log["step"].to_numpy()
    assert steps[0] == 0 and np.all(np.diff(steps) == config.log_every), "steps must be 0, log_every, 2·log_every…"
    assert steps[-1] == prov["steps_done"] <= config.steps
    for column in ("arch", "init", "seed", "corpus"):
        assert set(log[column]) == {getattr(config, column)}, column
    assert set(log["lr_max"]) == {config.lr}
    np.testing.assert_allclose(log["lr"].iloc[1:], [config.lr_at(s - 1) for s in steps[1:]], rtol=1e-9)
    assert log["val_loss"].notna().all() and log["train_loss"].iloc[1:].notna().all()
    scores = log.filter(regex=r"^symmetry_L\d+$")
    assert scores.shape[1] == config.layers and np.allclose(scores.mean(axis=1), log["symmetry_mean"])
    assert prov["data"]["corpus"] == config.corpus and prov["commit"]


def test_runs_of_one_experiment_are_paired():
    """Runs that are compared share everything but the init (and differ in seed): same schedule, data and shape."""
    for experiment in {run.parent for run in RUNS}:
        provs = [json.loads((run / "provenance.json").read_text()) for run in RUNS if run.parent == experiment]
        shared = [{k: v for k, v in p["config"].items() if k not in ("init", "seed")} for p in provs]
        assert all(s == shared[0] for s in shared), experiment.name
        assert len({p["data"]["fingerprint"] for p in provs}) == 1, experiment.name


def _recorded_logs() -> pd.DataFrame:
    return pd.concat([pd.read_csv(run / "log.csv") for run in RUNS], ignore_index=True)


def test_paired_curve_of_the_recorded_runs_ends_at_the_paired_final_difference():
    """The chapter's paired-difference figure and its verdict read the same numbers: the curve's last point is the
    paired final-loss difference, with the same t-interval over seeds."""
    from qkgeometry.training import metrics as tm

    logs = _recorded_logs()
    encoder = logs[logs["arch"] == "encoder"]
    curve = tm.paired_curve(encoder, "symmetric", "default", "val_loss")
    final = tm.paired_differences(encoder, "symmetric", "default").iloc[0]
    last = curve.sort_values("step").iloc[-1]
    assert last["n"] == final["n"] == encoder["seed"].nunique()
    np.testing.assert_allclose([last["diff_mean"], last["ci_low"], last["ci_high"]],
                               [final["diff_mean"], final["ci_low"], final["ci_high"]], rtol=1e-12)
    # same data and masks: at step 0 only the init differs, and the loss barely sees it
    assert curve.loc[curve["step"] == 0, "diff_mean"].abs().max() < 1e-3
    assert set(curve["step"]) == set(encoder["step"])


def test_symmetry_dynamics_of_the_recorded_runs_match_the_logs():
    from qkgeometry.training import metrics as tm

    logs = _recorded_logs()
    dyn = tm.symmetry_dynamics(logs).set_index("init")
    for init, row in dyn.iterrows():
        curve = logs[logs["init"] == init].groupby("step")["symmetry_mean"].mean()
        assert row["end"] == pytest.approx(curve.iloc[-1]) and row["peak"] == pytest.approx(curve.iloc[1:].max())
    assert dyn.loc["symmetric", "start"] == pytest.approx(1.0, abs=1e-6)  # exactly symmetric at step 0


#: the inits every experiment compares; control inits (skew, rotated, shared) may have run a subset of their seeds
MAIN_INITS = ("default", "symmetric")


def test_every_init_of_an_experiment_has_the_same_seeds_and_is_complete():
    """The chapter pairs runs by seed: the main inits of an experiment must have run the same seeds, and every
    control only seeds that they ran, each to the end of the schedule (a run still in progress is not committed)."""
    for experiment in {run.parent for run in RUNS}:
        provs = [json.loads((run / "provenance.json").read_text()) for run in RUNS if run.parent == experiment]
        seeds = {}
        for p in provs:
            seeds.setdefault(p["config"]["init"], set()).add(p["config"]["seed"])
            assert p["steps_done"] == p["config"]["steps"], f"{experiment.name}: a run stopped before its schedule"
        main = {frozenset(seeds[init]) for init in MAIN_INITS}
        assert len(main) == 1, f"{experiment.name}: the main inits ran different seeds"
        main_seeds = next(iter(main))
        assert len(main_seeds) >= 3, experiment.name
        for init, ran in seeds.items():
            assert ran <= main_seeds, f"{experiment.name}: {init} ran seeds the main inits did not"


def test_runs_paired_by_seed_read_the_same_data():
    """Pairing by seed holds only if every init of a seed trained on the same token streams: the same counts and
    the same unigram plateau (a different tokenizer moves the plateau by about 0.08 nats)."""
    for experiment in {run.parent for run in RUNS}:
        by_seed = {}
        for run in RUNS:
            if run.parent == experiment:
                p = json.loads((run / "provenance.json").read_text())
                d = p["data"]
                by_seed.setdefault(p["config"]["seed"], set()).add(
                    (d["train_tokens"], d["val_tokens"], round(d["unigram_loss"], 12)))
        mixed = {seed: sorted(v) for seed, v in by_seed.items() if len(v) > 1}
        assert not mixed, f"{experiment.name}: inits of one seed read different data: {mixed}"


def test_the_results_readme_names_every_recorded_seed():
    """The README next to the logs states which seeds ran; it must match the folders."""
    for experiment in {run.parent for run in RUNS}:
        readme = (experiment / "README.md").read_text()
        seeds = sorted({json.loads((run / "provenance.json").read_text())["config"]["seed"]
                        for run in RUNS if run.parent == experiment})
        assert f"--seed {' '.join(map(str, seeds))}" in readme, experiment.name


# ---------------------------------------------------------------------------------------- chapter 8's format
#: the runs in chapter 8's format
INDUCTION_RUNS = [run for run in ALL_RUNS if run.parent.name in INDUCTION_EXPERIMENTS]
#: the scores a head or a layer records at every logged step whatever its layer (the composition table's scores exist
#: only from layer 1 on: it reads the layers before it)
_ALWAYS = ("symmetry", "directionality", "energy_sym", "energy_skew", "position_symmetry", "position_skew_share",
           "position_contrast", "token_symmetry", "token_skew_share", "token_contrast")
_COMPOSITION = ("composition_symmetry", "composition_skew_share", "composition_contrast")
_BEHAVIOUR = ("previous", "current", "first", "previous_chance", "duplicate", "duplicate_null", "induction",
              "induction_null")


def _induction_provenance(run: Path) -> dict:
    return json.loads((run / "provenance.json").read_text())


def _check_composition(frame: pd.DataFrame, where: str) -> None:
    first = frame["layer"] == 0
    assert frame.loc[first, list(_COMPOSITION)].isna().all().all(), f"{where}: layer 0 has no composition table"
    assert frame.loc[~first, list(_COMPOSITION)].notna().all().all(), f"{where}: a composition score is missing"


@pytest.mark.parametrize("run", INDUCTION_RUNS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_induction_run_matches_its_provenance(run: Path):
    """A chapter-8 run: recorded from a clean tree at a named commit, to its last planned step, every planned step
    logged for every head (``log.csv``) and every layer (``steps.csv``), with the scores it promises."""
    from qkgeometry.training.config import InductionConfig
    from qkgeometry.training.induction_runs import induction_command

    prov = _induction_provenance(run)
    cfg = InductionConfig(**prov["config"])
    assert prov["run"] == cfg.name == run.name
    assert len(prov["commit"]) == 40 and int(prov["commit"], 16) >= 0, "the commit it was recorded at"
    assert prov["src_dirty"] is False, "recorded from a source tree with uncommitted changes"
    assert prov["steps_done"] == cfg.steps, "a run stopped before its schedule"
    assert prov["data"]["kind"] == cfg.data and len(prov["data"]["training_batches_sha256"]) == 64
    assert prov["command"] == induction_command(cfg, prov["hardware"]["torch_threads"])
    planned = [s for s in range(cfg.steps + 1) if cfg.logged(s)]

    log = pd.read_csv(run / "log.csv")
    assert list(dict.fromkeys(log["step"])) == planned, "log.csv: not every planned step, in order"
    cells = log.groupby("step")[["layer", "head"]].apply(lambda f: sorted(zip(f["layer"], f["head"])))
    every_head = [(layer, head) for layer in range(cfg.n_layers) for head in range(cfg.n_heads)]
    assert all(c == every_head for c in cells), "log.csv: a step without one row per head"
    assert log[list(_ALWAYS + _BEHAVIOUR)].notna().all().all()
    _check_composition(log, f"{run.name}/log.csv")

    steps = pd.read_csv(run / "steps.csv")
    assert list(dict.fromkeys(steps["step"])) == planned, "steps.csv: not every planned step, in order"
    assert all(sorted(f) == list(range(cfg.n_layers)) for _, f in steps.groupby("step")["layer"])
    assert steps[[*_ALWAYS, "in_context_loss", "other_loss", "seconds"]].notna().all().all()
    _check_composition(steps, f"{run.name}/steps.csv")
    first = steps["step"] == 0
    assert steps.loc[~first, "train_loss"].notna().all() and steps.loc[first, "train_loss"].isna().all()
    assert steps.groupby("step")["in_context_loss"].nunique().eq(1).all(), "one loss per step, on every layer's row"
    assert np.all(np.diff(steps.groupby("step")["seconds"].first().to_numpy()) >= 0)
    assert steps["seconds"].max() <= prov["wall_seconds"]

    for frame in (log, steps):
        for score in ("symmetry", "directionality", "position_symmetry", "token_symmetry", "composition_symmetry"):
            values = frame[score].dropna().to_numpy()
            assert np.all(np.abs(values) <= 1 + 1e-6), score


def test_induction_runs_are_paired():
    """The runs of chapter 8 differ only in their training seed and their data (with copies or without), were run
    with the command's defaults as the notes say, share their columns, and each control starts from the same
    initialisation as the run with copies of its training seed."""
    from qkgeometry.training.config import InductionConfig

    for experiment in INDUCTION_EXPERIMENTS:
        runs = [run for run in INDUCTION_RUNS if run.parent.name == experiment]
        provs = {run.name: _induction_provenance(run) for run in runs}
        defaults = {k: v for k, v in InductionConfig().to_dict().items() if k not in ("data", "seed")}
        for name, prov in provs.items():
            assert {k: v for k, v in prov["config"].items() if k not in ("data", "seed")} == defaults, name
        fingerprints = [p["data"]["training_batches_sha256"] for p in provs.values()]
        assert len(set(fingerprints)) == len(fingerprints), "two runs record the same training batches"
        seeds = {}
        for prov in provs.values():
            seeds.setdefault(prov["config"]["data"], set()).add(prov["config"]["seed"])
        assert seeds["no-repeat"] <= seeds["repeat"], "a control without its run with copies"
        logs = {run.name: pd.read_csv(run / "log.csv") for run in runs}
        assert len({tuple(log.columns) for log in logs.values()}) == 1, "runs with different columns"
        for seed in seeds["no-repeat"]:
            start = [logs[f"attn-{data}-s{seed}"].query("step == 0")[list(_ALWAYS)].to_numpy()
                     for data in ("repeat", "no-repeat")]
            np.testing.assert_array_equal(*start, err_msg=f"training seed {seed}: not the same initialisation")


def test_induction_training_batches_are_the_recorded_ones():
    """The training batches that the code draws today are the ones the runs trained on (their SHA-256), for the
    first training seed of each kind of data."""
    from qkgeometry.training.config import InductionConfig
    from qkgeometry.training.induction_data import SegmentSpec, stream_fingerprint

    firsts = {}
    for run in INDUCTION_RUNS:
        prov = _induction_provenance(run)
        key = (run.parent.name, prov["config"]["data"])
        if key not in firsts or prov["config"]["seed"] < firsts[key]["config"]["seed"]:
            firsts[key] = prov
    for prov in firsts.values():
        cfg = InductionConfig(**prov["config"])
        spec = SegmentSpec(cfg.vocab_size, cfg.seq_len, cfg.min_segment, cfg.max_segment, cfg.skip)
        found = stream_fingerprint(spec, cfg.batch_size, cfg.seed, cfg.steps, cfg.data == "repeat")
        assert found == prov["data"]["training_batches_sha256"], prov["run"]


def test_induction_notes_name_every_recorded_run():
    """The notes written before the runs state the schedule the runs followed, and the notes written after them
    name the training seeds that were recorded, with their count."""
    from qkgeometry.formatting import format_number
    from qkgeometry.training.config import InductionConfig

    for experiment in INDUCTION_EXPERIMENTS:
        readme = " ".join(qg.recorded(experiment).description.split())
        cfg = InductionConfig(**_induction_provenance(INDUCTION_RUNS[0])["config"])
        assert f"**{format_number(cfg.steps)} steps**" in readme
        assert (f"every {cfg.dense_every} steps before step {cfg.dense_until}" in readme
                and f"every {cfg.log_every} steps after" in readme)
        seeds = {}
        for run in INDUCTION_RUNS:
            if run.parent.name == experiment:
                config = _induction_provenance(run)["config"]
                seeds.setdefault(config["data"], []).append(config["seed"])
        for data, ran in seeds.items():
            ran = sorted(ran)
            assert ran == list(range(ran[0], ran[-1] + 1)), f"{data}: training seeds not consecutive"
            assert f"seeds {ran[0]}–{ran[-1]} ({len(ran)} runs" in readme, data
            assert f"--data {data} --seed 0" in readme


def test_induction_snapshots_are_the_recorded_heads():
    """The intuition figure's snapshots are of a recorded run: their symmetry scores are the log's at those steps
    (to float32 precision), their patterns are causal attention rows and their skew parts skew-symmetric."""
    for experiment in INDUCTION_EXPERIMENTS:
        files = sorted(qg.recorded(experiment).path.glob("snapshots-s*.npz"))
        assert files, f"{experiment}: no snapshots"
        for path in files:
            snap = np.load(path)
            seed, layer, head = int(snap["seed"]), int(snap["layer"]), int(snap["head"])
            assert path.name == f"snapshots-s{seed}.npz"
            log = pd.read_csv(qg.recorded(experiment).runs[f"attn-repeat-s{seed}"] / "log.csv")
            mine = log[(log["layer"] == layer) & (log["head"] == head)].set_index("step")["symmetry"]
            steps = snap["steps"].tolist()
            assert set(steps) <= set(mine.index)
            np.testing.assert_allclose(snap["symmetry"], mine.loc[steps].to_numpy(), atol=2e-6)
            n, t = len(steps), len(snap["ids"])
            assert snap["pattern"].shape == snap["sym"].shape == snap["skew"].shape == (n, t, t)
            np.testing.assert_allclose(snap["pattern"].sum(axis=-1), 1, atol=1e-4)
            assert np.all(np.triu(snap["pattern"], k=1) == 0), "attention to later tokens"
            np.testing.assert_allclose(snap["skew"], -np.swapaxes(snap["skew"], -1, -2), atol=1e-5)
