"""Adversarial input: nothing lost, nothing stale, nothing silent.

Every fixture is built here (tiny random checkpoints written with safetensors / gguf, no transformers model
construction), and each failure class is asserted the same way: exit status, ONE line on stderr naming the file
or field, no traceback, and the previous output intact.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import save_file

import qkgeometry as qg
from bounded import no_hang, one_line_error
from qkgeometry.cli import main
from qkgeometry.errors import SourceError
from qkgeometry.surveying.store import read_store

D, HEADS, KV, LAYERS = 16, 4, 2, 2
SRC = str(Path(__file__).resolve().parents[1] / "src")


# ------------------------------------------------------------------------------------------------ fixtures
def llama_config(**overrides) -> dict:
    cfg = {"model_type": "llama", "hidden_size": D, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
           "num_key_value_heads": KV, "intermediate_size": 32, "vocab_size": 50}
    cfg.update(overrides)
    return cfg


def llama_tensors(layers: int = LAYERS, seed: int = 0, heads: int = HEADS, kv: int = KV, scale: float = 1.0,
                  dtype=torch.float32) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    hd = D // heads
    out = {}
    for i in range(layers):
        out[f"model.layers.{i}.self_attn.q_proj.weight"] = (torch.randn(heads * hd, D, generator=gen,
                                                                        dtype=torch.float64) * scale).to(dtype)
        out[f"model.layers.{i}.self_attn.k_proj.weight"] = (torch.randn(kv * hd, D, generator=gen,
                                                                        dtype=torch.float64) * scale).to(dtype)
    return out


def make_model(folder: Path, config: dict | None = None, tensors: dict | None = None,
               file: str = "model.safetensors") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(llama_config() if config is None else config))
    save_file(llama_tensors() if tensors is None else tensors, str(folder / file), metadata={"format": "pt"})
    return folder


def make_gguf(path: Path, *, block_count=LAYERS, head_count=HEADS, head_count_kv=KV, embedding=D, q_shape=None,
              skip=(), extra_array: int = 0) -> Path:
    import gguf

    writer = gguf.GGUFWriter(str(path), "llama")
    for key, value, add in (("block_count", block_count, writer.add_uint32),
                            ("embedding_length", embedding, writer.add_uint32)):
        if key not in skip:
            add(f"llama.{key}", value)
    for key, value in (("attention.head_count", head_count), ("attention.head_count_kv", head_count_kv)):
        if key in skip:
            continue
        if isinstance(value, float):
            writer.add_float32(f"llama.{key}", value)
        elif value < 0:
            writer.add_int32(f"llama.{key}", value)
        else:
            writer.add_uint32(f"llama.{key}", value)
    if extra_array:
        writer.add_array("test.big_numeric_array", np.arange(extra_array, dtype=np.uint32).tolist())
    rng = np.random.default_rng(0)
    for i in range(LAYERS):
        q = rng.standard_normal(q_shape or (HEADS * (D // HEADS), D)).astype(np.float32)
        writer.add_tensor(f"blk.{i}.attn_q.weight", q)
        writer.add_tensor(f"blk.{i}.attn_k.weight", rng.standard_normal((KV * (D // HEADS), D)).astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.fixture
def model_dir(tmp_path) -> Path:
    return make_model(tmp_path / "tiny")




def cli(*args: str, env: dict | None = None, preexec=None, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "qkgeometry.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": SRC, **(env or {})}, check=False,
                          preexec_fn=preexec)


# ------------------------------------------------------------------------------------------------ data loss
_SLOW_SURVEY = textwrap.dedent("""
    import sys, time
    import qkgeometry.surveying.scoring as s
    real = s.score_layers
    def slow(model, *args, **kwargs):
        time.sleep(float(sys.argv[1]))
        return real(model, *args, **kwargs)
    s.score_layers = slow
    from qkgeometry.cli import main
    sys.exit(main(sys.argv[2:]))
