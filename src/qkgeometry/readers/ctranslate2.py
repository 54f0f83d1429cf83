"""A small reader for CTranslate2 ``model.bin`` files, and the Whisper adapter on top of it.

CTranslate2 (the engine behind faster-whisper) stores a converted model as one binary file, read here without the
``ctranslate2`` package and without unpickling anything. Layout (little-endian; strings are a uint16 byte count
including a final NUL, then the UTF-8 bytes and the NUL)::

    uint32 binary version (4 to 6 are read here)
    string spec name (e.g. "WhisperSpec"), uint32 spec revision
    uint32 number of variables, then for each:
        string name, uint8 rank, uint32 × rank shape, uint8 dtype id, uint32 byte count, the raw bytes
    uint32 number of aliases, then pairs (string alias, string variable name)

dtype ids: 0 float32, 1 int8, 2 int16, 3 int32, 4 float16, 5 bfloat16. A quantised weight ``w`` (int8 or int16)
comes with a float32 ``w_scale``, one scale per output row or one for the whole tensor, and the float weight is
``w / w_scale[:, None]`` (or ``w / w_scale``).

Whisper in CTranslate2's layout (the book's chapter 4 surveys it): encoder and decoder self-attention keep Q, K and
V in one Linear ``self_attention/linear_0`` of shape (3·d_model, d_model), blocked [Q; K; V]; cross-attention
(``decoder/layer_{i}/attention``) keeps Q in ``linear_0`` (d_model, d_model) and [K; V] fused in ``linear_1``
(2·d_model, d_model). Each Linear weight is ``W_Qᵀ`` stacked over heads, as in torch (Notation page). The query
bias is the first d_model entries of ``linear_0/bias``. Each attention block normalises its own input with
``…/layer_norm/{gamma,beta}`` (pre-LN); cross-attention keys read the encoder's output, normalised by
``encoder/layer_norm``. Biases and those gains are outside W_qk unless ``load_qk(input_norm="folded")``.
"""

from __future__ import annotations

import os
import stat
import struct
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from .._arrays import bfloat16_to_float32
from .._files import fingerprint
from ..architectures import QKNorm, get_architecture
from ..errors import CTranslate2FormatError, LimitExceeded
from ..limits import MAX_TENSOR_ELEMENTS, check_elements
from ..model import BlockPlan, SourcePlans

__all__ = ["DTYPE_IDS", "CT2FormatError", "CT2Index", "Variable", "is_ctranslate2", "open_ctranslate2", "sniff",
           "whisper_blocks"]

#: the same error under its short name
CT2FormatError = CTranslate2FormatError

#: binary versions whose variable table has the layout above
SUPPORTED_VERSIONS = (4, 5, 6)
DTYPES: dict[int, np.dtype] = {0: np.dtype("<f4"), 1: np.dtype("i1"), 2: np.dtype("<i2"), 3: np.dtype("<i4"),
                               4: np.dtype("<f2"), 5: np.dtype("<u2")}  # 5: bfloat16, widened on read
#: numpy dtype -> CTranslate2 dtype id (the inverse of :data:`DTYPES`, for writers)
DTYPE_IDS = {np.dtype("float32"): 0, np.dtype("int8"): 1, np.dtype("int16"): 2, np.dtype("int32"): 3,
              np.dtype("float16"): 4}


@dataclass(frozen=True)
class Variable:
    """One entry of the variable table: shape in numpy (row-major) order, dtype id, absolute byte offset."""

    name: str
    shape: tuple[int, ...]
    dtype_id: int
    offset: int
    nbytes: int


def sniff(path: Path) -> bool:
    """A regular file whose header is a CTranslate2 model's (:func:`is_ctranslate2`)."""
    return path.is_file() and is_ctranslate2(path)


def is_ctranslate2(path: str | os.PathLike) -> bool:
    """True when ``path`` starts like a CTranslate2 model: a small version number, then a ``...Spec`` name.

    A PyTorch ``.bin`` (a zip or a pickle) never does, so this check never opens a pickle.
    """
    try:
        with open(path, "rb") as f:
            head = f.read(6 + 256)
    except OSError:
        return False
    if len(head) < 6:
        return False
    version, length = struct.unpack_from("<IH", head)
    if version not in range(1, 100) or not 2 <= length <= 256 or len(head) < 6 + length:
        return False
    name = head[6:6 + length]
    return name.endswith(b"\0") and name[:-1].isascii() and name[:-1].endswith(b"Spec")


