"""Format readers, one module each, and :func:`load_qk`, the one place that knows every format.

Each reader has the same small interface: ``sniff(source) -> bool`` (is this mine?) and
``open_*(source, name, qk_norm) -> SourcePlans`` (the source resolved into one
:class:`~qkgeometry.model.BlockPlan` per attention block kind, before any layer is read). :func:`load_qk` picks
the reader from :data:`PATH_READERS` (files and folders, in order) or by the kind of source, and builds the
:class:`~qkgeometry.model.QKModel` once, with every setting fixed.

=========================  ================================================================================
module                     reads
=========================  ================================================================================
``safetensors``            a Hugging Face model folder: ``config.json`` + ``*.safetensors`` (sharded or not)
``gguf``                   a ``.gguf`` file (llama.cpp; any quantisation ``gguf`` dequantises)
``ctranslate2``            a CTranslate2 Whisper ``model.bin`` (recognised by its header, never unpickled)
``onnx``                   an ``.onnx`` graph (Q/K found from the graph's structure: ``onnx_walk``)
``module``                 an in-memory ``transformers.PreTrainedModel`` (or a wrapper of one)
``hub`` (a package)        a Hugging Face Hub repo id or ``hf://`` path: only the Q/K bytes, by range request
``tensors``                named tensors beside Q/K (embeddings, norm gains) or rows of them, by range
``hf_config``, ``files``   shared: config.json → plans; file-system checks and fingerprints
=========================  ================================================================================

``offline:<name>`` aliases name models shipped as PyPI packages (:mod:`qkgeometry.catalogue`); they resolve to a
path, read like any other.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._files import check_regular_file, path_exists
from ..architectures import InputNorm, QKNorm
from ..errors import SourceError
from ..model import QKModel, SourcePlans
from ..source_names import HF_PREFIX, OFFLINE_PREFIX, RANDOM_PREFIX
from . import ctranslate2, module, onnx, safetensors

if TYPE_CHECKING:
    from .hub import FetchMode

__all__ = ["PATH_READERS", "load_qk", "open_model"]

Opener = Callable[[Path, "str | None", QKNorm], SourcePlans]


def _hub() -> Any:
    """The Hub reader, imported when a source is not a local path (its HTTP client is not needed to read files)."""
    from . import hub

    return hub


def _gguf() -> Any:
    """The GGUF reader, imported when a path gets that far (the ``gguf`` package costs 0.1 s to import, and a
    model folder is recognised before it)."""
    from . import gguf

    return gguf

#: (format, sniff, open) for files and folders, tried in order; the first whose sniff accepts the path reads it.
PATH_READERS: tuple[tuple[str, Callable[[Path], bool], Opener], ...] = (
    ("onnx", onnx.sniff, onnx.open_onnx),
    ("safetensors", lambda p: p.is_dir(), lambda p, n, q: safetensors.open_folder(p, n or p.name, q)),
    ("gguf", lambda p: _gguf().sniff(p), lambda p, n, q: _gguf().open_gguf(p, n or p.stem, q)),
    ("ctranslate2", ctranslate2.sniff, ctranslate2.open_ctranslate2),
)


def load_qk(source: Any, *, revision: str | None = None, name: str | None = None,
            qk_norm: QKNorm = "folded", input_norm: InputNorm = "raw", device: Any = None,
            fetch: FetchMode = "remote") -> QKModel:
    """Open ``source`` and return a lazy :class:`~qkgeometry.QKModel` that reads one layer at a time.

    ``source``: a local Hugging Face folder (config.json + safetensors), a ``.gguf`` file, an ONNX graph, a
    CTranslate2 Whisper ``model.bin``, an ``offline:<name>`` alias, a Hub id or ``hf://org/name[@revision]`` (needs
    network the first time) or a ``transformers.PreTrainedModel`` in memory, also inside the wrappers people use
    (``torch.compile``, DDP, a PEFT/LoRA model, read with its adapters' deltas added; TransformerLens's
    ``TransformerBridge``; an nnsight model: :mod:`qkgeometry.readers.module`). ``revision`` picks a Hub revision; ``name``
    labels the model.

    ``fetch`` (Hub sources): ``"remote"`` (default) fetches only the tensors scoring reads, by range request, into
    a per-commit cache (a rerun needs no network); ``"snapshot"`` downloads every safetensors file first
    (:mod:`qkgeometry.readers.hub`).

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
    from ..devices import resolve_device

    # before opening anything: a clear error if CUDA is asked for and absent (no device: numpy, no torch import)
    dev = resolve_device(device) if device is not None else None
    opened = open_source_plans(source, revision=revision, name=name, qk_norm=qk_norm, fetch=fetch)
    return QKModel.from_plans(opened, qk_norm=qk_norm, input_norm=input_norm, device=dev)


