"""surveying.runs: a run's identity reads back from its text, and labels tell runs apart with as little as
needed."""

from __future__ import annotations

from qkgeometry.surveying.runs import RunId, config_fingerprint, run_labels


def test_a_run_identity_reads_back_from_its_text():
    run = RunId.start("/data/out", 7, config_fingerprint({"lr": 1e-3}))
    assert RunId.parse(str(run)) == run and len(run.config) == 8 and run.started.endswith("Z")
    unseeded = RunId.start("my run")
    assert RunId.parse(str(unseeded)) == unseeded and unseeded.seed is None
    assert RunId.parse("/data/out") is None and RunId.parse("EleutherAI/pythia-70m") is None


def test_a_fingerprint_follows_every_part_and_only_them():
    assert config_fingerprint({"a": 1, "b": 2}) == config_fingerprint({"b": 2, "a": 1})
    assert config_fingerprint({"a": 1}) != config_fingerprint({"a": 2})
    assert config_fingerprint({"a": 1}, None) != config_fingerprint({"a": 1}, {"trial": 1})


def test_labels_are_the_shortest_tail_then_the_seed_then_the_start():
    a = RunId("/x/expA/out", "2026-01-01T00:00:00.000Z", 0, "c1")
    b = RunId("/x/expB/out", "2026-01-01T00:00:00.000Z", 0, "c1")
    assert run_labels([str(a), str(b)]) == {str(a): "expA/out", str(b): "expB/out"}
    seeds = [RunId("/x/out", "2026-01-01T00:00:00.000Z", s, "c") for s in (0, 1)]
    assert list(run_labels([str(r) for r in seeds]).values()) == ["out (seed 0)", "out (seed 1)"]
    starts = [RunId("/x/out", f"2026-01-01T00:0{m}:00.000Z", 0, "c") for m in (0, 1)]
    assert list(run_labels([str(r) for r in starts]).values()) == [
        "out (started 2026-01-01T00:00:00.000Z)", "out (started 2026-01-01T00:01:00.000Z)"]
    assert run_labels(["/a/run", "/b/run"]) == {"/a/run": "a/run", "/b/run": "b/run"}  # checkpoint folders
