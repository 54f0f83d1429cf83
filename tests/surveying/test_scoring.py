"""qkgeometry.surveying.scoring: score_model's tidy frames on real offline weights; qg.survey's streaming, atomic cache,
resume after a kill and failures table; the CLI's survey and plot."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

import qkgeometry as qg
from qkgeometry.errors import first_line
from qkgeometry.surveying.store import CACHE_KEY, COLUMNS, SURVEY_COLUMNS, read_store
from tiny_models import tiny_folder


def _tiny(folder: Path, model_type: str, seed: int, **config) -> Path:
    return tiny_folder(model_type, folder, seed=seed, **config)


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory) -> list[str]:
    root = tmp_path_factory.mktemp("models")
    enc = _tiny(root / "tiny-bert", "bert", 0, hidden_size=48, num_hidden_layers=2, num_attention_heads=4,
                intermediate_size=64, vocab_size=99)
    dec = _tiny(root / "tiny-llama", "llama", 1, hidden_size=48, num_hidden_layers=3, num_attention_heads=4,
                num_key_value_heads=2, intermediate_size=64, vocab_size=99)
    return [str(enc), str(dec)]


def test_survey_frame_matches_score_model_and_caches(tiny_models, tmp_path):
    cache = tmp_path / "r.csv"
    frame = qg.survey([*tiny_models, f"random:{tiny_models[1]}"], per="head", cache=cache, progress=False)
    assert list(frame.columns) == SURVEY_COLUMNS and list(frame.columns[: len(COLUMNS)]) == COLUMNS
    assert frame.attrs["computed"] == ["tiny-bert", "tiny-llama", "tiny-llama (random init)"]
    assert frame.attrs["failures"].empty
    direct = qg.score_model(tiny_models[1], per="head")
    mine = frame[frame.model == "tiny-llama"][COLUMNS].reset_index(drop=True)
    pd.testing.assert_frame_equal(mine, direct, check_dtype=False)
    assert set(frame.loc[frame.model.str.contains("random"), "init"]) == {"random"}
    # the cache holds exactly what was returned, and a second call reads it back without computing
    again = qg.survey([*tiny_models, f"random:{tiny_models[1]}"], per="head", cache=cache, progress=False)
    assert again.attrs["computed"] == []
    pd.testing.assert_frame_equal(again, frame, check_dtype=False)
    # a different key (per layer) is computed, and the per-head rows stay in the file
    layer = qg.survey(tiny_models[:1], per="layer", cache=cache, progress=False)
    assert layer.attrs["computed"] == ["tiny-bert"] and layer["head"].isna().all()
    assert len(pd.read_csv(cache)) == len(frame) + len(layer)


def test_a_random_twin_source_leaves_no_file_of_its_model_open(tiny_models):
    from qkgeometry.surveying.scoring import open_source

    before = len(os.listdir("/proc/self/fd"))
    with open_source(f"random:{tiny_models[1]}") as twin:
        assert len(os.listdir("/proc/self/fd")) == before  # the source was closed once the twin existed
        assert len([layer.wq.shape for layer in twin]) == twin.n_layers


def test_random_twin_is_deterministic_and_has_the_same_shapes(tiny_models):
    base = qg.load_qk(tiny_models[1])
    a, b = base.randomized(), base.randomized()
    la, lb, lbase = a.layer(2), b.layer(2), base.layer(2)
    assert torch.equal(la.wq, lb.wq) and la.wq.shape == lbase.wq.shape and la.wk_kv.shape == lbase.wk_kv.shape
    assert not torch.equal(la.wq, a.layer(1).wq)
    assert not torch.equal(base.randomized(seed=1).layer(2).wq, la.wq)
    assert a.source == f"random:{base.source}" and a.name.endswith("(random init)")
    assert abs(la.wq.std().item() - 0.02) < 0.002


def test_failing_model_is_skipped_and_reported(tiny_models, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text('{"model_type": "bert"}')  # no weights
    with pytest.warns(UserWarning, match="skipped"):
        frame = qg.survey([tiny_models[0], str(broken), "/does/not/exist"], cache=tmp_path / "r.csv",
                          progress=False)
    assert frame.attrs["computed"] == ["tiny-bert"]
    failures = frame.attrs["failures"]
    assert list(failures.columns) == ["source", "name", "error", "message"]
    assert failures["source"].tolist() == [str(broken), "/does/not/exist"]
    assert (failures["error"] == "SourceError").all() and failures["message"].str.len().gt(10).all()


def test_an_error_without_a_message_is_reported_by_its_type(tiny_models, tmp_path):
    qk = qg.load_qk(tiny_models[0])

    def broken(**kwargs):
        raise RuntimeError()

    qk.iter_layers = broken  # reading the weights fails with an empty message
    with pytest.warns(UserWarning, match="skipped 'tiny-bert': RuntimeError"):
        frame = qg.survey([qk], cache=tmp_path / "r.csv", progress=False)
    assert frame.attrs["failures"][["error", "message"]].values.tolist() == [["RuntimeError", "RuntimeError"]]


def test_first_line_of_a_message_or_the_type_name():
    assert first_line(ValueError("\n  first\nsecond")) == "first"
    assert first_line(KeyError()) == "KeyError" and first_line(OSError("   ")) == "OSError"


def test_an_unreadable_csv_without_a_message_names_the_file(tmp_path, monkeypatch):
    path = tmp_path / "r.csv"
    path.write_text("model,symmetry\nm,0.5\n")
    monkeypatch.setattr(pd, "read_csv", lambda *a, **k: (_ for _ in ()).throw(pd.errors.ParserError()))
    with pytest.raises(ValueError, match=r"r\.csv.*not a readable CSV \(ParserError\)"):
        read_store(path)


def test_score_model_leaves_the_callers_model_on_its_device(tiny_models):
    qk = qg.load_qk(tiny_models[1])
    assert qk.device == torch.device("cpu")
    frame = qg.score_model(qk, per="head", device="cpu:0")
    assert qk.device == torch.device("cpu"), "score_model moved the caller's QKModel"
    pd.testing.assert_frame_equal(frame, qg.score_model(qk, per="head"))


def test_survey_leaves_the_callers_model_open(tiny_models):
    qk = qg.load_qk(tiny_models[0])
    assert qg.survey([qk], progress=False, device="cpu:0").attrs["computed"] == ["tiny-bert"]
    assert qk.layer(1).wq.shape == (4, 48, 12) and qk.device == torch.device("cpu")


def test_survey_rows_carry_the_package_version(tiny_models, monkeypatch):
    import importlib.metadata

    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.0.0-stale-install")
    frame = qg.survey(tiny_models[:1], progress=False)
    assert set(frame["qkgeometry_version"]) == {qg.__version__}


def test_bad_arguments_name_the_argument(tmp_path):
    with pytest.raises(ValueError, match="`per`"):
        qg.survey(["x"], per="token")
    with pytest.raises(TypeError, match="`sources`"):
        qg.survey("offline:minilm-l6")
    with pytest.raises(ValueError, match="`cache`"):
        qg.survey(["x"], cache=tmp_path / "r.json")


_KILLABLE = textwrap.dedent("""
    import sys, time
    import qkgeometry.surveying.scoring as s
    real = s.score_layers
    def slow_after_first(model, *args, **kwargs):
        if model.name != "tiny-bert":
            time.sleep(120)  # the second model hangs: the test kills the process here
        return real(model, *args, **kwargs)
    s.score_layers = slow_after_first
    from qkgeometry.cli import main
    sys.exit(main(sys.argv[1:]))
