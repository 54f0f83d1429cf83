"""The small transformers of chapter 8: GPT-2 blocks with the feed-forward part taken out (attention only), or left
in (the variant with MLPs).

The model is a ``transformers.GPT2LMHeadModel`` built from a ``GPT2Config`` (learned absolute position embeddings,
pre-LayerNorm blocks, an untied unembedding), so that :func:`qkgeometry.load_qk` and the training callbacks read
its query and key weights exactly as they read any GPT-2. Two changes make the experiment clean:

* **attention only**: each block's MLP is replaced by :class:`NoMLP`, which returns zeros, so the block adds only
  its attention output to the residual stream (the block's second LayerNorm then feeds nothing);
* **no query/key biases**: GPT-2's fused ``c_attn`` bias is zeroed for its query and key thirds and held at zero
  by a gradient hook, so that the pre-softmax logit between tokens i and j is exactly
  ``x_iᵀ W_qk x_j / sqrt(d_h)`` with ``x`` the output of the block's first LayerNorm (the form the scores
  describe; the value bias is trained as usual).

:func:`head_logits` recomputes a head's logits from ``load_qk``'s form and the model's own LayerNorm, the check
that the scores describe what the model computes.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

__all__ = ["NoMLP", "attention_inputs", "build_model", "head_logits"]


class NoMLP(nn.Module):
    """A feed-forward block that adds nothing: returns zeros shaped like its input. Chapter 8."""

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(hidden_states)


def _hold_qk_bias_at_zero(attn: nn.Module, d_model: int) -> None:
    with torch.no_grad():
        attn.c_attn.bias[: 2 * d_model] = 0.0

    def hook(grad: torch.Tensor) -> torch.Tensor:
        grad = grad.clone()
        grad[: 2 * d_model] = 0.0
        return grad

    attn.c_attn.bias.register_hook(hook)


def build_model(vocab_size: int, seq_len: int, d_model: int, n_layers: int, n_heads: int, mlp: bool,
                seed: int, init_std: float = 0.02) -> Any:
    """A ``GPT2LMHeadModel`` with ``n_layers`` blocks, eager attention, no dropout, an untied unembedding, query and
    key biases held at zero, and (``mlp=False``) no feed-forward part; weights from ``torch.manual_seed(seed)``
    and GPT-2's own initialisation (N(0, ``init_std``)). Chapter 8."""
    import transformers

    if d_model % n_heads:
        raise ValueError(f"d_model ({d_model}) must be a multiple of n_heads ({n_heads}).")
    config = transformers.GPT2Config(
        vocab_size=vocab_size, n_positions=seq_len, n_embd=d_model, n_layer=n_layers, n_head=n_heads,
        n_inner=4 * d_model, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, initializer_range=init_std,
        tie_word_embeddings=False, bos_token_id=None, eos_token_id=None, pad_token_id=None)
    config._attn_implementation = "eager"
    torch.manual_seed(int(seed))
    model = transformers.GPT2LMHeadModel(config)
    for block in model.transformer.h:
        if not mlp:
            block.mlp = NoMLP()
        _hold_qk_bias_at_zero(block.attn, d_model)
    return model


def attention_inputs(model: Any, input_ids: torch.Tensor) -> list[torch.Tensor]:
    """``[layer] -> (batch, T, d_model)``: what each block's attention reads (the output of its first
    LayerNorm) on ``input_ids``. Chapter 8."""
    seen: list[torch.Tensor] = []
    hooks = [block.ln_1.register_forward_hook(lambda _m, _i, out: seen.append(out.detach()))
             for block in model.transformer.h]
    try:
        with torch.no_grad():
            model(input_ids)
    finally:
        for h in hooks:
            h.remove()
    return seen


def head_logits(model: Any, input_ids: torch.Tensor, layer: int, head: int) -> torch.Tensor:
    """(batch, T, T) pre-softmax logits of one head recomputed from the form that :func:`qkgeometry.load_qk`
    reads, ``x_iᵀ W_qk x_j / sqrt(d_h)``, with x the block's LayerNorm output; causal entries only (the rest
    −inf). Chapter 8."""
    from ..readers import load_qk

    x = attention_inputs(model, input_ids)[layer].to(torch.float64)
    with load_qk(model) as qk:
        m = torch.as_tensor(qk.layer(layer).matrix(head=head), dtype=torch.float64)
        d_h = qk.head_dim
    logits = torch.einsum("bid,de,bje->bij", x, m, x) / d_h ** 0.5
    t = logits.shape[-1]
    mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
    return logits.masked_fill(~mask, float("-inf"))
