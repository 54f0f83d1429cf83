"""Spectra of the two parts of ``M = A Bᵀ``: eigenvalues of M_s and singular values of M_n, from 2r × 2r problems.

Book chapter 6, "The spectrum of the two parts". With ``U = [A, B]`` (d × 2r),

    M_s = (A Bᵀ + B Aᵀ)/2 = U K_s Uᵀ,  K_s = ½ [[0, I], [I, 0]],
    M_n = (A Bᵀ − B Aᵀ)/2 = U K_n Uᵀ,  K_n = ½ [[0, I], [−I, 0]].

With the Gram matrix ``G = UᵀU`` (O(d r²)) and its square root ``S = G^{1/2}``, ``U = W S`` for a W with
orthonormal columns, so the non-zero eigenvalues of the symmetric d × d matrix M_s are those of the 2r × 2r matrix
``S K_s Sᵀ``, and the singular values of M_n those of ``S K_n Sᵀ`` (S: the symmetric square root, or the Cholesky
factor ``Lᵀ`` when G is well conditioned; any S with ``SᵀS = G`` works) (skew: its eigenvalues come in pairs ±iσ, so its singular values come in equal pairs). The d × d
matrices are never formed. Conventions: the book's Notation page.

``‖M_s‖² = Σ λ²``, so the **positive share** ``Σ_{λ>0} λ² / Σ λ²`` says how much of the symmetric energy rewards
similar query and key directions (a tied W_Q = W_K gives a positive semi-definite M_s and share 1); the **trace
z-score** ``√d · tr(M)/‖M‖`` has mean 0 and variance 1 exactly under the rotation null ``M ↦ O M``.

The same M has many factorisations: ``(sA)(B/s)ᵀ`` for any s > 0. Before anything is computed, A and B are each
scaled by a power of two (exact in floating point) so that their largest entries lie in [1/2, 1), and the spectra
are scaled back by the product of those powers: the results do not depend on s (checked for s up to 10^±150), and
factors near 10^±160 neither overflow nor underflow. The shares and the trace z-score of an all-zero M are 0/0 and
raise ``ValueError``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from .._threads import small_problems
from .._validation import ArrayLike, check_factors, to_float64
from .iterate import iter_factors, opened

__all__ = [
    "SpectralSummary",
    "positive_share_rotation_null",
    "skew_singular_values",
    "spectral_summary",
    "spectrum_table",
    "symmetric_eigenvalues",
    "trace_z_score",
]


def _factors(A: ArrayLike, B: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    a, b = to_float64(A, "A"), to_float64(B, "B")
    check_factors(a, b)
    return a, b


def _balanced(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(a', b', e)`` with ``a = a'·2^eA``, ``b = b'·2^eB`` (each matrix's largest entry in [1/2, 1)) and
    ``e = eA + eB`` (batch shape): ``M = 2^e · a' b'ᵀ`` exactly, so spectra of ``a' b'ᵀ`` times ``2^e`` are M's."""
    def unit(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        peak = np.max(np.abs(x), axis=(-2, -1), keepdims=True)
        exponent = np.frexp(peak)[1]  # peak = m · 2**exponent, 0.5 <= m < 1 (0 for an all-zero matrix)
        return np.ldexp(x, -exponent), exponent[..., 0, 0]

    (ua, ea), (ub, eb) = unit(a), unit(b)
    return ua, ub, ea.astype(np.int64) + eb.astype(np.int64)


def _scaled_back(values: np.ndarray, exponent: np.ndarray, what: str) -> np.ndarray:
    """``values · 2^exponent`` (per batch entry), refusing results beyond float64's range."""
    out = np.ldexp(values, exponent[..., None])
    if not np.all(np.isfinite(out)):
        raise ValueError(f"the {what} of M = A Bᵀ exceed float64's range (about 1.8e308); scale A or B down (the "
                         "shares and the trace z-score do not depend on the scale).")
    return out


def _check_not_zero(a: np.ndarray, b: np.ndarray, what: str) -> None:
    """Refuse an all-zero ``M = A Bᵀ`` (``‖M‖² = tr(AᵀA BᵀB) = 0``), whose ``what`` is 0/0."""
    total = np.einsum("...rs,...rs->...", np.swapaxes(a, -1, -2) @ a, np.swapaxes(b, -1, -2) @ b)
    zero = total <= 0
    if np.any(zero):
        where = "" if total.ndim == 0 else f" (at batch index {tuple(int(i) for i in np.argwhere(zero)[0])})"
        raise ValueError(f"M = A Bᵀ is the zero matrix{where}, so its {what} is 0/0; check that the weights were "
                         "loaded (a zero matrix often means a missing tensor), or drop it.")


def _core(a: np.ndarray, b: np.ndarray, skew: bool) -> np.ndarray:
    """``S K Sᵀ`` (..., 2r, 2r) with ``SᵀS = G = UᵀU`` (Cholesky factor, or the symmetric root ``G^{1/2}``).

    ``U = [A, B] = W S`` with W having orthonormal columns on U's range (``W = U S⁺``), so ``U K Uᵀ`` and
    ``S K Sᵀ`` have the same non-zero eigenvalues and singular values. Only r × r products and a 2r × 2r
    Cholesky (or symmetric eigendecomposition) factorisation: no QR of a d × 2r matrix, no d × d matrix.
    """
    r = a.shape[-1]
    u = np.concatenate([a, b], axis=-1)
    gram = np.swapaxes(u, -1, -2) @ u
    root = _cholesky_root(gram)
    if root is None:
        root = _symmetric_root(gram)
    left, right = root[..., :, :r], root[..., :, r:]  # S K_s Sᵀ = ½(S_A S_Bᵀ + S_B S_Aᵀ), S = [S_A | S_B]
    cross = left @ np.swapaxes(right, -1, -2)
    return 0.5 * (cross - np.swapaxes(cross, -1, -2)) if skew else 0.5 * (cross + np.swapaxes(cross, -1, -2))


def _cholesky_root(gram: np.ndarray) -> np.ndarray | None:
    """``Lᵀ`` with ``G = L Lᵀ`` (then ``U = W Lᵀ`` with orthonormal W), or None when G is (numerically) singular."""
    try:
        low = np.linalg.cholesky(gram)
    except np.linalg.LinAlgError:
        return None
    pivots = np.diagonal(low, axis1=-2, axis2=-1) ** 2
    scale = np.max(np.diagonal(gram, axis1=-2, axis2=-1), axis=-1, keepdims=True)
    if np.any(pivots < 1e4 * gram.shape[-1] * np.finfo(np.float64).eps * scale):
        return None  # a tiny pivot: rank-deficient U (d < 2r or tied factors); use the eigendecomposition
    return np.swapaxes(low, -1, -2)


def _symmetric_root(gram: np.ndarray) -> np.ndarray:
    lam, vec = np.linalg.eigh(gram)
    # Directions of U's null space (d < 2r, or tied factors) have eigenvalues at round-off level; their square
    # roots (~1e-8) would pollute the spectrum, so they are set to exactly 0.
    noise = lam.shape[-1] * np.finfo(np.float64).eps * np.max(np.abs(lam), axis=-1, keepdims=True)
    root_lam = np.where(lam > noise, np.sqrt(np.clip(lam, 0, None)), 0.0)
    return (vec * root_lam[..., None, :]) @ np.swapaxes(vec, -1, -2)  # G^{1/2}


def symmetric_eigenvalues(A: ArrayLike, B: ArrayLike) -> np.ndarray:
    """Eigenvalues of ``M_s`` for ``M = A Bᵀ`` (A, B: (..., d, r)), ascending, shape (..., 2r).

    M_s has rank at most min(d, 2r): these 2r values are its non-zero eigenvalues padded with zeros (up to
    round-off), and its other eigenvalues are exactly 0. Chapter 6.
    """
    a, b, e = _balanced(*_factors(A, B))
    return _scaled_back(np.linalg.eigvalsh(_core(a, b, skew=False)), e, "eigenvalues")


def skew_singular_values(A: ArrayLike, B: ArrayLike) -> np.ndarray:
    """Singular values of ``M_n`` (descending, shape (..., 2r), zero-padded as in :func:`symmetric_eigenvalues`);
    the non-zero ones come in equal pairs (eigenvalues ±iσ of a real skew matrix). Chapter 6."""
    a, b, e = _balanced(*_factors(A, B))
    return _scaled_back(_skew_singular(_core(a, b, skew=True)), e, "singular values")


def _skew_singular(core: np.ndarray) -> np.ndarray:
    """Singular values of a real skew matrix X, descending: |eigenvalues| of the Hermitian matrix iX (±σ)."""
    return np.sort(np.abs(np.linalg.eigvalsh(1j * core)), axis=-1)[..., ::-1]


def trace_z_score(A: ArrayLike, B: ArrayLike) -> np.ndarray | float:
    """``√d · tr(M)/‖M‖`` for ``M = A Bᵀ``: mean 0 and variance 1 exactly under the rotation null. Chapter 6.

    ``tr(M) = tr(M_s) = Σ λ`` and ``‖M‖² = tr(G_A G_B)``; positive means the form rewards q ≈ k on average.
    """
    a, b, _ = _balanced(*_factors(A, B))
    _check_not_zero(a, b, "trace z-score")
    trace = np.einsum("...ir,...ir->...", a, b)
    total = np.einsum("...rs,...rs->...", np.swapaxes(a, -1, -2) @ a, np.swapaxes(b, -1, -2) @ b)
    out = np.sqrt(a.shape[-2]) * trace / np.sqrt(total)
    return float(out) if np.ndim(out) == 0 else out


class SpectralSummary(NamedTuple):
    """Per-matrix spectral numbers (floats, or arrays over a batch)."""

    positive_share: np.ndarray | float  # Σ_{λ>0} λ² / ‖M_s‖²
    top_eigenvalue_share: np.ndarray | float  # max λ² / ‖M_s‖²
    top_skew_share: np.ndarray | float  # 2 σ_max² / ‖M_n‖² (one ±iσ pair)
    trace_z: np.ndarray | float  # √d tr(M)/‖M‖


def spectral_summary(A: ArrayLike, B: ArrayLike) -> SpectralSummary:
    """Positive share, top-eigenvalue share, top skew-pair share and trace z-score of ``M = A Bᵀ``. Chapter 6.
    Independent of how M is factored (``(sA)(B/s)ᵀ``) and of its scale; an all-zero M raises ``ValueError``."""
    a, b, _ = _balanced(*_factors(A, B))
    _check_not_zero(a, b, "spectral summary")
    lam = np.linalg.eigvalsh(_core(a, b, skew=False))
    sig = _skew_singular(_core(a, b, skew=True))
    energy = np.sum(lam ** 2, axis=-1)
    skew_energy = np.sum(sig ** 2, axis=-1)
    tiny = 1e-12 * (energy + skew_energy)  # round-off level: M_n = 0 for a tied W_Q = W_K
    with np.errstate(invalid="ignore", divide="ignore"):
        values = (np.sum(np.where(lam > 0, lam ** 2, 0.0), axis=-1) / energy,
                  np.max(lam ** 2, axis=-1) / energy,
                  np.where(skew_energy > tiny, 2 * sig[..., 0] ** 2 / np.where(skew_energy > tiny, skew_energy, 1),
                           0.0),
                  trace_z_score(a, b))
    return SpectralSummary(*(float(v) if np.ndim(v) == 0 else np.asarray(v) for v in values))


@small_problems
def positive_share_rotation_null(A: ArrayLike, B: ArrayLike, n_samples: int, seed: int = 0) -> np.ndarray:
    """Positive shares of ``n_samples`` rotated copies ``O A Bᵀ`` (O Haar on ℝ^d, drawn as a random frame times
    ``Σ_A V_Aᵀ``: O(d r²) per sample, no d × d rotation). No closed form is known; this is its simulation."""
    from .nulls import random_frames

    a, b, _ = _balanced(*_factors(A, B))
    if a.ndim != 2:
        raise ValueError(f"`A` and `B` must be single (d, r) matrices; got shape {a.shape}.")
    _check_not_zero(a, b, "positive share")
    if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)) or n_samples < 1:
        raise ValueError(f"`n_samples` must be a positive integer; got {n_samples!r}.")
    rng = np.random.default_rng(seed)
    _, sig, vt = np.linalg.svd(a, full_matrices=False)
    core = sig[:, None] * vt
    out = []
    for start in range(0, n_samples, 16):
        n = min(16, n_samples - start)
        rotated = random_frames(rng, n, a.shape[0], core.shape[0]) @ core
        lam = np.linalg.eigvalsh(_core(rotated, np.broadcast_to(b, rotated.shape), skew=False))
        out.append(np.sum(np.where(lam > 0, lam ** 2, 0.0), axis=-1) / np.sum(lam ** 2, axis=-1))
    return np.concatenate(out)


