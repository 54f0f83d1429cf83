"""MPNet adapter: W_qk reproduces MPNet's content logits; its relative position bias is the only other term."""

from __future__ import annotations

import math

import pytest
import torch

import qkgeometry as qg
from logit_harness import capture_softmax_inputs

TINY_MPNET = dict(hidden_size=48, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, vocab_size=99,
                  max_position_embeddings=40, relative_attention_num_buckets=32)


def _tiny_mpnet(folder, zero_biases: bool = True):
    import transformers

    torch.manual_seed(0)
    config = transformers.MPNetConfig(**TINY_MPNET)
    model = transformers.MPNetModel(config).to(torch.float64).eval()
    with torch.no_grad():
        # the position-bias table initialises to small values: make it large so that forgetting it would show
        model.encoder.relative_attention_bias.weight.normal_(0, 1.0)
        for name, p in model.named_parameters():
            if name.endswith(("attn.q.bias", "attn.k.bias")):  # init to zero; make them random when kept
                p.zero_() if zero_biases else p.normal_(0, 0.5)
    model.save_pretrained(folder, safe_serialization=True)
    return model


def _predicted(layer: qg.QKLayer, x: torch.Tensor) -> torch.Tensor:
    w = torch.stack([layer.matrix(h) for h in range(layer.n_heads)])
    return torch.einsum("bid,hde,bje->bhij", x, w, x) / math.sqrt(layer.wq.shape[-1])


@pytest.mark.parametrize("with_position_bias", [False, True])
def test_mpnet_logits_equal_w_qk_plus_position_bias(tmp_path, with_position_bias):
    """Every layer and head: the module's pre-softmax logits = x_iᵀ W_qk x_j / sqrt(head_dim) (+ the model's own
    relative position bias when the encoder passes it), to 1e-10 in float64."""
    model = _tiny_mpnet(tmp_path)
    qk = qg.load_qk(tmp_path)
    assert qk.architecture == "mpnet" and len(qk) == TINY_MPNET["num_hidden_layers"]
    gen = torch.Generator().manual_seed(1)
    for layer in qk:
        x = torch.randn(2, 9, TINY_MPNET["hidden_size"], generator=gen, dtype=torch.float64)
        bias = model.encoder.compute_position_bias(x) if with_position_bias else None
        module = model.encoder.layer[layer.index].attention.attn
        with torch.no_grad(), capture_softmax_inputs() as captured:
            module(x, position_bias=bias)
        assert len(captured) == 1
        logits = captured[0]
        expected = _predicted(layer, x) + (bias if bias is not None else 0.0)
        assert (logits - expected).abs().max().item() < 1e-10
        if bias is not None:  # the bias is real and not part of W_qk: leaving it out must fail
            assert (logits - _predicted(layer, x)).abs().max().item() > 1e-2


def test_mpnet_q_bias_is_outside_w_qk(tmp_path):
    """With random q/k biases the logits are (q_i + b_q)·(k_j + b_k) / sqrt(head_dim): the W_qk form plus the
    bias terms b_q·k_j (a key-side preference), q_i·b_k (constant along a row) and b_q·b_k."""
    model = _tiny_mpnet(tmp_path, zero_biases=False)
    layer = qg.load_qk(tmp_path).layer(0)
    attn = model.encoder.layer[0].attention.attn
    x = torch.randn(1, 5, TINY_MPNET["hidden_size"], dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    with torch.no_grad(), capture_softmax_inputs() as captured:
        attn(x)
    hd = layer.wq.shape[-1]
    bq, bk = attn.q.bias.detach().reshape(-1, hd), attn.k.bias.detach().reshape(-1, hd)
    q = torch.einsum("btd,hde->bhte", x, layer.wq)
    k = torch.einsum("btd,hde->bhte", x, layer.wk)
    bias_terms = (torch.einsum("he,bhje->bhj", bq, k)[:, :, None, :] + torch.einsum("bhie,he->bhi", q, bk)[..., None]
                  + (bq * bk).sum(-1)[None, :, None, None]) / math.sqrt(hd)
    torch.testing.assert_close(captured[0], _predicted(layer, x) + bias_terms, rtol=0, atol=1e-10)
    assert bias_terms.abs().max() > 1e-3


@pytest.mark.slow
def test_offline_mpnet_loads_every_layer():
    qk = qg.load_qk("offline:mpnet-base")
    assert qk.architecture == "mpnet" and len(qk) == 12
    d = qk.dims()
    assert (d.d_model, d.n_heads, d.n_kv_heads, d.head_dim) == (768, 12, 12, 64)
    frame = qg.score_model(qk)
    assert len(frame) == 12 and frame["symmetry"].between(-1, 1).all()
