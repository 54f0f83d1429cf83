"""The model as the scores see it: :class:`QKModel`, a lazy layer-by-layer view of a model's Q/K weights, its
:class:`QKLayer` records, the :class:`BlockPlan` that a format reader hands over, and the random-init twin.

Shapes (the book's Notation page): ``QKLayer.wq`` is (n_heads, d_model, head_dim) and ``QKLayer.wk_kv`` is
(n_kv_heads, d_model, head_dim), float64; head h reads KV head ``g(h) = h // group_size`` (repeat, not tile), so
``W_qk^h = wq[h] @ wk_kv[g(h)].T`` and the pre-softmax logit between query token x_i and key token x_j is
``x_iᵀ W_qk^h x_j / sqrt(head_dim)``.

The scoring path reads weights as the reader returns them: numpy arrays for files (safetensors, GGUF, ONNX,
CTranslate2), without importing torch (:meth:`QKModel.iter_layers` with ``convert=False``, which
:func:`qkgeometry.score_model` and :func:`qkgeometry.survey` use). The float64 layers of :meth:`QKModel.layer` and
:meth:`QKModel.iter_layers` are torch tensors, on :attr:`QKModel.device`. Code that needs one kind converts
explicitly (``np.asarray(layer.wq)``, ``torch.as_tensor(layer.wq)``).

This module knows no file format: the readers in :mod:`qkgeometry.readers` resolve a source into a
:class:`SourcePlans` (one :class:`BlockPlan` per attention block kind), and :func:`qkgeometry.load_qk` builds the
:class:`QKModel` from it once, with every setting (QK-norm, input-norm folding, device) fixed at construction.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from ._arrays import as_float64, is_torch_tensor, numel, repeat_heads, to_torch
from .architectures import (
    Architecture,
    AttentionBlock,
    Dims,
    fold_input_norm,
    input_norm_names,
    norm_shift_name,
    pack_heads,
)
from .errors import SourceError
from .source_names import RANDOM_PREFIX

__all__ = ["RANDOM_PREFIX", "BlockPlan", "FactoredQK", "QKLayer", "QKModel", "SourcePlans", "TensorGetter",
           "to_float64_heads"]

#: A tensor by its checkpoint name (a numpy array, or a torch tensor for an in-memory torch model).
TensorGetter = Callable[[str], Any]


# ------------------------------------------------------------------------------------------------ forms
class FactoredQK(NamedTuple):
    """A bilinear form ``W_qk = a @ bᵀ`` kept as its factors, the way every factored score reads it.

    ``a`` and ``b`` have shape (..., d, r): ``d`` the model width (rows of W_qk index the query side, columns the key
    side; the book's Notation page), ``r`` a bound on the rank (head_dim for a head, n_kv_heads·head_dim for a
    layer), and any leading batch axes. numpy arrays or torch tensors. It unpacks as ``a, b``, and the factored
    scores take it whole: ``qg.scores_factored(form)``. Chapter 2, "The factored formulas".

    >>> import numpy as np
    >>> form = FactoredQK(np.ones((4, 2)), np.ones((4, 2)))
    >>> form.d, form.rank_bound, form.matrix().shape
    (4, 2, (4, 4))
    """

    a: Any
    b: Any

    @property
    def d(self) -> int:
        """The width d of the d × d form."""
        return int(self.a.shape[-2])

    @property
    def rank_bound(self) -> int:
        """r, the number of columns of each factor (the form's rank is at most r)."""
        return int(self.a.shape[-1])

    def matrix(self) -> Any:
        """The (..., d, d) matrix ``a @ bᵀ`` (forms it: the factored scores never need it)."""
        return self.a @ self.b.swapaxes(-1, -2)


# ------------------------------------------------------------------------------------------------ layers
@dataclass
class QKLayer:
    """Q/K weights of one attention block.

    ``wq``: (n_heads, d_model, head_dim); ``wk_kv``: (n_kv_heads, d_model, head_dim), float64 torch tensors, KV heads
    not expanded. ``QKModel.iter_layers(convert=False)`` leaves them as read, in the stored dtype: numpy arrays for
    weights read from files (no torch import), torch tensors for an in-memory torch model or a model opened with a
    ``device``. As read from a model, each is a view of a contiguous (n, head_dim, d_model) buffer, ``W_Qᵀ`` per
    head, the layout the scoring kernel multiplies as is.

    ``bq``: the query bias b_q, (n_heads, head_dim), or None when the model has none. It is outside W_qk: the
    logit gains a key-only term ``b_qᵀ W_Kᵀ x_j`` (see :func:`qkgeometry.analyses.anatomy.key_bias_ratio`). With
    ``input_norm="folded"`` it also carries the LayerNorm shift, ``b_q + W_Qᵀ β`` (so it can be set where the
    checkpoint has no bias).
    """

    index: int
    component: str
    wq: Any
    wk_kv: Any
    bq: Any | None = None

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
    def wk(self) -> Any:
        """K weights expanded to (n_heads, d_model, head_dim): head h uses KV head ``h // group_size``.

        A new tensor group_size times the size of ``wk_kv``: convenient for small models and teaching; the scores
        (:func:`qkgeometry.scores.layer_scores`) never use it."""
        return repeat_heads(self.wk_kv, self.group_size)

    def kv_head(self, head: int) -> int:
        """Index g(h) of the KV head that query head ``head`` reads (repeat, not tile)."""
        return int(head) // self.group_size

    def factors(self, head: int | None = None) -> FactoredQK:
        """``(A, B)`` with ``W_qk = A @ B.T``, as a :class:`FactoredQK` (it unpacks as ``A, B``).

        ``head=h``: ``(W_Q^h, W_K^{g(h)})``, each (d_model, head_dim).
        ``head=None`` (the layer): ``M_layer = Σ_h W_Q^h W_K^{g(h)ᵀ} = Σ_g (Σ_{h∈g} W_Q^h) W_K^{gᵀ}``, returned as
        factors of shape (d_model, n_kv_heads·head_dim) — the grouped form, rank ≤ n_kv_heads·head_dim.
        """
        if head is not None:
            head = check_index(head, self.n_heads, "head", "(or None for the whole layer)", IndexError)
            return FactoredQK(self.wq[head], self.wk_kv[self.kv_head(head)])
        n_kv, d, hd = self.wk_kv.shape
        q_grouped = self.wq.reshape(n_kv, self.group_size, d, hd).sum(1)
        return FactoredQK(pack_heads(q_grouped), pack_heads(self.wk_kv))

    def matrix(self, head: int | None = None) -> Any:
        """The d_model × d_model bilinear form W_qk of one head, or of the layer (sum over heads)."""
        a, b = self.factors(head)
        return a @ b.T


def check_index(value: Any, size: int, name: str, note: str = "", error: type[Exception] = IndexError) -> int:
    """``value`` as a Python int in [0, size): Python and numpy integers are accepted, bools (an int subclass, so
    ``True`` would silently mean 1), floats and strings are refused by ``name``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or not 0 <= value < size:
        raise error(f"`{name}` must be an int in [0, {size}){' ' + note if note else ''}; got {value!r}.")
    return int(value)


def to_float64_heads(w: Any, device: Any = None) -> Any:
    """``w`` (n, d_model, head_dim), any dtype, as float64 in one conversion pass: a numpy array for a numpy
    ``w`` and no ``device``, else a torch tensor on ``device`` (default: where ``w`` is).

    The result is a (n, d_model, head_dim) view of a contiguous (n, head_dim, d_model) buffer, ``W_Qᵀ`` per head:
    the layout of a Linear weight (so the copy is a plain sequential conversion) and the one the batched scoring
    kernel :func:`qkgeometry.scores.layer_scores` multiplies without another copy.
    """
    if device is not None:
        w = to_torch(w, device)  # move in the stored dtype (fewer bytes), convert on the device
    if not is_torch_tensor(w):
        out = np.empty((w.shape[0], w.shape[2], w.shape[1]), dtype=np.float64)
        out[...] = w.swapaxes(1, 2)
        return out.swapaxes(1, 2)
    import torch

    out = torch.empty((w.shape[0], w.shape[2], w.shape[1]), dtype=torch.float64, device=w.device)
    out.copy_(w.transpose(1, 2))
    return out.transpose(1, 2)


# ------------------------------------------------------------------------------------------------ plans
#: layer i -> (wq, wk_kv) or (wq, wk_kv, bq), shapes as in :class:`QKLayer`, any float dtype
Splitter = Callable[[int], tuple[Any, ...]]


@dataclass(frozen=True)
class BlockPlan:
    """One attention block kind of a concrete source, as a reader resolved it.

    ``block``: the registry's description (tensor name templates, layout, norms); ``dims``: its sizes;
    ``split(i)``: layer i's ``(wq, wk_kv)`` or ``(wq, wk_kv, bq)``; ``get(name)``: any tensor of the source by
    the block's naming (for the input-norm gains), or None when the source has no other tensors (a random twin);
    ``has(name)``: whether the source holds a tensor (None: unknown).
    """

    block: AttentionBlock
    dims: Dims
    split: Splitter
    get: TensorGetter | None = None
    has: Callable[[str], bool] | None = None

    def with_input_norm_folded(self, model_type: str) -> BlockPlan:
        """This plan with the gains of the normalisation before attention folded in: each layer reads as
        ``diag(γ_q) W_qk diag(γ_k)`` (:func:`qkgeometry.architectures.fold_input_norm` gives the algebra; the
        LayerNorm shift joins the query bias). Chapter 4, "Which bilinear form"."""
        block, get, inner = self.block, self.get, self.split
        if block.input_norm is None or get is None:
            raise SourceError(
                f"`input_norm='folded'` is not available for model type {model_type!r} ({block.component} "
                "attention): the gain of the normalisation whose output that attention reads is not known for it "
                "(no such norm, a norm without a gain, or one not registered). Use input_norm='raw' (the default).")
        has = self.has or (lambda name: False)
        d = self.dims.d_model

        def gain(name: str) -> Any:
            g = as_float64(get(name)).reshape(-1)
            if numel(g) != d:
                raise SourceError(f"input-norm gain {name!r} has {numel(g)} entries, expected d_model = {d}; "
                                  "the checkpoint does not match its architecture.")
            return block.input_norm_offset + g

        def split(i: int) -> tuple[Any, ...]:
            wq, wk, bq = unpack_split(inner(i))
            q_name, k_name = input_norm_names(block, i)
            gq = gain(q_name)
            gk = gq if k_name == q_name else gain(k_name)
            shift = norm_shift_name(q_name)
            beta = as_float64(get(shift)).reshape(-1) if shift is not None and has(shift) else None
            return fold_input_norm(wq, wk, bq, gq, gk, beta)

        return dataclasses.replace(self, split=split)


def unpack_split(parts: tuple[Any, ...]) -> tuple[Any, Any, Any | None]:
    """A splitter's ``(wq, wk_kv)`` or ``(wq, wk_kv, bq)`` as a triple."""
    return parts[0], parts[1], (parts[2] if len(parts) > 2 else None)


@dataclass(frozen=True)
class SourcePlans:
    """What a format reader returns: a source resolved into plans, before any layer is read.

    ``revision`` is a content fingerprint (local files: a function, called when the revision is first read, since
    hashing the weight files is most of the cost of opening a local model) or a commit (the Hub), used as a cache
    key; ``close`` releases the reader's file handles; ``config`` holds the model's settings in the vocabulary of a
    Hugging Face ``config.json`` (a GGUF file's rotary metadata translated into it), None where the source has none.
    """

    name: str
    arch: Architecture
    plans: list[BlockPlan]
    source: str
    revision: str | Callable[[], str] | None
    close: Callable[[], None] | None = None
    config: Mapping[str, Any] | None = None


# ------------------------------------------------------------------------------------------------ models
class QKModel:
    """Metadata plus a lazy, layer-by-layer view of a model's Q/K weights. A context manager: ``with
    qg.load_qk(source) as model:`` closes the files it reads on exit.

    Attributes: ``name``, ``architecture`` (HF model_type), ``family`` (encoder / decoder / encoder-decoder),
    ``n_layers``, ``d_model``, ``n_heads``, ``n_kv_heads``, ``head_dim`` (of the first block kind), ``source`` and
    ``revision`` (a content fingerprint or Hub commit, used as a cache key), ``qk_norm`` ("folded" / "raw" for
    QK-norm models, None otherwise), ``input_norm`` ("raw" / "folded"), ``device`` (the torch device float64
    layers are placed on when read, the CPU by default; float64 on every device) and ``config`` (the model's settings
    as its reader found them, in ``config.json``'s vocabulary, e.g. its rotary embeddings; None when the source has
    none: :func:`qkgeometry.analyses.rotary.rope_spec` reads them here).
    """

    def __init__(self, name: str, arch: Architecture, plans: list[BlockPlan], source: str,
                 revision: str | Callable[[], str] | None,
                 on_close: Callable[[], None] | None = None, *, qk_norm: str | None = None,
                 input_norm: str = "raw", device: Any = None, config: Mapping[str, Any] | None = None):
        if not plans:
            raise SourceError(f"{source!r}: no attention blocks were found; nothing to score.")
        self.name = name
        self.architecture = arch.model_type
        self.family = arch.family
        self.arch = arch
        self.source = source
        self._revision = revision
        self.plans: tuple[BlockPlan, ...] = tuple(plans)
        self._on_close = on_close
        self._closed = False
        self.qk_norm = qk_norm
        self.input_norm = input_norm
        self.config = config
        self._device = None if device is None else _torch_device(device)
        first = plans[0].dims
        self.n_layers, self.d_model = first.n_layers, first.d_model
        self.n_heads, self.n_kv_heads, self.head_dim = first.n_heads, first.n_kv_heads, first.head_dim

    @classmethod
    def from_plans(cls, opened: SourcePlans, *, qk_norm: str | None = None, input_norm: str = "raw",
                   device: Any = None) -> QKModel:
        """Build the model that a reader resolved, with every setting fixed here (nothing is changed later)."""
        plans = list(opened.plans)
        if input_norm == "folded":
            try:
                plans = [p.with_input_norm_folded(opened.arch.model_type) for p in plans]
            except SourceError:
                if opened.close is not None:
                    opened.close()
                raise
        has_qk_norm = any(p.block.q_norm is not None for p in plans)
        return cls(opened.name, opened.arch, plans, opened.source, opened.revision, opened.close,
                   qk_norm=qk_norm if has_qk_norm else None, input_norm=input_norm, device=device,
                   config=opened.config)

    def with_device(self, device: Any) -> QKModel:
        """The same model (same open files) reading its layers onto ``device``; this one is unchanged."""
        twin = QKModel(self.name, self.arch, list(self.plans), self.source, self._revision, None,
                       qk_norm=self.qk_norm, input_norm=self.input_norm, device=device, config=self.config)
        twin._owner = self  # keeps the files open as long as either is alive
        return twin

    @property
    def revision(self) -> str | None:
        """The content fingerprint (local files) or Hub commit: the survey cache's key. A local model's is computed
        when first read (it hashes the weight files), so scoring alone never pays for it."""
        if callable(self._revision):
            self._revision = self._revision()
        return self._revision

    @property
    def device(self) -> Any:
        """The torch device that float64 layers are read onto (the CPU unless one was asked for). Reading it imports
        torch; the scoring path, which never needs it, does not."""
        return self._device if self._device is not None else _torch_device("cpu")

    @property
    def has_qk_norm(self) -> bool:
        """True for QK-norm models (Qwen3, Gemma-3, OLMo-2), whose RMSNorm gains can be folded into W_Q / W_K."""
        return any(p.block.q_norm is not None for p in self.plans)

    @property
    def components(self) -> list[str]:
        return [p.block.component for p in self.plans]

    def __len__(self) -> int:
        return sum(p.dims.n_layers for p in self.plans)

    def __iter__(self) -> Iterator[QKLayer]:
        return self.iter_layers()

    def iter_layers(self, *, convert: bool = True) -> Iterator[QKLayer]:
        """The layers one at a time (each read when reached). ``convert=False`` leaves the weights in their stored
        dtype (bf16, fp16...) on :attr:`device`, not float64: for :func:`qkgeometry.scores.layer_scores`, which
        converts them itself, a few KV groups at a time, so that a whole float64 copy of the layer never exists."""
        for plan in self.plans:
            for i in range(plan.dims.n_layers):
                yield self._read(plan, i, convert)

    def layer(self, index: int, component: str | None = None, *, convert: bool = True) -> QKLayer:
        """One layer, by index (a Python or numpy integer) and component for encoder-decoder models.
        ``convert=False``: as read, as in :meth:`iter_layers`."""
        plan = self._plan_for(component)
        i = check_index(index, plan.dims.n_layers, "index", f"for component {plan.block.component!r}")
        return self._read(plan, i, convert)

    def dims(self, component: str | None = None) -> Dims:
        return self._plan_for(component).dims

    def randomized(self, seed: int = 0) -> QKModel:
        """The random-init twin of this model: same architecture, blocks and shapes, with every Q/K weight drawn
        i.i.d. N(0, 0.02²), the initialisation of BERT, GPT-2, Llama and Gemma (``initializer_range``); both scores
        are scale-invariant, so the scale does not matter anyway.

        Deterministic: layer ``i`` of component ``c`` is drawn from a generator seeded by (seed, architecture,
        d_model, c, i), so a twin can be re-streamed layer by layer without holding anything. The twin never reads
        this model's weights and holds none of its files: this model can be closed as soon as the twin exists. Its
        ``source`` is ``random:<source>`` (what :func:`qkgeometry.survey` accepts). Chapter 4 uses it as the null
        baseline of the survey.
        """
        plans = [BlockPlan(p.block, p.dims, _random_splitter(self.architecture, self.d_model, p.block.component,
                                                             p.dims, seed))
                 for p in self.plans]
        return QKModel(f"{self.name} (random init)", self.arch, plans, f"{RANDOM_PREFIX}{self.source}",
                       f"random-seed{seed}", device=self._device, config=self.config)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Release the files this model reads (idempotent). Reading a layer afterwards is an error."""
        if not self._closed:
            self._closed = True
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

    def _plan_for(self, component: str | None) -> BlockPlan:
        if component is None:
            return self.plans[0]
        for plan in self.plans:
            if plan.block.component == component:
                return plan
        raise ValueError(f"`component` must be one of {self.components}; got {component!r}.")

    def _read(self, plan: BlockPlan, i: int, convert: bool = True) -> QKLayer:
        if self._closed or getattr(getattr(self, "_owner", None), "_closed", False):
            raise SourceError(f"the model {self.name!r} is closed (its files were released); open it again with "
                              "qkgeometry.load_qk to read its layers.")
        wq, wk, bq = unpack_split(plan.split(i))
        dev = self._device
        if not convert:  # as read: numpy stays numpy (no torch import) unless a device was asked for
            if dev is not None:
                wq, wk, bq = to_torch(wq, dev), to_torch(wk, dev), None if bq is None else to_torch(bq, dev)
            return QKLayer(i, plan.block.component, wq, wk, bq)
        wq, wk, bq = to_torch(wq, dev), to_torch(wk, dev), None if bq is None else as_float64(to_torch(bq, dev))
        return QKLayer(i, plan.block.component, to_float64_heads(wq), to_float64_heads(wk), bq)


def _torch_device(device: Any) -> Any:
    import torch

    return torch.device(device)


def _random_splitter(model_type: str, d_model: int, component: str, dims: Dims, seed: int) -> Splitter:
    """Layer ``i`` -> i.i.d. N(0, 0.02²) (wq, wk_kv) of ``dims``' shapes, seeded by (seed, model, component, i)."""
    def split(i: int) -> tuple[np.ndarray, np.ndarray]:
        import torch  # torch's generator: the twin's weights are those the book's numbers were computed from

        key = zlib.crc32(f"{seed}|{model_type}|{d_model}|{component}|{i}".encode())
        gen = torch.Generator().manual_seed(key)
        wq = torch.randn(dims.n_heads, dims.d_model, dims.head_dim, generator=gen, dtype=torch.float64) * 0.02
        wk = torch.randn(dims.n_kv_heads, dims.d_model, dims.head_dim, generator=gen, dtype=torch.float64) * 0.02
        return wq.numpy(), wk.numpy()

    return split
