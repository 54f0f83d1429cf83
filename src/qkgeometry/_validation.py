"""Input checks shared by the decomposition and the scores.

Every check raises with a message that names the argument, says what was wrong and says what to do.
Inputs are never modified: conversion always produces a new float64 array.
"""

from __future__ import annotations

from typing import Any

import numpy as np

ArrayLike = Any  # numpy.ndarray | torch.Tensor | nested sequences of real numbers


def to_float64(x: ArrayLike, name: str) -> np.ndarray:
    """Return ``x`` as a new float64 numpy array after checking its dtype and values.

    Accepts numpy arrays, torch tensors (any floating dtype, including bf16/fp16, any device) and nested
    sequences of floats. Integer, bool and complex inputs are refused: the scores are defined for real
    matrices, and an integer matrix is almost always a mistake (e.g. a token-id tensor).
    """
    if _is_torch_tensor(x):
        import torch

        if x.dtype == torch.bool or not (x.is_floating_point()):
            kind = "complex" if x.is_complex() else ("bool" if x.dtype == torch.bool else "integer")
            raise TypeError(
                f"`{name}` has {kind} dtype {x.dtype}; the scores need a real floating-point matrix. "
                f"Convert it first, e.g. `{name}.double()`."
            )
        if x.device.type == "meta":
            raise ValueError(f"`{name}` is a meta-device tensor (a shape without values, e.g. from "
                             "init_empty_weights or device_map); load the real weights first.")
        arr = x.detach().to(device="cpu", dtype=torch.float64).numpy()
    else:
        arr = np.asarray(x)
        if arr.dtype == object:
            raise TypeError(f"`{name}` could not be read as a numeric array (got dtype=object); pass a "
                            "numpy array or torch tensor of floats.")
        if arr.dtype.kind != "f":
            kind = {"i": "integer", "u": "unsigned integer", "b": "bool", "c": "complex"}.get(
                arr.dtype.kind, f"non-float ({arr.dtype})")
            raise TypeError(
                f"`{name}` has {kind} dtype {arr.dtype}; the scores need a real floating-point matrix. "
                f"Convert it first, e.g. `{name}.astype(float)`."
            )
        arr = arr.astype(np.float64, copy=True)
    if not np.isfinite(arr).all():
        n_bad = int((~np.isfinite(arr)).sum())
        raise ValueError(
            f"`{name}` contains {n_bad} NaN or Inf entries; the scores are undefined. Check the weights "
            "(a diverged run or a failed dequantisation) or drop the affected heads."
        )
    return arr


#: Entries whose largest magnitude lies outside [2**-64, 2**64] are rescaled before the scores square them.
_SAFE_EXPONENT = 64


def rescale_extremes(arr: np.ndarray, axes: tuple[int, int] = (-2, -1)) -> np.ndarray:
    """``arr`` with each matrix (over ``axes``) multiplied by a power of two when its entries are huge or tiny.

    Both scores are invariant to multiplying M by a positive number (and a factored ``M = A Bᵀ`` to scaling A and
    B separately), but their formulas square entries, and the factored ones multiply four of them: entries near
    1e155 overflow to inf (the score becomes NaN) and entries near 1e-160 underflow to 0 (the matrix looks
    all-zero). Matrices whose largest magnitude is outside [2⁻⁶⁴, 2⁶⁴] are scaled so that it is about 1; a power
    of two is exact in floating point, and matrices already in range are returned untouched (same object).
    """
    if arr.size == 0:
        return arr
    peak = np.maximum(arr.max(axis=axes, keepdims=True), -arr.min(axis=axes, keepdims=True))
    exponent = np.frexp(peak)[1]  # peak = m · 2**exponent with 0.5 <= m < 1 (exponent 0 for an all-zero matrix)
    if np.all(np.abs(exponent) <= _SAFE_EXPONENT):
        return arr
    shift = np.where(peak > 0, -exponent, 0)
    return np.ldexp(arr, shift)


def check_num_std(num_std: Any) -> float:
    """``num_std`` as a float: any real number (Python or numpy scalar), finite and >= 0; bools are refused."""
    import numbers

    if isinstance(num_std, (bool, np.bool_)) or not isinstance(num_std, numbers.Real) \
            or not np.isfinite(float(num_std)) or num_std < 0:
        raise ValueError(
            f"`num_std` must be a finite number >= 0 (the outlier threshold is mean + num_std * std); "
            f"got {num_std!r}. The paper uses num_std=2."
        )
    return float(num_std)


def check_square(M: np.ndarray, name: str) -> None:
    """Require shape (..., d, d) with d >= 2."""
    if M.ndim < 2:
        raise ValueError(
            f"`{name}` must have at least 2 dimensions (..., d, d); got shape {tuple(M.shape)}. "
            "Pass a matrix, or a stack of matrices with the batch axes first."
        )
    if M.shape[-1] != M.shape[-2]:
        raise ValueError(
            f"`{name}` must be square in its last two axes (..., d, d); got shape {tuple(M.shape)}. "
            "W_qk = W_Q W_K^T is d x d: if you have the factors W_Q, W_K of shape (d, d_h), use the "
            "`*_factored(A, B)` functions instead."
        )
    if M.shape[-1] < 2:
        raise ValueError(
            f"`{name}` has d={M.shape[-1]}; the scores need d >= 2 (a 1 x 1 matrix is always symmetric and has "
            "no rows or columns to compare)."
        )


def check_factors(A: np.ndarray, B: np.ndarray) -> None:
    """Require A and B of the same shape (..., d, r) with d >= 2 and r >= 1."""
    for arr, name in ((A, "A"), (B, "B")):
        if arr.ndim < 2:
            raise ValueError(
                f"`{name}` must have at least 2 dimensions (..., d, r); got shape {tuple(arr.shape)}. "
                "The factored scores take M = A @ B^T with A, B of shape (d, r)."
            )
    if A.shape != B.shape:
        raise ValueError(
            f"`A` and `B` must have the same shape (..., d, r) for M = A @ B^T; got A{tuple(A.shape)} and "
            f"B{tuple(B.shape)}. For one head pass A = W_Q and B = W_K, both of shape (d_model, head_dim); "
            "for grouped-query attention first expand or sum the KV groups (see QKLayer.factors)."
        )
    if A.shape[-2] < 2:
        raise ValueError(f"`A` and `B` have d={A.shape[-2]}; the scores need d >= 2.")
    if A.shape[-1] < 1:
        raise ValueError("`A` and `B` have r=0 columns; M = A @ B^T would be the zero matrix.")


def check_nonzero(sq_norm: np.ndarray, name: str) -> None:
    """Refuse all-zero matrices, for which the symmetry score is 0/0."""
    zero = sq_norm <= 0.0
    if np.any(zero):
        where = "" if sq_norm.ndim == 0 else f" (at batch index {tuple(int(i) for i in np.argwhere(zero)[0])})"
        raise ValueError(
            f"`{name}` is an all-zero matrix{where}: ||M||_F = 0, so the symmetry score is undefined. "
            "Check that the weights were loaded (a zero matrix often means a missing tensor), or drop it."
        )


def _is_torch_tensor(x: Any) -> bool:
    mod = type(x).__module__
    return mod.startswith("torch") and hasattr(x, "detach")
