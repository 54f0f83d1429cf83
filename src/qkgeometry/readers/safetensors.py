"""The safetensors reader: a local Hugging Face model folder (``config.json`` plus ``*.safetensors``, sharded or
not, with or without ``model.safetensors.index.json``).

Only the tensors a plan asks for are read, one layer at a time, with plain reads (never a pickle). Chapter 1 uses
it from "Two real heads" on.
"""

from __future__ import annotations

import json
import os
import threading
import warnings
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from .._arrays import bfloat16_to_float32, widened
from .._files import check_regular_file, fingerprint, os_error, path_exists, read_bytes
from ..architectures import QKNorm, get_architecture
from ..errors import ConfigError, SourceError, first_line
from ..model import SourcePlans
from .hf_config import ConfigView, read_config, resolve_plans
from .safetensors_format import (
    FLOAT_TAGS,
    SCALE_SUFFIXES,
    WIDENED_TAGS,
    header_length,
    numpy_dtype,
    parse_header,
)

__all__ = ["SafetensorsIndex", "open_folder", "sniff"]


def sniff(path: Path) -> bool:
    """A folder holding ``config.json`` and at least one ``*.safetensors`` file."""
    return path.is_dir() and (path / "config.json").exists() and any(path.glob("*.safetensors"))


def open_folder(folder: Path, name: str, qk_norm: QKNorm = "folded") -> SourcePlans:
    """The plans of a model folder; ``name`` labels it. Refuses folders without config.json or without
    safetensors weights (pickled ``*.bin`` / ``*.pt`` weights are never loaded) with a message that says why."""
    config_path = folder / "config.json"
    if not path_exists(config_path, "config file"):
        raise SourceError(f"`source` folder {str(folder)!r} has no config.json; a Hugging Face model folder needs one "
                          "next to its *.safetensors files.")
    try:
        files = sorted(folder.glob("*.safetensors"))
    except OSError as e:
        raise os_error(folder, e, "folder") from e
    if not files:
        bins = sorted(p.name for p in folder.glob("*.bin")) + sorted(p.name for p in folder.glob("*.pt*"))
        hint = (f" It has {', '.join(bins)}: qkgeometry never unpickles weight files (they can run code). Convert "
                "them once with transformers (`model.save_pretrained(dir, safe_serialization=True)`) from a "
                "trusted copy.") if bins else ""
        raise SourceError(f"`source` folder {str(folder)!r} has no *.safetensors files.{hint}")
    config = read_config(config_path)
    arch = get_architecture(config.model_type)
    files, weight_map, index_file = weight_files(folder, files)
    index, handles = SafetensorsIndex.open(files, weight_map, index_file)
    try:  # a check that raises leaves no file open
        check_quantization(config_path, config, index)
        plans = resolve_plans(arch, config, index.names, index.get, qk_norm)
    except ConfigError as e:  # "the llama config: ..." -> name the file
        handles.clear()
        raise ConfigError(f"{str(config_path)!r}: {e}") from e
    except BaseException:
        handles.clear()
        raise
    meta = [config_path] + ([index_file] if index_file is not None else [])
    return SourcePlans(name, arch, plans, str(folder), partial(fingerprint, files, meta), close=handles.clear,
                       config=config.data)


