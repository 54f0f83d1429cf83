"""Where to compute, in one place.

* :func:`default_device` — the GPU when the runtime has one (a Colab GPU runtime), else the CPU.
  ``QKGEOMETRY_DEVICE`` overrides the choice (``cpu``, ``cuda``, ``cuda:N``), e.g. to keep a run on the CPU for
  bitwise-reproducible results. Chapter 5's training uses it.
* :func:`resolve_device` — a device that was asked for (``device=`` of the scores and the loader), checked:
  scoring stays on the CPU unless a device is passed.

torch is whatever the environment has (Colab's own build on Colab), imported only when a device is asked for.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["default_device", "resolve_device"]


def default_device(local_rank: int = 0) -> str:
    """``"cuda:<local_rank>"`` when torch sees a CUDA GPU, else ``"cpu"``; ``QKGEOMETRY_DEVICE`` wins when set.

    Raises ValueError, in one line, for a ``QKGEOMETRY_DEVICE`` that is not cpu / cuda / cuda:N, or that asks for a
    GPU torch cannot see.
    """
    import torch

    wanted = os.environ.get("QKGEOMETRY_DEVICE", "").strip()
    if wanted:
        if wanted != "cpu" and not (wanted == "cuda" or (wanted.startswith("cuda:") and wanted[5:].isdigit())):
            raise ValueError(f"QKGEOMETRY_DEVICE: expected cpu, cuda or cuda:N; got {wanted!r}. Unset it to let "
                             "qkgeometry choose.")
        if wanted != "cpu" and not torch.cuda.is_available():
            raise ValueError(f"QKGEOMETRY_DEVICE={wanted} but torch sees no CUDA GPU here (torch "
                             f"{torch.__version__}); unset it or set it to cpu.")
        return wanted
    return f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu"


def resolve_device(device: Any = None, what: str = "`device`") -> Any:
    """``None`` → CPU; otherwise ``torch.device(device)``, refusing a CUDA (or other) device that is not available
    (the message names ``what``, the argument or command-line option).

    Every number is float64 on every device; on CPU the result is the same as with the default. (This imports
    torch: the default, numpy path never calls it.)
    """
    import torch

    if device is None:
        return torch.device("cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise ValueError(f"{what} must be 'cpu', 'cuda', 'cuda:N' or a torch.device; got {device!r}.") from e
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            cpu = f"{what} cpu" if what.startswith("-") else "device='cpu'"  # an option, or an argument
            raise ValueError(f"{what} {device!r} was requested but CUDA is not available here (torch "
                             f"{torch.__version__}, built {'with' if torch.version.cuda else 'without'} CUDA). "
                             f"Use {cpu} (the default), or run where `torch.cuda.is_available()` is True.")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f"{what} {device!r} does not exist: this machine has "
                             f"{torch.cuda.device_count()} CUDA device(s).")
    elif dev.type != "cpu":
        raise ValueError(f"{what} must be 'cpu' or a CUDA device ('cuda', 'cuda:N'); got {device!r}.")
    return dev
