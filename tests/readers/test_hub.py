"""The Hub path against a loopback emulator of the Hub's file API (nothing here reaches the real Hub): scores from
a Hub id equal the local folder's exactly, only the Q/K bytes travel, reruns send no data request, cut fetches
resume, and every failure a Colab user can meet gives one line that says what to do."""

from __future__ import annotations

import pandas as pd
import pytest

import qkgeometry as qg
from hub_emulator import go_offline
from hub_models import hub_cache_root, llama_shards, one_line, same_scores
from qkgeometry import cli
from qkgeometry.errors import SourceError
from qkgeometry.readers import safetensors_format
from qkgeometry.readers.hub import hub_plan
from qkgeometry.readers.hub import plan as hub_plan_module
from qkgeometry.readers.hub.plan import coalesce


# ------------------------------------------------------------------------------------------------ scores
@pytest.mark.parametrize("kind", ["bert", "llama", "gpt2", "qwen3", "sharded"])
def test_hub_scores_equal_the_local_folder(hub, folders, kind):
    same_scores(qg.load_qk(f"tiny/{kind}"), qg.load_qk(folders[kind]))


@pytest.mark.parametrize("kind", ["bert", "llama", "qwen3"])
def test_every_bilinear_form_reads_from_one_fetch(hub, folders, kind):
    """The gains are fetched with Q/K, so raw / folded forms all equal the local ones (and need no second fetch)."""
    qg.score_model(qg.load_qk(f"tiny/{kind}"))
    hub.reset_log()
    for kw in (dict(input_norm="folded"), dict(qk_norm="raw"), dict(qk_norm="raw", input_norm="folded")):
        if kind != "qwen3" and "qk_norm" in kw:
            continue
        same_scores(qg.load_qk(f"tiny/{kind}", **kw), qg.load_qk(folders[kind], **kw))
    assert hub.data_requests() == []


def test_hf_uri_and_revision(hub, folders):
    sha = hub.repos["tiny/llama"].branches["main"]
    m = qg.load_qk(f"hf://tiny/llama@{sha}")
    assert m.revision == sha
    same_scores(m, qg.load_qk(folders["llama"]))


# ------------------------------------------------------------------------------------------------ bytes
def test_sharded_bytes_are_the_qk_bytes(hub, folders):
    _, tensors = llama_shards(folders["sharded"].parent / "again")  # same seed: the same tensors
    qk = sum(t.numel() * 2 for n, t in tensors.items() if any(k in n for k in ("q_proj", "k_proj", "input_layernorm")))
    plan = hub_plan("tiny/sharded")
    assert plan.total_bytes == qk and plan.fetch_bytes == qk and plan.header_files >= 3
    hub.reset_log()
    qg.score_model(qg.load_qk("tiny/sharded"))
    header = [r for r in hub.data_requests() if r.range and r.range.startswith("bytes=0-")]
    data = [r for r in hub.data_requests() if r not in header and "/_cdn/" in r.path and r.path.endswith(".safetensors")]
    header_bytes = sum(r.sent for r in header)
    data_bytes = sum(r.sent for r in data)
    snapshot = sum(p.stat().st_size for p in folders["sharded"].glob("*.safetensors"))
    assert data_bytes <= 1.05 * qk, (data_bytes, qk)
    assert header_bytes <= plan.header_files * 100_001
    assert snapshot > 5 * qk  # what a snapshot downloads
    # adjacent ranges are joined: q_proj and k_proj of a layer are not adjacent in the file (o_proj lies between),
    # so at most 3 requests per layer
    assert len(data) <= 3 * 4


def test_rerun_sends_no_data_request_and_works_offline(hub, folders, monkeypatch):
    first = qg.score_model(qg.load_qk("tiny/sharded"), per="head")
    hub.reset_log()
    again = qg.score_model(qg.load_qk("tiny/sharded"), per="head")
    assert hub.data_requests() == [] and len(hub.log) == 1  # the revision -> commit lookup only
    pd.testing.assert_frame_equal(first, again, check_exact=True)
    go_offline(monkeypatch)
    hub.reset_log()
    offline = qg.score_model(qg.load_qk("tiny/sharded"), per="head")
    assert hub.log == []
    pd.testing.assert_frame_equal(first, offline, check_exact=True)


