"""Checkers for the exercises of chapter 4, "A survey of real models".

Each checker compares the learner's function with the package's reference on fresh inputs, prints a one-line
verdict and returns True/False (it never raises on a wrong answer).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from ..architectures import Dims, pack_heads, split_fused_interleaved
from ..scores import symmetry_score_factored
from . import compare, report

__all__ = ["check_kv_head", "check_layer_symmetry", "check_split_neox"]

_SHAPES = [(4, 4), (8, 2), (9, 3), (32, 8), (12, 1), (6, 6)]


def _kv_reference(h: int, n_heads: int, n_kv_heads: int) -> int:
    return h // (n_heads // n_kv_heads)


def check_kv_head(fn: Callable[[int, int, int], int]) -> bool:
    """Exercise 4.1: ``fn(h, n_heads, n_kv_heads)`` returns the KV head g(h) that query head ``h`` reads under
    grouped-query attention (repeat, not tile)."""
    cases = [(h, n, k) for n, k in _SHAPES for h in range(n)]
    for h, n, k in cases:
        try:
            got = fn(h, n, k)
        except Exception as e:  # learners' code may raise anything
            return report(False, "kv_head", f"raised {type(e).__name__}: {e} for h={h}, n_heads={n}, n_kv_heads={k}")
        want = _kv_reference(h, n, k)
        if got != want:
            tiled = h % k
            hint = " (that is tiling, h % n_kv_heads: the KV heads are repeated)" if got == tiled else ""
            return report(False, "kv_head", f"h={h}, n_heads={n}, n_kv_heads={k}: got {got}, expected {want}{hint}")
    return report(True, "kv_head", f"{len(cases)} cases")


def check_split_neox(fn: Callable[[torch.Tensor, int, int], tuple[torch.Tensor, torch.Tensor]],
                     seed: int = 0) -> bool:
    """Exercise 4.2: ``fn(weight, n_heads, head_dim)`` splits a GPT-NeoX ``query_key_value.weight`` of shape
    (3·n_heads·head_dim, d) into ``(wq, wk)``, each (n_heads, d, head_dim) with ``q = wq[h].T @ x``."""
    gen = torch.Generator().manual_seed(seed)
    cases = []
    for n_heads, head_dim, d in ((2, 3, 5), (4, 8, 32), (3, 4, 12)):
        cases.append((torch.randn(3 * n_heads * head_dim, d, generator=gen, dtype=torch.float64), n_heads, head_dim))

    def reference(weight, n_heads, head_dim):
        dims = Dims(1, weight.shape[1], n_heads, n_heads, head_dim)
        return tuple(t.numpy() for t in split_fused_interleaved(weight, dims, "query_key_value.weight"))

    def candidate(weight, n_heads, head_dim):
        return tuple(np.asarray(t) for t in fn(weight.clone(), n_heads, head_dim))

    return compare(candidate, reference, cases, "split_neox")


def check_layer_symmetry(fn: Callable[[torch.Tensor, torch.Tensor, int], float], seed: int = 0) -> bool:
    """Exercise 4.3: ``fn(wq, wk_kv, group_size)`` returns the symmetry score of the layer matrix
    ``Σ_h W_Q^h (W_K^{g(h)})ᵀ`` from ``wq`` (n_heads, d, head_dim) and ``wk_kv`` (n_kv_heads, d, head_dim), without
    forming any d × d matrix per head."""
    gen = torch.Generator().manual_seed(seed)
    cases = []
    for n_heads, n_kv, d, hd in ((4, 4, 16, 4), (8, 2, 24, 3), (9, 3, 20, 4)):
        wk = torch.randn(n_kv, d, hd, generator=gen, dtype=torch.float64)
        wq = torch.randn(n_heads, d, hd, generator=gen, dtype=torch.float64) + wk.repeat_interleave(
            n_heads // n_kv, 0)  # correlated with its own KV head, so that pairing matters
        cases.append((wq, wk, n_heads // n_kv))

    def reference(wq, wk, group):
        n_kv, d, hd = wk.shape
        return float(symmetry_score_factored(pack_heads(wq.reshape(n_kv, group, d, hd).sum(1)), pack_heads(wk)))

    return compare(lambda wq, wk, g: float(fn(wq, wk, g)), reference, cases, "layer symmetry", atol=1e-9)
