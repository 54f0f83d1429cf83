"""One cache per commit, shared safely: models open on the same commit (two opens, a raw and a folded open, two
processes) read one file that is never replaced under them and give the single-process scores; a cached tensor
whose bytes changed is fetched again online and refused offline; no FIFO in the cache folder blocks a rerun."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import qkgeometry as qg
from hub_emulator import go_offline
from hub_models import hub_cache_root, one_line, same_scores


def cache_file(repo: str) -> Path:
    return next((hub_cache_root() / ("models--" + repo.replace("/", "--"))).glob("*/qk.safetensors"))


def test_two_opens_of_one_id_share_the_cache(hub, folders):
    first = qg.load_qk("tiny/sharded")
    second = qg.load_qk("tiny/sharded")  # opened before the first has fetched anything
    inode = cache_file("tiny/sharded").stat().st_ino
    local = qg.load_qk(folders["sharded"])
    same_scores(first, local)
    same_scores(second, local)
    assert cache_file("tiny/sharded").stat().st_ino == inode  # never replaced
    qk = hub_plan_bytes("tiny/sharded")
    assert sum(r.sent for r in hub.data_requests() if is_weight_range(r)) <= 1.05 * qk  # fetched once


def test_a_half_fetched_cache_is_not_rewritten_by_a_second_open(hub, folders):
    first = qg.load_qk("tiny/sharded")
    first.layer(0)  # layer 0 fetched, the rest not yet
    inode = cache_file("tiny/sharded").stat().st_ino
    second = qg.load_qk("tiny/sharded")
    assert cache_file("tiny/sharded").stat().st_ino == inode
    same_scores(first, qg.load_qk(folders["sharded"]))
    same_scores(second, qg.load_qk(folders["sharded"]))


@pytest.mark.parametrize("kind", ["llama", "bert"])
def test_a_raw_and_a_folded_open_give_the_local_scores(hub, folders, kind):
    raw = qg.load_qk(f"tiny/{kind}")
    folded = qg.load_qk(f"tiny/{kind}", input_norm="folded")
    same_scores(folded, qg.load_qk(folders[kind], input_norm="folded"))
    same_scores(raw, qg.load_qk(folders[kind]))


SCRIPT = """
import sys
import qkgeometry as qg
frame = qg.score_model(qg.load_qk("tiny/sharded"), per="head")
frame[["component", "layer", "head", "symmetry", "directionality"]].to_csv(sys.argv[1], index=False)
"""


def test_two_processes_fetching_one_repo_give_the_single_process_scores(hub, folders, tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_DOWNLOAD_TIMEOUT": "10", "HF_HUB_ETAG_TIMEOUT": "10",
           "PYTHONPATH": os.pathsep.join([str(Path(qg.__file__).parents[1]), os.environ.get("PYTHONPATH", "")])}
    # the first data range stalls 1.5 s, then is cut and retried: whoever holds the lock then makes the other wait
    hub.fault("stall", "model-0000", times=1, seconds=1.5, after=0)
    outs = [tmp_path / f"p{k}.csv" for k in range(2)]
    procs = [subprocess.Popen([sys.executable, "-c", SCRIPT, str(o)], env=env, stderr=subprocess.PIPE, text=True)
             for o in outs]
    errs = [p.communicate(timeout=100)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    local = qg.score_model(qg.load_qk(folders["sharded"]), per="head")
    cols = ["component", "layer", "head", "symmetry", "directionality"]
    for o in outs:
        got = pd.read_csv(o)
        pd.testing.assert_frame_equal(got, local[cols].reset_index(drop=True), check_exact=False, rtol=1e-12,
                                      check_dtype=False)
    qk = hub_plan_bytes("tiny/sharded")
    assert sum(r.sent for r in hub.data_requests() if is_weight_range(r)) <= 1.05 * qk  # the second fetched nothing


def hub_plan_bytes(repo: str) -> int:
    from qkgeometry.readers.hub import hub_plan

    return hub_plan(repo).total_bytes


def is_weight_range(r) -> bool:
    return "/_cdn/" in r.path and r.path.split("?")[0].endswith(".safetensors") and not r.range.startswith("bytes=0-")


# ------------------------------------------------------------------------------------------------ tampering
def tamper(path: Path) -> None:
    """Flip bytes in the middle of the data (the size stays the same)."""
    n = int.from_bytes(path.read_bytes()[:8], "little")
    with open(path, "r+b") as fh:
        at = 8 + n + (path.stat().st_size - 8 - n) // 2
        fh.seek(at)
        old = fh.read(16)
        fh.seek(at)
        fh.write(bytes(b ^ 0x5A for b in old))


def test_a_tampered_cache_is_refetched_online_and_refused_offline(hub, folders, monkeypatch, capsys):
    qg.score_model(qg.load_qk("tiny/llama"))
    f = cache_file("tiny/llama")
    tamper(f)
    hub.reset_log()
    same_scores(qg.load_qk("tiny/llama"), qg.load_qk(folders["llama"]))
    assert [r for r in hub.data_requests() if is_weight_range(r)]  # the changed tensor was fetched again
    manifest = json.loads((f.parent / "qk.sha256.json").read_text())
    assert set(manifest) == set(json.loads(f.read_bytes()[8:8 + int.from_bytes(f.read_bytes()[:8], "little")])) - {
        "__metadata__"}
    tamper(f)
    go_offline(monkeypatch)
    err = one_line(capsys, ["score", "tiny/llama"])
    assert "changed after they were fetched" in err and "unset HF_HUB_OFFLINE" in err and str(f) in err


@pytest.mark.parametrize("name", ["qk.sha256.json", "config.json"])  # the files a rerun reads
def test_a_fifo_in_the_cache_folder_does_not_block_a_rerun(hub, folders, name):
    with qg.load_qk("tiny/llama") as m:
        m.layer(0)  # a partial fetch: the rerun has to find out what is cached
    target = cache_file("tiny/llama").parent / name
    target.unlink(missing_ok=True)
    os.mkfifo(target)
    same_scores(qg.load_qk("tiny/llama"), qg.load_qk(folders["llama"]))  # the test's time limit catches a hang


def test_a_lock_held_too_long_gives_one_line(hub, folders, monkeypatch, capsys):
    from filelock import FileLock

    from qkgeometry.readers.hub import cache as hub_cache

    commit = hub.repos["tiny/llama"].branches["main"]
    folder = hub_cache_root() / "models--tiny--llama" / commit
    folder.mkdir(parents=True)
    monkeypatch.setattr(hub_cache, "LOCK_TIMEOUT_S", 0.2)
    with FileLock(str(folder / "qk.lock")):  # another process's fetch, as far as the lock can tell
        err = one_line(capsys, ["score", "tiny/llama"])
    assert "another process fetching 'tiny/llama'" in err and "qk.lock" in err and "then rerun" in err


# ------------------------------------------------------------------------------------------------ replaced files
@pytest.mark.parametrize("kind", ["llama", "sharded"])  # float32 (read by safetensors) and bfloat16 (by bytes)
def test_a_cache_cleared_under_an_open_model_is_not_read_as_zeros(hub, folders, kind):
    import shutil

    first = qg.load_qk(f"tiny/{kind}")
    first.layer(0)  # layer 0 fetched into the file `first` reads
    shutil.rmtree(hub_cache_root())  # the cache cleared while the model is open
    second = qg.load_qk(f"tiny/{kind}")
    local = qg.load_qk(folders[kind])
    same_scores(second, local)  # a new cache file, every tensor in it and in its manifest
    same_scores(first, local)  # the rest of `first` lands in its own file, whatever the new manifest says


def test_a_cache_file_replaced_by_another_layout_under_an_open_model_is_not_read(hub, folders):
    first = qg.load_qk("tiny/sharded")
    first.layer(0)
    f = cache_file("tiny/sharded")
    raw = f.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    names = sorted(k for k in header if k != "__metadata__")
    offsets = [header[k]["data_offsets"] for k in names]
    for k, o in zip(names, offsets[1:] + offsets[:1]):  # the same tensors at other places, as another layout has them
        header[k]["data_offsets"] = o
    tmp = f.with_name("other")
    tmp.write_bytes(raw[:8] + json.dumps(header, separators=(",", ":")).encode().ljust(n) + raw[8 + n:])
    os.replace(tmp, f)
    same_scores(first, qg.load_qk(folders["sharded"]))


def test_a_cache_file_of_another_layout_is_never_trusted(hub, folders, monkeypatch, capsys):
    qg.score_model(qg.load_qk("tiny/llama"))
    f = cache_file("tiny/llama")
    raw = f.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    header["__metadata__"]["format"] = "another-layout"
    head = json.dumps(header, separators=(",", ":")).encode()
    assert len(head) <= n
    f.write_bytes(raw[:8] + head.ljust(n) + raw[8 + n:])  # the same tensors and sizes, another format
    go_offline(monkeypatch)
    err = one_line(capsys, ["score", "tiny/llama"])
    assert "not in the qkgeometry cache" in err
    monkeypatch.delenv("HF_HUB_OFFLINE")
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    hub.reset_log()
    same_scores(qg.load_qk("tiny/llama"), qg.load_qk(folders["llama"]))
    assert [r for r in hub.data_requests() if is_weight_range(r)]  # fetched again, into a file of this layout
