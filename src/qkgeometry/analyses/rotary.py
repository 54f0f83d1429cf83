"""The offset-resolved bilinear form of rotary models, ``M(Δ) = W_Q R(Δ) W_Kᵀ``. Book chapter 6, "The rotary form".

With rotary position embeddings (RoPE) a query at position i is rotated by ``R(i)`` and a key at position j by
``R(j)``, so the pre-softmax logit of one head is

    x_iᵀ W_Q R(i)ᵀ R(j) W_Kᵀ x_j · scale = x_iᵀ M(j − i) x_j · scale,     M(Δ) = W_Q R(Δ) W_Kᵀ,

with ``Δ = j − i`` (key position minus query position; a causal decoder only uses Δ ≤ 0). ``R(Δ)`` is block
diagonal: in the k-th rotary plane (coordinates a_k, b_k of the head) it is ``[[cos Δθ_k, −sin Δθ_k],
[sin Δθ_k, cos Δθ_k]]``; dimensions outside ``rotary_dim`` are not rotated. Two pairing conventions exist:

* ``"half"`` (rotate-half; Llama, Qwen2, Gemma, GPT-NeoX in transformers): plane k is (k, k + rotary_dim/2);
* ``"interleaved"`` (GPT-J, and llama.cpp's GGUF files before un-permutation): plane k is (2k, 2k + 1).

:func:`qkgeometry.load_qk` returns the Hugging Face layout: for Llama GGUF files it undoes llama.cpp's per-head
row permutation, Gemma-3 GGUF files are not permuted. So the factors of every supported source use ``"half"``.

Reciprocity: the logit of j → i at offset −Δ is ``x_jᵀ M(−Δ) x_i = x_iᵀ M(−Δ)ᵀ x_j``, so how much "i attends to j"
mirrors "j attends to i" compares ``M(Δ)`` with ``M(−Δ)ᵀ`` (:func:`offset_scores`, column ``reciprocity``). The
symmetry score ``s(Δ) = s(M(Δ))`` asks instead whether swapping the two tokens' *contents* at a fixed offset keeps
the logit. Both equal the paper's score at Δ = 0.

Everything is factored: with ``C = W_Kᵀ W_Q``, ``G_Q = W_QᵀW_Q`` and ``G_K = W_KᵀW_K`` (r × r),
``tr(M(Δ)²) = tr((R C)²)``, ``‖M(Δ)‖² = tr(G_Q R G_K Rᵀ)`` and ``tr(M(Δ) M(−Δ)) = tr(R C Rᵀ C)``; applying R is a
2 × 2 rotation of row or column pairs, so each offset costs O(r²) after O(d r²) once. Conventions: the book's
Notation page.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from .._threads import small_problems
from .._validation import ArrayLike, to_float64
from ..model import FactoredQK
from ..scores import directionality_from_norms
from .iterate import Factors, iter_factors, opened
from .nulls import rotation_null_variance

__all__ = [
    "RopeSpec",
    "directionality_by_offset",
    "long_offset_limit",
    "offset_factors",
    "offset_form",
    "offset_scores",
    "offset_traces",
    "offset_z_scores",
    "rope_frequencies",
    "rope_spec",
    "rotation_matrix",
]

Pairing = Literal["half", "interleaved"]

# model_type -> pairing convention of the transformers forward code (rotate_half vs rotate_every_two)
_PAIRING: dict[str, Pairing] = dict.fromkeys((
    "llama", "mistral", "mixtral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "gemma3", "olmo", "olmo2",
    "phi", "phi3", "gpt_neox"), "half")
_PAIRING["gptj"] = "interleaved"
# llama.cpp's Gemma-3 layer pattern (HF configs before transformers 5 without `sliding_window_pattern`)
_GEMMA3_PATTERN = 6


@dataclass(frozen=True)
class RopeSpec:
    """Rotary frequencies and pairing of one layer.

    ``inv_freq``: (rotary_dim/2,) angular frequencies θ_k in radians per position; ``head_dim``: size of each head;
    ``pairing``: "half" or "interleaved". Dimensions ``rotary_dim .. head_dim − 1`` are not rotated.
    """

    inv_freq: np.ndarray
    head_dim: int
    pairing: Pairing = "half"
    base: float | None = None  # the rope theta the frequencies came from (for display)

    def __post_init__(self):
        if isinstance(self.head_dim, (bool, np.bool_)) or not isinstance(self.head_dim, (int, np.integer)) \
                or self.head_dim < 1:
            raise ValueError(f"`head_dim` must be a positive integer (the size of each head); got {self.head_dim!r}.")
        object.__setattr__(self, "head_dim", int(self.head_dim))
        try:
            freq = np.asarray(self.inv_freq, dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise ValueError(f"`inv_freq` must be a vector of real numbers; got {self.inv_freq!r:.80}.") from e
        if freq.ndim != 1 or 2 * len(freq) > self.head_dim or not np.all(np.isfinite(freq)):
            raise ValueError(f"`inv_freq` must be a finite vector of length <= head_dim/2 = {self.head_dim // 2}; "
                             f"got shape {freq.shape}.")
        if self.pairing not in ("half", "interleaved"):
            raise ValueError(f"`pairing` must be 'half' or 'interleaved'; got {self.pairing!r}.")
        object.__setattr__(self, "inv_freq", freq)

    @property
    def rotary_dim(self) -> int:
        return 2 * len(self.inv_freq)

    def planes(self) -> tuple[np.ndarray, np.ndarray]:
        """Index arrays (a_k, b_k) of the rotary planes inside one head."""
        k = np.arange(len(self.inv_freq))
        if self.pairing == "half":
            return k, k + len(k)
        return 2 * k, 2 * k + 1


def rope_frequencies(base: float, rotary_dim: int, scaling_factor: float = 1.0) -> np.ndarray:
    """θ_k = base^(−2k/rotary_dim) / scaling_factor for k = 0 .. rotary_dim/2 − 1 (float64). Chapter 6."""
    if not (isinstance(base, (int, float)) and base > 1):
        raise ValueError(f"`base` (rope theta) must be a number > 1; got {base!r}.")
    if not isinstance(rotary_dim, (int, np.integer)) or rotary_dim < 2 or rotary_dim % 2:
        raise ValueError(f"`rotary_dim` must be an even integer >= 2; got {rotary_dim!r}.")
    return base ** (-np.arange(0, rotary_dim, 2, dtype=np.float64) / rotary_dim) / scaling_factor


# ----------------------------------------------------------------------------------------- where θ lives
def rope_spec(model: Any, layer: int = 0, config: dict | None = None) -> RopeSpec:
    """The rotary frequencies and pairing that layer ``layer`` of ``model`` (a :class:`qkgeometry.QKModel`) uses,
    read from the settings its reader found (:attr:`qkgeometry.QKModel.config`, in ``config.json``'s vocabulary):

    * ``rope_parameters`` (transformers ≥ 5: ``rope_theta``, ``rope_type``; Gemma-3 keeps one entry per layer type,
      ``full_attention`` and ``sliding_attention``, and lists ``layer_types``); older files have ``rope_theta`` /
      ``rope_scaling`` (Gemma-3: ``rope_local_base_freq`` and ``sliding_window_pattern``). Partial rotary:
      ``partial_rotary_factor`` (in ``rope_parameters`` from transformers 5 on, at the top level before: Phi,
      GPT-NeoX), ``rotary_pct`` (older GPT-NeoX files), ``rotary_dim`` (GPT-J).
    * A GGUF file's ``<arch>.rope.*`` metadata arrives translated into those names
      (:func:`qkgeometry.readers.gguf.rope_config`; for Gemma-3, llama.cpp's base 10 000 on sliding-window layers
      and ``rope.freq_base`` on every 6th, global, layer).

    Only the ``default`` and ``linear`` rope types are supported; others raise. ``config`` (a config.json dict)
    overrides the model's, e.g. for a ``transformers`` model that is not a QKModel. Chapter 6.
    """
    head_dim = int(model.head_dim)
    if config is None:
        config = getattr(model, "config", None)
    if not config:
        raise ValueError(f"cannot find the rotary settings of {getattr(model, 'name', model)!r}: its source carries "
                         "none (an ONNX graph, a CTranslate2 file); pass `config=` (the model's config.json as a "
                         "dict).")
    return _hf_rope_spec(dict(config), layer, head_dim)


def _hf_rope_spec(config: dict, layer: int, head_dim: int) -> RopeSpec:
    model_type = config.get("model_type")
    if model_type == "gemma3" and "text_config" in config:
        config = {"model_type": "gemma3_text", **config["text_config"]}
        model_type = "gemma3_text"
    if model_type not in _PAIRING:
        raise ValueError(f"rotary settings of model_type {model_type!r} are not supported (supported: "
                         f"{', '.join(sorted(_PAIRING))}); the model may not use rotary embeddings at all.")
    params = config.get("rope_parameters")
    layer_types = config.get("layer_types")
    if model_type.startswith("gemma3") and not layer_types:
        pattern = int(config.get("sliding_window_pattern", _GEMMA3_PATTERN))
        n_layers = int(config.get("num_hidden_layers", layer + 1))
        layer_types = ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(n_layers)]
    if isinstance(params, dict) and layer_types and layer_types[layer] in params:
        params = params[layer_types[layer]]
    if not isinstance(params, dict):  # older configs
        params = dict(config.get("rope_scaling") or {})
        is_local = bool(layer_types) and layer_types[layer] == "sliding_attention"
        if is_local and "rope_local_base_freq" in config:
            params = {"rope_theta": config["rope_local_base_freq"]}  # scaling applies to global layers only
        else:
            params.setdefault("rope_theta", config.get("rope_theta", 10_000.0))
    rope_type = params.get("rope_type", params.get("type", "default"))
    if rope_type not in ("default", "linear"):
        raise ValueError(f"rope_type {rope_type!r} is not supported (only 'default' and 'linear'); its frequencies "
                         "depend on the position in ways the fixed form W_Q R(Δ) W_Kᵀ does not capture here.")
    factor = float(params.get("factor", 1.0)) if rope_type == "linear" else 1.0
    rotary_dim = head_dim
    if "partial_rotary_factor" in params:  # transformers >= 5 keeps it in rope_parameters (Phi, GPT-NeoX)
        rotary_dim = int(head_dim * float(params["partial_rotary_factor"]))
    elif "partial_rotary_factor" in config:
        rotary_dim = int(head_dim * float(config["partial_rotary_factor"]))
    elif "rotary_pct" in config:
        rotary_dim = int(head_dim * float(config["rotary_pct"]))
    elif config.get("rotary_dim"):
        rotary_dim = int(config["rotary_dim"])
    base = float(params.get("rope_theta", 10_000.0))
    return RopeSpec(rope_frequencies(base, rotary_dim, factor), head_dim, _PAIRING[model_type], base)


# -------------------------------------------------------------------------------------------- the form
def _deltas(deltas, name: str = "deltas") -> np.ndarray:
    """``deltas`` as a 1-D float64 array of finite offsets; anything else is refused naming ``name``."""
    try:
        out = np.atleast_1d(np.asarray(deltas, dtype=np.float64))
    except (TypeError, ValueError) as e:
        raise ValueError(f"`{name}` must be real offsets (numbers, or a 1-D array of them); got {deltas!r:.80}.") from e
    if out.ndim != 1:
        raise ValueError(f"`{name}` must be a number or a 1-D array of offsets; got shape {out.shape}.")
    if not np.all(np.isfinite(out)):
        raise ValueError(f"`{name}` holds {int(np.sum(~np.isfinite(out)))} NaN or infinite offset(s); an offset "
                         "Δ = j − i is a finite number of positions.")
    return out


def _angles(spec: RopeSpec, deltas) -> tuple[np.ndarray, np.ndarray]:
    phase = np.multiply.outer(_deltas(deltas), spec.inv_freq)
    return np.cos(phase), np.sin(phase)  # (n_deltas, n_pairs)


def _rotate_columns(x: np.ndarray, spec: RopeSpec, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """``X R(Δ)`` for every offset: x (..., m·head_dim) -> (n_deltas, ..., m·head_dim); R acts on each head block."""
    a, b = spec.planes()
    lead = x.shape[:-1]
    blocks = x.reshape(*lead, -1, spec.head_dim)
    extra = (1,) * (len(lead) + 1)  # broadcast the (n_deltas, n_pairs) angles over the leading axes and blocks
    c = cos.reshape(cos.shape[0], *extra, cos.shape[1])
    s = sin.reshape(sin.shape[0], *extra, sin.shape[1])
    out = np.broadcast_to(blocks, (cos.shape[0], *blocks.shape)).copy()
    xa, xb = blocks[..., a], blocks[..., b]
    out[..., a] = xa * c + xb * s
    out[..., b] = xb * c - xa * s
    return out.reshape(cos.shape[0], *x.shape)


def rotation_matrix(spec: RopeSpec, delta: float) -> np.ndarray:
    """The dense head_dim × head_dim rotation ``R(Δ)`` (for teaching and tests; the functions below never build it)."""
    cos, sin = _angles(spec, _deltas(delta, "delta"))
    return _rotate_columns(np.eye(spec.head_dim), spec, cos, sin)[0]


def offset_factors(wq: ArrayLike, wk: ArrayLike, spec: RopeSpec, delta: float) -> FactoredQK:
    """``(W_Q R(Δ), W_K)``: factors of ``M(Δ)``, as a :class:`qkgeometry.FactoredQK`. ``wq``, ``wk``: (..., d,
    m·head_dim) (one head: m = 1; a layer's grouped factors from :meth:`qkgeometry.QKLayer.factors`: m = n_kv_heads,
    R acting on each block). Chapter 6."""
    q, k = _pair(wq, wk, spec)
    cos, sin = _angles(spec, _deltas(delta, "delta"))
    return FactoredQK(_rotate_columns(q, spec, cos, sin)[0], k)


def offset_form(wq: ArrayLike, wk: ArrayLike, spec: RopeSpec, delta: float) -> np.ndarray:
    """The dense ``M(Δ) = W_Q R(Δ) W_Kᵀ`` (..., d, d), for checks against a model's logits. Chapter 6."""
    return offset_factors(wq, wk, spec, delta).matrix()


def _pair(wq: ArrayLike, wk: ArrayLike, spec: RopeSpec) -> tuple[np.ndarray, np.ndarray]:
    q, k = to_float64(wq, "wq"), to_float64(wk, "wk")
    if q.shape != k.shape or q.ndim < 2:
        raise ValueError(f"`wq` and `wk` must have the same shape (..., d, r); got {q.shape} and {k.shape}.")
    if q.shape[-1] % spec.head_dim:
        raise ValueError(f"the last axis of `wq` ({q.shape[-1]}) must be a multiple of spec.head_dim "
                         f"({spec.head_dim}).")
    return q, k


_J = np.array([[0.0, -1.0], [1.0, 0.0]])  # rotation by π/2 in one plane: R_k = cos φ_k I + sin φ_k J


def _all_planes(spec: RopeSpec, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Planes over a factor of ``width = m·head_dim`` columns: index pairs (p, 2) and their frequencies (p,).

    Dimensions outside ``rotary_dim`` are paired up as planes of frequency 0 (R = I there)."""
    a, b = spec.planes()
    rest = np.setdiff1d(np.arange(spec.head_dim), np.concatenate([a, b]))
    if len(rest) % 2:
        raise ValueError(f"head_dim - rotary_dim = {len(rest)} is odd; cannot pair the unrotated dimensions.")
    pairs = np.concatenate([np.stack([a, b], -1), rest.reshape(-1, 2)])
    freq = np.concatenate([spec.inv_freq, np.zeros(len(rest) // 2)])
    blocks = width // spec.head_dim
    offsets = (spec.head_dim * np.arange(blocks))[:, None, None]
    return (pairs[None] + offsets).reshape(-1, 2), np.tile(freq, blocks)


def _trig_coefficients(x: np.ndarray, y: np.ndarray, pairs: np.ndarray, transpose_right: bool) -> list[np.ndarray]:
    """``T_AB[k, l] = tr(A X_kl B Y_lk)`` for A, B ∈ {I, J} (B ∈ {I, −J} when the right factor is Rᵀ), so that
    ``Σ_kl tr(R_k X_kl R_l^(ᵀ) Y_lk) = cᵀT_II c + cᵀT_IJ s + sᵀT_JI c + sᵀT_JJ s`` with c, s = cos φ, sin φ."""
    xb = x[pairs[:, None, :, None], pairs[None, :, None, :]]  # (p, p, 2, 2): X_kl
    y_swapped = np.swapaxes(y[pairs[:, None, :, None], pairs[None, :, None, :]], 0, 1)  # [k, l] holds Y_lk
    y_t = np.swapaxes(y_swapped, -1, -2)  # [k, l, i, m] = (Y_lk)_mi
    right_j = -_J if transpose_right else _J
    out = []
    for left in (np.eye(2), _J):
        ax = left @ xb
        for right in (np.eye(2), right_j):
            out.append(np.sum((ax @ right) * y_t, axis=(-1, -2)))  # tr(A X_kl B Y_lk)
    return out


def _trig_eval(coef: list[np.ndarray], cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    t_ii, t_ij, t_ji, t_jj = coef
    return np.sum((cos @ t_ii + sin @ t_ji) * cos + (cos @ t_ij + sin @ t_jj) * sin, axis=-1)


def offset_traces(q: ArrayLike, k: ArrayLike, spec: RopeSpec, deltas, chunk: int = 4096) -> dict[str, np.ndarray]:
    """``tr(M(Δ)²)``, ``‖M(Δ)‖²`` and ``tr(M(Δ) M(−Δ))`` for every offset in ``deltas`` (n,), as a dict of (n,)
    float64 arrays with keys ``"cross"``, ``"total"`` and ``"mirror"``. ``q``, ``k``: (d, m·head_dim) float64 numpy
    arrays, the factors of one head (m = 1) or of a layer's grouped form. Chapter 6.

    Each is a quadratic form in (cos Δθ_k, sin Δθ_k): ``tr(RCRC) = Σ_kl tr(R_k C_kl R_l C_lk)`` over the 2 × 2 blocks
    of C = W_KᵀW_Q in the rotary planes, with ``R_k = cos φ_k I + sin φ_k J``. The coefficient matrices (one per
    choice of I or J on each side, r/2 × r/2) are computed once; each offset then costs O(r²).
    """
    q, k = _pair(q, k, spec)
    deltas = _deltas(deltas)
    core = k.T @ q  # C = W_Kᵀ W_Q
    pairs, freq = _all_planes(spec, q.shape[-1])
    coefs = {"cross": _trig_coefficients(core, core, pairs, transpose_right=False),
             "total": _trig_coefficients(k.T @ k, q.T @ q, pairs, transpose_right=True),
             "mirror": _trig_coefficients(core, core, pairs, transpose_right=True)}
    out = {key: [] for key in coefs}
    for start in range(0, len(deltas), chunk):
        phase = np.multiply.outer(np.asarray(deltas[start:start + chunk], dtype=np.float64), freq)
        cos, sin = np.cos(phase), np.sin(phase)
        for key, coef in coefs.items():
            out[key].append(_trig_eval(coef, cos, sin))
    return {key: np.concatenate(v) for key, v in out.items()}


def _with_specs(qk, per: str, layers) -> Iterator[tuple[Factors, RopeSpec]]:
    """:func:`qkgeometry.analyses.iterate.iter_factors` with the rotary spec of each factor's layer (looked up once per layer)."""
    specs: dict[int, RopeSpec] = {}
    for f in iter_factors(qk, per, layers):
        if f.layer not in specs:
            specs[f.layer] = rope_spec(qk, f.layer)
        yield f, specs[f.layer]


@small_problems
def offset_scores(model: Any, deltas, per: str = "head", layers=None) -> pd.DataFrame:
    """Offset-resolved scores of every head (``per="head"``), layer (``"layer"``) or both (``"both"``; layer rows
    have ``head`` = <NA>) of a rotary model.

    ``model``: a :class:`qkgeometry.QKModel` (or a source for :func:`qkgeometry.load_qk`); ``deltas``: offsets
    Δ = j − i; ``layers``: layer indices (default: all). Columns: ``model, layer, head, delta, symmetry``
    (s(M(Δ))), ``reciprocity`` (⟨M(Δ), M(−Δ)ᵀ⟩/(‖M(Δ)‖‖M(−Δ)‖)), ``energy`` (‖M(Δ)‖²/‖M(0)‖²), ``rope_base``.
    Cost O(d r²) per head plus O(r²) per offset. Chapter 6.
    """
    deltas = _deltas(deltas)
    all_deltas = np.unique(np.concatenate([deltas, -deltas, [0.0]]))
    pos = {float(v): i for i, v in enumerate(all_deltas)}
    idx = np.array([pos[float(v)] for v in deltas])
    mirror_idx = np.array([pos[float(-v)] for v in deltas])
    frames = []
    with opened(model) as qk:
        for f, spec in _with_specs(qk, per, layers):
            tr = offset_traces(f.a, f.b, spec, all_deltas)
            total = tr["total"][idx]
            frames.append(pd.DataFrame({
                "model": qk.name, "layer": f.layer, "head": pd.NA if f.head is None else f.head, "delta": deltas,
                "symmetry": tr["cross"][idx] / total,
                "reciprocity": tr["mirror"][idx] / np.sqrt(total * tr["total"][mirror_idx]),
                "energy": total / tr["total"][pos[0.0]], "rope_base": spec.base}))
    frame = pd.concat(frames, ignore_index=True)
    frame["head"] = frame["head"].astype("Int64")
    return frame


@small_problems
def offset_z_scores(model: Any, deltas, per: str = "layer", layers=None) -> pd.DataFrame:
    """Rotation-null z-scores ``(s(Δ) − 1/d)/sd(Δ)`` at each offset; ``sd(Δ)`` uses ρ of ``M(Δ)`` itself.

    ρ(Δ) = tr((Rᵀ G_Q R G_K)²)/‖M(Δ)‖⁴ costs O(r³) per offset, so pass a modest grid of offsets. Columns:
    ``model, layer, head, delta, symmetry, rho, null_sd, z``. Chapter 6.
    """
    deltas = _deltas(deltas)
    frames = []
    with opened(model) as qk:
        d = qk.d_model
        for f, spec in _with_specs(qk, per, layers):
            q, k = f.a, f.b
            cos, sin = _angles(spec, deltas)
            qr = _rotate_columns(q, spec, cos, sin)  # (n, d, r): W_Q R(Δ)
            core = k.T @ qr  # (n, r, r): W_Kᵀ W_Q R(Δ); tr(M(Δ)²) = tr(core²)
            prod = np.swapaxes(qr, -1, -2) @ qr @ (k.T @ k)  # Rᵀ G_Q R G_K
            total = np.trace(prod, axis1=1, axis2=2)
            sym = np.einsum("nij,nji->n", core, core) / total
            rho = np.einsum("nij,nji->n", prod, prod) / total ** 2
            sd = np.sqrt(rotation_null_variance(d, rho))
            frames.append(pd.DataFrame({"model": qk.name, "layer": f.layer,
                                        "head": pd.NA if f.head is None else f.head, "delta": deltas,
                                        "symmetry": sym, "rho": rho, "null_sd": sd, "z": (sym - 1.0 / d) / sd}))
    frame = pd.concat(frames, ignore_index=True)
    frame["head"] = frame["head"].astype("Int64")
    return frame


def directionality_by_offset(wq: ArrayLike, wk: ArrayLike, spec: RopeSpec, deltas, num_std: float = 2.0) -> np.ndarray:
    """Directionality score of ``M(Δ)`` for each offset, from the factors (O(d r²) per offset). Chapter 6.

    Row norms² are ``diag(W_Q (R G_K Rᵀ) W_Qᵀ)``, column norms² ``diag(W_K (Rᵀ G_Q R) W_Kᵀ)``.
    """
    q, k = _pair(wq, wk, spec)
    deltas = _deltas(deltas)
    cos, sin = _angles(spec, deltas)
    qr = _rotate_columns(q, spec, cos, sin)  # (n, d, r)
    rows = np.einsum("ndr,rs,nds->nd", qr, k.T @ k, qr)
    cols = np.einsum("dr,nrs,ds->nd", k, np.swapaxes(qr, -1, -2) @ qr, k)
    return directionality_from_norms(np.sqrt(np.clip(rows, 0, None)), np.sqrt(np.clip(cols, 0, None)), num_std)


def long_offset_limit(wq: ArrayLike, wk: ArrayLike, spec: RopeSpec) -> tuple[float, float]:
    """Long-offset averages ``(N̄, D̄)`` of ``tr(M(Δ)²)`` and ``‖M(Δ)‖²`` for a fully rotary head. Chapter 6.

    For distinct frequencies in (0, π), the averages over Δ = 1..T converge as T → ∞ to
    ``N̄ = Σ_k ‖S_k‖²`` (S_k: the symmetric traceless part of the 2 × 2 block of C = W_KᵀW_Q in plane k, so N̄ ≥ 0)
    and ``D̄ = ½ Σ_k tr(G_Q,kk) tr(G_K,kk)``. Their ratio is the energy-weighted long-range symmetry.
    """
    q, k = _pair(wq, wk, spec)
    if q.shape[-1] != spec.head_dim or spec.rotary_dim != spec.head_dim:
        raise ValueError("long_offset_limit needs one fully rotary head (rotary_dim = head_dim = r).")
    a, b = spec.planes()
    core, gram_q, gram_k = k.T @ q, q.T @ q, k.T @ k
    caa, cbb, cab, cba = core[a, a], core[b, b], core[a, b], core[b, a]
    sym_traceless = 0.5 * (caa - cbb) ** 2 + 0.5 * (cab + cba) ** 2  # ‖S_k‖² with S = [[u, v], [v, −u]]
    mean_energy = 0.5 * (gram_q[a, a] + gram_q[b, b]) * (gram_k[a, a] + gram_k[b, b])
    return float(sym_traceless.sum()), float(mean_energy.sum())
