"""Named tensors beside Q and K (embeddings, norm gains), read from a safetensors model without loading it: a local
folder, an ``offline:`` alias that is one, or a Hub repo id, where only the bytes asked for are fetched by range
request (a few rows of a 50,000-token embedding table cost kilobytes, not the table's 50 MB).

"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .._arrays import widened
from ..errors import SourceError
from ..source_names import OFFLINE_PREFIX
from .safetensors_format import FLOAT_TAGS, TABLE_ROW_GAP, numpy_dtype, row_ranges

__all__ = ["read_tensors"]


def read_tensors(source: str, names: Sequence[str], rows: Mapping[str, Iterable[int]] | None = None, *,
                 revision: str | None = None, gap: int = TABLE_ROW_GAP) -> dict[str, np.ndarray]:
    """The tensors ``names`` of the safetensors model ``source`` as float32 arrays (float64 ones stay float64).

    ``rows`` maps a name to the row indices (along axis 0) wanted; that tensor is returned as
    ``(len(rows), *shape[1:])``, in the order given. ``source``: a model folder (config.json + ``*.safetensors``),
    an ``offline:`` alias of one, or a Hub id / ``hf://`` path (``revision`` picks the Hub revision). From the Hub
    only the asked-for bytes are fetched: one range request per run of rows closer than ``gap`` bytes.

    Raises SourceError naming the tensor when it is not in the model, and ValueError naming ``rows`` when an index
    is outside the tensor.
    """
    from . import hub

    names = list(dict.fromkeys(names))
    rows = {k: [int(i) for i in v] for k, v in (rows or {}).items()}
    extra = sorted(set(rows) - set(names))
    if extra:
        raise ValueError(f"`rows` names {extra[0]!r}, which is not in `names`; add it to `names` or drop it.")
    if isinstance(source, str) and source.startswith(OFFLINE_PREFIX):
        from ..catalogue.offline import offline_path

        source = str(offline_path(source.removeprefix(OFFLINE_PREFIX)))
    path = Path(str(source)).expanduser()
    if isinstance(source, str) and not path.is_dir() and hub.is_hub_source(source):
        from .hub import client

        repo_id, revision = hub.parse_hub_source(source, revision)
        try:
            return _from_hub(repo_id, revision, names, rows, gap)
        except (SourceError, ValueError):  # already one line (a tensor or row that is not there)
            raise
        except Exception as e:  # an HTTP answer, a dropped connection: one line, no signed URL
            raise client.hub_error(e, repo_id, revision) from e
    if not path.is_dir():
        raise SourceError(f"`source` {str(source)!r} is not a model folder (config.json + *.safetensors), an offline "
                          "alias of one or a Hub id; pass one of those.")
    return _from_folder(path, names, rows)


def _check_rows(name: str, wanted: list[int], n_rows: int) -> None:
    bad = [i for i in wanted if not 0 <= i < n_rows]
    if bad:
        raise ValueError(f"`rows` of {name!r}: index {bad[0]} is outside its {n_rows} rows; pass indices in "
                         f"[0, {n_rows}).")


def _from_folder(folder: Path, names: list[str], rows: dict[str, list[int]]) -> dict[str, np.ndarray]:
    from .safetensors import SafetensorsIndex, weight_files

    files, weight_map, _ = weight_files(folder, sorted(folder.glob("*.safetensors")))
    index, handles = SafetensorsIndex.open(files, weight_map)
    try:
        out = {}
        for name in names:
            if name not in index.names:
                raise SourceError(f"tensor {name!r} is not in {str(folder)!r}; its tensors include "
                                  f"{', '.join(sorted(index.names)[:4])} ...")
            full = np.asarray(index.get(name))
            if name in rows:
                _check_rows(name, rows[name], full.shape[0])
                full = full[rows[name]]
            out[name] = _widened(full)
        return out
    finally:
        handles.clear()


def _from_hub(repo_id: str, revision: str | None, names: list[str], rows: dict[str, list[int]],
              gap: int) -> dict[str, np.ndarray]:
    from .hub import client

    repo = client.open_remote(repo_id, revision)
    files = client.HubFiles(repo)  # one /resolve per file; every range read from its signed URL
    headers, starts, _ = client.safetensors_headers(files)  # checked like a local file's headers
    where = {t: f for f, entries in headers.items() for t in entries if t != "__metadata__"}
    out = {}
    for name in names:
        file = where.get(name)
        if file is None:
            raise SourceError(f"tensor {name!r} is not in Hub repo {repo_id!r} (commit {repo.commit[:12]}); its "
                              f"tensors include {', '.join(sorted(where)[:4])} ...")
        info = headers[file][name]
        if info["dtype"] not in FLOAT_TAGS:
            raise SourceError(f"tensor {name!r} of Hub repo {repo_id!r} is stored as {info['dtype']}; only "
                              f"{', '.join(sorted(FLOAT_TAGS))} tensors are read here.")
        begin, stop = (int(v) for v in info["data_offsets"])
        base = starts[file] + begin
        shape = tuple(int(v) for v in info["shape"])
        dtype = numpy_dtype(info["dtype"])
        row_bytes = int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize
        if name not in rows:
            raw = files.read(file, base, base + stop - begin)
            out[name] = _widened(np.frombuffer(raw, dtype=dtype).reshape(shape))
            continue
        wanted = rows[name]
        _check_rows(name, wanted, shape[0])
        got: dict[int, np.ndarray] = {}
        for first, end in row_ranges(wanted, row_bytes, gap):
            raw = files.read(file, base + first * row_bytes, base + end * row_bytes)
            block = np.frombuffer(raw, dtype=dtype).reshape((end - first, *shape[1:]))
            got.update({i: block[i - first] for i in range(first, end)})
        out[name] = _widened(np.stack([got[i] for i in wanted]) if wanted else np.empty((0, *shape[1:]), dtype))
    return out


def _widened(a: Any) -> np.ndarray:
    """float16, bfloat16 and float8 widened to float32 (exactly, :func:`qkgeometry._arrays.widened`); float32 and
    float64 kept; anything else as float32."""
    a = widened(a)
    return a if a.dtype in (np.float32, np.float64) else a.astype(np.float32)