""")


def test_two_concurrent_surveys_to_one_out_both_land(tmp_path):
    models = [str(make_model(tmp_path / f"m{k}", tensors=llama_tensors(seed=k))) for k in range(6)]
    out = tmp_path / "results.csv"
    env = {**os.environ, "PYTHONPATH": SRC}
    procs = [subprocess.Popen([sys.executable, "-c", _SLOW_SURVEY, "0.3", "survey", *chunk, "--out", str(out)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for chunk in (models[0::2], models[1::2])]
    for p in procs:
        assert p.wait(timeout=300) == 0, p.stdout.read()
    assert sorted(read_store(out)["model"].unique()) == [f"m{k}" for k in range(6)]
    assert len(read_store(out)) == 6 * LAYERS


def test_truncated_cache_is_recomputed_per_model(tmp_path):
    a, b = make_model(tmp_path / "a"), make_model(tmp_path / "b", tensors=llama_tensors(seed=1))
    cache = tmp_path / "r.csv"
    full = qg.survey([str(a), str(b)], per="head", cache=cache, progress=False)
    text = cache.read_text()
    lines = text.splitlines(keepends=True)
    # `head -n`: model b loses rows; the cache must not be reused as complete for b, and a stays reused
    cache.write_text("".join(lines[: 1 + HEADS * LAYERS + 3]))
    again = qg.survey([str(a), str(b)], per="head", cache=cache, progress=False)
    assert again.attrs["computed"] == ["b"]
    pd.testing.assert_frame_equal(again, full, check_dtype=False)
    # a file cut mid-line: the half row is not kept, and the model is recomputed
    cache.write_text(text[: len(text) - 25])
    with pytest.warns(UserWarning, match="partial line"):
        again = qg.survey([str(a), str(b)], per="head", cache=cache, progress=False)
    assert again.attrs["computed"] == ["b"]
    pd.testing.assert_frame_equal(read_store(cache), full, check_dtype=False)


def test_changed_config_or_same_size_weights_are_recomputed(tmp_path):
    folder = make_model(tmp_path / "m", config=llama_config(num_key_value_heads=HEADS),
                        tensors=llama_tensors(kv=HEADS))
    cache = tmp_path / "r.csv"
    assert qg.survey([str(folder)], per="head", cache=cache, progress=False).attrs["computed"] == ["m"]
    assert qg.survey([str(folder)], per="head", cache=cache, progress=False).attrs["computed"] == []
    config = folder / "config.json"
    st = config.stat()
    config.write_text(json.dumps(llama_config(num_attention_heads=2, num_key_value_heads=2)))
    os.utime(config, ns=(st.st_atime_ns, st.st_mtime_ns))
    frame = qg.survey([str(folder)], per="head", cache=cache, progress=False)
    assert frame.attrs["computed"] == ["m"] and len(frame) == 2 * LAYERS
    # weights rewritten in place, same size, mtime preserved (cp -p, rsync, tar)
    weights = folder / "model.safetensors"
    st = weights.stat()
    save_file(llama_tensors(seed=7, kv=HEADS), str(weights), metadata={"format": "pt"})
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert weights.stat().st_size == st.st_size
    assert qg.survey([str(folder)], per="head", cache=cache, progress=False).attrs["computed"] == ["m"]


def test_stray_safetensors_files_are_refused_or_ignored_by_the_index(tmp_path, capsys):
    folder = make_model(tmp_path / "m")
    save_file(llama_tensors(seed=9), str(folder / "zz-old-checkpoint.safetensors"), metadata={"format": "pt"})
    one_line_error(capsys, main(["score", str(folder)]), "model.safetensors", "zz-old-checkpoint.safetensors")
    # with an index, files it does not list are ignored (with a warning) and the listed tensors win
    clean = qg.score_model(make_model(tmp_path / "clean"), per="head")
    weight_map = dict.fromkeys(llama_tensors(), "model.safetensors")
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    with pytest.warns(UserWarning, match="zz-old-checkpoint.safetensors"):
        scored = qg.score_model(folder, per="head")
    np.testing.assert_array_equal(scored["symmetry"], clean["symmetry"])
    # an index that names a missing shard is one clear line
    weight_map["model.layers.0.self_attn.q_proj.weight"] = "model-00002-of-00002.safetensors"
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    one_line_error(capsys, main(["score", str(folder)]), "model-00002-of-00002.safetensors")


def test_int8_with_scales_is_dequantised_and_other_codes_are_refused(tmp_path, capsys):
    real = llama_tensors()
    quant = {}
    for name, w in real.items():
        scb = w.abs().amax(dim=1).float()
        codes = torch.round(w / scb[:, None] * 127).to(torch.int8)
        quant[name] = codes
        quant[name.removesuffix(".weight") + ".SCB"] = scb
    bnb = {"quant_method": "bitsandbytes", "load_in_8bit": True}
    folder = make_model(tmp_path / "int8", config=llama_config(quantization_config=bnb), tensors=quant)
    deq = {n: quant[n].double() * quant[n.removesuffix(".weight") + ".SCB"].double()[:, None] / 127 for n in real}
    expected = qg.score_model(make_model(tmp_path / "deq", tensors=deq), per="head")
    got = qg.score_model(folder, per="head")
    np.testing.assert_allclose(got["symmetry"], expected["symmetry"], atol=1e-12)
    # raw integer codes without a scale, and quantisation methods that are not supported
    ints = {n: (w * 100).to(torch.int32) for n, w in real.items()}
    one_line_error(capsys, main(["score", str(make_model(tmp_path / "i32", tensors=ints))]), "I32",
                   "q_proj.weight")
    gptq = make_model(tmp_path / "gptq", config=llama_config(quantization_config={"quant_method": "gptq"}))
    one_line_error(capsys, main(["score", str(gptq)]), "quantization_config.quant_method", "gptq")


def test_score_out_is_atomic_and_checked_before_computing(tmp_path):
    model_dir = make_model(tmp_path / "deep", config=llama_config(num_hidden_layers=12),
                           tensors=llama_tensors(layers=12))  # 48 per-head rows: a CSV of several kB
    out = tmp_path / "scores.csv"
    out.write_text("previous results\n")
    import resource

    def limit(n):
        return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (n, n))

    res = cli("score", str(model_dir), "--per", "head", "--out", str(out), preexec=limit(300))  # probe fails
    assert res.returncode == 2 and "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert "--out" in res.stderr and str(out) in res.stderr and "computed" not in res.stdout
    res = cli("score", str(model_dir), "--per", "head", "--out", str(out), preexec=limit(1000))  # CSV too big
    assert res.returncode == 2 and "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert str(out) in res.stderr
    assert out.read_text() == "previous results\n", "the previous file was damaged"
    assert not list(tmp_path.glob(".scores.csv.*.tmp"))


def test_huge_and_tiny_values_give_the_same_scores_and_nan_is_never_stored(tmp_path):
    rng = np.random.default_rng(0)
    M = rng.standard_normal((6, 6))
    for factor in (1e155, 1e300, 1e-170):
        assert qg.symmetry_score(M * factor) == pytest.approx(qg.symmetry_score(M), abs=1e-14)
        assert qg.directionality_score(M * factor) == pytest.approx(qg.directionality_score(M), abs=1e-14)
    A, B = rng.standard_normal((2, 6, 3))
    assert qg.symmetry_score_factored(A * 1e200, B * 1e-250) == pytest.approx(qg.symmetry_score_factored(A, B))
    base = make_model(tmp_path / "base", tensors=llama_tensors(dtype=torch.float64))
    huge = make_model(tmp_path / "huge", tensors=llama_tensors(scale=1e200, dtype=torch.float64))
    cache = tmp_path / "r.csv"
    frame = qg.survey([str(base), str(huge)], per="head", cache=cache, progress=False)
    np.testing.assert_allclose(frame[frame.model == "huge"]["symmetry"], frame[frame.model == "base"]["symmetry"],
                               atol=1e-12)
    bad = llama_tensors()
    bad["model.layers.1.self_attn.q_proj.weight"][0, 0] = float("nan")
    nan = make_model(tmp_path / "nan", tensors=bad)
    with pytest.warns(UserWarning, match="layer 1: .*NaN(/| or )Inf"):
        frame = qg.survey([str(nan)], cache=cache, progress=False)
    assert list(frame.attrs["failures"]["name"]) == [str(nan)]
    assert "nan" not in set(read_store(cache)["model"]) and np.isfinite(read_store(cache)["symmetry"]).all()


def test_a_zero_layer_model_never_stops_a_survey(model_dir, tmp_path, capsys):
    zero = make_model(tmp_path / "zero", config=llama_config(num_hidden_layers=0))
    gguf0 = make_gguf(tmp_path / "zero.gguf", block_count=0)
    out = tmp_path / "r.csv"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["survey", str(zero), str(gguf0), str(model_dir), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "computed 1 model(s)" in text and "2 model(s) failed" in text and "num_hidden_layers" in text
    assert list(read_store(out)["model"].unique()) == ["tiny"]


# ------------------------------------------------------------------------------------------------ hangs
@pytest.mark.parametrize("kind", ["safetensors", "gguf", "config"])
def test_fifos_are_refused_before_opening(model_dir, tmp_path, capsys, kind):
    if kind == "safetensors":
        (model_dir / "model.safetensors").unlink()
        os.mkfifo(model_dir / "model.safetensors")
        source, needle = model_dir, "model.safetensors"
    elif kind == "config":
        (model_dir / "config.json").unlink()
        os.mkfifo(model_dir / "config.json")
        source, needle = model_dir, "config.json"
    else:
        source = needle = str(tmp_path / "x.gguf")
        os.mkfifo(source)
    with no_hang():
        one_line_error(capsys, main(["score", str(source)]), needle, "FIFO")


# ------------------------------------------------------------------------------------------------ config.json
@pytest.mark.parametrize("field, value, needle", [
    ("num_attention_heads", 0, "num_attention_heads"),
    ("num_attention_heads", -4, "num_attention_heads"),
    ("num_attention_heads", "4", "num_attention_heads"),
    ("num_attention_heads", True, "num_attention_heads"),
    ("num_attention_heads", 4.5, "num_attention_heads"),
    ("num_attention_heads", float("nan"), "num_attention_heads"),
    ("hidden_size", "1e400", "hidden_size"),  # written raw below: json.dumps cannot
    ("num_key_value_heads", 3, "key/value heads"),
    ("model_type", 5, "model_type"),
    ("model_type", ["llama"], "model_type"),
])
def test_bad_config_fields_are_one_clear_line(tmp_path, capsys, field, value, needle):
    cfg = llama_config(**{field: value})
    tensors = llama_tensors(kv=3) if field == "num_key_value_heads" else None  # shapes that match the config
    if field == "num_key_value_heads":
        cfg["head_dim"] = D // HEADS
    folder = make_model(tmp_path / "m", config=cfg, tensors=tensors)
    if value == "1e400":
        text = (folder / "config.json").read_text().replace('"1e400"', "1e400")
        (folder / "config.json").write_text(text)
    line = one_line_error(capsys, main(["score", str(folder)]), needle)
    assert "config" in line


@pytest.mark.parametrize("content, needle", [
    ("[" * 100_000 + "]" * 100_000, "nested"),
    ("[1, 2, 3]", "not an object"),
    ('{"model_type": "llama", "hidden_size": ', "not valid JSON"),
    ('{"model_type": "llama"}\n\x9e', "not valid JSON"),
])
def test_malformed_config_json_is_one_clear_line(model_dir, capsys, content, needle):
    (model_dir / "config.json").write_text(content, encoding="latin-1")
    one_line_error(capsys, main(["score", str(model_dir)]), "config.json", needle)


# ------------------------------------------------------------------------------------------------ GGUF
@pytest.mark.parametrize("kwargs, needle", [
    ({"head_count": 0}, "llama.attention.head_count"),
    ({"head_count": float("inf")}, "llama.attention.head_count"),
    ({"head_count": -4}, "llama.attention.head_count"),
    ({"head_count_kv": 0}, "llama.attention.head_count_kv"),
    ({"skip": ("attention.head_count",)}, "llama.attention.head_count"),
    ({"skip": ("embedding_length",)}, "llama.embedding_length"),
    ({"skip": ("block_count",)}, "llama.block_count"),
    ({"q_shape": (D * D,)}, "blk.0.attn_q.weight"),
    ({"q_shape": (2, D // 2, D)}, "blk.0.attn_q.weight"),
])
def test_bad_gguf_metadata_and_tensors_are_one_clear_line(tmp_path, capsys, kwargs, needle):
    path = make_gguf(tmp_path / "bad.gguf", **kwargs)
    line = one_line_error(capsys, main(["score", str(path)]), needle)
    assert "bad.gguf" in line


def test_long_numeric_gguf_arrays_are_skipped_unbuilt(tmp_path):
    import tracemalloc

    from qkgeometry.readers.gguf import GGUFIndex

    path = make_gguf(tmp_path / "big.gguf", extra_array=2_000_000)  # 8 MB of uint32 metadata
    tracemalloc.start()
    index = GGUFIndex(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert index.fields["test.big_numeric_array"] is None
    assert peak < 2_000_000, f"parsing built {peak:,} bytes of Python objects"
    assert index.tensor("blk.1.attn_k.weight").shape == (KV * (D // HEADS), D)
    with pytest.raises(KeyError, match="no tensor 'nope'"):
        index.tensor("nope")


# ------------------------------------------------------------------------------------------------ files
def test_path_problems_are_one_clear_line(tmp_path, capsys):
    one_line_error(capsys, main(["score", "/" + "a" * 300 + "/model.gguf"]), "too long")
    one_line_error(capsys, main(["score", "~nosuchuser_qk/model"]), "~nosuchuser_qk", "user")
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    one_line_error(capsys, main(["score", str(loop)]), str(loop), "loop")
    dangling = tmp_path / "dangling.gguf"
    dangling.symlink_to(tmp_path / "gone.gguf")
    one_line_error(capsys, main(["score", str(dangling)]), str(dangling), "does not exist")


@pytest.mark.parametrize("code, needle", [(errno.EACCES, "permission denied"), (errno.EIO, "I/O error")])
def test_unreadable_files_are_one_clear_line(model_dir, capsys, monkeypatch, code, needle):
    real = Path.read_bytes

    def failing(self):
        if self.name == "config.json":
            raise OSError(code, os.strerror(code), str(self))
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", failing)
    one_line_error(capsys, main(["score", str(model_dir)]), "config.json", needle)


def test_permissions_really_enforced(model_dir, tmp_path):
    from bounded import unprivileged

    prefix = unprivileged()  # as root: without the capabilities that bypass file permissions
    (model_dir / "model.safetensors").chmod(0)
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        for args, needles in ((["score", str(model_dir)], ("model.safetensors", "permission denied")),
                              (["survey", str(model_dir), "--out", str(ro / "r.csv")], ("--out", "not writable"))):
            res = subprocess.run([*prefix, sys.executable, "-m", "qkgeometry.cli", *args], capture_output=True,
                                 text=True, timeout=120, env={**os.environ, "PYTHONPATH": SRC}, check=False)
            lines = [line for line in res.stderr.splitlines() if line.strip()]
            assert res.returncode == 2 and len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
            assert all(n in lines[0] for n in needles), lines[0]
        assert not any(ro.iterdir())
    finally:
        (model_dir / "model.safetensors").chmod(0o644)
        ro.chmod(0o755)


def test_bad_out_paths_are_refused_before_computing(model_dir, tmp_path, capsys, monkeypatch):
    import qkgeometry.surveying.scoring as s

    monkeypatch.setattr(s, "score_layers", lambda *a, **k: pytest.fail("computed before checking --out"))
    a_file = tmp_path / "file.txt"
    a_file.write_text("keep me\n")
    for out, needle in ((tmp_path, "is a folder"), (a_file / "r.csv", "is a file")):
        one_line_error(capsys, main(["survey", str(model_dir), "--out", str(out)]), "--out", needle)
        one_line_error(capsys, main(["score", str(model_dir), "--out", str(out)]), "--out", needle)
    assert a_file.read_text() == "keep me\n"


def test_survey_out_over_a_size_limit_keeps_the_previous_file(model_dir, tmp_path):
    import resource

    out = tmp_path / "r.csv"
    assert cli("survey", str(model_dir), "--out", str(out)).returncode == 0
    before = out.read_bytes()
    other = make_model(tmp_path / "other", tensors=llama_tensors(seed=3))
    res = cli("survey", str(other), "--per", "head", "--out", str(out),
              preexec=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (len(before) + 100,) * 2))
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and str(out) in res.stderr
    assert out.read_bytes() == before


def test_symlinked_out_is_written_through(model_dir, tmp_path):
    target = tmp_path / "real" / "results.csv"
    target.parent.mkdir()
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    assert main(["survey", str(model_dir), "--out", str(link)]) == 0
    assert link.is_symlink() and len(read_store(target)) == LAYERS
    assert main(["score", str(model_dir), "--per", "head", "--out", str(link)]) == 0
    assert link.is_symlink() and len(pd.read_csv(target)) == LAYERS * HEADS


def test_cache_env_pointing_at_a_file(tmp_path, capsys, monkeypatch):
    from qkgeometry.catalogue import OFFLINE_MODELS, part_paths

    part_paths(OFFLINE_MODELS["gemma3-270m"].parts, "gemma")  # declared offline parts: missing ones fail the test
    blocker = tmp_path / "cache-file"
    blocker.write_text("")
    monkeypatch.setenv("QKGEOMETRY_CACHE", str(blocker))
    one_line_error(capsys, main(["score", "offline:gemma3-270m"]), "QKGEOMETRY_CACHE", str(blocker))


# ------------------------------------------------------------------------------------------------ plot and CSVs
@pytest.mark.parametrize("content, needle", [
    (b"", "no complete rows"),
    (b"\x9e\x00\xff binary", "not UTF-8"),
    (b"a,b\n1,2\n", "missing columns"),
])
def test_bad_results_files_name_the_file(model_dir, tmp_path, capsys, content, needle):
    bad = tmp_path / "bad.csv"
    bad.write_bytes(content)
    line = one_line_error(capsys, main(["plot", str(bad), "--out-dir", str(tmp_path / "f")]), str(bad))
    assert needle in line
    if content:  # a survey into a file that is not a survey cache: refused, and the file is left as it was
        one_line_error(capsys, main(["survey", str(model_dir), "--out", str(bad)]), str(bad))
        assert bad.read_bytes() == content


def test_plot_refuses_unplottable_results(model_dir, tmp_path, capsys):
    good = tmp_path / "r.csv"
    assert main(["survey", str(model_dir), "--out", str(good)]) == 0
    frame = pd.read_csv(good)
    for name, edit in (("nan.csv", {"symmetry": np.nan, "directionality": np.nan}), ("nomodel.csv", {"model": ""})):
        frame.assign(**edit).to_csv(tmp_path / name, index=False)
        one_line_error(capsys, main(["plot", str(tmp_path / name)]), name, "no complete rows")
    a_file = tmp_path / "figs"
    a_file.write_text("")
    one_line_error(capsys, main(["plot", str(good), "--out-dir", str(a_file)]), "--out-dir", "is a file")


def test_sigint_during_a_survey_says_what_was_saved(tmp_path):
    models = [str(make_model(tmp_path / f"m{k}", tensors=llama_tensors(seed=k))) for k in range(2)]
    out = tmp_path / "r.csv"
    marker = tmp_path / "scoring-m1"  # written when the survey is inside the second model's (slow) scoring
    script = _SLOW_SURVEY.replace("time.sleep(float(sys.argv[1]))",
                                  f"model.name == 'm0' or (open({str(marker)!r}, 'w').close(), "
                                  "time.sleep(float(sys.argv[1])))")
    # A process started with SIGINT ignored keeps ignoring it (Python installs its handler only where SIGINT is
    # not ignored), and a test session that started Jupyter kernels may hand that on; a terminal never does.
    script = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n" + script
    proc = subprocess.Popen([sys.executable, "-c", script, "60", "survey", *models, "--out", str(out)],
                            env={**os.environ, "PYTHONPATH": SRC}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.time() + 240  # a loaded machine can take a minute to import the stack
    while not (out.exists() and marker.exists()) and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert marker.exists(), "the survey never reached the second model"
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in stderr and "interrupted" in lines[0] and "m0" in lines[0]
    assert list(read_store(out)["model"].unique()) == ["m0"]


# ------------------------------------------------------------------------------------------------ in-memory
def test_meta_device_tensors_and_models_are_refused(capsys):
    with pytest.raises(ValueError, match="meta-device"):
        qg.symmetry_score(torch.empty(4, 4, device="meta"))
    import transformers

    cfg = transformers.AutoConfig.for_model("llama", **{k: v for k, v in llama_config().items() if k != "model_type"})
    with torch.device("meta"):
        model = transformers.AutoModel.from_config(cfg)
    with pytest.raises(SourceError, match="meta device"):
        qg.load_qk(model)


# ------------------------------------------------------------------------------------------------ smaller
def test_fewer_configured_layers_than_the_checkpoint_warns(tmp_path):
    folder = make_model(tmp_path / "m", config=llama_config(num_hidden_layers=1))
    with pytest.warns(UserWarning, match="config says 1 layers but the checkpoint has more"):
        qg.load_qk(folder)
    with pytest.warns(UserWarning, match="config says 1 layers"):
        qg.load_qk(make_gguf(tmp_path / "m.gguf", block_count=1))


def test_small_api_edges(model_dir):
    layer = qg.load_qk(model_dir).layer(0)
    with pytest.raises(IndexError, match="`head`"):
        layer.matrix(head=True)
    assert torch.equal(layer.matrix(np.int64(1)), layer.matrix(1))
    M = np.random.default_rng(0).standard_normal((8, 8))
    assert qg.directionality_score(M, num_std=np.float32(2)) == qg.directionality_score(M, num_std=2.0)
    with pytest.raises(ValueError, match="`num_std`"):
        qg.directionality_score(M, num_std=np.bool_(True))
