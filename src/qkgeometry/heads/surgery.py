"""Cut one attention head down to the symmetric or the skew part of its bilinear form, exactly, inside a real
``transformers`` model. Book chapter 7, "Heads cut down to one part".

One head's logit between query token i and key token j is ``x_iᵀ M x_j · scale`` with ``M = W_Q W_Kᵀ`` (plus
bias terms). Doubling the head,

    Q' = [W_Q, W_K] / √2,      K' = [W_K, ±W_Q] / √2      (d × 2 d_h),

gives ``Q' K'ᵀ = (W_Q W_Kᵀ ± W_K W_Qᵀ) / 2``: ``M_s`` with the plus sign, ``M_n`` with the minus sign, with the head's
own scale ``1/√d_h`` kept. A part carries only ``(1 ± s)/2`` of the form's energy (``‖M_s‖² = (1 + s)/2 ‖M‖²`` with
``s`` the symmetry score), so a plain part edit also cools the head. The *norm-matched* edits
(``"symmetric_matched"``, ``"skew_matched"``) multiply the kept part by ``√(2/(1 ± s))`` so that its Frobenius
norm is the head's own ``‖M‖``: for isotropic inputs the logits then keep the head's scale, and what changes is
only which part the head has (:func:`part_scale`). Under rotary embeddings both halves of the doubled head rotate with the head's own
``R``, so the offset form becomes ``½(M(Δ) ± M(−Δ)ᵀ)``: the part that is symmetric (or skew) under swapping both
the tokens and their positions (:func:`part_form`). Query and key biases add terms that are linear in x; they are
left as they were.

Inside a model this is done without building the doubled weights: with ``q̃_i``, ``k̃_j`` the head's rotated but
unbiased query and key, the two halves contribute ``(q̃_i·k̃_j ± k̃_i·q̃_j)/2``, so the new logits are the model's own
logits plus ``(k̃_i·q̃_j − q̃_i·k̃_j)/2`` (symmetric) or minus ``(q̃_i·k̃_j + k̃_i·q̃_j)/2`` (skew), times the scale.
:func:`edited_heads` installs that as an attention function for the chosen heads of a BERT, Llama or Qwen2-style
model (any model whose attention modules call ``ALL_ATTENTION_FUNCTIONS``), and can also mean-ablate a head and
record its attention pattern. Conventions: the book's Notation page.
"""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch

from .._validation import ArrayLike, to_float64
from ..analyses.rotary import RopeSpec, offset_form, rotation_matrix
from .models import attention_modules, qk_projections

__all__ = [
    "PARTS",
    "PART_EDITS",
    "EditState",
    "doubled_factors",
    "doubled_rotation",
    "edited_heads",
    "model_rope_spec",
    "part_form",
    "part_scale",
]

Part = Literal["full", "symmetric", "skew", "symmetric_matched", "skew_matched", "mean"]
#: What a head can keep: everything, its symmetric or skew part (plain, or rescaled to the head's own Frobenius
#: norm: ``*_matched``), or nothing but its mean output.
PARTS: tuple[str, ...] = ("full", "symmetric", "skew", "symmetric_matched", "skew_matched", "mean")
#: The edits that keep one part of the form.
PART_EDITS: tuple[str, ...] = ("symmetric", "skew", "symmetric_matched", "skew_matched")
_NAME = "qkgeometry_edit"


def doubled_factors(wq: ArrayLike, wk: ArrayLike, part: str) -> tuple[np.ndarray, np.ndarray]:
    """``(Q', K')`` of the doubled head, each (d, 2 d_h): ``Q' K'ᵀ = M_s`` (``part="symmetric"``) or ``M_n``
    (``"skew"``) for ``M = W_Q W_Kᵀ``, times :func:`part_scale` (on ``Q'``) for the norm-matched parts. ``wq``,
    ``wk``: one head's (d, d_h) factors. Chapter 7."""
    q, k = to_float64(wq, "wq"), to_float64(wk, "wk")
    if q.ndim != 2 or q.shape != k.shape:
        raise ValueError(f"`wq` and `wk` must be one head's (d, d_h) factors of the same shape; got {q.shape} and "
                         f"{k.shape}.")
    sign = _sign(part)
    scale = part_scale(q, k, part)
    return (scale * np.concatenate([q, k], axis=1) / math.sqrt(2),
            np.concatenate([k, sign * q], axis=1) / math.sqrt(2))


def _sign(part: str) -> float:
    if part not in PART_EDITS:
        raise ValueError(f"`part` must be one of {', '.join(PART_EDITS)}; got {part!r}.")
    return 1.0 if part.startswith("symmetric") else -1.0


