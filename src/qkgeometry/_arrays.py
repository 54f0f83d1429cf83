"""The few array operations that the readers and the model need on both numpy arrays and torch tensors.

Weights read from files are numpy arrays (no torch import); weights of an in-memory torch model, or placed on a
torch device, are tensors. These helpers keep one code path for both, and never import torch for a numpy array.
A leaf: it imports nothing of the package, so the registry and the model can use it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["as_float64", "cast_like", "einsum", "is_torch_tensor", "numel", "repeat_heads", "to_torch"]


def is_torch_tensor(x: Any) -> bool:
    """True for a ``torch.Tensor`` (checked without importing torch)."""
    return type(x).__module__.startswith("torch") and hasattr(x, "detach")


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
