"""Each head's geometry, from its weights and from the inputs it meets: the scores that chapter 7 sets against
behaviour.

**Geometry.** :func:`head_geometry` computes for every head the symmetry and directionality of ``W_qk`` (with the
rotation-null z of the symmetry, chapter 6), the positive-energy share and trace z of ``M_s``, for rotary models
the same trace at offset Δ = −1 (``M(−1) = W_Q R(−1) W_Kᵀ``), and where there is a query bias the size of the
key-only logit term ``b_qᵀ W_Kᵀ x_j``. :func:`separation` turns "labelled heads vs the rest" into an AUC with a
bootstrap interval over heads and a permutation test.


:func:`input_geometry` scores each head's form on the inputs it really meets, the symmetry ``η`` of
``X W_qk Xᵀ`` (rows of X: the layer's attention inputs, tokens), and the effective rank of its skew part.
Conventions: the book's Notation page.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import pandas as pd
import torch

from ..analyses.nulls import rotation_null_moments_factored
from ..analyses.rotary import RopeSpec, offset_factors
from ..analyses.spectrum import spectral_summary
from ..scores import directionality_score_factored, symmetry_score_factored
from .models import attention_modules, qk_projections

__all__ = [
    "head_factors",
    "head_geometry",
    "input_geometry",
    "input_isotropy",
    "input_trace_z",
    "skew_effective_rank",
]


def head_factors(model) -> Iterable[tuple[int, int, np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]]:
    """``(layer, head, W_Q, W_K, b_q, b_k)`` of every head of a BERT-, MPNet-, Llama- or Qwen2-style
    ``transformers`` model, in float64, with ``W_Q``, ``W_K`` of shape (d, d_h) (KV heads repeated, h // group).
    Chapter 7. A model without separate query and key projections (GPT-2's fused ``c_attn``) raises ``ValueError``:
    an empty frame would read as "no heads"."""
    mods = attention_modules(model)
    cfg = model.config
    n_heads = cfg.num_attention_heads
    n_kv = getattr(cfg, "num_key_value_heads", None) or n_heads
    hd = getattr(cfg, "head_dim", None) or cfg.hidden_size // n_heads
    for layer, m in enumerate(mods):
        q, k = qk_projections(m)
        qw, kw = (t.weight.detach().to(torch.float64).numpy() for t in (q, k))
        qb = None if q.bias is None else q.bias.detach().to(torch.float64).numpy()
        kb = None if k.bias is None else k.bias.detach().to(torch.float64).numpy()
        for h in range(n_heads):
            g = h // (n_heads // n_kv)
            sq, sk = slice(h * hd, (h + 1) * hd), slice(g * hd, (g + 1) * hd)
            yield (layer, h, qw[sq].T, kw[sk].T, None if qb is None else qb[sq], None if kb is None else kb[sk])


def _trace_z(a: np.ndarray, b: np.ndarray) -> float:
    m_norm = math.sqrt(float(np.trace((a.T @ a) @ (b.T @ b))))
    return math.sqrt(a.shape[0]) * float(np.sum(a * b)) / m_norm


def head_geometry(model, spec_of_layer=None) -> pd.DataFrame:
    """Geometric scores of every head of a ``transformers`` model: ``symmetry``, ``symmetry_z`` (against the
    rotation null, chapter 6), ``directionality``, ``positive_share`` and ``trace_z`` of ``M_s`` (``√d tr(M)/‖M‖``:
    large and positive when ``x_iᵀ M x_i`` is), ``trace_z_m1`` and ``trace_gain_m1`` (``trace_z`` of ``M(−1)``
    and its excess over Δ = 0; rotary models only, else NaN) and ``key_bias`` (``‖W_K b_q‖ √d / ‖M‖``: the key-only
    logit term against a typical bilinear one; NaN without a query bias). ``spec_of_layer``: layer ->
    :class:`~qkgeometry.analyses.rotary.RopeSpec` or None (default: read from the model's config). Chapter 7.
    """
    from .surgery import model_rope_spec

    if spec_of_layer is None:
        def spec_of_layer(layer, _cache={}):  # noqa: B006 - a per-call cache
            if layer not in _cache:
                _cache[layer] = model_rope_spec(model, layer)
            return _cache[layer]
    rows = []
    for layer, head, wq, wk, bq, _ in head_factors(model):
        d = wq.shape[0]
        null = rotation_null_moments_factored(wq, wk)
        s = float(symmetry_score_factored(wq, wk))
        summary = spectral_summary(wq, wk)
        spec: RopeSpec | None = spec_of_layer(layer)
        tz = float(summary.trace_z)
        if spec is not None:
            a1, b1 = offset_factors(wq, wk, spec, -1)
            tz1 = _trace_z(a1, b1)
        else:
            tz1 = float("nan")
        m_norm = math.sqrt(float(np.trace((wq.T @ wq) @ (wk.T @ wk))))
        kb = float("nan") if bq is None else float(np.linalg.norm(wk @ bq)) * math.sqrt(d) / m_norm
        rows.append({"layer": layer, "head": head, "symmetry": s,
                     "symmetry_z": (s - float(null.mean)) / math.sqrt(float(null.variance)),
                     "directionality": float(directionality_score_factored(wq, wk)),
                     "positive_share": float(summary.positive_share), "trace_z": tz, "trace_z_m1": tz1,
                     "trace_gain_m1": tz1 - tz, "key_bias": kb})
    return pd.DataFrame(rows)



def skew_effective_rank(wq: np.ndarray, wk: np.ndarray) -> float:
    """Effective rank of the skew part ``M_n = (M − Mᵀ)/2`` of ``M = W_Q W_Kᵀ``: ``exp(H(p))`` with ``p`` its
    singular values divided by their sum (Roy & Vetterli). Computed from the factors
    ``M_n = ½ [W_Q, W_K] [W_K, −W_Q]ᵀ`` (two thin QRs and a (2 d_h)² SVD). ``wq``, ``wk``: (d, d_h). Chapter 7."""
    a = np.concatenate([wq, wk], axis=1) / 2
    b = np.concatenate([wk, -wq], axis=1)
    _, ra = np.linalg.qr(a)
    _, rb = np.linalg.qr(b)
    sv = np.linalg.svd(ra @ rb.T, compute_uv=False)
    m_norm = math.sqrt(max(float(np.trace((wq.T @ wq) @ (wk.T @ wk))), 0.0))  # ‖M‖: rounding sets the floor
    sv = sv[sv > 1e-10 * m_norm]
    if sv.size == 0:
        return 0.0
    p = sv / sv.sum()
    return float(np.exp(-np.sum(p * np.log(p))))


def _attention_inputs(model, input_ids: torch.Tensor) -> list[torch.Tensor]:
    """The hidden states each attention module receives (what its Q and K projections read), in layer order."""
    mods = attention_modules(model)
    seen: dict[int, torch.Tensor] = {}

    def hook(i):
        def grab(_m, args, kwargs):
            x = kwargs.get("hidden_states", args[0] if args else None)
            seen[i] = x.detach().to(torch.float64)
        return grab

    hooks = [m.register_forward_pre_hook(hook(i), with_kwargs=True) for i, m in enumerate(mods)]
    try:
        with torch.no_grad():
            kwargs = {"use_cache": False} if "CausalLM" in type(model).__name__ else {}
            model(input_ids, **kwargs)
    finally:
        for h in hooks:
            h.remove()
    return [seen[i] for i in range(len(mods))]


def _centred(x: np.ndarray) -> np.ndarray:
    """``x`` (..., d) as rows of features, less their mean: what the softmax can tell apart."""
    flat = np.asarray(x, dtype=np.float64).reshape(-1, np.shape(x)[-1])
    if flat.shape[0] == 0 or flat.shape[1] == 0:
        raise ValueError(f"x: needs at least one input of at least one feature; got shape {np.shape(x)}.")
    return flat - flat.mean(axis=0)


def input_isotropy(x: np.ndarray) -> float:
    """How isotropic inputs are: the participation ratio of their covariance ``C = E (x − μ)(x − μ)ᵀ`` over its
    largest value, ``(tr C)² / (d · tr C²)``: 1 when ``C ∝ I``, ``1/d`` when every input lies on one line through
    their mean. ``x``: (..., d), the last axis the features. Centred, because a mean ``μ`` shared by every token adds
    ``μᵀMμ`` to every logit of a query alike, which the softmax cancels (:func:`input_trace_z`). Chapter 7.

    >>> round(input_isotropy(np.eye(4)), 3), round(input_isotropy(np.arange(20.0).reshape(5, 4)), 3)  # a simplex; a line
    (0.75, 0.25)
    """
    xc = _centred(x)
    sigma = xc.T @ xc / xc.shape[0]
    tr, tr2 = float(np.trace(sigma)), float(np.sum(sigma * sigma))
    return tr * tr / (xc.shape[1] * tr2) if tr2 > 0 else float("nan")


def input_trace_z(x: np.ndarray, wq: np.ndarray, wk: np.ndarray) -> float:
    """The trace z of ``M = W_Q W_Kᵀ`` on the inputs a head meets: ``√d · tr(MC) / (‖M‖ · tr C / d)``, ``C`` the
    inputs' covariance. A token's expected advantage on itself over another token of the same inputs is
    ``E xᵢᵀM xᵢ − E xᵢᵀM xⱼ = tr(MC)``: the mean ``μ`` enters every logit of a query as the same ``μᵀMμ`` and cancels
    in the softmax, so it is left out. Scaled so that it equals the weight-level trace z when ``C ∝ I``; NaN when
    ``M`` or the inputs' spread is 0. ``x``: (..., d); ``wq``, ``wk``: (d, d_h). Chapter 7."""
    xc = _centred(x)
    d = xc.shape[1]
    self_logit = float(np.mean(np.sum((xc @ wq) * (xc @ wk), axis=-1)))  # tr(MC)
    spread = float(np.mean(np.sum(xc * xc, axis=-1)))  # tr C
    m_norm = math.sqrt(max(float(np.trace((wq.T @ wq) @ (wk.T @ wk))), 0.0))
    return math.sqrt(d) * self_logit / (m_norm * spread / d) if m_norm > 0 and spread > 0 else float("nan")


def input_geometry(model, input_ids: torch.Tensor, skip: int = 4) -> pd.DataFrame:
    """Per head, the form on the inputs it meets and the shape of its skew part. ``input_symmetry``:
    ``η = Σ_s (‖S_s‖² − ‖S_n‖²) / Σ_s ‖S‖²`` for ``S = X W_qk Xᵀ`` (T × T; X the layer's attention inputs of one
    sequence, rows = tokens; offset 0, no rotary, no bias), summed over the sequences of ``input_ids``
    (sequences, T); ``skew_effective_rank`` (:func:`skew_effective_rank`) and ``skew_rank_share`` (that over the
    largest possible rank, ``min(d, 2 d_h)``).

    The weight-level trace z (:func:`head_geometry`) predicts a token's logit on itself only for isotropic inputs.
    Two columns test that assumption on the tokens from position ``skip`` on (the rows the behaviour scores read):
    ``input_isotropy`` (:func:`input_isotropy` of the layer's inputs) and ``input_trace_z`` (:func:`input_trace_z`),
    the trace z with the inputs' own covariance C, ``√d · tr(MC) / (‖M‖ · tr C / d)``: a token's expected advantage
    on itself over another token (the mean input cancels in the softmax), on the scale
    that makes it equal ``trace_z`` when ``C ∝ I``. One row per (layer, head). Chapter 7."""
    inputs = _attention_inputs(model, input_ids)
    if isinstance(skip, bool) or not isinstance(skip, int) or not 0 <= skip < input_ids.shape[-1]:
        raise ValueError(f"skip: the leading positions to leave out of the trace, a whole number from 0 to "
                         f"{input_ids.shape[-1] - 1} (the sequences' length minus one); got {skip!r}.")
    rows = []
    isotropy: dict[int, float] = {}
    for layer, head, wq, wk, _, _ in head_factors(model):
        x = inputs[layer].numpy()
        q, k = x @ wq, x @ wk  # (sequences, T, d_h)
        sm = q @ np.swapaxes(k, 1, 2)  # (sequences, T, T)
        total = float(np.sum(sm * sm))
        cross = float(np.sum(sm * np.swapaxes(sm, 1, 2)))
        er = skew_effective_rank(wq, wk)
        d = wq.shape[0]
        seen = x[:, skip:]
        if layer not in isotropy:
            isotropy[layer] = input_isotropy(seen)
        rows.append({"layer": layer, "head": head, "input_symmetry": cross / total if total > 0 else float("nan"),
                     "skew_effective_rank": er,
                     "skew_rank_share": er / min(d, 2 * wq.shape[1]),
                     "input_isotropy": isotropy[layer],
                     "input_trace_z": input_trace_z(seen, wq, wk)})
    return pd.DataFrame(rows)