""")


def test_cli_survey_killed_mid_run_resumes_without_recomputing(tiny_models, tmp_path, monkeypatch):
    cache = tmp_path / "results.csv"
    args = ["survey", *tiny_models, "--per", "head", "--out", str(cache)]
    proc = subprocess.Popen([sys.executable, "-c", _KILLABLE, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.time() + 120
        while not cache.exists() and time.time() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert cache.exists(), f"the first model was never written: {proc.communicate()[0][-2000:]!r}"
        time.sleep(0.3)
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    first = pd.read_csv(cache)
    assert first["model"].unique().tolist() == ["tiny-bert"]
    assert not list(tmp_path.glob(".results.csv.*.tmp")), "a temporary file was left behind"

    import qkgeometry.surveying.scoring as s

    scored = []
    real = s.score_layers
    monkeypatch.setattr(s, "score_layers", lambda model, *a, **k: scored.append(model.name) or real(model, *a, **k))
    from qkgeometry.cli import main

    assert main(args) == 0
    assert scored == ["tiny-llama"], "the finished model was recomputed"
    final = pd.read_csv(cache)
    assert final["model"].unique().tolist() == ["tiny-bert", "tiny-llama"]
    pd.testing.assert_frame_equal(final[final.model == "tiny-bert"].reset_index(drop=True), first)


def test_cache_key_includes_revision(tiny_models, tmp_path):
    """The revision is a content key: new weights of the same size with the old mtime are recomputed, while a
    touch that changes nothing is not."""
    import shutil

    from safetensors.torch import load_file, save_file

    folder = tmp_path / "m"
    shutil.copytree(tiny_models[0], folder)
    cache = tmp_path / "r.csv"
    assert qg.survey([str(folder)], cache=cache, progress=False).attrs["computed"] == ["m"]
    weights = next(folder.glob("*.safetensors"))
    os.utime(weights, (time.time() + 10, time.time() + 10))
    assert qg.survey([str(folder)], cache=cache, progress=False).attrs["computed"] == []
    st = weights.stat()
    tensors = load_file(weights)
    tensors = {k: (v * 1.5 if "query" in k else v) for k, v in tensors.items()}
    save_file(tensors, str(weights), metadata={"format": "pt"})
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns))  # same size, same mtime: as `cp -p` would leave it
    assert weights.stat().st_size == st.st_size
    new = qg.survey([str(folder)], cache=cache, progress=False)
    assert new.attrs["computed"] == ["m"]
    stored = pd.read_csv(cache)  # the new version replaced the old one: one version, the model's rows once
    assert stored["revision"].nunique() == 1 and len(stored) == len(new) == 2
    assert stored["revision"].iloc[0] == new["revision"].iloc[0]
    assert set(CACHE_KEY) <= set(SURVEY_COLUMNS)


def test_cli_plot_writes_figures(tiny_models, tmp_path, capsys):
    from qkgeometry.cli import main

    cache = tmp_path / "r.csv"
    assert main(["survey", tiny_models[0], f"random:{tiny_models[0]}", tiny_models[1], "--per", "head",
                 "--out", str(cache)]) == 0
    assert "computed 3 model(s)" in capsys.readouterr().out
    assert main(["plot", str(cache), "--out-dir", str(tmp_path / "figs")]) == 0
    written = sorted(p.name for p in (tmp_path / "figs").glob("*.png"))
    assert written == ["head_heatmaps_directionality.png", "head_heatmaps_symmetry.png", "layer_curves.png",
                       "random_twins.png", "scatter.png"]
    assert all((tmp_path / "figs" / n).stat().st_size > 5000 for n in written)
    assert main(["plot", str(tmp_path / "missing.csv")]) == 2
    assert main(["survey"]) == 2


@pytest.mark.slow  # every offline model and its twin (about a minute)
def test_cli_survey_offline_preset_writes_the_csv(tmp_path, capsys):
    """`qkgeometry survey --preset offline` runs offline and writes the CSV; a rerun reuses it all."""
    from qkgeometry import catalogue
    from qkgeometry.cli import main

    out = tmp_path / "results.csv"
    assert main(["survey", "--preset", "offline", "--out", str(out)]) == 0
    frame = pd.read_csv(out)
    rows = {"MiniLM-L6": 6, "SmolLM2-135M": 30, "gemma-3-270m": 18, "all-mpnet-base-v2": 12,
            "Qwen2.5-Coder-0.5B-Instruct": 24, "whisper-base": 18}  # whisper: 6 encoder, 6 decoder, 6 cross layers
    expected = {name: n for base, n in rows.items() for name in (base, f"{base} (random init)")}
    sizes = frame.groupby("model", sort=False).size().to_dict()
    assert list(sizes) == [e.name for e in catalogue.preset("offline")]  # models added to the preset join automatically
    assert {name: sizes[name] for name in expected} == expected
    assert frame.loc[frame["model"] == "whisper-base", "component"].value_counts().to_dict() == {
        "encoder": 6, "decoder": 6, "cross": 6}
    assert set(frame.loc[frame["model"].str.startswith("whisper"), "modality"]) == {"audio"}
    n = len(catalogue.preset("offline"))
    assert f"computed {n} model(s), reused 0" in capsys.readouterr().out
    assert main(["survey", "--preset", "offline", "--out", str(out)]) == 0
    assert f"computed 0 model(s), reused {n}" in capsys.readouterr().out


def test_paper_scores_ship_with_the_package():
    from qkgeometry.catalogue import paper_scores

    paper = paper_scores()
    assert len(paper) == 80 and paper["symmetry_median"].between(-1, 1).all()
    assert paper.set_index("model_as_reported").loc["bert-base", "hub_id"] == "google-bert/bert-base-uncased"


def test_survey_exercise_checkers_accept_the_reference_and_reject_the_slips(capsys):
    from qkgeometry.architectures import split_fused_blocked
    from qkgeometry.exercises.survey import check_kv_head, check_layer_symmetry, check_split_neox

    assert check_kv_head(lambda h, n, k: h // (n // k))
    assert not check_kv_head(lambda h, n, k: h % k)
    assert "tiling" in capsys.readouterr().out
    assert check_split_neox(lambda w, n, hd: (w.reshape(n, 3, hd, -1)[:, 0].transpose(1, 2),
                                              w.reshape(n, 3, hd, -1)[:, 1].transpose(1, 2)))
    from qkgeometry.architectures import Dims

    assert not check_split_neox(lambda w, n, hd: split_fused_blocked(w, Dims(1, w.shape[1], n, n, hd), "w"))

    def dense(wq, wk, g):
        return qg.symmetry_score(sum(wq[h] @ wk[h // g].T for h in range(wq.shape[0])).numpy())

    assert check_layer_symmetry(dense)
    assert not check_layer_symmetry(lambda wq, wk, g: dense(wq, wk[torch.arange(wq.shape[0]) % wk.shape[0]], 1))


# ------------------------------------------------------------------------ score_model on real offline weights
@pytest.fixture(scope="module")
def real_layers() -> dict[str, pd.DataFrame]:
    return {alias: qg.score_model(f"offline:{alias}", per="layer") for alias in ("minilm-l6", "smollm2-135m")}


def test_tidy_layer_frame(real_layers):
    enc = real_layers["minilm-l6"]
    assert list(enc.columns) == COLUMNS
    assert len(enc) == 6 and enc["head"].isna().all() and str(enc["head"].dtype) == "Int64"
    assert (enc["family"] == "encoder").all() and (enc["component"] == "self").all()
    assert enc[["d_model", "head_dim", "n_heads", "n_kv_heads"]].iloc[0].tolist() == [384, 32, 12, 12]
    dec = real_layers["smollm2-135m"]
    assert len(dec) == 30 and dec[["n_heads", "n_kv_heads", "head_dim"]].iloc[0].tolist() == [9, 3, 64]
    assert dec["symmetry"].between(-1, 1).all() and dec["directionality"].between(-1, 1).all()


def test_encoder_more_symmetric_than_decoder_on_real_weights(real_layers):
    """The paper's headline on our two offline models (a property of the weights, measured, not tuned)."""
    enc = real_layers["minilm-l6"]["symmetry"].median()
    dec = real_layers["smollm2-135m"]["symmetry"].median()
    print(f"median layer symmetry: MiniLM-L6 {enc:.3f}, SmolLM2-135M {dec:.3f}, difference {enc - dec:.3f}")
    assert enc - dec > 0.2