def part_scale(wq: ArrayLike, wk: ArrayLike, part: str) -> float:
    """The factor an edit puts on the kept part: 1 for ``"symmetric"`` / ``"skew"``, and ``‖M‖ / ‖M_s‖ =
    √(2/(1 + s))`` or ``‖M‖ / ‖M_n‖ = √(2/(1 − s))`` for the norm-matched ``"symmetric_matched"`` /
    ``"skew_matched"``, with ``s`` the symmetry score of ``M = W_Q W_Kᵀ`` at offset 0 (under rotary the form at
    other offsets has the same norm ``‖M(Δ)‖ = ‖M‖``; the factor is the offset-0 one). ``wq``, ``wk``: one head's
    (d, d_h) factors. Chapter 7."""
    sign = _sign(part)
    if not part.endswith("_matched"):
        return 1.0
    q, k = to_float64(wq, "wq"), to_float64(wk, "wk")
    total = float(np.trace((q.T @ q) @ (k.T @ k)))  # ‖M‖²
    cross = float(np.trace((k.T @ q) @ (k.T @ q)))  # tr(M M)
    kept = (total + sign * cross) / 2  # ‖M_s‖² or ‖M_n‖²
    if kept <= 1e-300 * max(total, 1e-300):
        raise ValueError(f"`part` {part!r}: the head has no {part.split('_')[0]} part to rescale (its norm is 0).")
    return math.sqrt(total / kept)


def part_form(wq: ArrayLike, wk: ArrayLike, part: str, spec: RopeSpec | None = None, delta: float = 0) -> np.ndarray:
    """The dense form the doubled head computes at offset ``Δ = j − i``: ``½(M(Δ) ± M(−Δ)ᵀ)`` with
    ``M(Δ) = W_Q R(Δ) W_Kᵀ`` (``spec=None``: no rotary, ``M_s`` or ``M_n``), times :func:`part_scale` for the
    norm-matched parts. Chapter 7."""
    sign = _sign(part)
    scale = part_scale(wq, wk, part)
    q, k = to_float64(wq, "wq"), to_float64(wk, "wk")
    if spec is None:
        m = q @ k.T
        return scale * (m + sign * m.T) / 2
    return scale * (offset_form(q, k, spec, delta) + sign * offset_form(q, k, spec, -delta).T) / 2


def doubled_rotation(spec: RopeSpec, delta: float) -> np.ndarray:
    """``diag(R(Δ), R(Δ))``: both halves of a doubled head rotate with the head's own rotation. Chapter 7."""
    r = rotation_matrix(spec, delta)
    z = np.zeros_like(r)
    return np.block([[r, z], [z, r]])


# ------------------------------------------------------------------------------------------------ inside a model
@dataclass
class EditState:
    """What :func:`edited_heads` does to one attention module, and what it records there.

    ``edits``: head -> part; ``record``: heads whose attention pattern (batch, query, key) is kept in
    ``patterns`` after each forward pass (float64 numpy arrays). ``means``: head -> a fixed (d_h,) output used by
    ``"mean"`` (default: the head's mean output over the batch's tokens). ``scales``: head -> the factor on its kept
    part (:func:`part_scale`; 1 for the plain edits).
    """

    layer: int
    edits: dict[int, str] = field(default_factory=dict)
    record: tuple[int, ...] = ()
    record_logits: bool = False
    means: dict[int, torch.Tensor] = field(default_factory=dict)
    record_means: bool = False
    scales: dict[int, float] = field(default_factory=dict)
    output_means: dict[int, torch.Tensor] = field(default_factory=dict)
    patterns: dict[int, np.ndarray] = field(default_factory=dict)
    logits: dict[int, np.ndarray] = field(default_factory=dict)
    hidden: torch.Tensor | None = None
    position_embeddings: Any = None


def _head_dim(module, query: torch.Tensor) -> int:
    return int(query.shape[-1])


def _unbiased(module, state: EditState, head: int, kv_head: int, head_dim: int):
    """The head's query and key without biases, rotated as the model rotates them: (batch, 1, T, d_h) each."""
    x = state.hidden
    wq, wk = qk_projections(module)
    q = torch.nn.functional.linear(x, wq.weight[head * head_dim:(head + 1) * head_dim]).unsqueeze(1)
    k = torch.nn.functional.linear(x, wk.weight[kv_head * head_dim:(kv_head + 1) * head_dim]).unsqueeze(1)
    if state.position_embeddings is not None:
        rotate = getattr(sys.modules[type(module).__module__], "apply_rotary_pos_emb", None)
        if rotate is None:
            raise ValueError(f"{type(module).__name__}: the model passes rotary embeddings but its module has no "
                             f"apply_rotary_pos_emb; head edits do not support this architecture.")
        cos, sin = state.position_embeddings
        q, k = rotate(q, k, cos, sin)
    return q, k


