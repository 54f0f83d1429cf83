"""The package's one home for array plumbing on both numpy arrays and torch tensors: which library an array
belongs to (:func:`is_torch_tensor`), its array API namespace (:func:`array_namespace`), the device it lives on
(:func:`device_of`), float64 in its own library and on its own device (:func:`as_float64`) or on the host
(:func:`host_float64`), the readers' one widening of stored floats to float32 (:func:`bfloat16_to_float32`,
:func:`widened`), and a few operations.

Weights read from files are numpy arrays (no torch import); weights of an in-memory torch model, or placed on a
torch device, are tensors. These helpers keep one code path for both, and never import torch for a numpy array.
Where to compute (the device) is :mod:`qkgeometry.devices`. A leaf: it imports nothing of the package, so the
registry and the model can use it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["array_namespace", "as_float64", "bfloat16_to_float32", "cast_like", "device_of", "einsum", "host_float64",
           "is_torch_tensor", "numel", "repeat_heads", "to_torch", "widened"]

#: numpy >= 2.1 is itself an array API namespace (``astype``, ``concat``, ``permute_dims``, ``std(correction=)``,
#: ``clip(min=)``): numpy arrays are computed with it directly, without the compatibility layer's import cost.
_NUMPY_IS_ARRAY_API = np.lib.NumpyVersion(np.__version__) >= "2.1.0"


def is_torch_tensor(x: Any) -> bool:
    """True for a ``torch.Tensor`` (checked without importing torch)."""
    return type(x).__module__.startswith("torch") and hasattr(x, "detach")


def device_of(x: Any) -> Any:
    """The device ``x`` lives on: a tensor's own, ``"cpu"`` for anything else."""
    return x.device if is_torch_tensor(x) else "cpu"


def array_namespace(*arrays: Any) -> Any:
    """The array API namespace of ``arrays``: ``numpy`` itself for numpy arrays (numpy >= 2.1), else
    ``array_api_compat``'s (torch tensors, older numpy). Never imports torch for numpy input."""
    if _NUMPY_IS_ARRAY_API and not any(is_torch_tensor(a) for a in arrays):
        return np
    from array_api_compat import array_namespace as compat

    return compat(*arrays)


def host_float64(x: Any) -> np.ndarray:
    """``x`` (a torch tensor on any device, with or without ``requires_grad``, or an array-like) as a float64 numpy
    array on the CPU (the same array when it already is one)."""
    if is_torch_tensor(x):
        import torch

        return x.detach().to("cpu", torch.float64).numpy()
    return np.asarray(x, dtype=np.float64)


def as_float64(x: Any) -> Any:
    """``x`` in float64, of its own library (the same object when it already is float64)."""
    if is_torch_tensor(x):
        import torch

        return x if x.dtype == torch.float64 else x.to(torch.float64)
    x = np.asarray(x)
    return x if x.dtype == np.float64 else x.astype(np.float64)


def cast_like(x: Any, like: Any) -> Any:
    """``x`` in the dtype (and library) of ``like``."""
    if is_torch_tensor(like):
        import torch

        return torch.as_tensor(x, device=like.device).to(like.dtype)
    return np.asarray(x, dtype=like.dtype)


def numel(x: Any) -> int:
    """Number of entries of an array or a tensor."""
    return int(np.prod(x.shape, dtype=np.int64))


def einsum(spec: str, *operands: Any) -> Any:
    """``numpy.einsum`` for arrays, ``torch.einsum`` for tensors."""
    if any(is_torch_tensor(o) for o in operands):
        import torch

        return torch.einsum(spec, *operands)
    return np.einsum(spec, *operands)


def repeat_heads(x: Any, repeats: int) -> Any:
    """Each entry of the first axis repeated ``repeats`` times in place (repeat, not tile)."""
    if is_torch_tensor(x):
        return x.repeat_interleave(repeats, dim=0)
    return np.repeat(x, repeats, axis=0)


def to_torch(x: Any, device: Any = None) -> Any:
    """``x`` as a torch tensor (zero-copy on the CPU for a numpy array), on ``device`` when one is given."""
    import torch

    if not is_torch_tensor(x):
        arr = np.asarray(x)
        if not arr.flags.writeable or any(step < 0 for step in arr.strides):
            arr = np.array(arr)  # torch wraps only writeable arrays with non-negative strides
        x = torch.from_numpy(arr)
    return x if device is None or x.device == device else x.to(device)


def bfloat16_to_float32(codes: np.ndarray) -> np.ndarray:
    """bfloat16 values given by their 16-bit codes (a uint16 array of either byte order, as a file stores them) as
    float32, exactly: a bfloat16 is the top half of the float32 with the same sign, exponent and leading mantissa
    bits. Every reader widens bfloat16 here (safetensors, CTranslate2, and ``ml_dtypes`` arrays through
    :func:`widened`)."""
    codes = np.asarray(codes)
    if codes.dtype.kind != "u" or codes.dtype.itemsize != 2:
        raise TypeError(f"codes: expected the uint16 codes of bfloat16 values, got {codes.dtype}.")
    out = np.empty(codes.shape, dtype=np.float32)
    bits = out.view(np.uint32)
    bits[...] = codes
    bits <<= 16
    return out


def widened(array: Any) -> np.ndarray:
    """A stored float array as the readers return it: float32 and float64 kept; float16 and the floats numpy holds
    only through ``ml_dtypes`` (bfloat16, float8) widened to float32, exactly (each is a subset of float32); other
    kinds (integers, booleans) kept."""
    array = np.asarray(array)
    if array.dtype in (np.float32, np.float64) or array.dtype.kind in "iub":
        return array
    if array.dtype.name == "bfloat16":
        return bfloat16_to_float32(array.view(np.uint16))
    if array.dtype.kind == "f" or array.dtype.type.__module__.startswith("ml_dtypes"):
        return array.astype(np.float32)
    return array

