"""The Hub reader trusts nothing it is served and fits the Hub's rate limits (against the loopback emulator): a
commit id or a revision with path syntax is refused before anything is written, remote safetensors headers get the
local reader's checks, each file is resolved once, a 429 is waited out, an expired signed URL is resolved again,
and a slow drip gives up within a deadline."""

from __future__ import annotations

import json
import re
import time

import pytest

import qkgeometry as qg
from hub_models import one_line, same_scores
from qkgeometry.errors import SourceError
from qkgeometry.readers.hub import client as remote
from qkgeometry.readers.hub import hub_plan


def tree(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


# ------------------------------------------------------------------------------------------------ security
@pytest.mark.parametrize("sha", ["../../../outside/pwned", "ABCDEF" * 7, "0" * 39, "0" * 40 + "/x"])
def test_a_commit_that_is_not_40_hex_digits_is_refused_before_any_write(hub, folders, tmp_path, capsys, sha):
    hub.add_repo("org/evil", folders["llama"])
    hub.repos["org/evil"].api_sha = sha
    before = tree(tmp_path)
    err = one_line(capsys, ["score", "org/evil"])
    assert "not a 40-digit hexadecimal commit id" in err and "HF_ENDPOINT" in err
    assert tree(tmp_path) == before  # nothing created: no cache folder, no refs, no config.json, nothing outside
    assert not hub.resolves()


def test_a_lying_commit_is_refused_by_the_snapshot_path_too(hub, folders, tmp_path):
    hub.add_repo("org/evil", folders["llama"])
    hub.repos["org/evil"].api_sha = "../../../outside/pwned"
    before = tree(tmp_path)
    with pytest.raises(SourceError, match="not a 40-digit hexadecimal commit id"):
        qg.load_qk("org/evil", fetch="snapshot")
    assert tree(tmp_path) == before


@pytest.mark.parametrize("revision", ["..", ".", "/etc", "a/../b", "refs/../../x", "a//b", ".hidden",
                                      "v1\\..\\x", "a b"])
def test_a_revision_with_path_syntax_is_refused_before_any_write(hub, tmp_path, capsys, revision):
    before = tree(tmp_path)
    with pytest.raises(SourceError, match=r"`revision` .* is not a branch, tag or commit name") as info:
        qg.load_qk("tiny/llama", revision=revision)
    assert "\n" not in str(info.value)
    err = one_line(capsys, ["score", f"hf://tiny/llama@{revision}"])
    assert "is not a branch, tag or commit name" in err
    assert tree(tmp_path) == before and hub.log == []


def test_a_branch_with_a_slash_is_still_a_revision(hub, folders):
    hub.add_repo("tiny/llama", folders["llama"], branch="refs/pr/1")
    same_scores(qg.load_qk("tiny/llama", revision="refs/pr/1"), qg.load_qk(folders["llama"]))


# ------------------------------------------------------------------------------------------------ header lies
def lying_repo(folders, case):
    """tiny/llama's files with the safetensors header lying in one way."""
    files = {p.name: p.read_bytes() for p in folders["llama"].iterdir() if p.is_file()}
    blob = files["model.safetensors"]
    n = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8:8 + n])
    q = next(k for k in header if k.endswith("layers.0.self_attn.q_proj.weight"))
    k = next(k for k in header if k.endswith("layers.0.self_attn.k_proj.weight"))
    if case == "trailing":
        files["model.safetensors"] = blob + b"\0" * 8
        return files
    if case == "past_end":  # the last tensor claims more rows than the file holds
        last = max((v for key, v in header.items() if key != "__metadata__"), key=lambda v: v["data_offsets"][1])
        last["shape"][0] += 64
        last["data_offsets"][1] += 64 * 2 * (last["data_offsets"][1] - last["data_offsets"][0]) // (
            2 * (last["shape"][0] - 64))
    elif case == "overlap":  # K's bytes are the start of Q's
        size = header[k]["data_offsets"][1] - header[k]["data_offsets"][0]
        header[k]["data_offsets"] = [header[q]["data_offsets"][0], header[q]["data_offsets"][0] + size]
    elif case == "list":
        header = [header]
    elif case == "dtype":
        header[q]["dtype"] = "I4"
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    files["model.safetensors"] = len(raw).to_bytes(8, "little") + raw + blob[8 + n:]
    return files