def test_per_head_rows_match_dense_scores():
    qk = qg.load_qk("offline:minilm-l6")
    heads = qg.score_model(qk, per="head")
    assert len(heads) == 6 * 12 and heads["head"].notna().all()
    layer = qk.layer(2)
    row = heads[(heads.layer == 2) & (heads["head"] == 5)].iloc[0]
    assert row.symmetry == pytest.approx(qg.symmetry_score(layer.matrix(5)), abs=1e-10)
    assert row.directionality == pytest.approx(qg.directionality_score(layer.matrix(5)), abs=1e-10)
    lay = qg.score_model(qk, per="layer")
    assert lay.loc[lay.layer == 2, "symmetry"].item() == pytest.approx(qg.symmetry_score(layer.matrix()), abs=1e-10)


def test_summarize_and_bad_per():
    frame = qg.score_model("offline:minilm-l6")
    summary = qg.summarize(frame)
    assert summary.loc[0, "n"] == 6
    assert summary.loc[0, "symmetry_median"] == pytest.approx(frame.symmetry.median())
    with pytest.raises(ValueError, match=r"`per` must be 'layer' or 'head'; got 'neuron'"):
        qg.score_model("offline:minilm-l6", per="neuron")


def test_input_norm_folded_scores_and_survey_cache_key(tmp_path):
    raw = qg.score_model("offline:minilm-l6")
    folded = qg.score_model("offline:minilm-l6", input_norm="folded")
    qk = qg.load_qk("offline:minilm-l6", input_norm="folded")
    assert folded.loc[2, "symmetry"] == pytest.approx(qg.symmetry_score(qk.layer(2).matrix()), abs=1e-10)
    assert (folded["symmetry"] - raw["symmetry"]).abs().max() > 0.01  # the gains move the scores
    with pytest.raises(ValueError, match="`input_norm` must be 'raw' or 'folded'"):
        qg.score_model("offline:minilm-l6", input_norm="yes")
    with pytest.raises(ValueError, match=r"loaded with input_norm='raw'"):
        qg.score_model(qg.load_qk("offline:minilm-l6"), input_norm="folded")
    cache = tmp_path / "s.csv"
    a = qg.survey(["offline:minilm-l6"], cache=cache, progress=False)
    b = qg.survey(["offline:minilm-l6"], cache=cache, progress=False, input_norm="folded")
    assert b.attrs["computed"] == ["offline:minilm-l6"]  # a different key: computed, not reused
    assert (a["input_norm"] == "raw").all() and (b["input_norm"] == "folded").all()
    pd.testing.assert_series_equal(b["symmetry"], folded["symmetry"], check_names=False)
    again = qg.survey(["offline:minilm-l6"], cache=cache, progress=False, input_norm="folded")
    assert again.attrs["computed"] == [] and len(read_store(cache)) == 12


