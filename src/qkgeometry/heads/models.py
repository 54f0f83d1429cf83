"""Forward passes of the offline models with their real weights, for the head-behaviour chapter (book chapter 7).

:func:`forward_model` returns a ``transformers`` model in evaluation mode with eager attention (so attention
patterns can be read and heads edited) and its tokenizer:

* ``minilm-l6`` and ``mpnet-base``: the encoders' own safetensors folders (``AutoModel``; no language-model head);
* ``smollm2-135m`` and ``qwen2.5-coder-0.5b``: the decoders rebuilt from their GGUF files by transformers
  (``from_pretrained(folder, gguf_file=name)``, dequantised to float32). Converting a GGUF file and its tokenizer
  takes one to several minutes, so the rebuilt model is saved once, as a safetensors folder, under
  :func:`qkgeometry.catalogue.offline.cache_dir` (``forward/<alias>``) and read from there afterwards.

How the rebuilt decoders are checked (:func:`rebuilt_check`): their W_Q and W_K equal the ones
:func:`qkgeometry.load_qk` reads from the same GGUF file with the package's own reader (which undoes llama.cpp's
row permutation independently); and their next-token loss on held-out text is that of a working language model
(a cross-entropy of a few nats, far below the log-vocabulary loss of a model whose rows are scrambled).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import sys
from pathlib import Path

import numpy as np
import torch

__all__ = [
    "DECODERS",
    "ENCODERS",
    "FORWARD_MODELS",
    "attention_modules",
    "forward_model",
    "held_out_texts",
    "qk_projections",
    "quiet_gguf_progress",
    "rebuilt_check",
    "token_batch",
]

ENCODERS = ("minilm-l6", "mpnet-base")
DECODERS = ("smollm2-135m", "qwen2.5-coder-0.5b")
#: Offline models with a forward pass in chapter 7.
FORWARD_MODELS = ENCODERS + DECODERS
_CACHE_VERSION = "1"


def _cache_folder(alias: str) -> Path:
    from ..catalogue.offline import cache_dir

    return cache_dir() / "forward" / alias


_GGUF_PROGRESS = "de-quantizing GGUF tensors"  # in the description of transformers' conversion bar


@contextlib.contextmanager
def quiet_gguf_progress():
    """Drop the progress bar transformers prints (with a plain ``tqdm``, not switched off by its own
    ``disable_progress_bar``) while it dequantises a GGUF file; anything else written to stderr is passed on.
    :func:`forward_model` rebuilds the decoders of chapter 7 inside it."""
    buffer = io.StringIO()
    try:
        with contextlib.redirect_stderr(buffer):
            yield
    finally:
        kept = [line for line in buffer.getvalue().replace("\r", "\n").splitlines()
                if line.strip() and _GGUF_PROGRESS not in line]
        if kept:
            print("\n".join(kept), file=sys.stderr)


def forward_model(alias: str, dtype: torch.dtype = torch.float32, use_hub: bool | None = None):
    """``(model, tokenizer)`` of offline model ``alias`` (one of :data:`FORWARD_MODELS`), eval mode, eager
    attention. Decoders are ``AutoModelForCausalLM`` (their loss is the next-token cross-entropy); encoders are
    ``AutoModel``. ``use_hub`` (default: on Colab only) loads the model's Hub checkpoint instead; for the decoders
    that is the unquantised model, so its numbers differ slightly from the recorded runs. Chapter 7."""
    from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer

    from ..catalogue.offline import OFFLINE_MODELS, offline_path, on_colab

    if alias not in FORWARD_MODELS:
        raise ValueError(f"alias: no forward pass for {alias!r}; available: {', '.join(FORWARD_MODELS)}.")
    if use_hub or (use_hub is None and on_colab()):
        hub_id = OFFLINE_MODELS[alias].hub_id
        auto = AutoModel if alias in ENCODERS else AutoModelForCausalLM
        model = auto.from_pretrained(hub_id, attn_implementation="eager", dtype=dtype)
        return model.eval(), AutoTokenizer.from_pretrained(hub_id)
    path = offline_path(alias)
    if alias in ENCODERS:
        model = AutoModel.from_pretrained(path, attn_implementation="eager", dtype=dtype)
        tokenizer = AutoTokenizer.from_pretrained(path)
        return model.eval(), tokenizer
    folder = _cache_folder(alias)
    stamp = folder / "qkgeometry-source.json"
    expected = {"gguf": path.name, "size": path.stat().st_size, "version": _CACHE_VERSION}
    if not (stamp.is_file() and json.loads(stamp.read_text()) == expected):
        with quiet_gguf_progress():
            model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
            tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
        from safetensors.torch import save_model

        folder.mkdir(parents=True, exist_ok=True)
        save_model(model, str(folder / "model.safetensors"), metadata={"format": "pt"})
        config = model.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config  # dequantised: the saved weights are plain float32
        config.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        stamp.write_text(json.dumps(expected))
    model = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager", dtype=dtype)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    return model.eval(), tokenizer


def held_out_texts(n: int, seed: int = 7, min_chars: int = 400) -> list[str]:
    """``n`` Wikipedia lead sections of at least ``min_chars`` characters, drawn without replacement with ``seed``
    from the offline corpus (chapters 3 and 5 train on other draws; this chapter trains nothing). Chapter 7."""
    from ..catalogue.offline import wikipedia_articles

    texts = [t for _, t in wikipedia_articles() if len(t) >= min_chars]
    rng = np.random.default_rng(seed)
    return [texts[i] for i in rng.choice(len(texts), size=n, replace=False)]


def token_batch(tokenizer, texts: list[str], length: int) -> torch.Tensor:
    """(len(texts), length) token ids, each text cut to its first ``length`` tokens (with the tokenizer's own
    special tokens: [CLS] … [SEP] for encoders, the BOS token where the decoder's tokenizer adds one). Texts that
    are too short are refused. Chapter 7."""
    rows = []
    for t in texts:
        ids = tokenizer(t, truncation=True, max_length=length)["input_ids"]
        if len(ids) < length:
            raise ValueError(f"texts: a text has only {len(ids)} tokens, fewer than length = {length}; pass longer "
                             f"texts or a smaller length.")
        if tokenizer.sep_token_id is not None and ids[0] == tokenizer.cls_token_id:
            ids = [*ids[:length - 1], tokenizer.sep_token_id]
        rows.append(ids[:length])
    return torch.tensor(rows)


def attention_modules(model: torch.nn.Module, component: str | None = None) -> list[torch.nn.Module]:
    """The attention modules of a ``transformers`` model, in layer order, where the architecture registry says they
    are (:func:`qkgeometry.readers.module.attention_paths`): those holding separate query and key projections
    (``q_proj``/``k_proj``: Llama, Qwen2; ``query``/``key``: BERT; ``q``/``k``: MPNet). Every step of chapter 7
    (geometry, surgery, the rebuilt-model check) numbers layers by this one list, so layer ``i`` is the same module
    everywhere.

    ``component`` picks one kind of attention of a model with several (an encoder-decoder such as Whisper:
    ``"encoder"``, ``"decoder"`` or ``"cross"``), whose layers are numbered on their own; for such a model it must
    be given, so that a decoder's cross-attention is never numbered as a layer of its own. A model outside the
    registry (no ``config.model_type``) is read by the projection names the registry knows, as one stack. A model
    without such modules (GPT-2's fused ``c_attn``) raises ``ValueError``."""
    from ..architectures import REGISTRY

    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if model_type in REGISTRY:
        from ..readers.module import attention_paths

        paths = attention_paths(model)
        if component is None and len(paths) > 1:
            raise ValueError(f"model: a {model_type} model has {len(paths)} kinds of attention "
                             f"({', '.join(paths)}), each with its own layers; pass component= one of them.")
        if component is not None and component not in paths:
            raise ValueError(f"component: a {model_type} model has {', '.join(repr(c) for c in paths) or 'no'} "
                             f"attention with separate query and key projections; got {component!r}.")
        modules = dict(model.named_modules())
        found = [modules[path] for path, _, _ in paths[component or next(iter(paths))]] if paths else []
    elif component not in (None, "self"):
        raise ValueError(f"component: {type(model).__name__} is not in the architecture registry, so its attention "
                         f"is read as one stack ('self'); got {component!r}.")
    else:
        found = [m for m in model.modules() if _qk_names(m) is not None]
    if not found:
        raise ValueError(f"model: {type(model).__name__} has no attention module with separate query and key "
                         "projections (q_proj/k_proj, query/key or q/k), which the head analyses read; pass a BERT-, "
                         "MPNet-, Llama- or Qwen2-style model, or score this one with qkgeometry.score_model(model, "
                         "per='head').")
    return found


def qk_projections(module: torch.nn.Module) -> tuple[torch.nn.Linear, torch.nn.Linear]:
    """The query and key ``Linear`` layers of one of :func:`attention_modules`."""
    names = _qk_names(module)
    if names is None:
        raise ValueError(f"module: {type(module).__name__} has no separate query and key projections.")
    return getattr(module, names[0]), getattr(module, names[1])


def _qk_names(module: torch.nn.Module) -> tuple[str, str] | None:
    """The (query, key) attribute names of ``module``'s projections, as the architecture registry spells them."""
    from ..architectures import projection_names

    for q, k in projection_names():
        if isinstance(getattr(module, q, None), torch.nn.Linear) and isinstance(getattr(module, k, None),
                                                                                   torch.nn.Linear):
            return q, k
    return None


def rebuilt_check(alias: str, model=None, tokenizer=None, n_texts: int = 4, length: int = 64) -> dict:
    """Evidence that the rebuilt decoder ``alias`` is the checkpoint: the largest difference between its W_qk of
    each head and the one :func:`qkgeometry.load_qk` reads from the GGUF file (relative to ‖W_qk‖), its held-out
    next-token loss, and the loss of the same model with the rows of every W_Q scrambled inside each head (a broken
    rebuild looks like that). Chapter 7."""
    from .. import load_qk
    from ..catalogue.offline import offline_path

    if alias not in DECODERS:
        raise ValueError(f"alias: {alias!r} is not a rebuilt decoder; choose from {', '.join(DECODERS)}.")
    if model is None:
        model, tokenizer = forward_model(alias)
    qk = load_qk(str(offline_path(alias)))
    worst = 0.0
    modules = attention_modules(model)
    for layer, m in zip(qk, modules, strict=True):
        hd = qk.head_dim
        group = qk.n_heads // qk.n_kv_heads
        wq = np.asarray(layer.wq, dtype=np.float64)
        wk = np.asarray(layer.wk_kv, dtype=np.float64)
        q_w, k_w = (t.weight.detach().to(torch.float64).numpy() for t in qk_projections(m))
        for h in range(qk.n_heads):
            g = h // group
            ours = wq[h] @ wk[g].T
            theirs = q_w[h * hd:(h + 1) * hd].T @ k_w[g * hd:(g + 1) * hd]
            worst = max(worst, float(np.linalg.norm(ours - theirs) / np.linalg.norm(ours)))
    ids = token_batch(tokenizer, held_out_texts(n_texts, seed=11), length)
    with torch.no_grad():
        loss = float(model(ids, labels=ids, use_cache=False).loss)
        rng = np.random.default_rng(0)
        saved = [qk_projections(m)[0].weight.detach().clone() for m in modules]
        try:
            for m in modules:
                w = qk_projections(m)[0].weight
                perm = np.concatenate([h * qk.head_dim + rng.permutation(qk.head_dim) for h in range(qk.n_heads)])
                w.copy_(w[torch.as_tensor(perm)])
            scrambled = float(model(ids, labels=ids, use_cache=False).loss)
        finally:
            for m, w in zip(modules, saved, strict=True):
                qk_projections(m)[0].weight.copy_(w)
    return {"model": alias, "max_relative_wqk_difference": worst, "loss": loss, "scrambled_loss": scrambled,
            "log_vocab": math.log(model.config.vocab_size), "tokens": int(ids.numel())}