@pytest.mark.parametrize("case, message", [
    ("trailing", r"8 trailing bytes"), ("past_end", r"ends early|needs \d+ bytes"),
    ("overlap", r"overlaps the tensor before it|leaves a gap"), ("list", r"not an object of tensors"), ("dtype", r"not a tensor"),
])
def test_a_lying_header_is_refused_as_the_local_reader_refuses_it(hub, folders, tmp_path, capsys, case, message):
    files = lying_repo(folders, case)
    local = tmp_path / "local"
    local.mkdir()
    for name, data in files.items():
        (local / name).write_bytes(data)
    with pytest.raises(SourceError):
        qg.score_model(qg.load_qk(local))
    hub.add_repo("org/liar", files)
    err = one_line(capsys, ["score", "org/liar"])
    assert "'org/liar'" in err and "'model.safetensors'" in err
    assert re.search(message, err), err
    weights = [r for r in hub.data_requests() if "safetensors" in r.path and not r.range.startswith("bytes=0-")]
    assert weights == []  # refused from the header alone


def test_416_says_retrying_cannot_help(hub):
    from huggingface_hub.errors import HfHubHTTPError
    from huggingface_hub.utils import _http

    http = getattr(_http, "httpx2", None) or _http.httpx  # huggingface_hub 2 talks httpx2, 1.x httpx
    response = http.Response(416, request=http.Request("GET", "http://127.0.0.1/x"))
    e = HfHubHTTPError("416 Range Not Satisfiable", response=response)
    msg = str(remote.hub_error(e, "org/m", "main"))
    assert "retrying cannot help" in msg and "retry later" not in msg


# ------------------------------------------------------------------------------------------------ rate limits
def test_each_file_is_resolved_once(hub, folders):
    qg.score_model(qg.load_qk("tiny/sharded"))
    shards = len(list(folders["sharded"].glob("*.safetensors")))
    resolves = hub.resolves()
    assert len(resolves) <= shards + 2, [r.path for r in resolves]
    hub.reset_log()
    qg.score_model(qg.load_qk("tiny/llama"))
    assert len(hub.resolves()) <= 1 + 2


def test_plan_counts_the_requests_a_fetch_makes(hub, folders, capsys):
    hub.add_repo("tiny/sharded-copy", folders["sharded"])
    plan = hub_plan("tiny/sharded-copy")
    hub.reset_log()
    qg.score_model(qg.load_qk("tiny/sharded"))
    assert plan.requests == len(hub.log)
    assert qg.cli.main(["score", "tiny/sharded-copy", "--plan"]) == 0
    out = capsys.readouterr().out
    assert "requests" in out and str(plan.requests) in out


def test_a_429_is_waited_out(hub, folders):
    hub.fault("429", "model-00002", times=1, seconds=1)
    hub.fault("429", "model-00003", times=1, seconds=1, where="resolve")
    same_scores(qg.load_qk("tiny/sharded"), qg.load_qk(folders["sharded"]))
    assert waited(hub, "model-00002") >= 1.0 and waited(hub, "model-00003") >= 1.0  # Retry-After honoured
    assert all(f.times == 0 for f in hub.faults)
    assert sum(r.status == 429 for r in hub.log) == 2


def test_a_429_with_only_ratelimit_headers_is_waited_out(hub, folders):
    hub.fault("429", "model-00004", times=1, seconds=2, retry_after=False)
    same_scores(qg.load_qk("tiny/sharded"), qg.load_qk(folders["sharded"]))
    assert hub.faults[0].times == 0
    assert waited(hub, "model-00004") >= 2.0  # the RateLimit reset (t=2), not the 0.5 s backoff


def waited(hub, name: str) -> float:
    """Seconds between a 429 for ``name`` and the next request for it."""
    log = [r for r in hub.log if name in r.path]
    k = next(i for i, r in enumerate(log) if r.status == 429)
    return log[k + 1].at - log[k].at


def test_an_expired_signed_url_is_resolved_again(hub, folders):
    qg.load_qk("tiny/sharded")  # headers read: every shard resolved once
    hub.fault("expire", "model-00002", times=1)
    hub.reset_log()
    same_scores(qg.load_qk("tiny/sharded"), qg.load_qk(folders["sharded"]))
    assert sum(r.status == 403 for r in hub.log) == 1
    assert sum("model-00002" in r.path for r in hub.resolves()) == 2  # the first resolve, and one after the 403


