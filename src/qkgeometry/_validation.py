"""Input checks and the exact rescaling shared by the decomposition, the scores and the analyses.

Every check raises with a message that names the argument, says what was wrong and says what to do.
Inputs are never modified: conversion always produces a new float64 array.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._arrays import array_namespace, host_float64, is_torch_tensor

ArrayLike = Any  # numpy.ndarray | torch.Tensor | nested sequences of real numbers

def check_real_floating(x: Any, name: str) -> None:
    """Refuse integer, bool, complex and object inputs (numpy arrays or torch tensors) with a message naming ``name``.

    The scores are defined for real matrices, and an integer matrix is almost always a mistake (e.g. a token-id
    tensor). Meta-device tensors (shapes without values) and sparse tensors are refused too.
    """
    if is_torch_tensor(x):
        import torch

        if x.layout != torch.strided:
            raise TypeError(f"`{name}` is a sparse torch tensor (layout {x.layout}); the scores read dense matrices. "
                            f"Pass `{name}.to_dense()`.")
        if x.dtype == torch.bool or not x.is_floating_point():
            kind = "complex" if x.is_complex() else ("bool" if x.dtype == torch.bool else "integer")
            raise TypeError(
                f"`{name}` has {kind} dtype {x.dtype}; the scores need a real floating-point matrix. "
                f"Convert it first, e.g. `{name}.double()`."
            )
        if x.device.type == "meta":
            raise ValueError(f"`{name}` is a meta-device tensor (a shape without values, e.g. from "
                             "init_empty_weights or device_map); load the real weights first.")
        return
    if x.dtype == object:
        raise TypeError(f"`{name}` could not be read as a numeric array (got dtype=object); pass a "
                        "numpy array or torch tensor of floats.")
    if x.dtype.kind != "f":
        kind = {"i": "integer", "u": "unsigned integer", "b": "bool", "c": "complex"}.get(
            x.dtype.kind, f"non-float ({x.dtype})")
        raise TypeError(
            f"`{name}` has {kind} dtype {x.dtype}; the scores need a real floating-point matrix. "
            f"Convert it first, e.g. `{name}.astype(float)`."
        )


def check_finite(x: Any, name: str) -> None:
    """Refuse NaN and Inf entries of ``x`` (a numpy array or a torch tensor on any device)."""
    xp = array_namespace(x)
    bad = ~xp.isfinite(x)
    if bool(xp.any(bad)):
        raise ValueError(
            f"`{name}` contains {int(xp.sum(xp.astype(bad, xp.int64)))} NaN or Inf entries; the scores are "
            "undefined. Check the weights (a diverged run or a failed dequantisation) or drop the affected heads."
        )


def as_array(x: ArrayLike, name: str) -> np.ndarray:
    """``np.asarray(x)``, refusing a ragged nested sequence (rows of different lengths) with a message naming
    ``name`` instead of NumPy's "inhomogeneous shape" error, and a SciPy sparse matrix (which NumPy would wrap as
    one object)."""
    if hasattr(x, "nnz") and hasattr(x, "toarray"):
        raise TypeError(f"`{name}` is a SciPy sparse matrix ({type(x).__name__}); the scores read dense matrices. "
                        f"Pass `{name}.toarray()`.")
    try:
        return np.asarray(x)
    except (ValueError, TypeError) as e:
        raise ValueError(f"`{name}` could not be read as an array: it is a ragged nested sequence (rows of different "
                         "lengths) or holds non-numbers; pass a rectangular numpy array or torch tensor of floats."
                         ) from e


def to_float64(x: ArrayLike, name: str) -> np.ndarray:
    """Return ``x`` as a new float64 numpy array on the CPU after checking its dtype and values.

    Accepts numpy arrays, torch tensors (any floating dtype, including bf16/fp16, any device, with or without
    ``requires_grad``) and nested sequences of floats; refuses what :func:`check_real_floating` refuses and
    non-finite entries.
    """
    if is_torch_tensor(x):
        check_real_floating(x, name)
        arr = host_float64(x)
    else:
        arr = as_array(x, name)
        check_real_floating(arr, name)
        arr = arr.astype(np.float64, copy=True)
    check_finite(arr, name)
    return arr


#: Entries whose largest magnitude lies outside [2**-64, 2**64] are rescaled before the scores square them.
SAFE_EXPONENT = 64


def rescale_extremes(x: Any, axes: tuple[int, ...] | None = (-2, -1)) -> Any:
    """``x`` with each matrix (over ``axes``; ``None``: the whole array) multiplied by a power of two when its
    entries are huge or tiny. ``x``: a numpy array or a torch tensor (any floating dtype, any device).

    Both scores are invariant to multiplying M by a positive number (and a factored ``M = A Bᵀ`` to scaling A and
    B separately), but their formulas square entries, and the factored ones multiply four of them: entries near
    1e155 overflow to inf (the score becomes NaN) and entries near 1e-160 underflow to 0 (the matrix looks
    all-zero). Matrices whose largest magnitude is outside [2⁻⁶⁴, 2⁶⁴] are scaled so that it is about 1 (and come
    back in float64); a power of two is exact in floating point, and when every matrix is already in range (or
    holds NaN/Inf, left for the finiteness check to name) ``x`` itself is returned (same object).
    """
    xp = array_namespace(x)
    if (x.numel() if is_torch_tensor(x) else x.size) == 0:
        return x
    peak = xp.astype(xp.maximum(xp.max(x, axis=axes, keepdims=True), -xp.min(x, axis=axes, keepdims=True)),
                     xp.float64)
    exponent = _frexp_exponent(peak)  # peak = m · 2**exponent with 0.5 <= m < 1 (0 for zero, NaN or Inf)
    shift = xp.where(xp.isfinite(peak) & (peak > 0), -exponent, xp.zeros_like(exponent))
    if not bool(xp.any(xp.abs(shift) > SAFE_EXPONENT)):
        return x
    half = shift // 2  # two steps: 2**shift alone can overflow (shift up to 1074) although x · 2**shift does not
    x64 = xp.astype(x, xp.float64)
    return (x64 * 2.0 ** xp.astype(half, xp.float64)) * 2.0 ** xp.astype(shift - half, xp.float64)


def _frexp_exponent(x: Any) -> Any:
    """The binary exponent e of ``x = m · 2**e`` (0.5 <= |m| < 1), as an int64 array of the same kind."""
    if is_torch_tensor(x):
        import torch

        return torch.frexp(x).exponent.to(torch.int64)
    return np.frexp(x)[1].astype(np.int64)


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
