"""QKModel, QKLayer and BlockPlan: settings fixed at construction, indices, closing, the random twin."""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pytest
import torch
import transformers

import qkgeometry as qg
from qkgeometry.errors import SourceError
from qkgeometry.model import BlockPlan


@pytest.fixture(scope="module")
def bert_folder(tmp_path_factory):
    config = transformers.BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=64, max_position_embeddings=32)
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("bert")
    model = transformers.BertModel(config)
    with torch.no_grad():  # gains away from 1, so that folding them changes the form
        for m in model.modules():
            if isinstance(m, torch.nn.LayerNorm):
                m.weight.uniform_(0.5, 1.5)
    model.save_pretrained(folder)
    return folder


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_layer_accepts_numpy_integers_like_factors(bert_folder):
    with qg.load_qk(bert_folder) as model:
        by_int, by_numpy = model.layer(1), model.layer(np.int64(1))
        torch.testing.assert_close(by_int.wq, by_numpy.wq, rtol=0, atol=0)
        a, _ = by_int.factors(np.int32(2))
        torch.testing.assert_close(a, by_int.wq[2], rtol=0, atol=0)
        for bad in (True, 1.0, "1", 2, -1):
            with pytest.raises(IndexError, match="`index` must be an int in \\[0, 2\\)"):
                model.layer(bad)


def test_settings_are_fixed_at_construction_and_plans_are_frozen(bert_folder):
    raw, folded = qg.load_qk(bert_folder), qg.load_qk(bert_folder, input_norm="folded")
    assert (raw.input_norm, folded.input_norm) == ("raw", "folded")
    assert isinstance(raw.plans, tuple) and all(isinstance(p, BlockPlan) for p in raw.plans)
    with pytest.raises(dataclasses.FrozenInstanceError):
        raw.plans[0].split = None
    # folding builds new plans: the raw model's layers are unchanged by the folded one's existence
    assert not torch.allclose(raw.layer(0).wq, folded.layer(0).wq)
    raw.close(), folded.close()


def test_a_closed_model_says_so_instead_of_a_key_error(bert_folder):
    model = qg.load_qk(bert_folder)
    model.close()
    model.close()  # idempotent
    assert model.closed
    with pytest.raises(SourceError, match=r"is closed .* open it again with qkgeometry\.load_qk"):
        model.layer(0)


def test_the_random_twin_holds_none_of_the_models_files(bert_folder):
    before = _open_fds()
    model = qg.load_qk(bert_folder)
    twin = model.randomized(seed=3)
    model.close()
    assert _open_fds() == before  # nothing of the model stays open for the twin's sake
    layers = [layer.wq.clone() for layer in twin]  # the twin reads without its source
    assert len(layers) == 2 and twin.source.startswith("random:")
    again = qg.load_qk(bert_folder).randomized(seed=3)
    torch.testing.assert_close(next(iter(again)).wq, layers[0], rtol=0, atol=0)  # deterministic by seed
    assert all(p.get is None for p in twin.plans)


def test_with_device_leaves_the_model_unchanged(bert_folder):
    with qg.load_qk(bert_folder) as model:
        other = model.with_device("cpu")
        assert other is not model and model.device == torch.device("cpu")
        torch.testing.assert_close(other.layer(1).wq, model.layer(1).wq, rtol=0, atol=0)
    with pytest.raises(SourceError, match="is closed"):
        other.layer(0)


def test_factors_are_one_factored_form():
    """``QKLayer.factors`` returns a :class:`qkgeometry.FactoredQK` that still unpacks as ``A, B``."""
    import numpy as np

    from qkgeometry.model import FactoredQK, QKLayer

    rng = np.random.default_rng(0)
    layer = QKLayer(index=0, component="self", wq=rng.normal(size=(4, 6, 2)), wk_kv=rng.normal(size=(2, 6, 2)))
    form = layer.factors()
    assert isinstance(form, FactoredQK) and (form.d, form.rank_bound) == (6, 4)
    a, b = layer.factors(head=3)
    np.testing.assert_array_equal(a @ b.T, layer.matrix(3))
