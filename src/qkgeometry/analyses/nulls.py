"""Exact and simulated null laws of the symmetry and directionality scores. Book chapter 6, "The null, exactly".

Three null models for a d × d bilinear form (conventions on the book's Notation page):

* **Gaussian**: ``M`` with i.i.d. N(0, 1) entries. ``‖M_s‖²`` and ``‖M_n‖²`` are independent χ² variables with
  d(d+1)/2 and d(d−1)/2 degrees of freedom, so ``s = 2·Beta(d(d+1)/4, d(d−1)/4) − 1`` exactly
  (:func:`gaussian_symmetry_law`).
* **Low rank**: ``M = A Bᵀ`` with ``A, B`` (d, r) i.i.d. N(0, 1) (a random head: ``r = head_dim``).
  ``E s = 1/d`` exactly for every r; ``Var s`` is the rotation-null variance at ``E ρ`` (exact identity), with a
  closed-form ratio-of-means value for ``E ρ`` (:func:`lowrank_symmetry_variance`); r = 1 gives
  ``s = cos²(a, b) ~ Beta(1/2, (d−1)/2)``; for fixed r and d → ∞, ``d·s → (χ²_{r(r+1)/2} − χ²_{r(r−1)/2})/r``.
* **Rotation null** for a fixed, trained ``M``: ``s(O M)`` with Haar-random orthogonal ``O``. It keeps M's singular
  values. ``E s(OM) = 1/d`` and ``Var s(OM) = (2d² + 2d + 2 − 6dρ)/(d²(d − 1)(d + 2))`` with
  ``ρ = ‖MᵀM‖²/‖M‖⁴`` (:func:`rotation_null_moments_factored`), so every real layer gets a z-score "how far from
  chance, given its spectrum" (:func:`rotation_z_scores`).

The directionality score has no closed form. What is exact: its law is symmetric about 0 under the Gaussian nulls
and under the two-sided rotation null ``O₁ M O₂ᵀ`` (not under the one-sided ``O M``, which keeps M's column norms);
with ``num_std = 2`` and ddof = 1 it is identically 0 for d ≤ 5 (:func:`max_z_score`); for d ≥ 6 it has atoms at −1,
0 and +1. Its quantiles are simulated and cached (:func:`directionality_null_quantiles`); a table over a grid of
(d, r) ships with the package (:func:`directionality_quantile_table`).
"""

from __future__ import annotations

import functools
import math
from importlib import resources
from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy import stats

from .._threads import small_problems
from .._validation import ArrayLike, check_factors, check_square, to_float64
from ..scores import scores_factored, symmetry_score, symmetry_score_factored
from .iterate import iter_factors, opened

__all__ = [
    "DEFAULT_QUANTILES",
    "RotationNull",
    "chance_line",
    "directionality_is_identically_zero",
    "directionality_null_quantiles",
    "directionality_null_samples",
    "directionality_quantile_table",
    "gaussian_symmetry_law",
    "gaussian_symmetry_moments",
    "large_d_limit_samples",
    "lowrank_rho_ratio_of_means",
    "lowrank_symmetry_variance",
    "max_z_score",
    "null_law_checks",
    "random_frames",
    "rank_one_symmetry_law",
    "rotation_null_moments",
    "rotation_null_moments_factored",
    "rotation_null_samples",
    "rotation_null_variance",
    "rotation_z_scores",
    "symmetry_null_quantiles",
]

DEFAULT_QUANTILES: tuple[float, ...] = (0.05, 0.5, 0.95)
#: The d and r of the shipped directionality table (r = 0 stands for the full i.i.d. Gaussian d × d matrix).
TABLE_DS: tuple[int, ...] = (6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 576, 640, 768, 1024)
TABLE_RS: tuple[int, ...] = (0, 1, 8, 32, 64)
TABLE_SAMPLES = 2000
_TABLE_FILE = "directionality_null_quantiles.csv"


def _check_int(value, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"`{name}` must be an integer >= {minimum}; got {value!r}.")
    return int(value)


# ------------------------------------------------------------------------------------------ Gaussian null
def gaussian_symmetry_law(d: int):
    """Exact law of ``s(M)`` for ``M`` (d, d) with i.i.d. N(0, 1) entries: ``2·Beta(d(d+1)/4, d(d−1)/4) − 1``.

    Returns a frozen ``scipy.stats`` distribution on [−1, 1] (``.mean()``, ``.var()``, ``.ppf(q)``...). Chapter 6.
    """
    d = _check_int(d, "d", 2)
    return stats.beta(d * (d + 1) / 4, d * (d - 1) / 4, loc=-1.0, scale=2.0)


