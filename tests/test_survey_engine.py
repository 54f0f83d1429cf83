"""qg.survey: streaming, atomic cache, resume after a kill, failures table; CLI survey and plot."""

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
from qkgeometry.survey import CACHE_KEY, COLUMNS, SURVEY_COLUMNS


def _tiny(folder: Path, model_type: str, seed: int, **config) -> Path:
    import transformers

    torch.manual_seed(seed)
    cfg = transformers.AutoConfig.for_model(model_type, **config)
    transformers.AutoModel.from_config(cfg).save_pretrained(folder)
    return folder


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


def test_bad_arguments_name_the_argument(tmp_path):
    with pytest.raises(ValueError, match="`per`"):
        qg.survey(["x"], per="token")
    with pytest.raises(TypeError, match="`sources`"):
        qg.survey("offline:minilm-l6")
    with pytest.raises(ValueError, match="`cache`"):
        qg.survey(["x"], cache=tmp_path / "r.json")


_KILLABLE = textwrap.dedent("""
    import importlib, sys, time
    s = importlib.import_module("qkgeometry.survey")  # the module (qkgeometry.survey the attribute is the function)
    real = s._score_streaming
    def slow_after_first(model, *args, **kwargs):
        if model.name != "tiny-bert":
            time.sleep(120)  # the second model hangs: the test kills the process here
        return real(model, *args, **kwargs)
    s._score_streaming = slow_after_first
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

    import importlib

    s = importlib.import_module("qkgeometry.survey")
    scored = []
    real = s._score_streaming
    monkeypatch.setattr(s, "_score_streaming", lambda model, *a, **k: scored.append(model.name) or real(model, *a, **k))
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
    assert qg.survey([str(folder)], cache=cache, progress=False).attrs["computed"] == ["m"]
    assert pd.read_csv(cache)["revision"].nunique() == 2
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
    from qkgeometry import zoo
    from qkgeometry.cli import main

    out = tmp_path / "results.csv"
    assert main(["survey", "--preset", "offline", "--out", str(out)]) == 0
    frame = pd.read_csv(out)
    rows = {"MiniLM-L6": 6, "SmolLM2-135M": 30, "gemma-3-270m": 18, "all-mpnet-base-v2": 12,
            "Qwen2.5-Coder-0.5B-Instruct": 24, "whisper-base": 18}  # whisper: 6 encoder, 6 decoder, 6 cross layers
    expected = {name: n for base, n in rows.items() for name in (base, f"{base} (random init)")}
    sizes = frame.groupby("model", sort=False).size().to_dict()
    assert list(sizes) == [e.name for e in zoo.preset("offline")]  # models added to the preset join automatically
    assert {name: sizes[name] for name in expected} == expected
    assert frame.loc[frame["model"] == "whisper-base", "component"].value_counts().to_dict() == {
        "encoder": 6, "decoder": 6, "cross": 6}
    assert set(frame.loc[frame["model"].str.startswith("whisper"), "modality"]) == {"audio"}
    n = len(zoo.preset("offline"))
    assert f"computed {n} model(s), reused 0" in capsys.readouterr().out
    assert main(["survey", "--preset", "offline", "--out", str(out)]) == 0
    assert f"computed 0 model(s), reused {n}" in capsys.readouterr().out


def test_paper_scores_ship_with_the_package():
    from qkgeometry.zoo import paper_scores

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
