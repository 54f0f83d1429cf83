"""Writes CTranslate2 ``model.bin`` files for the tests (the inverse of ``qkgeometry.readers.ctranslate2.CT2Index``)."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np

from qkgeometry.readers.ctranslate2 import DTYPE_IDS as _DTYPE_IDS


def write_ctranslate2(path: str | os.PathLike, spec: str, variables: dict[str, np.ndarray], revision: int = 1,
                      aliases: dict[str, str] | None = None, version: int = 6) -> Path:
    """Write ``variables`` (name -> float32 / float16 / int8 / int16 / int32 array) as a CTranslate2 model.bin.

    The inverse of :class:`CT2Index`, for building small test models; int8 weights need their ``<name>_scale``.
    """
    def string(text: str) -> bytes:
        data = text.encode("utf-8") + b"\0"
        return struct.pack("<H", len(data)) + data

    out = [struct.pack("<I", version), string(spec), struct.pack("<I", revision),
           struct.pack("<I", len(variables))]
    for name, array in variables.items():
        array = np.array(array, order="C", copy=True)  # not ascontiguousarray: it turns a scalar into shape (1,)
        if array.dtype not in _DTYPE_IDS:
            raise ValueError(f"variables[{name!r}] has dtype {array.dtype}; use one of "
                             f"{', '.join(str(d) for d in _DTYPE_IDS)}.")
        out += [string(name), struct.pack("<B", array.ndim), struct.pack(f"<{array.ndim}I", *array.shape),
                struct.pack("<BI", _DTYPE_IDS[array.dtype], array.nbytes), array.astype(array.dtype.newbyteorder("<"))
                .tobytes()]
    aliases = aliases or {}
    out.append(struct.pack("<I", len(aliases)))
    for alias, target in aliases.items():
        out += [string(alias), string(target)]
    path = Path(path)
    path.write_bytes(b"".join(out))
    return path