def gaussian_symmetry_moments(d: int) -> tuple[float, float]:
    """``(E s, Var s) = (1/d, 2(d² − 1)/(d²(d² + 2)))`` for the i.i.d. Gaussian d × d matrix. Chapter 6."""
    d = _check_int(d, "d", 2)
    return 1.0 / d, 2.0 * (d * d - 1) / (d * d * (d * d + 2))


# ------------------------------------------------------------------------------------------ low-rank null
def rank_one_symmetry_law(d: int):
    """Exact law of ``s(a bᵀ) = cos²(a, b)`` for independent standard normal a, b ∈ ℝ^d: Beta(1/2, (d−1)/2).

    Frozen ``scipy.stats`` distribution. Chapter 6.
    """
    d = _check_int(d, "d", 2)
    return stats.beta(0.5, (d - 1) / 2)


def lowrank_rho_ratio_of_means(d: int, r: int) -> float:
    """``E‖MᵀM‖² / E‖M‖⁴`` for ``M = A Bᵀ``, A, B (d, r) i.i.d. N(0, 1), in closed form (Wishart moments).

    ``= ((d+1)(d+r+1) + dr + 2) / (d²r + 4d + 2r + 2)``; exactly 1 (= ρ itself) for r = 1, ≈ 1/r for d ≫ r,
    ≈ 3/d for r = d. It stands in for ``E ρ`` in :func:`lowrank_symmetry_variance`. Chapter 6.
    """
    d, r = _check_int(d, "d", 2), _check_int(r, "r", 1)
    return ((d + 1) * (d + r + 1) + d * r + 2) / (d * d * r + 4 * d + 2 * r + 2)


def lowrank_symmetry_variance(d: int, r: int, rho: float | None = None) -> float:
    """Variance of ``s(A Bᵀ)`` for A, B (d, r) i.i.d. N(0, 1). Chapter 6.

    Exact identity: ``Var s = rotation_null_variance(d, E ρ)`` with ``ρ = ‖MᵀM‖²/‖M‖⁴`` (the law of A Bᵀ is
    invariant under M ↦ O M, and the rotation-null variance is linear in ρ). Pass ``rho = E ρ`` (e.g. a Monte Carlo
    mean) for the exact value; by default ``E ρ`` is replaced by the closed-form ratio of means
    :func:`lowrank_rho_ratio_of_means`, exact for r = 1 and ≈ (2/d²)(1 − 3/(rd)) for d ≫ r.
    """
    d, r = _check_int(d, "d", 2), _check_int(r, "r", 1)
    if rho is not None:
        _check_rho(rho, min(d, r))
    return rotation_null_variance(d, lowrank_rho_ratio_of_means(d, r) if rho is None else rho)


@small_problems
def large_d_limit_samples(r: int, n_samples: int, seed: int = 0) -> np.ndarray:
    """Samples of the fixed-r, d → ∞ limit law of ``d·s(A Bᵀ)``: ``(χ²_{r(r+1)/2} − χ²_{r(r−1)/2})/r``.

    Mean 1, variance 2 (for r = 1 the second χ² has 0 degrees of freedom: the limit is χ²₁). Chapter 6.
    """
    r, n_samples = _check_int(r, "r", 1), _check_int(n_samples, "n_samples", 1)
    rng = np.random.default_rng(seed)
    sym = rng.chisquare(r * (r + 1) / 2, n_samples)
    skew = rng.chisquare(r * (r - 1) / 2, n_samples) if r > 1 else np.zeros(n_samples)
    return (sym - skew) / r


# ------------------------------------------------------------------------------------------ rotation null
class RotationNull(NamedTuple):
    """Moments of ``s(O M)`` under Haar-random orthogonal ``O`` (floats, or arrays over a batch)."""

    mean: np.ndarray | float  # 1/d
    variance: np.ndarray | float  # (2d² + 2d + 2 − 6dρ)/(d²(d−1)(d+2))
    rho: np.ndarray | float  # ‖MᵀM‖²/‖M‖⁴ in [1/rank, 1]


