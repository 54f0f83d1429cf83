"""Layout converters: one checkpoint tensor layout (a Linear pair, GPT-2's fused Conv1D, blocked or per-head
interleaved fused QKV, llama.cpp's rotary row order) -> per-head factors.

Every converter returns ``(wq, wk)`` with ``wq`` of shape (n_heads, d_model, head_dim) and ``wk`` of shape
(n_kv_heads, d_model, head_dim), i.e. KV heads *not* yet expanded (conventions: the book's Notation page).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._arrays import numel
from .norms import norm_shift_name
from .registry import AttentionBlock, Dims


def _heads_from_linear(weight: Any, n_heads: int, head_dim: int, d_model: int, name: str) -> Any:
    """``nn.Linear.weight`` (n_heads·head_dim, d_model) -> (n_heads, d_model, head_dim)."""
    expected = (n_heads * head_dim, d_model)
    if tuple(weight.shape) != expected:
        raise ValueError(
            f"tensor {name!r} has shape {tuple(weight.shape)}, expected {expected} (n_heads·head_dim, d_model) "
            "from the config; the checkpoint and its config.json disagree."
        )
    return weight.reshape(n_heads, head_dim, d_model).swapaxes(1, 2)


def pack_heads(w: Any) -> Any:
    """Stack per-head factors side by side: (n_heads, d_model, head_dim) -> (d_model, n_heads·head_dim).

    The result is ``[W^0 | W^1 | ...]``, so ``pack_heads(wq) @ pack_heads(wk).T = Σ_h W_Q^h W_K^hᵀ``: the layer
    matrix as one pair of factors (the factored scores take it as is). Works on torch tensors and NumPy arrays.
    Conventions: the book's Notation page; chapter 4 ("Grouped-query attention") uses it.

    >>> import numpy as np
    >>> w = np.arange(12.).reshape(2, 3, 2)  # 2 heads, d_model 3, head_dim 2
    >>> pack_heads(w)
    array([[ 0.,  1.,  6.,  7.],
           [ 2.,  3.,  8.,  9.],
           [ 4.,  5., 10., 11.]])
    >>> bool(np.allclose(pack_heads(w) @ pack_heads(w).T, sum(h @ h.T for h in w)))
    True
    """
    if w.ndim != 3:
        raise ValueError(f"`w` must have shape (n_heads, d_model, head_dim); got {tuple(w.shape)}.")
    n, d, hd = w.shape
    return w.swapaxes(0, 1).reshape(d, n * hd)


def split_linear(q: Any, k: Any, dims: Dims, names: tuple[str, str]):
    """Separate ``q_proj``/``k_proj`` (or ``query``/``key``) Linear weights."""
    return (_heads_from_linear(q, dims.n_heads, dims.head_dim, dims.d_model, names[0]),
            _heads_from_linear(k, dims.n_kv_heads, dims.head_dim, dims.d_model, names[1]))


def split_conv1d_fused(qkv: Any, dims: Dims, name: str):
    """GPT-2 ``Conv1D`` c_attn weight, shape (d_model, 3·d_model) = [W_Q | W_K | W_V], blocked.

    ``Conv1D`` computes ``x @ W + b``, so ``W[:, :n_heads·head_dim]`` is W_Q itself with heads contiguous.
    """
    width = dims.n_heads * dims.head_dim
    if qkv.shape[0] != dims.d_model or qkv.shape[1] < 2 * width:
        raise ValueError(f"tensor {name!r} has shape {tuple(qkv.shape)}, expected ({dims.d_model}, 3·{width}).")
    wq = qkv[:, :width].reshape(dims.d_model, dims.n_heads, dims.head_dim).swapaxes(0, 1)
    wk = qkv[:, width:2 * width].reshape(dims.d_model, dims.n_heads, dims.head_dim).swapaxes(0, 1)
    return wq, wk


def split_fused_blocked(qkv: Any, dims: Dims, name: str):
    """Fused Linear weight ``[W_Qᵀ; W_Kᵀ; W_Vᵀ]`` stacked along the output axis (ModernBERT Wqkv, Phi-3 qkv_proj)."""
    nq, nk = dims.n_heads * dims.head_dim, dims.n_kv_heads * dims.head_dim
    if len(qkv.shape) != 2 or tuple(qkv.shape) != (nq + 2 * nk, dims.d_model):
        # any other row count leaves it unknown which rows are Q and which are K
        raise ValueError(f"tensor {name!r} has shape {tuple(qkv.shape)}, expected ({nq + 2 * nk}, {dims.d_model}) "
                         f"([Q; K; V] for {dims.n_heads} query and {dims.n_kv_heads} key/value heads of "
                         f"{dims.head_dim}); the checkpoint and its config disagree, or the file is corrupt.")
    return (_heads_from_linear(qkv[:nq], dims.n_heads, dims.head_dim, dims.d_model, name),
            _heads_from_linear(qkv[nq:nq + nk], dims.n_kv_heads, dims.head_dim, dims.d_model, name))


def split_fused_interleaved(qkv: Any, dims: Dims, name: str):
    """Fused Linear weight interleaved per head, output axis laid out as (n_heads, 3, head_dim) (NeoX, BLOOM)."""
    h, hd, d = dims.n_heads, dims.head_dim, dims.d_model
    if tuple(qkv.shape) != (3 * h * hd, d):
        raise ValueError(f"tensor {name!r} has shape {tuple(qkv.shape)}, expected ({3 * h * hd}, {d}).")
    per_head = qkv.reshape(h, 3, hd, d)
    return per_head[:, 0].swapaxes(1, 2), per_head[:, 1].swapaxes(1, 2)


def split_block(block: AttentionBlock, dims: Dims, get: Callable[[str], Any], i: int):
    """Read and split the Q/K weights of layer ``i`` of ``block`` through the tensor getter ``get(name)``."""
    q_name = block.q.format(i=i)
    if block.layout == "linear":
        k_name = block.k.format(i=i)
        return split_linear(get(q_name), get(k_name), dims, (q_name, k_name))
    fused = get(q_name)
    if block.layout == "conv1d_fused":
        return split_conv1d_fused(fused, dims, q_name)
    if block.layout == "fused_blocked":
        return split_fused_blocked(fused, dims, q_name)
    if block.layout == "fused_interleaved":
        return split_fused_interleaved(fused, dims, q_name)
    raise ValueError(f"unknown layout {block.layout!r} in the registry entry for {q_name!r}")


def split_query_bias(block: AttentionBlock, dims: Dims, get: Callable[[str], Any],
                     has: Callable[[str], bool], i: int) -> Any | None:
    """The query bias ``b_q`` of layer ``i`` as (n_heads, head_dim), or None when the checkpoint has none.

    Read next to the query weight (``….weight`` -> ``….bias``) in the block's layout: a Linear's own bias, the
    first n_heads·head_dim entries of a blocked fused bias ([b_Q; b_K; b_V]), or slot 0 of an interleaved one
    (viewed as (n_heads, 3, head_dim)).
    """
    name = norm_shift_name(block.q.format(i=i))
    if name is None or not has(name):
        return None
    b = get(name).reshape(-1)
    nq = dims.n_heads * dims.head_dim
    if block.layout == "fused_interleaved":
        if numel(b) != 3 * nq:
            raise ValueError(f"tensor {name!r} has {numel(b)} entries, expected {3 * nq} (n_heads·3·head_dim).")
        return b.reshape(dims.n_heads, 3, dims.head_dim)[:, 0]
    if numel(b) < nq or (block.layout == "linear" and numel(b) != nq):
        raise ValueError(f"tensor {name!r} has {numel(b)} entries, expected {nq} (n_heads·head_dim) for the query "
                         "bias; the checkpoint and its config disagree.")
    return b[:nq].reshape(dims.n_heads, dims.head_dim)


def unpermute_gguf_rope(weight: Any, n_heads: int) -> Any:
    """Undo llama.cpp's per-head row permutation (HF rotate-half -> interleaved pairs) of a Q or K weight.

    llama.cpp's converter maps HF rows ``(head, half, j)`` to ``(head, j, half)``; this maps them back.
    """
    rows, cols = weight.shape
    head_dim = rows // n_heads
    return weight.reshape(n_heads, head_dim // 2, 2, cols).swapaxes(1, 2).reshape(rows, cols)


# ---------------------------------------------------------------------------------------------- registry
