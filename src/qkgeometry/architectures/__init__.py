"""Declarative registry of architectures: for each HF ``model_type``, where Q and K live and how they are laid out.

* :mod:`~qkgeometry.architectures.registry` — the entries (:data:`REGISTRY`, :class:`Architecture`,
  :class:`AttentionBlock`, :class:`Dims`) and their lookup;
* :mod:`~qkgeometry.architectures.layouts` — one converter per checkpoint layout (Linear pair, fused Conv1D, blocked
  or interleaved fused QKV) and llama.cpp's rotary row order;
* :mod:`~qkgeometry.architectures.norms` — folding QK-norm and input-norm gains into the factors.
"""

from __future__ import annotations

from .layouts import (
    pack_heads,
    split_block,
    split_conv1d_fused,
    split_fused_blocked,
    split_fused_interleaved,
    split_linear,
    split_query_bias,
    unpermute_gguf_rope,
)
from .norms import (
    InputNorm,
    QKNorm,
    fold_input_norm,
    fold_qk_norm,
    input_norm_names,
    norm_shift_name,
    qk_norm_gains,
)
from .registry import (
    MPNET,
    QK_NORM_NOTES,
    REGISTRY,
    Architecture,
    AttentionBlock,
    Component,
    Dims,
    Family,
    GGUFSpec,
    Layout,
    architecture_for_gguf,
    get_architecture,
    projection_names,
    register,
    standard_dims,
)

__all__ = [
    "MPNET", "QK_NORM_NOTES", "REGISTRY", "Architecture", "AttentionBlock", "Component", "Dims", "Family",
    "GGUFSpec", "InputNorm", "Layout", "QKNorm", "architecture_for_gguf", "fold_input_norm", "fold_qk_norm",
    "get_architecture", "input_norm_names", "norm_shift_name", "pack_heads", "projection_names", "qk_norm_gains",
    "register",
    "split_block", "split_conv1d_fused", "split_fused_blocked", "split_fused_interleaved", "split_linear",
    "split_query_bias", "standard_dims", "unpermute_gguf_rope",
]
