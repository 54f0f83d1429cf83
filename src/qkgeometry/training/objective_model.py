"""The small Transformer of chapter 3's objective comparison: :class:`ObjectiveTransformer`. Chapter 3.

Several pre-LayerNorm blocks of multi-head attention and an MLP, the attention written out (not fused) so that its
inputs and probabilities can be captured for :func:`qkgeometry.training.objective_gradients.attention_gradients`.
The query–key weights are stored per head as ``(n_heads, d, d_h)`` in the book's convention (q = W_Qᵀ x, see the
Notation page), so :meth:`ObjectiveTransformer.w_qk` is exactly ``W_Q^h W_K^hᵀ``.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ..analyses.gradients import bidirectional_mask, causal_mask
from .config import ObjectiveConfig
from .data import SPECIAL_TOKENS

__all__ = ["ObjectiveTransformer"]

Tensor = torch.Tensor


class _Block(nn.Module):
    """Pre-LayerNorm block: x + Attn(LN(x)), then x + MLP(LN(x)). Attention written out (not fused) so that its
    inputs and probabilities can be captured."""

    def __init__(self, cfg: ObjectiveConfig):
        super().__init__()
        d, h, dh, std = cfg.d_model, cfg.n_heads, cfg.head_dim, cfg.init_std
        self.head_dim = dh
        self.ln_attn = nn.LayerNorm(d)
        self.wq, self.wk, self.wv = (nn.Parameter(torch.randn(h, d, dh) * std) for _ in range(3))
        self.wo = nn.Parameter(torch.randn(h, dh, d) * std)
        self.mlp = None
        if cfg.d_mlp:
            self.ln_mlp = nn.LayerNorm(d)
            self.mlp = nn.Sequential(nn.Linear(d, cfg.d_mlp), nn.GELU(), nn.Linear(cfg.d_mlp, d))
            for lin in (self.mlp[0], self.mlp[2]):
                nn.init.normal_(lin.weight, std=std)
                nn.init.zeros_(lin.bias)

    def forward(self, x: Tensor, mask: Tensor, capture: list | None) -> Tensor:
        a = self.ln_attn(x)  # (B, T, d): what W_qk of this layer sees
        q = torch.einsum("btd,hdk->bhtk", a, self.wq)
        k = torch.einsum("btd,hdk->bhtk", a, self.wk)
        v = torch.einsum("btd,hdk->bhtk", a, self.wv)
        logits = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)
        probs = logits.masked_fill(~mask, float("-inf")).softmax(dim=-1)  # (B, H, T, T)
        if capture is not None:
            probs.retain_grad()
            capture.append((a, probs))
        x = x + torch.einsum("bhtk,hkd->btd", probs @ v, self.wo)
        if self.mlp is not None:
            x = x + self.mlp(self.ln_mlp(x))
        return x


class ObjectiveTransformer(nn.Module):
    """Token + learned position embeddings, ``n_layers`` pre-LN blocks, a final LayerNorm, a read-out tied to the
    token embeddings (for the causal and masked LM) and a one-logit head (for replaced-token detection).

    The same module runs causal or bidirectional attention, chosen per call. Chapter 3, "A fair test".
    """

    def __init__(self, vocab_size: int, cfg: ObjectiveConfig):
        super().__init__()
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size <= len(SPECIAL_TOKENS):
            raise ValueError(f"`vocab_size` must be an int > {len(SPECIAL_TOKENS)} (the special tokens come first); "
                             f"got {vocab_size!r}.")
        self.cfg = cfg
        self.vocab_size = vocab_size
        std = cfg.init_std
        self.tok = nn.Parameter(torch.randn(vocab_size, cfg.d_model) * std)
        self.pos = nn.Parameter(torch.randn(cfg.seq_len, cfg.d_model) * std)
        self.blocks = nn.ModuleList(_Block(cfg) for _ in range(cfg.n_layers))
        self.ln_final = nn.LayerNorm(cfg.d_model)
        self.rtd_head = nn.Linear(cfg.d_model, 1)
        nn.init.normal_(self.rtd_head.weight, std=std)
        nn.init.zeros_(self.rtd_head.bias)

    def w_qk(self) -> Tensor:
        """Per-head bilinear forms ``W_Q^h W_K^hᵀ``: float64 (n_layers, n_heads, d, d), detached."""
        with torch.no_grad():
            wq = torch.stack([b.wq for b in self.blocks]).double()
            wk = torch.stack([b.wk for b in self.blocks]).double()
            return wq @ wk.transpose(-1, -2)

    def hidden(self, ids: Tensor, causal: bool, capture: list | None = None) -> Tensor:
        """ids (B, T) -> final hidden states (B, T, d). ``capture``: a list that receives, per layer, the pair
        ``(X, P)``: attention input (B, T, d) and probabilities (B, H, T, T), the latter with ``retain_grad``."""
        t = ids.shape[1]
        if t > self.cfg.seq_len:
            raise ValueError(f"`ids` has {t} positions but the model has {self.cfg.seq_len} position embeddings.")
        mask = causal_mask(t, device=ids.device) if causal else bidirectional_mask(t, device=ids.device)
        x = self.tok[ids] + self.pos[:t]
        for block in self.blocks:
            x = block(x, mask, capture)
        return self.ln_final(x)

    def lm_logits(self, h: Tensor) -> Tensor:
        """(…, d) -> (…, vocab) through the tied token embeddings."""
        return h @ self.tok.T