def _check_rho(rho, rank: int) -> np.ndarray:
    """``rho`` as float64, each value in [1/rank, 1] (ρ = ‖MᵀM‖²/‖M‖⁴ = Σσ⁴/(Σσ²)² for a matrix of that rank)."""
    try:
        values = np.asarray(rho, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise ValueError(f"`rho` must be a number or an array of numbers; got {rho!r:.80}.") from e
    tol = 1e-12
    bad = ~np.isfinite(values) | (values < 1.0 / rank - tol) | (values > 1 + tol)
    if np.any(bad):
        first = values.reshape(-1)[int(np.argmax(bad.reshape(-1)))]
        raise ValueError(f"`rho` must lie in [1/{rank}, 1] (ρ = ‖MᵀM‖²/‖M‖⁴ is 1 for rank one and 1/rank for equal "
                         f"singular values); got {first!r}. Compute it with rotation_null_moments.")
    return values


def rotation_null_variance(d: int, rho):
    """``Var s(O M) = (2d² + 2d + 2 − 6dρ)/(d²(d − 1)(d + 2))`` for ``ρ = ‖MᵀM‖²/‖M‖⁴``, which lies in [1/d, 1]
    (values outside are refused). Chapter 6."""
    d = _check_int(d, "d", 2)
    rho = _check_rho(rho, d)
    return (2.0 * d * d + 2.0 * d + 2.0 - 6.0 * d * np.asarray(rho, dtype=np.float64)) / (d * d * (d - 1.0) * (d + 2.0))


def rotation_null_moments(M: ArrayLike) -> RotationNull:
    """Rotation-null moments of ``s(O M)`` for a fixed ``M`` (..., d, d). Chapter 6."""
    arr = to_float64(M, "M")
    check_square(arr, "M")
    gram = np.swapaxes(arr, -1, -2) @ arr
    return _rotation_null(arr.shape[-1], np.einsum("...ij,...ij->...", gram, gram),
                          np.einsum("...ij,...ij->...", arr, arr))


def rotation_null_moments_factored(A: ArrayLike, B: ArrayLike) -> RotationNull:
    """Rotation-null moments for ``M = A Bᵀ``, A and B (..., d, r), from r × r matrices only. Chapter 6.

    ``‖M‖² = tr(G_A G_B)`` and ``‖MᵀM‖² = tr((G_A G_B)²)`` with ``G_A = AᵀA``, ``G_B = BᵀB``.
    """
    a, b = to_float64(A, "A"), to_float64(B, "B")
    check_factors(a, b)
    prod = (np.swapaxes(a, -1, -2) @ a) @ (np.swapaxes(b, -1, -2) @ b)
    return _rotation_null(a.shape[-2], np.einsum("...ij,...ji->...", prod, prod), np.trace(prod, axis1=-2, axis2=-1))


def _rotation_null(d: int, gram_sq: np.ndarray, total: np.ndarray) -> RotationNull:
    if np.any(np.asarray(total) <= 0):
        raise ValueError("the matrix is zero: its symmetry score and rotation null are undefined.")
    rho = np.asarray(gram_sq / total ** 2, dtype=np.float64)
    var = rotation_null_variance(d, rho)
    def out(v):
        return float(v) if np.ndim(v) == 0 else np.asarray(v)

    return RotationNull(out(np.full_like(rho, 1.0 / d)), out(var), out(rho))


@small_problems
def rotation_null_samples(A: ArrayLike, B: ArrayLike, n_samples: int, seed: int = 0, num_std: float = 2.0,
                          two_sided: bool = False) -> pd.DataFrame:
    """Scores of ``n_samples`` rotated copies ``O A Bᵀ`` (or ``O₁ A Bᵀ O₂ᵀ``) of ``M = A Bᵀ``, A, B (d, r).

    ``O A`` has the law of ``F Σ_A V_Aᵀ`` with F a uniformly random d × r orthonormal frame (the polar factor of a
    Gaussian matrix) and ``A = U_A Σ_A V_Aᵀ``: cost O(d r²) per sample, never a d × d rotation. The symmetry
    score has the same law one- and two-sided; the directionality score is symmetric about 0 only two-sided.
    Returns columns ``sample, symmetry, directionality``. Chapter 6.
    """
    a, b = to_float64(A, "A"), to_float64(B, "B")
    check_factors(a, b)
    if a.ndim != 2:
        raise ValueError(f"`A` and `B` must be single (d, r) matrices; got shape {a.shape}.")
    n_samples = _check_int(n_samples, "n_samples", 1)
    rng = np.random.default_rng(seed)
    _, sig_a, vt_a = np.linalg.svd(a, full_matrices=False)
    core_a = sig_a[:, None] * vt_a
    if two_sided:
        _, sig_b, vt_b = np.linalg.svd(b, full_matrices=False)
        core_b = sig_b[:, None] * vt_b
    sym, direc = [], []
    for start in range(0, n_samples, 64):
        n = min(64, n_samples - start)
        rot_a = random_frames(rng, n, a.shape[0], core_a.shape[0]) @ core_a
        rot_b = random_frames(rng, n, b.shape[0], core_b.shape[0]) @ core_b if two_sided else \
            np.broadcast_to(b, (n, *b.shape)).copy()
        s = scores_factored(rot_a, rot_b, num_std=num_std)
        sym.append(np.atleast_1d(s.symmetry))
        direc.append(np.atleast_1d(s.directionality))
    return pd.DataFrame({"sample": np.arange(n_samples), "symmetry": np.concatenate(sym),
                         "directionality": np.concatenate(direc)})


def random_frames(rng: np.random.Generator, n: int, d: int, k: int) -> np.ndarray:
    """``n`` Haar-random d × k orthonormal frames: the polar factor ``Z (ZᵀZ)^{-1/2}`` of a Gaussian d × k matrix Z
    (its law is invariant under left rotations, hence uniform). Only k × k eigendecompositions, no QR."""
    z = rng.standard_normal((n, d, k))
    lam, vec = np.linalg.eigh(np.swapaxes(z, -1, -2) @ z)
    return z @ ((vec / np.sqrt(lam)[..., None, :]) @ np.swapaxes(vec, -1, -2))


@small_problems
def rotation_z_scores(model, per: str = "layer") -> pd.DataFrame:
    """Rotation-null z-scores ``(s − 1/d)/sd`` of every layer (``per="layer"``), head (``"head"``) or both
    (``"both"``; layer rows have ``head`` = <NA>).

    ``model`` is a :class:`qkgeometry.QKModel` (or anything :func:`qkgeometry.load_qk` accepts). Columns:
    ``model, family, component, layer, head, d_model, rank, symmetry, null_mean, null_sd, rho, z``. Chapter 6.
    """
    rows = []
    with opened(model) as qk:
        for f in iter_factors(qk, per):
            s = scores_factored(f.a, f.b)
            null = rotation_null_moments_factored(f.a, f.b)
            sd = math.sqrt(null.variance)
            rows.append({"model": qk.name, "family": qk.family, "component": f.component, "layer": f.layer,
                         "head": pd.NA if f.head is None else f.head, "d_model": f.a.shape[0],
                         "rank": f.a.shape[1], "symmetry": float(s.symmetry), "null_mean": null.mean,
                         "null_sd": sd, "rho": null.rho, "z": (float(s.symmetry) - null.mean) / sd})
    frame = pd.DataFrame(rows)
    frame["head"] = frame["head"].astype("Int64")
    return frame


# -------------------------------------------------------------------------------------- directionality
def max_z_score(n: int) -> float:
    """Largest possible ``(x_i − mean)/std`` over n numbers with the unbiased std (ddof = 1): ``(n − 1)/√n``.

    Attained when one value differs and the other n − 1 are equal (Samuelson's inequality). Chapter 6.
    """
    n = _check_int(n, "n", 2)
    return (n - 1) / math.sqrt(n)


def directionality_is_identically_zero(d: int, num_std: float = 2.0) -> bool:
    """True when ``d(M) = 0`` for *every* d × d matrix: no norm can exceed mean + num_std·std, i.e.
    ``(d − 1)/√d ≤ num_std``. With num_std = 2 that is d ≤ 5. Chapter 6."""
    return max_z_score(d) <= num_std


def directionality_null_samples(d: int, r: int | None = None, n_samples: int = 2000, seed: int = 0,
                                num_std: float = 2.0) -> np.ndarray:
    """Directionality scores of ``n_samples`` null matrices: i.i.d. Gaussian d × d (``r=None``) or ``A Bᵀ`` with
    A, B (d, r) i.i.d. Gaussian. Cached in memory (same arguments, same array, computed once). Chapter 6."""
    d, n_samples = _check_int(d, "d", 2), _check_int(n_samples, "n_samples", 1)
    if r is not None:
        r = _check_int(r, "r", 1)
    out = _directionality_samples(d, r, n_samples, int(seed), float(num_std))
    return out.copy()


@functools.lru_cache(maxsize=256)
def _directionality_samples(d: int, r: int | None, n_samples: int, seed: int, num_std: float) -> np.ndarray:
    from ..scores import directionality_score

    rng = np.random.default_rng([seed, d, 0 if r is None else r])
    chunk = max(1, min(n_samples, 2 ** 22 // (d * (d if r is None else 2 * r))))
    parts = []
    for start in range(0, n_samples, chunk):
        n = min(chunk, n_samples - start)
        if r is None:
            parts.append(np.atleast_1d(directionality_score(rng.standard_normal((n, d, d)), num_std=num_std)))
        else:
            a, b = rng.standard_normal((n, d, r)), rng.standard_normal((n, d, r))
            parts.append(np.atleast_1d(scores_factored(a, b, num_std=num_std).directionality))
    return np.concatenate(parts)


def _levels(q) -> np.ndarray:
    """Quantile levels ``q`` as a 1-D float64 array, each in [0, 1]."""
    try:
        levels = np.atleast_1d(np.asarray(q, dtype=np.float64))
    except (TypeError, ValueError) as e:
        raise ValueError(f"`q` must be quantile levels in [0, 1]; got {q!r:.80}.") from e
    if levels.ndim != 1 or not np.all(np.isfinite(levels) & (levels >= 0) & (levels <= 1)):
        raise ValueError(f"`q` must hold quantile levels in [0, 1] (e.g. 0.05, 0.5, 0.95); got {q!r:.80}.")
    return levels


def directionality_null_quantiles(d: int, r: int | None = None, q=DEFAULT_QUANTILES, n_samples: int = 2000,
                                  seed: int = 0, num_std: float = 2.0) -> pd.Series:
    """Simulated quantiles of the null directionality score (index: the levels ``q``). Chapter 6.

    The law is symmetric about 0, so the estimate is symmetrised (the samples and their negatives are pooled),
    which halves the Monte Carlo variance of the centre. For d ≤ 5 (num_std = 2) every quantile is exactly 0. With
    the default settings, shapes and levels of the shipped table are read from it (the same numbers, no simulation).
    """
    levels = _levels(q)
    if directionality_is_identically_zero(d, num_std):
        return pd.Series(np.zeros(len(levels)), index=levels, name="directionality")
    if n_samples == TABLE_SAMPLES and seed == 0 and num_std == 2.0:  # the shipped table holds these exact numbers
        table = directionality_quantile_table()
        row = table[(table["d"] == d) & (table["r"] == (0 if r is None else r))]
        columns = [f"q{level:g}" for level in levels]
        if len(row) == 1 and all(c in table.columns for c in columns):
            return pd.Series(row[columns].to_numpy()[0], index=levels, name="directionality")
    samples = directionality_null_samples(d, r, n_samples, seed, num_std)
    pooled = np.concatenate([samples, -samples])
    return pd.Series(np.quantile(pooled, levels) + 0.0, index=levels, name="directionality")


def symmetry_null_quantiles(d: int, r: int | None = None, q=DEFAULT_QUANTILES, n_samples: int = 4000,
                            seed: int = 0) -> pd.Series:
    """Quantiles of the null symmetry score: exact (Beta) for the Gaussian d × d matrix (``r=None``) and for
    rank one; simulated (cached) for other r, where no closed-form law is known. ``q``: levels in [0, 1]. Chapter 6."""
    levels = _levels(q)
    if r is None:
        values = gaussian_symmetry_law(d).ppf(levels)
    elif r == 1:
        values = rank_one_symmetry_law(d).ppf(levels)
    else:
        values = np.quantile(_symmetry_samples(_check_int(d, "d", 2), _check_int(r, "r", 1), n_samples, seed),
                             levels)
    return pd.Series(values, index=levels, name="symmetry")


@functools.lru_cache(maxsize=128)
def _symmetry_samples(d: int, r: int, n_samples: int, seed: int) -> np.ndarray:
    from ..scores import symmetry_score_factored

    rng = np.random.default_rng([seed, d, r, 1])
    chunk = max(1, min(n_samples, 2 ** 22 // (2 * d * r)))
    return np.concatenate([np.atleast_1d(symmetry_score_factored(rng.standard_normal((n, d, r)),
                                                                 rng.standard_normal((n, d, r))))
                           for n in (min(chunk, n_samples - s) for s in range(0, n_samples, chunk))])


def directionality_quantile_table(ds=None, rs=None, q=(0.025, 0.05, 0.25, 0.5, 0.75, 0.95, 0.975),
                                  n_samples: int = TABLE_SAMPLES, seed: int = 0, num_std: float = 2.0,
                                  shipped: bool = True) -> pd.DataFrame:
    """Null directionality quantiles and atoms over a grid of (d, r). Chapter 6.

    One row per (d, r) with r ≤ d; ``r = 0`` means the i.i.d. Gaussian d × d matrix. Columns: ``d, r, n_samples,
    sd, p_zero, p_plus_one, p_minus_one`` (the atoms: fractions of samples exactly at 0, +1, −1) and one column
    ``q<level>`` per quantile (symmetrised as in :func:`directionality_null_quantiles`).

    With ``shipped=True`` and the default grid and settings, the table is read from the package data (computed by
    this same function with ``shipped=False``); any other request is simulated (and cached in memory).
    """
    default = ds is None and rs is None and n_samples == TABLE_SAMPLES and seed == 0 and num_std == 2.0 \
        and tuple(q) == (0.025, 0.05, 0.25, 0.5, 0.75, 0.95, 0.975)
    if shipped and default:
        with resources.files("qkgeometry").joinpath("data", _TABLE_FILE).open() as f:
            return pd.read_csv(f)
    ds = TABLE_DS if ds is None else ds
    rs = TABLE_RS if rs is None else rs
    rows = []
    for d in ds:
        for r in rs:
            if r > d:
                continue
            x = directionality_null_samples(d, None if r == 0 else r, n_samples, seed, num_std)
            pooled = np.concatenate([x, -x])
            row = {"d": d, "r": r, "n_samples": n_samples, "sd": float(np.sqrt(np.mean(x ** 2))),
                   "p_zero": float(np.mean(x == 0)), "p_plus_one": float(np.mean(x == 1)),
                   "p_minus_one": float(np.mean(x == -1))}
            row.update({f"q{level:g}": float(np.quantile(pooled, level)) + 0.0 for level in q})  # no -0
            rows.append(row)
    return pd.DataFrame(rows)


def chance_line(z: np.ndarray, threshold: float = 3.0) -> str:
    """How far trained layers sit from chance, in one plain sentence: how many layer z-scores against the rotation
    null (:func:`rotation_z_scores`) lie above ``threshold`` (more symmetric than chance), how many below
    −``threshold`` (less symmetric than chance), and the lowest one. Chapter 6.

    >>> chance_line(np.array([12.0, 30.5, 8.2]))
    'every one of the 3 trained layers is more symmetric than random rotations of its own spectrum make it (z above 3; the lowest is 8.2)'
    >>> chance_line(np.array([12.0, 1.5]))
    '1 of the 2 trained layers is more symmetric than random rotations of its own spectrum make it (z above 3); the other is within chance (its z is 1.5)'
    >>> chance_line(np.array([12.0, 9.0, 1.5, -7.6]))
    '2 of the 4 trained layers are more symmetric than random rotations of their own spectra make them (z above 3); of the other 2, 1 is less symmetric than chance (z below −3; the lowest is −7.6)'
    """
    from ..formatting import format_number

    z = np.asarray(z, dtype=float)
    z = z[np.isfinite(z)]
    if not len(z):
        raise ValueError("z: needs at least one finite layer z-score.")
    n, above, below = len(z), int((z > threshold).sum()), int((z < -threshold).sum())
    cut, low = format_number(threshold, decimals=0), format_number(float(z.min()), decimals=1)
    if above == n:
        return (f"every one of the {n} trained layers is more symmetric than random rotations of its own spectrum "
                f"make it (z above {cut}; the lowest is {low})")
    one = above == 1
    head = (f"{above} of the {n} trained layers {'is' if one else 'are'} more symmetric than random rotations of "
            f"{'its own spectrum make it' if one else 'their own spectra make them'} (z above {cut})")
    rest = n - above
    if not below:
        return (head + f"; the other {'is' if rest == 1 else f'{rest} are'} within chance "
                f"({'its z is' if rest == 1 else 'the lowest z is'} {low})")
    return (head + f"; of the other {rest}, {below} {'is' if below == 1 else 'are'} less symmetric than chance "
            f"(z below {format_number(-threshold, decimals=0)}; the lowest is {low})")
    return (f"{above} of the {len(z)} trained layers {'is' if above == 1 else 'are'} more symmetric than random "
            f"rotations of its own spectrum make it by more than z = {format_number(threshold, decimals=0)} "
            f"(the lowest z is {low})")


#: The shapes chapter 6 checks its closed forms on: Gaussian d × d, and random A Bᵀ of rank r (d, r).
GAUSSIAN_CHECK_DS = (8, 32)
LOWRANK_CHECK_SHAPES = ((16, 1), (8, 3), (16, 4), (64, 8), (384, 32))


def _check_row(law: str, d: int, r: int, x: np.ndarray, mean: float, var: float) -> dict:
    n = len(x)
    se_mean = x.std(ddof=1) / np.sqrt(n)
    se_var = ((x - x.mean()) ** 2).std(ddof=1) / np.sqrt(n)
    return {"null": law, "d": d, "r": r, "MC mean": x.mean(), "exact mean": mean, "MC variance": x.var(ddof=1),
            "formula variance": var, "mean gap (SE)": (x.mean() - mean) / se_mean,
            "variance gap (SE)": (x.var(ddof=1) - var) / se_var, "variance SE": se_var}


def null_law_checks(n_draws: int, seed: int = 0, gaussian_ds=GAUSSIAN_CHECK_DS, lowrank_shapes=LOWRANK_CHECK_SHAPES,
                    chunk: int = 500) -> tuple[pd.DataFrame, dict]:
    """The closed forms of this module against Monte Carlo. Chapter 6.

    For Gaussian d × d matrices, the exact mean and variance of the symmetry score
    (:func:`gaussian_symmetry_moments`); for random A Bᵀ with A, B of shape (d, r), i.i.d. N(0, 1), the exact mean
    1/d and :func:`lowrank_symmetry_variance`, once with E ρ estimated from the same draws and once with the ratio of
    means. ``n_draws`` matrices per shape, drawn ``chunk`` at a time from one generator seeded by ``seed`` (Gaussian
    shapes first, in order). Returns ``(checks, samples)``: one row per check with both moments and their gaps in
    standard errors of the Monte Carlo, and the drawn scores keyed ``("gaussian", d)`` or ``("lowrank", d, r)``.

    >>> checks, samples = null_law_checks(400, gaussian_ds=(8,), lowrank_shapes=((16, 2),))
    >>> list(checks["null"]), sorted(samples)
    (['Gaussian d x d', 'A B^T, E rho from the draws', 'A B^T, ratio of means'], [('gaussian', 8), ('lowrank', 16, 2)])
    >>> bool((checks["mean gap (SE)"].abs() < 5).all())
    True
    """
    n_draws = _check_int(n_draws, "n_draws", 2)
    chunk = _check_int(chunk, "chunk", 1)
    rng = np.random.default_rng(seed)
    samples: dict = {}
    rows = []
    for d in gaussian_ds:
        d = _check_int(d, "gaussian_ds", 2)
        x = np.concatenate([symmetry_score(rng.standard_normal((min(chunk, n_draws - i), d, d)))
                            for i in range(0, n_draws, chunk)])
        samples[("gaussian", d)] = x
        rows.append(_check_row("Gaussian d x d", d, d, x, *gaussian_symmetry_moments(d)))
    for d, r in lowrank_shapes:
        d, r = _check_int(d, "lowrank_shapes", 2), _check_int(r, "lowrank_shapes", 1)
        s, rho = [], []
        for start in range(0, n_draws, chunk):
            m = min(chunk, n_draws - start)
            a, b = rng.standard_normal((m, d, r)), rng.standard_normal((m, d, r))
            s.append(symmetry_score_factored(a, b))
            rho.append(rotation_null_moments_factored(a, b).rho)
        x, rho_all = np.concatenate(s), np.concatenate(rho)
        samples[("lowrank", d, r)] = x
        rows.append(_check_row("A B^T, E rho from the draws", d, r, x, 1 / d,
                               lowrank_symmetry_variance(d, r, rho_all.mean())))
        rows.append(_check_row("A B^T, ratio of means", d, r, x, 1 / d, lowrank_symmetry_variance(d, r)))
    return pd.DataFrame(rows), samples