class CT2Index:
    """Header, variable table and aliases of a CTranslate2 ``model.bin``; tensors are read on demand.

    ``spec`` is the model spec's name (``"WhisperSpec"``), ``revision`` its revision, ``variables`` maps a name to
    its :class:`Variable`, ``aliases`` maps an alias to the variable it stands for.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        mode = os.stat(self.path).st_mode  # OSError (missing, EACCES...) goes to the caller
        if not stat.S_ISREG(mode):
            raise CT2FormatError(f"{str(self.path)!r} is not a regular file; pass a CTranslate2 model.bin")
        self._data = np.memmap(self.path, mode="r") if os.stat(self.path).st_size else np.zeros(0, np.uint8)
        self._buf = memoryview(self._data)
        self._pos = 0
        try:
            self._parse()
        except (struct.error, UnicodeDecodeError) as e:
            raise CT2FormatError(f"{str(self.path)!r}: the CTranslate2 header or variable table is truncated or "
                                 f"malformed ({type(e).__name__}: {e}); download or assemble the file again.") from e

    def _read(self, fmt: str) -> Any:
        value = struct.unpack_from("<" + fmt, self._buf, self._pos)
        self._pos += struct.calcsize("<" + fmt)
        return value[0] if len(value) == 1 else value

    def _string(self) -> str:
        n = self._read("H")
        if n == 0 or self._pos + n > len(self._buf):
            raise struct.error(f"string of {n} bytes at offset {self._pos - 2}")
        text = bytes(self._buf[self._pos:self._pos + n - 1]).decode("utf-8")
        self._pos += n
        return text

    def _parse(self) -> None:
        self.version = self._read("I")
        if self.version not in SUPPORTED_VERSIONS:
            raise CT2FormatError(f"{str(self.path)!r}: CTranslate2 binary version {self.version} is not supported "
                                 f"(supported: {', '.join(map(str, SUPPORTED_VERSIONS))}); it is not a CTranslate2 "
                                 "model.bin, or re-convert it with a CTranslate2 release from 3.0 on.")
        self.spec, self.revision = self._string(), self._read("I")
        self.variables: dict[str, Variable] = {}
        for _ in range(self._read("I")):
            name = self._string()
            rank = self._read("B")
            shape = tuple(self._read("I") for _ in range(rank))
            dtype_id, nbytes = self._read("B"), self._read("I")
            if dtype_id not in DTYPES:
                raise CT2FormatError(f"{str(self.path)!r}: variable {name!r} has unknown dtype id {dtype_id}.")
            try:  # exact Python integers: (2**31, 2**31, 4) must not wrap around to 0 bytes
                expected = check_elements(shape, MAX_TENSOR_ELEMENTS, f"{str(self.path)!r}: variable {name!r}") \
                    * DTYPES[dtype_id].itemsize
            except LimitExceeded as e:
                raise CT2FormatError(str(e)) from None
            if nbytes != expected or self._pos + nbytes > len(self._buf):
                raise CT2FormatError(f"{str(self.path)!r}: variable {name!r} {shape} claims {nbytes} bytes (expected "
                                     f"{expected}) at offset {self._pos} of a {len(self._buf)}-byte file: the file "
                                     "is truncated or corrupt.")
            self.variables[name] = Variable(name, shape, dtype_id, self._pos, nbytes)
            self._pos += nbytes
        self.aliases: dict[str, str] = {}
        for _ in range(self._read("I")):
            alias = self._string()
            self.aliases[alias] = self._string()
        for alias, target in self.aliases.items():  # an alias stands for a variable of the file, or it is damage
            if target not in self.variables:
                raise CT2FormatError(f"{str(self.path)!r}: alias {alias!r} names the variable {target!r}, which the "
                                     "file does not hold; the file is incomplete or corrupt. Re-convert the model.")

    def names(self) -> list[str]:
        """Variable names in file order (aliases not included)."""
        return list(self.variables)

    def raw(self, name: str) -> np.ndarray:
        """The stored array of ``name`` (alias resolved), in its stored dtype, without dequantisation."""
        var = self.variables.get(self.aliases.get(name, name))
        if var is None:
            raise KeyError(f"variable {name!r} is not in {str(self.path)!r} (a {self.spec} model).")
        dtype = DTYPES[var.dtype_id]
        return np.frombuffer(self._buf, dtype=dtype, count=var.nbytes // dtype.itemsize,
                             offset=var.offset).reshape(var.shape)

    def tensor(self, name: str) -> np.ndarray:
        """Variable ``name`` as float32: float16 / bfloat16 widened, a quantised weight (int8 or int16) divided by
        its ``<name>_scale`` (one per output row, or one for the tensor). Shape in numpy order, e.g.
        (out_features, in_features) for a Linear weight. Integer scalars (``num_heads``) are returned as stored."""
        var = self.variables.get(self.aliases.get(name, name))
        raw = self.raw(name)
        if var.dtype_id == 5:
            return bfloat16_to_float32(raw)
        if var.dtype_id in (1, 2) and raw.ndim > 0:
            kind = "int8" if var.dtype_id == 1 else "int16"
            scale_name = var.name + "_scale"
            if scale_name not in self.variables:
                raise CT2FormatError(f"{str(self.path)!r}: {kind} variable {var.name!r} has no {scale_name!r}, so "
                                     "its real values are unknown; re-convert the model.")
            scale = self.tensor(scale_name).reshape(-1)
            if scale.size not in (1, raw.shape[0]):
                raise CT2FormatError(f"{str(self.path)!r}: {scale_name!r} has {scale.size} entries; a scale for "
                                     f"the {kind} weight {var.name!r} {raw.shape} needs 1 or {raw.shape[0]} (one per "
                                     "output row). The file is corrupt; re-convert the model.")
            scale = scale.reshape(-1, *([1] * (raw.ndim - 1))) if scale.size > 1 else scale.reshape(())
            return raw.astype(np.float32) / scale
        return raw.astype(np.float32)

    def scalar(self, name: str) -> int:
        """An integer scalar variable (e.g. ``encoder/num_heads``)."""
        value = self.raw(name)
        if value.shape != ():
            raise CT2FormatError(f"{str(self.path)!r}: {name!r} has shape {value.shape}, expected a scalar.")
        if not np.issubdtype(value.dtype, np.integer):
            raise CT2FormatError(f"{str(self.path)!r}: {name!r} is stored as {value.dtype} ({float(value)!r}); an "
                                 "integer is expected. The file is corrupt; re-convert the model.")
        return int(value)


# ------------------------------------------------------------------------------------------------ Whisper
def _count_layers(index: CT2Index, template: str) -> int:
    """Layers 0..n-1 of ``template``; a gap (layer 2 present, layer 1 missing) is an error, not a shorter model."""
    present = set()
    for name in [*index.variables, *index.aliases]:  # a layer may be stored under an alias
        for i in _layer_numbers(name, template):
            present.add(i)
    n = 0
    while n in present:
        n += 1
    if present and max(present) >= n:
        raise CT2FormatError(f"{str(index.path)!r}: {template.format(i=n)!r} is missing but layer {max(present)} is "
                             "present; the file is incomplete or corrupt.")
    return n


def _layer_numbers(name: str, template: str) -> list[int]:
    prefix, _, suffix = template.partition("{i}")
    if name.startswith(prefix) and name.endswith(suffix):
        middle = name[len(prefix):len(name) - len(suffix)]
        if middle.isdigit():
            return [int(middle)]
    return []


def whisper_blocks(index: CT2Index) -> list[BlockPlan]:
    """The attention blocks of a CTranslate2 Whisper model: one :class:`~qkgeometry.model.BlockPlan` for each of
    the components ``encoder``, ``decoder`` and ``cross`` (layouts in the module docstring), where ``split(i)`` gives
    layer i's
    ``(wq, wk, bq)``: the weights of shapes (n_heads, d_model, head_dim) and the query bias (n_heads, head_dim), or
    None when the file has no bias. :func:`qkgeometry.load_qk` builds the model from them.

    Other CTranslate2 specs, and files without the expected variables, raise :class:`CT2FormatError`.
    """
    from ..architectures import AttentionBlock, Dims, split_fused_blocked, split_linear

    where = str(index.path)
    if index.spec != "WhisperSpec":
        raise CT2FormatError(f"{where!r} is a CTranslate2 {index.spec!r} model; only WhisperSpec (Whisper) is "
                             "supported. Load the original model from a safetensors folder instead.")

    def has(name: str) -> bool:
        return index.aliases.get(name, name) in index.variables

    def get(var: str) -> np.ndarray:
        try:
            return np.array(index.tensor(var))
        except KeyError as e:
            raise CT2FormatError(f"{where!r}: {e.args[0]} The Whisper model is incomplete.") from None

    self_q = "{side}/layer_{{i}}/self_attention/linear_0/weight"
    norms = {"encoder": ("encoder/layer_{i}/self_attention/layer_norm/gamma", None),
             "decoder": ("decoder/layer_{i}/self_attention/layer_norm/gamma", None),
             "cross": ("decoder/layer_{i}/attention/layer_norm/gamma", "encoder/layer_norm/gamma")}

    def query_bias(weight_name: str, dims: Dims) -> np.ndarray | None:
        name = weight_name.removesuffix("weight") + "bias"
        if index.aliases.get(name, name) not in index.variables:
            return None
        return get(name)[:dims.d_model].reshape(dims.n_heads, dims.head_dim)

    cross_q, cross_kv = "decoder/layer_{i}/attention/linear_0/weight", "decoder/layer_{i}/attention/linear_1/weight"
    blocks = []
    for component, side in (("encoder", "encoder"), ("decoder", "decoder"), ("cross", "decoder")):
        try:
            n_heads = index.scalar(f"{side}/num_heads")
        except KeyError:
            raise CT2FormatError(f"{where!r}: no {side}/num_heads; the Whisper model is incomplete.") from None
        template = self_q.format(side=side) if component != "cross" else cross_q
        n_layers = _count_layers(index, template)
        if n_layers == 0:
            raise CT2FormatError(f"{where!r}: no {template.format(i=0)!r}; the Whisper model is incomplete.")
        first = index.variables[index.aliases.get(template.format(i=0), template.format(i=0))]
        if len(first.shape) != 2 or 0 in first.shape:
            raise CT2FormatError(f"{where!r}: {first.name!r} has shape {first.shape}; a Linear weight must be 2-D "
                                 "(out_features, d_model). The file is corrupt; re-convert the model.")
        d_model = first.shape[1]
        if n_heads <= 0 or d_model % n_heads:
            raise CT2FormatError(f"{where!r}: d_model {d_model} is not a multiple of {side}/num_heads {n_heads}.")
        dims = Dims(n_layers, d_model, n_heads, n_heads, d_model // n_heads)

        if component == "cross":
            def split(i: int, dims: Dims = dims) -> tuple[np.ndarray, ...]:
                q, kv = get(cross_q.format(i=i)), get(cross_kv.format(i=i))
                return (*split_linear(q, kv[:dims.d_model], dims, (cross_q.format(i=i), cross_kv.format(i=i))),
                        query_bias(cross_q.format(i=i), dims))
            block = AttentionBlock("cross", cross_q, cross_kv, input_norm=norms[component][0],
                                   input_norm_k=norms[component][1])
        else:
            def split(i: int, dims: Dims = dims, template: str = template) -> tuple[np.ndarray, ...]:
                return (*split_fused_blocked(get(template.format(i=i)), dims, template.format(i=i)),
                        query_bias(template.format(i=i), dims))
            block = AttentionBlock(component, template, None, "fused_blocked", input_norm=norms[component][0])
        blocks.append(BlockPlan(block, dims, split, get, has))
    return blocks


def open_ctranslate2(path: Path, name: str | None, qk_norm: QKNorm = "folded") -> SourcePlans:
    """The plans of a CTranslate2 Whisper ``model.bin``: components encoder, decoder, cross (``qk_norm`` has no
    effect: Whisper has no QK-norm)."""
    index = CT2Index(path)
    return SourcePlans(name or path.parent.name, get_architecture("whisper"), whisper_blocks(index), str(path),
                       partial(fingerprint, [path]))