def _attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """Eager attention with the edits of ``module._qkgeometry_edit`` applied (an ``ALL_ATTENTION_FUNCTIONS``
    entry). Unedited modules compute exactly what the model's eager attention computes."""
    state: EditState | None = getattr(module, "_qkgeometry_edit", None)
    if scaling is None:
        scaling = query.size(-1) ** -0.5
    n_heads, n_kv = query.shape[1], key.shape[1]
    group = n_heads // n_kv
    if group > 1:  # grouped-query attention: KV heads repeated along the head axis (h // group)
        key = key.repeat_interleave(group, dim=1)
        value = value.repeat_interleave(group, dim=1)
    logits = torch.matmul(query, key.transpose(2, 3)) * scaling
    if state is not None:
        edited = [h for h, p in state.edits.items() if p in PART_EDITS]
        if edited and key.shape[2] != query.shape[2]:
            raise ValueError("head edits need a full forward pass without a cache (use_cache=False): the query and "
                             "key lengths differ.")
        for h in edited:
            q, k = _unbiased(module, state, h, h // group, _head_dim(module, query))
            direct = torch.matmul(q, k.transpose(2, 3))[:, 0]  # q̃_i · k̃_j
            mirror = torch.matmul(k, q.transpose(2, 3))[:, 0]  # k̃_i · q̃_j
            sign = _sign(state.edits[h])
            kept = state.scales.get(h, 1.0) * (direct + sign * mirror) / 2  # q̃ᵀ(part)k̃ in the doubled head
            change = kept - direct
            logits = logits.clone() if not logits.requires_grad else logits
            logits[:, h] = logits[:, h] + change * scaling
    if attention_mask is not None:
        mask = attention_mask[:, :, :, : key.shape[-2]]
        logits = logits.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else logits + mask
    if state is not None and state.record_logits:
        for h in state.record:
            state.logits[h] = logits[:, h].detach().to(torch.float64).cpu().numpy()
    # half precision: softmax in float32 as the models' eager code does; float32 and float64 stay as they are
    soft = torch.float32 if query.dtype in (torch.float16, torch.bfloat16) else query.dtype
    weights = torch.nn.functional.softmax(logits, dim=-1, dtype=soft).to(query.dtype)
    weights = torch.nn.functional.dropout(weights, p=dropout, training=module.training)
    out = torch.matmul(weights, value)  # (batch, heads, T, d_h)
    if state is not None:
        for h in state.record:
            state.patterns[h] = weights[:, h].detach().to(torch.float64).cpu().numpy()
        if state.record_means:
            state.output_means = {h: out[:, h].detach().mean(dim=(0, 1)) for h in range(n_heads)}
        for h, p in state.edits.items():
            if p == "mean":
                mean = state.means.get(h)
                if mean is None:
                    mean = out[:, h].mean(dim=(0, 1))
                out = out.clone()
                out[:, h] = mean.to(out.dtype)
    return out.transpose(1, 2).contiguous(), weights


def _register() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, eager_mask

    AttentionInterface.register(_NAME, _attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(_NAME, eager_mask)  # the masks eager attention gets


def _pre_hook(module, args, kwargs):
    state: EditState = module._qkgeometry_edit
    state.hidden = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
    state.position_embeddings = kwargs.get("position_embeddings")
    if state.position_embeddings is None and len(args) > 1 and isinstance(args[1], tuple):
        state.position_embeddings = args[1]


def _configs(model) -> list:
    seen, out = set(), []
    for m in model.modules():
        cfg = getattr(m, "config", None)
        if cfg is not None and id(cfg) not in seen:
            seen.add(id(cfg))
            out.append(cfg)
    return out


@contextlib.contextmanager
def edited_heads(model: torch.nn.Module, edits: Mapping[tuple[int, int], str] | None = None,
                 record: Mapping[int, tuple[int, ...]] | None = None, record_logits: bool = False,
                 means: Mapping[tuple[int, int], torch.Tensor] | None = None,
                 record_means: bool = False) -> Iterator[list[EditState]]:
    """Run ``model`` with some heads cut down to one part, and record attention patterns. Chapter 7.

    ``edits``: ``{(layer, head): part}`` with part in :data:`PARTS` (``"full"`` changes nothing, ``"symmetric"`` /
    ``"skew"`` keep ``½(M(Δ) ± M(−Δ)ᵀ)`` of the bilinear form with the bias terms unchanged, ``"symmetric_matched"`` /
    ``"skew_matched"`` the same part times :func:`part_scale` (its Frobenius norm made the head's own), ``"mean"`` replaces
    the head's output by ``means[(layer, head)]`` or by its mean over the batch's tokens). ``record``:
    ``{layer: heads}`` whose patterns (and, with ``record_logits``, pre-softmax logits including the mask) are
    kept; ``record_means`` keeps every head's mean output over the batch's tokens (``output_means``, the values to
    pass as ``means`` later). Yields one :class:`EditState` per attention layer. Run forward passes with ``use_cache=False``.
    """
    edits, record, means = dict(edits or {}), dict(record or {}), dict(means or {})
    modules = attention_modules(model)
    n_heads = int(model.config.num_attention_heads)
    for (layer, head), part in edits.items():
        _check_head("edits", layer, head, len(modules), n_heads)
        if part not in PARTS:
            raise ValueError(f"edits: part for head ({layer}, {head}) must be one of {', '.join(PARTS)}; got "
                             f"{part!r}.")
    for layer, heads in record.items():
        for head in heads:
            _check_head("record", layer, head, len(modules), n_heads)
    for layer, head in means:
        _check_head("means", layer, head, len(modules), n_heads)
    _register()
    configs = _configs(model)
    saved = [cfg._attn_implementation for cfg in configs]
    states, hooks = [], []
    try:
        for cfg in configs:
            cfg._attn_implementation = _NAME
        for i, m in enumerate(modules):
            state = EditState(i, {h: p for (layer, h), p in edits.items() if layer == i and p != "full"},
                              tuple(record.get(i, ())), record_logits,
                              {h: v for (layer, h), v in means.items() if layer == i}, record_means)
            for h, part in state.edits.items():
                if part.endswith("_matched"):
                    state.scales[h] = _module_part_scale(model, m, h, part)
            m._qkgeometry_edit = state
            hooks.append(m.register_forward_pre_hook(_pre_hook, with_kwargs=True))
            states.append(state)
        yield states
    finally:
        for hk in hooks:
            hk.remove()
        for m in modules:
            if hasattr(m, "_qkgeometry_edit"):
                del m._qkgeometry_edit
        for cfg, impl in zip(configs, saved, strict=True):
            cfg._attn_implementation = impl


def _check_head(what: str, layer: object, head: object, n_layers: int, n_heads: int) -> None:
    """Refuse a (layer, head) of ``what`` that is not a whole number in range (a bool, -1 or 99 would edit nothing,
    the wrong head, or fail in the middle of a forward pass)."""
    for name, value, n in (("layer", layer, n_layers), ("head", head, n_heads)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ValueError(f"{what}: {name} must be a whole number; got {value!r} ({type(value).__name__}) in "
                             f"({layer!r}, {head!r}).")
        if not 0 <= value < n:
            raise ValueError(f"{what}: {name} {value} is out of range in ({layer}, {head}); the model has {n} "
                             f"attention {name}s ({name}s 0 to {n - 1}).")


def _module_part_scale(model, module, head: int, part: str) -> float:
    """:func:`part_scale` of head ``head`` of one attention module, from its projection weights."""
    cfg = model.config
    n_heads = cfg.num_attention_heads
    n_kv = getattr(cfg, "num_key_value_heads", None) or n_heads
    hd = getattr(cfg, "head_dim", None) or cfg.hidden_size // n_heads
    g = head // (n_heads // n_kv)
    wq, wk = qk_projections(module)
    q = wq.weight[head * hd:(head + 1) * hd].detach().to(torch.float64).numpy().T
    k = wk.weight[g * hd:(g + 1) * hd].detach().to(torch.float64).numpy().T
    return part_scale(q, k, part)


def model_rope_spec(model: torch.nn.Module, layer: int = 0) -> RopeSpec | None:
    """The rotary settings of layer ``layer`` of a ``transformers`` model (:func:`qkgeometry.analyses.rotary.rope_spec` on its
    config), or None for a model without rotary embeddings (BERT, MPNet). Chapter 7."""
    import types

    from ..analyses.rotary import rope_spec

    cfg = model.config
    if not hasattr(cfg, "rope_parameters") and not hasattr(cfg, "rope_theta"):
        return None
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    return rope_spec(types.SimpleNamespace(head_dim=int(head_dim), source="", name=type(model).__name__), layer,
                     config=cfg.to_dict())