def weight_files(folder: Path, files: list[Path]) -> tuple[list[Path], dict[str, str] | None, Path | None]:
    """The safetensors files to read: those named by ``*.safetensors.index.json`` when there is one (others in the
    folder are ignored with a warning), else every ``*.safetensors`` in the folder."""
    indexes = sorted(folder.glob("*.safetensors.index.json"))
    if not indexes:
        return files, None, None
    if len(indexes) > 1:
        raise SourceError(f"`source` folder {str(folder)!r} has several shard indexes "
                          f"({', '.join(p.name for p in indexes)}); keep only the one that belongs to the model.")
    index_file = indexes[0]
    try:
        data = json.loads(read_bytes(index_file, "shard index"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
        raise SourceError(f"shard index {str(index_file)!r} is not valid JSON ({type(e).__name__}); the file may be "
                          "truncated: download it again.") from e
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not weight_map \
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in weight_map.items()):
        raise SourceError(f"shard index {str(index_file)!r} has no valid 'weight_map' (tensor name -> file name); "
                          "download it again or delete it if the folder holds a single *.safetensors file.")
    listed = sorted(set(weight_map.values()))
    missing = [f for f in listed if not (folder / f).is_file()]
    if missing:
        raise SourceError(f"shard index {str(index_file)!r} lists {', '.join(missing)}, which "
                          f"{'is' if len(missing) == 1 else 'are'} not in the folder (an incomplete download?); "
                          "download the missing shards.")
    extra = [f.name for f in files if f.name not in listed]
    if extra:
        warnings.warn(f"{str(folder)!r}: ignoring {', '.join(extra)}, not listed in {index_file.name} (stale or "
                      "foreign checkpoint files); delete them to silence this warning.", stacklevel=4)
    return [folder / f for f in listed], weight_map, index_file




class SafetensorsIndex:
    """Tensor name -> file map over one or more safetensors shards, read lazily through ``safe_open``.

    Files are opened with ``backend="pread"`` when the installed safetensors offers it: each tensor is read with a
    plain file read into a fresh buffer instead of through a memory map, whose file-backed pages would stay
    resident until the handle closes (streaming a 7B checkpoint would otherwise grow the RSS by every Q/K tensor
    read so far; ``benchmarks/bench_survey_memory.py`` measures it).

    Weights are returned as floating-point numpy arrays (torch is not imported). Supported storage: F64, F32, F16
    (as stored), BF16 (to float32 by an exact bit shift: a bfloat16 is the upper half of a float32), F8_E4M3 and
    F8_E5M2 (to float32 through ``ml_dtypes``, exact), and bitsandbytes LLM.int8 (an I8 weight with its per-row
    ``.SCB`` scale, dequantised in float64 as ``W = I8 · SCB / 127``).
    Everything else (other integer codes, 4-bit packs, GPTQ/AWQ ``qweight``, scaled FP8 blocks) is refused with a
    message: scoring raw codes would give meaningless numbers.
    """


    def __init__(self, handles: dict[str, Any], names: dict[str, str]):
        self._handles = handles
        self.names = names
        self._headers: dict[str, tuple[int, dict[str, Any]]] = {}
        self._lock = threading.Lock()

    @classmethod
    def open(cls, files: list[Path], weight_map: dict[str, str] | None = None,
             index_file: Path | None = None) -> tuple[SafetensorsIndex, dict]:
        handles: dict[str, Any] = _Handles()
        names: dict[str, str] = {}
        for f in files:
            check_regular_file(f, "safetensors file")
            handle = handles[str(f)] = open_safetensors(f)
            # the bytes of BF16 and F8 tensors are read through this handle, opened with the safetensors one: both
            # read the same file, even when another file takes its name while the model is open
            handles[_RAW + str(f)] = open(f, "rb")  # noqa: SIM115 (closed when `handles` is cleared)
            for key in handle.keys():  # noqa: SIM118 (a safe_open handle is not iterable)
                if weight_map is not None:
                    if weight_map.get(key) == f.name:
                        names[key] = str(f)
                    continue
                if key in names:
                    raise SourceError(
                        f"tensor {key!r} is in both {Path(names[key]).name!r} and {f.name!r} in "
                        f"{str(f.parent)!r}: the folder mixes two checkpoints (a stale file or a copy?). Remove "
                        "the file that does not belong, or add the model's model.safetensors.index.json.")
                names[key] = str(f)
        if weight_map is not None:
            absent = sorted(set(weight_map) - set(names))
            if absent:
                raise SourceError(f"{str(index_file)!r} lists {len(absent)} tensor(s) that are not in their shard "
                                  f"(first: {absent[0]!r} in {weight_map[absent[0]]!r}); a shard is truncated or "
                                  "from another download: download it again.")
        return cls(handles, names), handles

    def dtype(self, name: str) -> str:
        """The safetensors dtype tag of ``name`` (``"BF16"``, ``"I8"`` ...), read from the header only."""
        return self._handles[self.names[name]].get_slice(name).get_dtype()

    def get(self, name: str) -> np.ndarray:
        file = self.names[name]
        dtype = self.dtype(name)
        scale = next((name.removesuffix(".weight") + s for s in SCALE_SUFFIXES
                      if name.removesuffix(".weight") + s in self.names), None)
        if dtype == "I8" and scale is not None and scale.endswith("SCB"):
            weight, scb = self._read(file, name), self._read(self.names[scale], scale)
            if scb.ndim != 1 or scb.shape[0] != weight.shape[0]:
                raise SourceError(f"tensor {scale!r} in {file!r} has shape {tuple(scb.shape)}, expected "
                                  f"({weight.shape[0]},) for the LLM.int8 weight {name!r}; the file is corrupt.")
            return weight.astype(np.float64) * (scb.astype(np.float64)[:, None] / 127.0)
        if dtype not in FLOAT_TAGS or scale is not None:
            what = (f"stored with a separate scale {scale!r}" if scale is not None
                    else f"stored as {dtype} codes")
            raise SourceError(
                f"tensor {name!r} in {file!r} is {what}: a quantised or integer weight that this reader cannot "
                "turn into real values. Supported: F64/F32/F16/BF16/F8 weights and bitsandbytes LLM.int8 (I8 + "
                ".SCB). Score the unquantised checkpoint, or a GGUF export (its quantisations are supported).")
        return self._read(file, name)

    def _read(self, file: str, name: str) -> np.ndarray:
        try:
            dtype = self.dtype(name)
            if dtype in WIDENED_TAGS:
                return self._read_widened(file, name, dtype)
            return self._handles[file].get_tensor(name)
        except SourceError:
            raise
        except Exception as e:
            raise SourceError(f"could not read tensor {name!r} from {file!r}: {e}. The file may be truncated or "
                              "corrupt; download it again.") from e


    def _read_widened(self, file: str, name: str, dtype: str) -> np.ndarray:
        """A BF16 or F8 tensor (which numpy cannot hold) read from its bytes and widened to float32, exactly. The
        header's offsets locate the bytes (checked by :func:`parse_header`, the rules the Hub reader applies too)."""
        f = self._handles[_RAW + file]
        with self._lock:
            if file not in self._headers:
                where = f"safetensors file {file!r}"
                f.seek(0)
                size = header_length(f.read(8), os.fstat(f.fileno()).st_size, where)
                self._headers[file] = (8 + size, parse_header(f.read(size), os.fstat(f.fileno()).st_size, where))
            start, header = self._headers[file]
            info = header[name]
            begin, end = info["data_offsets"]
            shape = tuple(info["shape"])
            raw = np.empty(end - begin, dtype=np.uint8)
            f.seek(start + begin)
            got = f.readinto(raw)
        if got != end - begin:
            raise SourceError(f"could not read tensor {name!r} from {file!r}: the file ends early; it is truncated: "
                              "download it again.")
        if dtype == "BF16":
            return bfloat16_to_float32(raw.view("<u2")).reshape(shape)
        return widened(raw.view(numpy_dtype(dtype))).reshape(shape)


#: the key prefix, in a handles dict, of the plain file a safetensors handle's raw bytes are read from
_RAW = "raw:"


class _Handles(dict):
    """The open files of a :class:`SafetensorsIndex`; ``clear()`` closes them."""

    def clear(self) -> None:
        for key, value in self.items():
            if key.startswith(_RAW):
                value.close()
        super().clear()


def open_safetensors(file: Path) -> Any:
    """``safetensors.safe_open`` with the pread backend where available; errors as :class:`SourceError`."""
    from safetensors import safe_open

    try:
        with open(file, "rb"):  # the operating system's own reason (permission denied...), which safetensors loses
            pass
    except OSError as e:
        raise os_error(file, e, "safetensors file") from e
    try:
        try:
            return safe_open(str(file), framework="numpy", backend="pread")
        except TypeError:  # safetensors < 0.7 has no backend argument: fall back to its memory map
            return safe_open(str(file), framework="numpy")
    except OSError as e:
        raise os_error(file, e, "safetensors file") from e
    except Exception as e:  # safetensors raises its own SafetensorError on bad headers / short files (the
        # operating system's refusals, permission denied first, were reported by the plain open above)
        raise SourceError(f"could not read safetensors file {str(file)!r}: {first_line(e)}. The file is probably "
                          "truncated or corrupt (an interrupted download?); download it again.") from e


def check_quantization(config_path: Path, config: Any, index: SafetensorsIndex) -> None:
    """Refuse a ``quantization_config`` whose weights this reader would misread (everything but LLM.int8)."""
    qc = config._data.get("quantization_config") if isinstance(config, ConfigView) else None
    if qc is None:
        return
    qc = qc if isinstance(qc, dict) else {}
    method, four_bit = qc.get("quant_method"), bool(qc.get("load_in_4bit"))
    if not (method == "bitsandbytes" and qc.get("load_in_8bit") and not four_bit):
        raise SourceError(f"{str(config_path)!r}: field `quantization_config.quant_method` is {method!r}"
                          f"{' (4-bit)' if four_bit else ''}; "
                          "only bitsandbytes LLM.int8 (load_in_8bit) checkpoints can be dequantised here. Score the "
                          "unquantised checkpoint, or a GGUF export.")
