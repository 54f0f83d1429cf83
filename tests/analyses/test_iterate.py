"""The analyses' shared walk over layers and heads: order, GQA pairing, CPU float64 copies, opening and closing.

A tensor on a GPU cannot be made on a CPU-only machine, so device safety is tested through the same code path
(``.detach().to("cpu", float64)``) with tensors that a bare ``.numpy()`` refuses: ones that require grad, and
non-contiguous views.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers

import qkgeometry as qg
from qkgeometry._arrays import host_float64
from qkgeometry.analyses.anatomy import head_share
from qkgeometry.analyses.iterate import Factors, heads_for, iter_factors, iter_layers, opened
from qkgeometry.analyses.nulls import rotation_z_scores
from qkgeometry.analyses.spectrum import spectrum_table

TINY_LLAMA = dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
                  intermediate_size=32, vocab_size=50, max_position_embeddings=16)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    torch.manual_seed(0)
    config = transformers.AutoConfig.for_model("llama", **TINY_LLAMA)
    path = tmp_path_factory.mktemp("tiny-llama")
    transformers.AutoModel.from_config(config).save_pretrained(path)
    return path


class GradModel(qg.QKModel):
    """A QKModel whose layers hold tensors that require grad and are non-contiguous views."""

    def __init__(self, n_layers: int = 2, n_heads: int = 4, n_kv: int = 2, d: int = 16, r: int = 3):
        gen = torch.Generator().manual_seed(1)
        self.name, self.family, self.d_model = "grad", "decoder", d
        self._layers = []
        for i in range(n_layers):
            wq = torch.randn(n_heads, r, d, generator=gen, dtype=torch.float64).requires_grad_().mT
            wk = torch.randn(n_kv, r, d, generator=gen, dtype=torch.float64).requires_grad_().mT
            self._layers.append(qg.QKLayer(i, "self", wq, wk))

    def __iter__(self):
        return iter(self._layers)

    def __len__(self):
        return len(self._layers)

    def layer(self, index, component=None):
        return self._layers[index]

    def close(self):
        pass


def test_heads_and_layers_come_in_order_with_the_gqa_pairing(folder):
    with qg.load_qk(folder) as model:
        records = list(iter_factors(model, per="both"))
        assert [(f.layer, f.head) for f in records[:6]] == [(0, None), (0, 0), (0, 1), (0, 2), (0, 3), (1, None)]
        assert len(records) == 3 * 5 and all(isinstance(f, Factors) and f.component == "self" for f in records)
        layer = model.layer(1)
        for f in (f for f in records if f.layer == 1):
            a, b = layer.factors(f.head)
            assert f.a.dtype == f.b.dtype == np.float64 and isinstance(f.a, np.ndarray)
            np.testing.assert_array_equal(f.a, a.numpy())
            np.testing.assert_array_equal(f.b, b.numpy())
        head3 = next(f for f in records if (f.layer, f.head) == (1, 3))
        np.testing.assert_array_equal(head3.b, layer.wk_kv[3 // 2].numpy())  # g(h) = h // group: repeat, not tile
        assert records[0].a.shape == (32, 2 * 8)  # the layer: grouped factors of rank n_kv · head_dim
        assert [f.head for f in iter_factors(model, per="layer")] == [None] * 3
        assert [(f.layer, f.head) for f in iter_factors(model, per="head", layers=[2])] == [(2, h) for h in range(4)]


def test_per_is_checked_before_any_layer_is_read():
    with pytest.raises(ValueError, match="`per` must be 'layer', 'head' or 'both'"):
        iter_factors(GradModel(), per="heads")
    assert heads_for("both", 2) == [None, 0, 1]


def test_tensors_that_require_grad_or_are_views_come_back_as_cpu_float64():
    model = GradModel()
    layer = next(iter(model))
    assert layer.wq.requires_grad and not layer.wq.is_contiguous()
    with pytest.raises(RuntimeError):
        layer.factors(0)[0].numpy()  # what a bare .numpy() does
    records = list(iter_factors(model, per="both"))
    assert all(f.a.dtype == np.float64 and f.a.flags.c_contiguous is not None for f in records)
    np.testing.assert_array_equal(records[1].a, layer.wq[0].detach().numpy())
    assert host_float64(torch.ones(2, dtype=torch.bfloat16)).dtype == np.float64
    assert [lyr.index for lyr in iter_layers(model, layers=[1])] == [1]


def test_analyses_walk_models_whose_tensors_require_grad():
    model = GradModel()
    z = rotation_z_scores(model, per="both")
    assert len(z) == 2 * 5 and np.isfinite(z["z"]).all()
    table = spectrum_table(model, per="head")
    assert len(table) == 2 * 4 and np.isfinite(table["trace_z"]).all()
    share = head_share(next(iter(model)))
    assert share["trace"].shape == (4, 4) and np.isfinite(share["within_head"])


def test_opened_closes_what_it_opens_and_leaves_a_given_model_open(folder, monkeypatch):
    closed = []
    monkeypatch.setattr(qg.QKModel, "close", lambda self: closed.append(self.name))
    with qg.load_qk(folder) as given:
        closed.clear()
        with opened(given) as qk:
            assert qk is given
        assert closed == []
    closed.clear()
    with opened(folder) as qk:
        assert isinstance(qk, qg.QKModel) and qk.n_kv_heads == 2
    assert closed == [qk.name]
    closed.clear()
    rotation_z_scores(folder)
    assert closed == [qk.name]
