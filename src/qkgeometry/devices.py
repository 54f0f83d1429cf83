"""Where to compute: the GPU when the runtime has one (a Colab GPU runtime), else the CPU.

``QKGEOMETRY_DEVICE`` overrides the choice (``cpu``, ``cuda``, ``cuda:N``), e.g. to keep a run on the CPU for
bitwise-reproducible results. torch is whatever the environment has (Colab's own build on Colab). Chapter 5's
training uses it; scoring stays on the CPU unless a device is passed.
"""

from __future__ import annotations

import os

__all__ = ["default_device"]


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