def test_damaged_cache_is_refetched(hub, folders):
    m = qg.load_qk("tiny/llama")
    qg.score_model(m)
    m.close()
    f = next((hub_cache_root() / "models--tiny--llama").glob("*/qk.safetensors"))
    with open(f, "r+b") as fh:
        fh.truncate(f.stat().st_size - 10)
    hub.reset_log()
    same_scores(qg.load_qk("tiny/llama"), qg.load_qk(folders["llama"]))
    assert hub.data_requests()


# ------------------------------------------------------------------------------------------------ faults
def test_cut_connection_resumes_at_tensor_granularity(hub, folders):
    hub.fault("cut", "model-", skip=4, times=20, after=100)  # after 4 ranges, every request is cut mid-tensor
    with pytest.raises(SourceError, match=r"could not reach the Hugging Face Hub for 'tiny/sharded' .*tensors .* "
                                          r"are cached in .*rerun: the fetch resumes"):
        qg.score_model(qg.load_qk("tiny/sharded"))
    hub.faults.clear()
    done = {(r.path, r.range) for r in hub.data_requests() if r.status == 206 and "/_cdn/" in r.path
            and not r.range.startswith("bytes=0-") and r.sent == int(r.range.split("-")[1]) - int(
                r.range.split("=")[1].split("-")[0]) + 1}
    assert len(done) == 4
    hub.reset_log()
    same_scores(qg.load_qk("tiny/sharded"), qg.load_qk(folders["sharded"]))
    again = {(r.path, r.range) for r in hub.data_requests()}
    assert not done & again  # what the first run wrote is not fetched again
    assert any(r.status == 206 for r in hub.data_requests())


def test_a_single_cut_a_stall_and_a_503_are_retried(hub, folders):
    hub.fault("cut", "model-00001", times=1, after=50)
    hub.fault("stall", "model-00002", times=1, seconds=4)  # longer than the 2 s read timeout
    hub.fault("503", "model-00003", times=1)
    same_scores(qg.load_qk("tiny/sharded"), qg.load_qk(folders["sharded"]))
    assert all(f.times == 0 for f in hub.faults)


# ------------------------------------------------------------------------------------------------ errors
def test_repo_not_found(hub, capsys):
    err = one_line(capsys, ["score", "tiny/nope"])
    assert "'tiny/nope' was not found" in err and "check the spelling, or the model is private" in err
    assert "could not reach" not in err and "check the network" not in err  # a 401 is an answer, not the network


def test_gated_repo_401_and_403(hub, folders, capsys, monkeypatch):
    hub.add_repo("org/gated", folders["llama"], gated="manual")
    err = one_line(capsys, ["score", "org/gated"])
    assert "is gated" in err and "`hf auth login`" in err and "HF_TOKEN" in err and "huggingface-cli" not in err
    hub.tokens["hf_user"] = set()
    monkeypatch.setenv("HF_TOKEN", "hf_user")
    err = one_line(capsys, ["score", "org/gated"])
    assert "accept the licence on the model's Hub page (https://huggingface.co/org/gated)" in err
    assert "not in the authorized list" in err  # the Hub's own words
    hub.tokens["hf_user"] = {"org/gated"}
    assert cli.main(["score", "org/gated"]) == 0


def test_bin_only_repo_names_the_repo_and_a_safetensors_revision(hub, folders, tmp_path, capsys):
    hub.add_repo("org/pickled", {"config.json": (folders["llama"] / "config.json").read_bytes(),
                                 "pytorch_model.bin": b"\x80" * 4096})
    err = one_line(capsys, ["score", "org/pickled"])
    assert "'org/pickled'" in err and "pytorch_model.bin" in err and "never loads pickled weights" in err
    assert "snapshots" not in err
    hub.add_repo("org/pickled", folders["llama"], branch="refs/pr/1")
    err = one_line(capsys, ["score", "org/pickled"])
    assert "pass `revision='refs/pr/1'`" in err
    assert not any("pytorch_model.bin" in r.path for r in hub.data_requests())