def open_model(source: Any, *, qk_norm: QKNorm = "folded", input_norm: InputNorm = "raw",
               device: Any = None) -> QKModel:
    """Open one source as a survey or an analysis does: anything :func:`load_qk` accepts; a QKModel, used as it is
    (for another ``device``, a view of it on that device: the caller's model is neither moved nor closed); or
    ``"random:<source>"``, the random-init twin of ``source`` (:meth:`QKModel.randomized`; it has no normalisation
    gains, so it is the same for both ``input_norm`` values and is labelled ``raw``)."""
    from ..devices import resolve_device

    if input_norm not in ("folded", "raw"):
        raise ValueError(f"`input_norm` must be 'raw' or 'folded'; got {input_norm!r}.")
    if isinstance(source, QKModel):
        if input_norm == "folded" and source.input_norm != "folded":
            raise ValueError(f"`input_norm='folded'` was asked for, but the QKModel {source.name!r} was loaded with "
                             "input_norm='raw'; load it with qkgeometry.load_qk(..., input_norm='folded') or pass the "
                             "source itself.")
        if device is not None and resolve_device(device) != source.device:
            return source.with_device(resolve_device(device))  # the caller's model is unchanged
        return source
    if isinstance(source, str) and source.startswith(RANDOM_PREFIX):
        # the twin reads nothing of its source: the source's files are closed before the twin is used
        with load_qk(source[len(RANDOM_PREFIX):], qk_norm=qk_norm, device=device) as base:
            return base.randomized()
    return load_qk(source, qk_norm=qk_norm, input_norm=input_norm, device=device)


def open_source_plans(source: Any, *, revision: str | None = None, name: str | None = None,
                      qk_norm: QKNorm = "folded", fetch: FetchMode = "remote") -> SourcePlans:
    """Resolve ``source`` into the plans of its reader (see :func:`load_qk` for the kinds of source)."""
    if module.sniff(source):
        return module.open_module(source, name, qk_norm)
    if isinstance(source, os.PathLike):
        source = os.fspath(source)
    if not isinstance(source, str):
        raise TypeError(f"`source` must be a path, an 'offline:<name>' alias, a Hub id or a transformers "
                        "PreTrainedModel (or a wrapper of one: torch.compile, DDP, PEFT, TransformerLens's "
                        f"TransformerBridge, nnsight); got {type(source).__name__}.")
    if "\0" in source:
        raise SourceError("`source` contains a NUL byte, which no file name can hold; pass the path as text.")
    if source.startswith(OFFLINE_PREFIX):
        from ..catalogue.offline import offline_path

        return open_path(offline_path(source[len(OFFLINE_PREFIX):]), name or source, qk_norm)
    if source.startswith(HF_PREFIX):
        return _hub().open_hub(source, revision, name, qk_norm, fetch)
    try:
        path = Path(source).expanduser()
    except RuntimeError as e:  # "~nosuchuser/...": Python cannot expand an unknown user's home
        raise SourceError(f"`source` {source!r} starts with '~user' but that user does not exist ({e}); "
                          "pass the full path instead.") from e
    if path_exists(path, "`source`"):
        return open_path(path, name, qk_norm)
    if _hub().looks_like_path(source):
        raise SourceError(f"`source` {source!r} does not exist. Pass an existing model folder (config.json + "
                          "*.safetensors), a .gguf file, an 'offline:<name>' alias or a Hub id.")
    return _hub().open_hub(source, revision, name, qk_norm, fetch)


def open_path(path: Path, name: str | None, qk_norm: QKNorm = "folded") -> SourcePlans:
    """The plans of an existing file or folder, by the first reader of :data:`PATH_READERS` that accepts it."""
    if not path.is_dir():
        check_regular_file(path, "`source`")
    for _, sniff, opener in PATH_READERS:
        if sniff(path):
            return opener(path, name, qk_norm)
    raise SourceError(f"`source` {str(path)!r} is neither a model folder nor a .gguf file (nor an .onnx file or a "
                      "CTranslate2 model.bin). Pass a folder with config.json and *.safetensors, a .gguf file or an "
                      ".onnx file.")
