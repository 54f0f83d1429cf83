"""The GGUF reader: a lazy index of a ``.gguf`` file (header, metadata scalars and tensor locations, without
parsing the vocabulary) and the plans of its attention blocks.

``gguf.GGUFReader`` builds a numpy view for every element of every metadata array, including the 49k-entry
token and merge lists of a tokenizer: opening SmolLM2-135M took 25–50 s on a 2-core machine. Scoring needs a
dozen scalars and two tensors per layer, so :class:`GGUFIndex` walks the header with ``struct`` (skipping arrays),
memory maps the file, and leaves dequantisation to ``gguf.quants.dequantize``. The format is the GGUF v2/v3 spec
(github.com/ggml-org/ggml/blob/master/docs/gguf.md); type codes and block sizes come from the ``gguf`` package.

llama.cpp permutes the rows of Q and K inside each head for its rotary kernel in the Llama family (not in Qwen2,
which uses the NEOX rotary and is stored unpermuted); the permutation is undone for both, so W_qk is unchanged.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType
from gguf.quants import dequantize

from .._arrays import as_float64, numel
from .._files import fingerprint, os_error
from ..architectures import (
    AttentionBlock,
    Dims,
    QKNorm,
    architecture_for_gguf,
    fold_qk_norm,
    split_linear,
    unpermute_gguf_rope,
)
from ..errors import GGUFFormatError, SourceError
from ..model import BlockPlan, SourcePlans
from .hf_config import check_dims, warn_extra_layers

__all__ = ["GGUFFormatError", "GGUFIndex", "TensorInfo", "open_gguf", "rope_config", "sniff"]


def sniff(path: Path) -> bool:
    """A file named ``*.gguf``."""
    return path.suffix == ".gguf" and not path.is_dir()


_MAGIC = b"GGUF"
_SCALARS = {
    GGUFValueType.UINT8: "B", GGUFValueType.INT8: "b", GGUFValueType.UINT16: "H", GGUFValueType.INT16: "h",
    GGUFValueType.UINT32: "I", GGUFValueType.INT32: "i", GGUFValueType.FLOAT32: "f", GGUFValueType.BOOL: "?",
    GGUFValueType.UINT64: "Q", GGUFValueType.INT64: "q", GGUFValueType.FLOAT64: "d",
}


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]  # numpy order (rows first): GGUF stores ne[0] (the contiguous axis) first
    qtype: GGMLQuantizationType
    offset: int  # absolute byte offset in the file
    nbytes: int


class GGUFIndex:
    """Metadata (``fields``: key -> scalar, string, or list for short arrays) and tensor infos of a GGUF file.

    This is the package's one GGUF reader: ``GGUFIndex(path).tensor(name)`` returns one dequantised tensor.
    Only regular files are opened (a FIFO would block forever); numeric metadata arrays longer than
    :data:`MAX_ARRAY` are skipped without building them (``fields[key]`` is None).
    """

    #: numeric metadata arrays up to this length are kept in ``fields`` (as lists); longer ones are skipped
    MAX_ARRAY = 64

    def __init__(self, path: str | Path):
        import os
        import stat

        self.path = Path(path)
        mode = os.stat(self.path).st_mode  # OSError (missing, loop, EACCES...) goes to the caller
        if not stat.S_ISREG(mode):
            raise GGUFFormatError("it is not a regular file (a FIFO, device or folder); pass a real .gguf file")
        if os.stat(self.path).st_size < 24:
            raise GGUFFormatError("the file is shorter than a GGUF header (24 bytes): it is empty or truncated")
        self._data = np.memmap(self.path, mode="r")
        self._buf = memoryview(self._data)
        try:
            self.fields, self.tensors = self._parse()
        except (struct.error, IndexError, ValueError, UnicodeDecodeError, KeyError, OverflowError) as e:
            if isinstance(e, GGUFFormatError):
                raise
            raise GGUFFormatError(f"the GGUF header is truncated or malformed ({type(e).__name__}: {e})") from e

    @property
    def names(self) -> list[str]:
        """Tensor names, in file order."""
        return list(self.tensors)

    def tensor(self, name: str) -> np.ndarray:
        """Dequantised float32 tensor ``name``, shape in numpy order (e.g. (out_features, in_features) for a
        Linear). Any quantisation type that ``gguf.quants.dequantize`` knows is supported."""
        if name not in self.tensors:
            raise KeyError(f"no tensor {name!r} in GGUF file {str(self.path)!r} (it has {len(self.tensors)} "
                           f"tensors, e.g. {', '.join(list(self.tensors)[:3])})")
        info = self.tensors[name]
        if info.offset + info.nbytes > len(self._data):
            raise GGUFFormatError(f"tensor {name!r} ends at byte {info.offset + info.nbytes:,} but the file has only "
                                  f"{len(self._data):,} bytes: it is truncated")
        raw = self._data[info.offset:info.offset + info.nbytes]
        block, type_size = GGML_QUANT_SIZES[info.qtype]
        rows = int(np.prod(info.shape[:-1])) if len(info.shape) > 1 else 1
        raw = raw.reshape(rows, info.shape[-1] // block * type_size)
        out = np.asarray(dequantize(raw, info.qtype), dtype=np.float32).reshape(info.shape)
        return out if out.flags.writeable else out.copy()  # F32 tensors come back as views of the read-only map

    # ------------------------------------------------------------------------------------------- parsing
    def _parse(self) -> tuple[dict[str, Any], dict[str, TensorInfo]]:
        if bytes(self._buf[:4]) != _MAGIC:
            raise GGUFFormatError("not a GGUF file (bad magic bytes)")
        version, n_tensors, n_kv = struct.unpack_from("<IQQ", self._buf, 4)
        if version not in (2, 3):
            raise GGUFFormatError(f"GGUF version {version} is not supported (only 2 and 3)")
        self._pos = 24
        fields: dict[str, Any] = {}
        for _ in range(n_kv):
            key = self._string()
            fields[key] = self._value(GGUFValueType(self._unpack("<I")))
        infos = []
        for _ in range(n_tensors):
            name = self._string()
            n_dims = self._unpack("<I")
            ne = struct.unpack_from(f"<{n_dims}Q", self._buf, self._pos)
            self._pos += 8 * n_dims
            qtype = GGMLQuantizationType(self._unpack("<I"))
            offset = self._unpack("<Q")
            infos.append((name, tuple(reversed(ne)), qtype, offset))
        alignment = fields.get("general.alignment", 32)
        if isinstance(alignment, bool) or not isinstance(alignment, int) or alignment <= 0:
            raise GGUFFormatError(f"general.alignment must be a positive integer; got {alignment!r}")
        data_start = -(-self._pos // alignment) * alignment
        tensors = {}
        for name, shape, qtype, offset in infos:
            block, type_size = GGML_QUANT_SIZES[qtype]
            nbytes = int(np.prod(shape)) // block * type_size
            tensors[name] = TensorInfo(name, shape, qtype, data_start + offset, nbytes)
        end = max((t.offset + t.nbytes for t in tensors.values()), default=data_start)
        if end > len(self._data):
            raise GGUFFormatError(f"the tensor data needs {end:,} bytes but the file has only {len(self._data):,}: "
                                  "it is truncated")
        return fields, tensors

    def _unpack(self, fmt: str) -> Any:
        value = struct.unpack_from(fmt, self._buf, self._pos)[0]
        self._pos += struct.calcsize(fmt)
        return value

    def _string(self) -> str:
        n = self._unpack("<Q")
        if self._pos + n > len(self._buf):
            raise GGUFFormatError("the GGUF header is truncated (a string runs past the end of the file)")
        s = bytes(self._buf[self._pos:self._pos + n]).decode("utf-8")
        self._pos += n
        return s

    def _value(self, vtype: GGUFValueType) -> Any:
        if vtype == GGUFValueType.STRING:
            return self._string()
        if vtype == GGUFValueType.ARRAY:
            etype, count = GGUFValueType(self._unpack("<I")), self._unpack("<Q")
            if etype in _SCALARS:  # numeric arrays: short ones in one struct call, long ones skipped unread
                nbytes = count * struct.calcsize(_SCALARS[etype])
                if self._pos + nbytes > len(self._buf):
                    raise GGUFFormatError("the GGUF header is truncated (an array runs past the end of the file)")
                values = (list(struct.unpack_from(f"<{count}{_SCALARS[etype]}", self._buf, self._pos))
                          if count <= self.MAX_ARRAY else None)
                self._pos += nbytes
                return values
            if etype == GGUFValueType.STRING:  # e.g. a tokenizer's 49k tokens: skip by length, decode nothing
                for _ in range(count):
                    self._pos += 8 + struct.unpack_from("<Q", self._buf, self._pos)[0]
                if self._pos > len(self._buf):
                    raise GGUFFormatError("the GGUF header is truncated (a string array runs past the end)")
                return None
            for _ in range(count):  # nested arrays
                self._value(etype)
            return None
        return self._unpack("<" + _SCALARS[vtype])


# ------------------------------------------------------------------------------------------------ plans
def open_gguf(path: Path, name: str, qk_norm: QKNorm = "folded") -> SourcePlans:
    """The plans of a ``.gguf`` file (one self-attention block kind), from its metadata and tensor table."""

    try:
        index = GGUFIndex(path)
    except OSError as e:
        raise os_error(path, e, "GGUF file") from e
    except Exception as e:  # GGUFFormatError and whatever numpy's memmap raises on odd files
        detail = str(e) if isinstance(e, GGUFFormatError) else f"{type(e).__name__}: {e}"
        raise SourceError(f"could not read GGUF file {str(path)!r}: {detail}. The file is probably "
                          "truncated or corrupt (an interrupted download?); download it again.") from e

    gguf_arch = index.fields.get("general.architecture")
    if not isinstance(gguf_arch, str):
        raise SourceError(f"GGUF file {str(path)!r} has no general.architecture field (or it is not a string); "
                          "re-export it with llama.cpp's converter.")
    arch = architecture_for_gguf(gguf_arch)

    def size(key: str, default: Any = None) -> int:
        """A positive integer metadata field; a uniform per-layer array counts as one value."""
        full = f"{gguf_arch}.{key}"
        value = index.fields.get(full)
        if value is None:
            if default is None:
                raise SourceError(f"GGUF file {str(path)!r} has no metadata field `{full}`; the file is incomplete "
                                  "or not a plain transformer: re-export it with llama.cpp's converter.")
            return default
        if isinstance(value, list) and value and all(v == value[0] for v in value):
            value = value[0]
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise SourceError(f"GGUF file {str(path)!r}: metadata field `{full}` must be a positive integer; got "
                              f"{value!r}. The file is corrupt or uses per-layer sizes this reader does not "
                              "support.")
        return value

    d_model, n_heads = size("embedding_length"), size("attention.head_count")
    n_kv = size("attention.head_count_kv", n_heads)
    head_dim = size("attention.key_length", d_model // n_heads if d_model >= n_heads else 0)
    dims = Dims(size("block_count"), d_model, n_heads, n_kv, head_dim)
    where = f"GGUF file {str(path)!r}"
    check_dims(dims, where)
    spec = arch.gguf
    warn_extra_layers(dims.n_layers, spec.q.format(i=dims.n_layers), index.tensors, where)

    def get(name: str) -> Any:
        if name not in index.tensors:
            raise SourceError(f"tensor {name!r} is missing from GGUF file {str(path)!r}.")
        try:
            return index.tensor(name)
        except Exception as e:
            raise SourceError(f"could not read {name!r} ({index.tensors[name].qtype.name}) from {str(path)!r}: "
                              f"{e}. The file may be truncated or corrupt; download it again.") from e

    def split(i: int) -> tuple[Any, ...]:
        names = spec.q.format(i=i), spec.k.format(i=i)
        for n in names:
            info = index.tensors.get(n)
            if info is not None and len(info.shape) != 2:
                raise SourceError(f"tensor {n!r} in GGUF file {str(path)!r} has shape {info.shape}; a query/key "
                                  "projection must be 2-D (out_features, in_features). The file is corrupt.")
        q, k = get(names[0]), get(names[1])
        if spec.rope_permuted:
            q, k = unpermute_gguf_rope(q, dims.n_heads), unpermute_gguf_rope(k, dims.n_kv_heads)
        wq, wk = split_linear(q, k, dims, names)
        if spec.q_norm is not None and qk_norm == "folded":
            # llama.cpp stores norm gains as applied (Gemma's 1 + weight already added by its converter).
            wq, wk = fold_qk_norm(as_float64(wq), as_float64(wk), as_float64(get(spec.q_norm.format(i=i))),
                                  as_float64(get(spec.k_norm.format(i=i))))
        return wq, wk, query_bias(i)

    def query_bias(i: int) -> Any | None:
        name = spec.q_bias.format(i=i)
        if name not in index.tensors:
            return None
        b = get(name).reshape(-1)
        if numel(b) != dims.n_heads * dims.head_dim:
            raise SourceError(f"tensor {name!r} in GGUF file {str(path)!r} has {numel(b)} entries, expected "
                              f"{dims.n_heads * dims.head_dim} (n_heads·head_dim). The file is corrupt.")
        if spec.rope_permuted:  # the converter permutes a bias's rows like its weight's
            b = unpermute_gguf_rope(b[:, None], dims.n_heads)[:, 0]
        return b.reshape(dims.n_heads, dims.head_dim)

    # llama.cpp stores every norm gain as applied (its converter adds Gemma's 1 to each norm weight): no offset
    block = AttentionBlock("self", spec.q, spec.k, q_norm=spec.q_norm, k_norm=spec.k_norm, input_norm=spec.input_norm)
    plan = BlockPlan(block, dims, split, get, lambda name: name in index.tensors)
    return SourcePlans(name, arch, [plan], str(path), partial(fingerprint, [path]),
                       config=rope_config(index.fields, gguf_arch, arch.model_type, dims.head_dim, dims.n_layers))


#: llama.cpp's constants for Gemma-3, which its GGUF files do not store: sliding-window (local) layers rotate with
#: base 10 000, every 6th layer is a global one (with ``rope.freq_base``)
GEMMA3_LOCAL_BASE, GEMMA3_PATTERN = 10_000.0, 6


def rope_config(fields: dict[str, Any], gguf_arch: str, model_type: str, head_dim: int, n_layers: int
                ) -> dict[str, Any]:
    """A GGUF file's rotary settings in the vocabulary of a Hugging Face ``config.json``, as the model's
    :attr:`~qkgeometry.QKModel.config` (:func:`qkgeometry.analyses.rotary.rope_spec` reads them there):
    ``<arch>.rope.freq_base`` is ``rope_theta``, ``<arch>.rope.dimension_count`` ``rotary_dim``,
    ``<arch>.rope.scaling.type`` and ``.factor`` ``rope_scaling``. The factors this reader returns are in the Hugging
    Face layout (llama's row permutation undone), so the pairing is the one of ``model_type``. For Gemma-3, the
    layer pattern and the local base are llama.cpp's (:data:`GEMMA3_LOCAL_BASE`, :data:`GEMMA3_PATTERN`)."""
    config: dict[str, Any] = {"model_type": model_type, "head_dim": head_dim, "num_hidden_layers": n_layers}
    rope = {k.removeprefix(f"{gguf_arch}."): v for k, v in fields.items() if k.startswith(f"{gguf_arch}.rope.")}
    if "rope.freq_base" in rope:
        config["rope_theta"] = float(rope["rope.freq_base"])
    if "rope.dimension_count" in rope:
        config["rotary_dim"] = int(rope["rope.dimension_count"])
    scaling = str(rope.get("rope.scaling.type", "none"))
    if scaling != "none":
        config["rope_scaling"] = {"rope_type": scaling, "factor": float(rope.get("rope.scaling.factor", 1.0))}
    if gguf_arch == "gemma3":
        pattern = int(fields.get(f"{gguf_arch}.attention.sliding_window_pattern", GEMMA3_PATTERN))
        config["layer_types"] = ["sliding_attention" if (i + 1) % pattern else "full_attention"
                                 for i in range(n_layers)]
        config["rope_local_base_freq"] = GEMMA3_LOCAL_BASE
    return config