def test_revision_not_found(hub, capsys):
    with pytest.raises(SourceError, match=r"revision 'v9' of Hub repo 'tiny/llama' was not found"):
        qg.load_qk("tiny/llama", revision="v9")


def test_network_down_and_offline_cold_cache(hub, capsys, monkeypatch):
    hub.close()
    err = one_line(capsys, ["score", "tiny/llama"])
    assert "could not reach the Hugging Face Hub for 'tiny/llama'" in err and "rerun" in err
    go_offline(monkeypatch)
    err = one_line(capsys, ["score", "tiny/llama"])
    assert "HF_HUB_OFFLINE is set" in err and "not in the qkgeometry cache" in err


def test_snapshot_fallback(hub, folders):
    same_scores(qg.load_qk("tiny/gpt2", fetch="snapshot"), qg.load_qk(folders["gpt2"]))
    with pytest.raises(ValueError, match="`fetch` must be 'remote' or 'snapshot'"):
        qg.load_qk("tiny/gpt2", fetch="all")


# ------------------------------------------------------------------------------------------------ plan
def test_plan_says_what_a_fetch_costs(hub, capsys):
    plan = hub_plan("tiny/gpt2")
    assert plan.fused and all("c_attn" in n for n in plan.fused) and plan.fused_share == pytest.approx(2 / 3)
    assert cli.main(["score", "tiny/gpt2", "--plan"]) == 0
    out = capsys.readouterr().out
    assert "tiny/gpt2" in out and "c_attn" in out and "Q/K" in out
    weights = [r for r in hub.data_requests() if "safetensors" in r.path and not r.range.startswith("bytes=0-")]
    assert weights == []  # headers only
    qg.score_model(qg.load_qk("tiny/gpt2"))
    assert hub_plan("tiny/gpt2").fetch_bytes == 0
    assert cli.main(["survey", "tiny/llama", "tiny/gpt2", "offline:minilm-l6", "--plan"]) == 0
    out = capsys.readouterr().out
    assert "total" in out and "local" in out


def test_gguf_repo_is_refused_with_the_download_command(hub, capsys):
    hub.add_repo("org/gguf", {"model-q8_0.gguf": b"GGUF" + b"\0" * 4096, "README.md": b"hi"})
    err = one_line(capsys, ["score", "org/gguf"])
    assert "GGUF files (model-q8_0.gguf)" in err and "`hf download org/gguf model-q8_0.gguf`" in err
    assert not [r for r in hub.data_requests() if "gguf" in r.path]


# ------------------------------------------------------------------------------------------------ row-fused QKV
@pytest.mark.parametrize("kind, v_share", [("gpt_neox", 1 / 3), ("phi3", 2 / 8), ("modernbert", 1 / 3)])
def test_row_fused_qkv_fetches_only_the_q_and_k_rows(hub, folders, kind, v_share, monkeypatch):
    monkeypatch.setattr(safetensors_format, "FUSED_ROW_GAP", 1)  # skip every V block, however short
    plan = hub_plan(f"tiny/{kind}")
    fused = sorted(plan.row_fused)
    assert fused and not plan.fused - plan.row_fused  # every fused weight is fetched by rows
    whole = sum(plan.spans[n].nbytes for n in fused)
    assert plan.rows_saved_bytes == pytest.approx(v_share * whole)
    hub.reset_log()
    same_scores(qg.load_qk(f"tiny/{kind}"), qg.load_qk(folders[kind]))
    sent = sum(r.sent for r in hub.data_requests() if "/_cdn/" in r.path and not r.range.startswith("bytes=0-"))
    ranges = [c for g in plan.groups for c in coalesce([plan.spans[n] for n in g])]
    assert sent == sum(end - start for _, start, end, _ in ranges)  # what the plan asked for, gaps of < 4 kB joined
    assert sent < plan.total_bytes + 0.5 * plan.rows_saved_bytes  # the V rows do not travel
    if kind == "phi3":  # the input-norm gains of GPT-NeoX and ModernBERT are not registered
        kw = dict(input_norm="folded")
        same_scores(qg.load_qk(f"tiny/{kind}", **kw), qg.load_qk(folders[kind], **kw))


