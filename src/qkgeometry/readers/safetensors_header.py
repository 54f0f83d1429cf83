"""The safetensors header rules, in one place, for a local file and a file on the Hub alike.

A safetensors file is ``N`` (8 bytes, little-endian) + a JSON header of ``N`` bytes + the data. The data of every
tensor lies at ``8 + N + data_offsets``; the offsets of all tensors tile the data from 0 to its end with no gap and no
overlap, each tensor's byte count is ``numel · dtype size``, and the data ends the file (no trailing bytes). These
are the checks the ``safetensors`` library makes when it opens a file; :func:`parse_header` makes them on the
header bytes alone, so a header read by range request from the Hub gets the same checks as a local file.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import LimitExceeded, SourceError
from ..limits import MAX_TENSOR_ELEMENTS, check_elements

__all__ = ["DTYPE_SIZES", "MAX_HEADER_BYTES", "check_header", "header_length", "parse_header"]

#: bytes per element of each safetensors dtype tag
DTYPE_SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "I64": 8, "I32": 4, "I16": 2,
               "I8": 1, "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1}
#: the safetensors library refuses larger headers
MAX_HEADER_BYTES = 100_000_000


def header_length(first8: bytes, file_size: int, where: str) -> int:
    """``N`` from the first 8 bytes of a file of ``file_size`` bytes; refuses a value the file cannot hold."""
    if len(first8) < 8 or file_size < 8:
        raise SourceError(f"{where} is too short to be a safetensors file ({file_size} bytes); it is truncated or "
                          "not a safetensors file.")
    n = int.from_bytes(first8[:8], "little")
    if n < 2 or n > MAX_HEADER_BYTES or 8 + n > file_size:
        raise SourceError(f"{where} says its safetensors header is {n} bytes long, which a file of {file_size} bytes "
                          "cannot hold; it is truncated or not a safetensors file.")
    return n


def parse_header(raw: bytes, file_size: int, where: str) -> dict[str, dict[str, Any]]:
    """The tensor entries (``name -> {"dtype", "shape", "data_offsets"}``) of the JSON header ``raw`` (the ``N``
    bytes after the length) of a file of ``file_size`` bytes, after :func:`check_header`."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise SourceError(f"{where}: its safetensors header is not valid JSON ({type(e).__name__}); the file is "
                          "corrupt or not a safetensors file.") from e
    if not isinstance(data, dict) or not raw.lstrip()[:1] == b"{":
        raise SourceError(f"{where}: its safetensors header is a JSON {type(data).__name__}, not an object of "
                          "tensors; the file is corrupt or not a safetensors file.")
    data.pop("__metadata__", None)
    check_header(data, 8 + len(raw), file_size, where)
    return data


def check_header(entries: dict[str, Any], data_start: int, file_size: int, where: str) -> None:
    """Every entry well formed (a known dtype, a shape of non-negative ints, two offsets whose span is the tensor's
    byte count), the entries tiling the data from ``data_start`` with no gap and no overlap, and the data ending
    exactly at ``file_size``. Raises one :class:`SourceError` naming the tensor and the rule it breaks."""
    spans = []
    for name, e in entries.items():
        ok = isinstance(e, dict) and e.get("dtype") in DTYPE_SIZES and isinstance(e.get("shape"), list) \
            and all(type(s) is int and s >= 0 for s in e["shape"]) and isinstance(e.get("data_offsets"), list) \
            and len(e["data_offsets"]) == 2 and all(type(o) is int and o >= 0 for o in e["data_offsets"])
        if not ok:
            raise SourceError(f"{where}: header entry {name!r} is not a tensor (it needs a known 'dtype', a 'shape' "
                              "of non-negative integers and two 'data_offsets'); the file is corrupt.")
        begin, end = e["data_offsets"]
        try:  # what a header declares is held to the same bounds whether it was read from a disk or the Hub
            nbytes = check_elements(e["shape"], MAX_TENSOR_ELEMENTS, f"{where}: tensor {name!r}") \
                * DTYPE_SIZES[e["dtype"]]
        except LimitExceeded as err:
            raise SourceError(str(err)) from err
        if end - begin != nbytes:
            raise SourceError(f"{where}: tensor {name!r} ({e['dtype']}, shape {tuple(e['shape'])}) needs {nbytes} "
                              f"bytes but its data_offsets [{begin}, {end}] span {end - begin}; the file is corrupt.")
        spans.append((begin, end, name))
    spans.sort()
    at = 0
    for begin, end, name in spans:
        if begin != at:
            what = "overlaps the tensor before it" if begin < at else "leaves a gap after the tensor before it"
            raise SourceError(f"{where}: tensor {name!r} (data_offsets [{begin}, {end}]) {what}; the file is corrupt "
                              "or was written by a broken tool.")
        at = end
    if data_start + at != file_size:
        more = "ends early" if data_start + at > file_size else f"has {file_size - data_start - at} trailing bytes"
        raise SourceError(f"{where}: the header places the data in bytes {data_start}-{data_start + at} but the file "
                          f"is {file_size} bytes long (it {more}); the file is truncated or corrupt.")
