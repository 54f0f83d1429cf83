"""The safetensors format, in one place, for a local file and a file on the Hub alike: its dtype tags, its header
rules, and how byte ranges of it are joined into reads.

A safetensors file is ``N`` (8 bytes, little-endian) + a JSON header of ``N`` bytes + the data. The data of every
tensor lies at ``8 + N + data_offsets``; the offsets of all tensors tile the data from 0 to its end with no gap and no
overlap, each tensor's byte count is ``numel · dtype size``, and the data ends the file (no trailing bytes). These
are the checks the ``safetensors`` library makes when it opens a file; :func:`parse_header` makes them on the
header bytes alone, so a header read by range request from the Hub gets the same checks as a local file, and the
shapes it declares are held to :mod:`qkgeometry.limits`.

Reads of a file join byte ranges that lie close together (:func:`join_ranges`): one more request costs about as
much time as reading a few kilobytes to a megabyte, so a short gap is read and dropped. Three gaps, one per kind of
read: :data:`RANGE_GAP` between the tensors of one layer, :data:`FUSED_ROW_GAP` between the Q/K rows of a fused QKV
weight (its V rows), :data:`TABLE_ROW_GAP` between the rows asked of a table (``read_tensors``).

>>> row_ranges([3, 4, 9], row_bytes=10, gap=0)
[(3, 5), (9, 10)]
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, TypeVar

from ..errors import LimitExceeded, SourceError
from ..limits import MAX_TENSOR_ELEMENTS, check_elements

__all__ = ["DTYPE_SIZES", "FLOAT_TAGS", "FUSED_ROW_GAP", "MAX_HEADER_BYTES", "RANGE_GAP", "SCALE_SUFFIXES",
           "TABLE_ROW_GAP", "WIDENED_TAGS", "check_header", "header_length", "join_ranges", "numpy_dtype",
           "parse_header", "returned_dtype", "row_pieces", "row_ranges"]

#: bytes per element of each safetensors dtype tag
DTYPE_SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "I64": 8, "I32": 4, "I16": 2,
               "I8": 1, "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1}
#: the tags of real-valued weights (the rest are integer codes, which need a scale to mean anything)
FLOAT_TAGS = frozenset({"F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2"})
#: the tags numpy has no type for: read from their bytes (``ml_dtypes``) and widened to float32, exactly
WIDENED_TAGS = frozenset({"BF16", "F8_E4M3", "F8_E5M2"})
#: tensors that say "the weight next to me is not the real weight, it needs this scale" (by name suffix)
SCALE_SUFFIXES = (".SCB", ".weight.SCB", ".weight_scale", ".weight_scale_inv", ".scales", ".weight.absmax")
#: the safetensors library refuses larger headers
MAX_HEADER_BYTES = 100_000_000

#: ranges of different tensors of one file closer than this are read in one request
RANGE_GAP = 4096
#: the Q/K row blocks of one fused QKV weight are read as one piece across V rows shorter than this: one more request
#: costs about as much time as reading 1 MiB on a typical link (50 ms at 20 MB/s), so skipping less saves nothing
FUSED_ROW_GAP = 2**20
#: rows asked of one table (an embedding) closer than this are read in one request
TABLE_ROW_GAP = 64 * 1024

_NUMPY = {"F64": "float64", "F32": "float32", "F16": "float16", "I64": "int64", "I32": "int32", "I16": "int16",
          "I8": "int8", "U64": "uint64", "U32": "uint32", "U16": "uint16", "U8": "uint8", "BOOL": "bool"}


def numpy_dtype(tag: str) -> Any:
    """The numpy dtype of the values stored under ``tag`` (``ml_dtypes``' for BF16 and F8); KeyError if unknown."""
    import numpy as np

    if tag in WIDENED_TAGS:
        import ml_dtypes

        return np.dtype({"BF16": ml_dtypes.bfloat16, "F8_E4M3": ml_dtypes.float8_e4m3fn,
                         "F8_E5M2": ml_dtypes.float8_e5m2}[tag])
    return np.dtype(_NUMPY[tag])


def returned_dtype(tag: str) -> str | None:
    """The dtype name the readers return a ``tag`` tensor as (the widened ones as float32), or None if unknown."""
    return "float32" if tag in WIDENED_TAGS else _NUMPY.get(tag)


T = TypeVar("T")


def join_ranges(pieces: Iterable[tuple[int, int, T]], gap: int) -> list[tuple[int, int, list[T]]]:
    """Byte ranges ``(start, end, member)`` sorted and joined where the next starts at most ``gap`` bytes after the
    last ends (overlaps join too): ``(start, end, members)`` per read."""
    out: list[tuple[int, int, list[T]]] = []
    for start, end, member in sorted(pieces, key=lambda p: (p[0], p[1])):
        if out and start - out[-1][1] <= gap:
            first, last, members = out[-1]
            out[-1] = (first, max(last, end), [*members, member])
        else:
            out.append((start, end, [member]))
    return out


def row_pieces(rows: list[tuple[int, int]], row_bytes: int, gap: int | None = None) -> tuple[tuple[int, int], ...]:
    """Byte pieces of a row-fused weight from its Q/K row ranges: rows times ``row_bytes``, joined across gaps of at
    most ``gap`` bytes (default :data:`FUSED_ROW_GAP`)."""
    gap = FUSED_ROW_GAP if gap is None else gap
    return tuple((a, b) for a, b, _ in join_ranges(((a * row_bytes, b * row_bytes, None) for a, b in rows), gap))


def row_ranges(indices: Iterable[int], row_bytes: int, gap: int = TABLE_ROW_GAP) -> list[tuple[int, int]]:
    """Runs of rows ``[first, end)`` to read: the unique ``indices``, joined where at most ``gap`` bytes
    (``row_bytes`` per row) lie between them."""
    joined = join_ranges(((i * row_bytes, (i + 1) * row_bytes, None) for i in set(indices)), gap)
    return [(a // row_bytes, b // row_bytes) for a, b, _ in joined] if row_bytes else \
        [(i, i + 1) for i in sorted(set(indices))]


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