def test_short_v_blocks_between_heads_are_read_rather_than_skipped(hub):
    """GPT-NeoX interleaves Q, K, V per head: V blocks of at most FUSED_ROW_GAP are read through (one request per
    layer, not one per head); only the last head's V block is left out."""
    plan = hub_plan("tiny/gpt_neox")
    for n in plan.row_fused:
        s = plan.spans[n]
        assert len(s.pieces) == 1 and s.fetch_nbytes == s.nbytes * (1 - 1 / (3 * 4))
    assert plan.fetch_ranges <= 2 * 2  # per layer: the norm, and the fused weight with its bias


def test_the_snapshot_downloads_the_commit_it_resolved_not_the_branch(hub, folders, monkeypatch):
    """The branch could move between resolving it and downloading: every file comes from the commit resolved first,
    and the branch's ref is still recorded, so that an offline rerun by branch finds the snapshot."""
    import re

    import huggingface_hub

    asked = []
    real = huggingface_hub.snapshot_download

    def recording(repo_id, *, revision=None, **kw):
        asked.append(revision)
        return real(repo_id, revision=revision, **kw)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", recording)
    model = qg.load_qk("tiny/gpt2", fetch="snapshot")
    assert len(asked) == 1 and re.fullmatch(r"[0-9a-f]{40}", asked[0]) and asked[0] == model.revision
    go_offline(monkeypatch)
    assert qg.load_qk("tiny/gpt2", fetch="snapshot").revision == model.revision


def test_a_hub_model_whose_check_fails_leaves_no_file_open(hub, tmp_path, monkeypatch):
    """The Hub reader closes the cache file it opened when a check of the model raises."""
    from tiny_models import quantised_folder, spy_on_closing

    hub.add_repo("org/gptq", quantised_folder(tmp_path / "gptq"))
    cleared = spy_on_closing(monkeypatch)
    with pytest.raises(SourceError, match="quant_method"):
        qg.load_qk("org/gptq")
    assert cleared and cleared[-1] > 0


def test_snapshot_works_offline_once_downloaded(hub, folders, monkeypatch):
    qg.load_qk("tiny/gpt2", fetch="snapshot")
    go_offline(monkeypatch)
    hub.reset_log()
    same_scores(qg.load_qk("tiny/gpt2", fetch="snapshot"), qg.load_qk(folders["gpt2"]))
    assert hub.log == []


@pytest.mark.parametrize("kind", ["bert", "llama", "gpt2", "qwen3", "sharded", "gpt_neox", "phi3", "modernbert"])
def test_plans_recorded_on_numpy_and_on_torch_agree(hub, kind, monkeypatch):
    plans = {}
    for backend in ("numpy", "torch"):
        monkeypatch.setattr(hub_plan_module, "PLAN_BACKEND", backend)
        p = hub_plan(f"tiny/{kind}")
        plans[backend] = (p.spans, p.groups, p.weights, p.fused)
    assert plans["numpy"] == plans["torch"]


def test_a_plan_table_gives_a_row_to_a_source_whose_header_disagrees_with_its_config(hub, folders):
    import json

    from qkgeometry.readers.hub import plan_table

    config = json.loads((folders["llama"] / "config.json").read_text())
    config["num_key_value_heads"] = 4  # K is stored for 2 KV heads
    files = {p.name: p.read_bytes() for p in folders["llama"].iterdir() if p.is_file()}
    hub.add_repo("org/liar", {**files, "config.json": json.dumps(config).encode()})
    frame = plan_table(["org/liar", "tiny/sharded"]).set_index("model")
    assert "disagree" in frame.loc["org/liar", "note"] and "\n" not in frame.loc["org/liar", "note"]
    assert frame.loc["tiny/sharded", "qk_bytes"] > 0 and frame.loc["total", "qk_bytes"] > 0
