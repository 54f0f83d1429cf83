"""The chapter-8 model: attention only, query/key biases held at zero, and the form that the package reads gives the
model's own logits."""
import numpy as np
import pytest
import torch

from qkgeometry.integrations import LiveScorer
from qkgeometry.training.induction_model import build_model, head_logits


def _logits_of(model, ids, layer):
    """The model's own pre-softmax logits of one layer, captured from its eager attention."""
    import transformers.models.gpt2.modeling_gpt2 as g2

    seen = {}
    original = g2.eager_attention_forward

    def spy(module, query, key, value, attention_mask, **kw):
        seen.setdefault(module.layer_idx, torch.matmul(query, key.transpose(-1, -2)) * kw["scaling"])
        return original(module, query, key, value, attention_mask, **kw)

    g2.eager_attention_forward = spy
    try:
        with torch.no_grad():
            model(ids)
    finally:
        g2.eager_attention_forward = original
    return seen[layer]


@pytest.fixture(scope="module")
def trained():
    model = build_model(vocab_size=16, seq_len=8, d_model=16, n_layers=2, n_heads=2, mlp=False, seed=0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ids = torch.randint(0, 16, (4, 8), generator=torch.Generator().manual_seed(0))
    for _ in range(5):
        loss = model(ids, labels=ids).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model, ids


def test_no_mlp_adds_nothing(trained):
    model, _ids = trained
    x = torch.randn(2, 3, 16)
    for block in model.transformer.h:
        assert torch.equal(block.mlp(x), torch.zeros_like(x))


def test_query_key_biases_stay_zero_after_training(trained):
    model, _ = trained
    for block in model.transformer.h:
        bias = block.attn.c_attn.bias
        assert torch.all(bias[:32] == 0)
        assert torch.any(bias[32:] != 0)   # the value bias trains


@pytest.mark.parametrize("layer", [0, 1])
def test_scored_form_gives_the_models_own_logits(trained, layer):
    model, ids = trained
    own = _logits_of(model, ids, layer).to(torch.float64)      # (batch, heads, T, T)
    for head in range(2):
        mine = head_logits(model, ids, layer, head)
        causal = torch.isfinite(mine)
        assert torch.allclose(mine[causal], own[:, head][causal], atol=1e-5, rtol=1e-4)


def test_live_scorer_scores_every_head(trained):
    model, _ = trained
    scorer = LiveScorer(None, 1, per="head", run="test")
    scorer.score(model, 0)
    frame = scorer.latest
    assert len(frame) == 4 and set(frame["layer"]) == {0, 1}
    assert np.all(np.abs(frame["symmetry"].to_numpy(dtype=float)) <= 1)


def test_mlp_variant_keeps_its_mlp():
    model = build_model(vocab_size=16, seq_len=8, d_model=16, n_layers=2, n_heads=2, mlp=True, seed=0)
    assert type(model.transformer.h[0].mlp).__name__ == "GPT2MLP"


def test_width_must_divide_into_heads():
    with pytest.raises(ValueError, match="multiple of n_heads"):
        build_model(vocab_size=16, seq_len=8, d_model=15, n_layers=2, n_heads=2, mlp=False, seed=0)