def test_cache_written_before_input_norm_reads_as_raw(tmp_path):
    cache = tmp_path / "old.csv"
    frame = qg.survey(["offline:minilm-l6"], cache=cache, progress=False)
    frame.drop(columns="input_norm").to_csv(cache, index=False)
    again = qg.survey(["offline:minilm-l6"], cache=cache, progress=False)
    assert again.attrs["computed"] == [] and (again["input_norm"] == "raw").all()


def test_survey_csv_cells_that_start_a_formula_are_quoted_and_read_back(tiny_models, tmp_path):
    import csv
    import shutil

    names = ["=cmd|' -C calc'!A0", "@SUM(1+1)", "+1", "-x", "'quoted"]
    sources = []
    for name in names:
        shutil.copytree(tiny_models[0], tmp_path / name)
        sources.append(str(tmp_path / name))
    cache = tmp_path / "r.csv"
    frame = qg.survey(sources, cache=cache, progress=False)
    assert list(dict.fromkeys(frame["model"])) == names
    with open(cache, newline="") as f:
        rows = list(csv.DictReader(f))
    for row in rows:  # every text cell a spreadsheet would run as a formula starts with the text mark '
        for column in ("model", "source"):
            assert not row[column].startswith(("=", "+", "-", "@")), row[column]
        assert row["model"].startswith("'")
    assert float(rows[0]["symmetry"]) == pytest.approx(frame["symmetry"].iloc[0])  # numbers stay numbers
    back = read_store(cache)
    assert list(dict.fromkeys(back["model"])) == names and list(dict.fromkeys(back["source"])) == sources
    again = qg.survey(sources, cache=cache, progress=False)  # the keys read back equal: nothing recomputed
    assert again.attrs["computed"] == []
    pd.testing.assert_frame_equal(qg.surveying.spreadsheet_text(qg.surveying.spreadsheet_safe(frame)), frame,
                                  check_dtype=False)


def test_layers_are_read_in_the_background_while_the_last_one_is_scored(tiny_models, monkeypatch):
    import threading

    from qkgeometry.model import QKModel

    readers, read = [], QKModel._read

    def spy(self, *args, **kwargs):
        readers.append(threading.current_thread().name)
        return read(self, *args, **kwargs)

    monkeypatch.setattr(QKModel, "_read", spy)
    frame = qg.score_model(tiny_models[1], per="head")
    assert len(frame) == 3 * 4 and len(readers) == 3
    assert set(readers) == {"qkgeometry-read-ahead"}


def test_summarize_of_an_empty_survey_is_an_empty_summary():
    from qkgeometry.surveying.scoring import summarize
    from qkgeometry.surveying.store import SURVEY_COLUMNS

    out = summarize(pd.DataFrame(columns=SURVEY_COLUMNS))
    assert out.empty and {"model", "n", "symmetry_median", "directionality_q75"} <= set(out.columns)
    with pytest.raises(ValueError, match="column 'symmetry' holds values that are not numbers"):
        summarize(pd.DataFrame({"model": ["m"], "family": ["decoder"], "component": ["self"],
                                "symmetry": ["high"], "directionality": [0.1]}))