def test_a_url_refused_even_when_fresh_names_the_clock(hub):
    hub.url_lifetime = -120  # every signed URL is born expired
    with pytest.raises(SourceError, match=r"refused a freshly signed URL .* check the clock"):
        qg.score_model(qg.load_qk("tiny/sharded"))


def test_a_slow_drip_is_cut_at_its_deadline_and_retried(hub, folders, monkeypatch):
    monkeypatch.setattr(remote, "RANGE_GRACE_S", 1.0)
    monkeypatch.setattr(remote, "MIN_RATE", 1e7)
    hub.fault("drip", "model-00002", times=1, seconds=0.2)
    start = time.monotonic()
    same_scores(qg.load_qk("tiny/sharded"), qg.load_qk(folders["sharded"]))
    assert time.monotonic() - start < 30 and hub.faults[0].times == 0


def test_a_drip_that_never_ends_fails_in_bounded_time(hub, monkeypatch, capsys):
    monkeypatch.setattr(remote, "RANGE_GRACE_S", 0.5)
    monkeypatch.setattr(remote, "MIN_RATE", 1e7)
    hub.fault("drip", "model-00002", times=100, seconds=0.2)
    start = time.monotonic()
    err = one_line(capsys, ["score", "tiny/sharded"])
    assert time.monotonic() - start < 30
    assert "could not reach the Hugging Face Hub for 'tiny/sharded'" in err and "slower than" in err
    assert re.search(r"\(4 attempts over \d+ s\)", err)  # how long it tried, said


PLAN_WITHOUT_TORCH = r"""
import json, os, sys
import numpy as np
from safetensors.numpy import save
from hub_emulator import HubEmulator

rng = np.random.default_rng(0)
d, layers = 32, 2
tensors = {"model.embed_tokens.weight": rng.standard_normal((50, d), dtype=np.float32)}
for i in range(layers):
    p = f"model.layers.{i}."
    for n, shape in (("input_layernorm.weight", (d,)), ("self_attn.q_proj.weight", (d, d)),
                     ("self_attn.k_proj.weight", (d // 2, d)), ("self_attn.v_proj.weight", (d // 2, d))):
        tensors[p + n] = rng.standard_normal(shape, dtype=np.float32)
config = {"model_type": "llama", "hidden_size": d, "num_hidden_layers": layers, "num_attention_heads": 4,
          "num_key_value_heads": 2, "intermediate_size": 64, "vocab_size": 50}
with HubEmulator() as hub:
    hub.add_repo("np/llama", {"config.json": json.dumps(config).encode(), "model.safetensors": save(tensors)})
    os.environ.update(HF_ENDPOINT=hub.url, HF_HOME=sys.argv[1] + "/hf", QKGEOMETRY_CACHE=sys.argv[1] + "/qk")
    from qkgeometry.readers.hub import hub_plan
    plan = hub_plan("np/llama")
    print(plan.total_bytes, "torch" in sys.modules)
"""