@small_problems
def spectrum_table(model, per: str = "head", null_samples: int = 0, seed: int = 0, layers=None) -> pd.DataFrame:
    """Spectral summary of every head (or layer) of ``model`` (a QKModel or a source for ``load_qk``). Chapter 6.

    Columns: ``model, family, layer, head, positive_share, top_eigenvalue_share, top_skew_share, trace_z`` and,
    when ``null_samples > 0``, ``null_share_mean, null_share_sd`` (rotation null of the positive share, simulated
    with that many samples per head) and ``share_z``. ``layers``: layer indices (default: all).
    """
    rows = []
    with opened(model) as qk:
        for f in iter_factors(qk, per, layers):
            row = {"model": qk.name, "family": qk.family, "layer": f.layer,
                   "head": pd.NA if f.head is None else f.head, **spectral_summary(f.a, f.b)._asdict()}
            if null_samples:
                null = positive_share_rotation_null(f.a, f.b, null_samples, seed=seed + 1000 * f.layer + (f.head or 0))
                row.update(null_share_mean=float(null.mean()), null_share_sd=float(null.std(ddof=1)))
                row["share_z"] = (row["positive_share"] - row["null_share_mean"]) / row["null_share_sd"]
            rows.append(row)
    frame = pd.DataFrame(rows)
    frame["head"] = frame["head"].astype("Int64")
    return frame
