"""The ONNX reader: an ``.onnx`` graph, or a folder without safetensors weights that holds one ``model.onnx``.
Attention is found from the graph's structure (:mod:`qkgeometry.readers.onnx_walk`); chapter 4 surveys two such
graphs."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from .._files import check_regular_file, fingerprint, os_error, path_exists
from ..architectures import Architecture, QKNorm
from ..errors import SourceError
from ..model import SourcePlans

__all__ = ["open_onnx", "single_onnx", "sniff"]


def sniff(path: Path) -> bool:
    """An ``.onnx`` file, or a folder that holds ONNX graphs and no ``config.json`` + ``*.safetensors`` pair."""
    if path.is_dir():
        has_weights = path_exists(path / "config.json", "config file") and any(path.glob("*.safetensors"))
        return not has_weights and single_onnx(path) is not None
    return path.suffix == ".onnx"


def single_onnx(folder: Path) -> Path | None:
    """The ONNX model of a folder: its only ``*.onnx`` file, or ``model.onnx`` among several (None: no graph)."""
    try:
        found = sorted(folder.glob("*.onnx"))
    except OSError as e:
        raise os_error(folder, e, "folder") from e
    if len(found) > 1:
        if (folder / "model.onnx") in found:
            return folder / "model.onnx"
        raise SourceError(f"`source` folder {str(folder)!r} holds several ONNX files ({', '.join(p.name for p in found)}"
                          ") and no model.onnx; pass the path of the one to read.")
    return found[0] if found else None


def open_onnx(path: Path, name: str | None, qk_norm: QKNorm = "folded") -> SourcePlans:
    """The plans of an ONNX graph (``path`` a file or a folder :func:`sniff` accepts). ``qk_norm`` has no effect:
    a graph with a normalisation between projection and product is refused."""
    if path.is_dir():
        name, path = name or path.name, single_onnx(path)
    try:
        from .onnx_graph import external_files
        from .onnx_walk import onnx_blocks
    except ImportError as e:  # the onnx package is a dependency; say so if an environment lacks it
        raise SourceError(f"reading {str(path)!r} needs the `onnx` package ({e}); `pip install onnx`.") from e
    check_regular_file(path, "`source`")
    family, blocks, graph = onnx_blocks(path)
    arch = Architecture("onnx", family, tuple(p.block for p in blocks),
                        notes="An ONNX graph: Q/K projections found from the graph structure.")
    plans = blocks
    files = [path, *(p for p in external_files(graph) if p.is_file())]
    return SourcePlans(name or path.stem, arch, plans, str(path), partial(fingerprint, files))