def test_a_plan_imports_no_torch(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_ENDPOINT")}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(qg.__file__).parents[1]), str(Path(__file__).parents[1])])
    out = subprocess.run([sys.executable, "-c", PLAN_WITHOUT_TORCH, str(tmp_path)], env=env, capture_output=True,
                         text=True, timeout=100)
    assert out.returncode == 0, out.stderr[-2000:]
    total, torch_loaded = out.stdout.split()
    assert int(total) == 2 * 4 * (32 + 32 * 32 + 16 * 32) and torch_loaded == "False"


def test_plan_of_a_missing_revision_is_an_error(hub, capsys):
    err = one_line(capsys, ["score", "hf://tiny/llama@v9.9", "--plan"])
    assert "revision 'v9.9' of Hub repo 'tiny/llama' was not found" in err


def test_signed_urls_are_renewed_a_minute_before_they_expire():
    now = time.time()
    assert remote._expires(f"https://cdn/x?Expires={int(now) + 3600}&Signature=s") == pytest.approx(now + 3540, abs=2)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    amz = remote._expires(f"https://cas/x?X-Amz-Date={stamp}&X-Amz-Expires=3600&X-Amz-Signature=s")
    assert amz == pytest.approx(now + 3540, abs=2)
    assert remote._expires("https://cdn/x") == pytest.approx(now + remote.URL_MAX_AGE_S, abs=2)


# ------------------------------------------------------------------------------------------------ what is sent
def test_the_token_goes_to_the_hub_only_never_to_the_storage_host(hub, folders, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_secrettoken123")
    same_scores(qg.load_qk("tiny/sharded"), qg.load_qk(folders["sharded"]))
    storage = [r for r in hub.log if r.to_storage]
    assert storage and all("authorization" not in r.headers for r in storage)
    assert any(r.headers.get("authorization") == "Bearer hf_secrettoken123" for r in hub.log if not r.to_storage)


# ------------------------------------------------------------------------------------------------ what is served
def test_a_server_that_ignores_range_is_refused_not_buffered(hub, capsys):
    hub.fault("norange", "model-00002", times=100)
    err = one_line(capsys, ["score", "tiny/sharded"])
    assert "ignored the Range header" in err and "'model-00002" in err and "fetch='snapshot'" in err


def test_a_206_of_other_bytes_than_asked_is_refused(hub, capsys):
    hub.fault("shifted", "model-00002", times=100, after=64)
    err = one_line(capsys, ["score", "tiny/sharded"])
    assert "Content-Range" in err and "other bytes than asked" in err


def test_a_206_that_sends_more_than_asked_is_refused(hub, capsys):
    hub.fault("overlong", "model-00002", times=100, after=4096)
    err = one_line(capsys, ["score", "tiny/sharded"])
    assert "sent more than bytes" in err


def test_a_remote_header_is_held_to_the_limits_of_a_local_one(hub, folders):
    config = (folders["llama"] / "config.json").read_bytes()
    hub.add_synthetic("syn/huge", {"model.safetensors": {"model.embed_tokens.weight": ("F32", (2**20, 2**15))}},
                      {"config.json": config})
    with pytest.raises(SourceError, match=r"'model.embed_tokens.weight' declares shape .* over the bound"):
        hub_plan("syn/huge")


def test_read_tensors_fails_in_one_line_without_a_signed_url(hub):
    from qkgeometry.readers.tensors import read_tensors

    name = "model.layers.1.self_attn.q_proj.weight"
    hub.fault("503", "model-0000", times=1000)
    with pytest.raises(SourceError, match="the Hub answered 503") as got:
        read_tensors("tiny/sharded", [name])
    assert "Signature" not in str(got.value) and "Expires=" not in str(got.value)
    hub.faults.clear()
    hub.fault("cut", "model-0000", times=1000, after=10)
    with pytest.raises(SourceError, match="could not reach the Hugging Face Hub") as got:
        read_tensors("tiny/sharded", [name])
    assert "Signature" not in str(got.value) and "\n" not in str(got.value)


def test_no_message_shows_a_signature_or_a_token():
    text = remote.scrub("GET https://cdn.example/x.safetensors?Expires=9&Signature=abc&Key-Pair-Id=k: 403; "
                        "Authorization: Bearer hf_abcdefghijkl")
    assert "abc" not in text and "hf_abcdefghijkl" not in text and "https://cdn.example/x.safetensors" in text


# ------------------------------------------------------------------------------------------------ local failures
def test_a_full_disk_names_the_cache_file_not_the_network(hub, capsys, monkeypatch):
    import errno
    import os

    def full(*_):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwrite", full)
    err = one_line(capsys, ["score", "tiny/llama"])
    assert "the disk is full" in err and "qk.safetensors" in err and "could not reach" not in err


@pytest.mark.parametrize("error, words", [
    (PermissionError(13, "Permission denied", "/cache/hub/qk.sha256.json"), "permission denied"),
    (FileNotFoundError(2, "No such file or directory", "/cache/hub/qk.safetensors"), "does not exist"),
])
def test_a_local_os_error_through_hub_error_names_the_file_and_the_cause(error, words):
    msg = str(remote.hub_error(error, "org/m", "main"))
    assert error.filename in msg and words in msg and "network" not in msg


def test_a_revision_that_is_not_text_is_refused_in_one_line(hub):
    with pytest.raises(SourceError, match="`revision` must be a string"):
        qg.load_qk("tiny/llama", revision=1)


def test_overlapping_quiet_retries_leave_the_hub_logger_as_it_was():
    import logging
    import threading

    log = logging.getLogger("huggingface_hub")
    before = log.level
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()

    def first():
        with remote.quiet_retries():
            a_in.set()
            b_in.wait(5)
        a_out.set()

    def second():
        a_in.wait(5)
        with remote.quiet_retries():
            b_in.set()
            a_out.wait(5)

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert log.level == before and log.getEffectiveLevel() <= logging.WARNING
