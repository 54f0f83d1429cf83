"""The paper's data and tables: what Saponati et al. (2025) report, and every per-layer score in their result files.

The files live in ``data/`` beside this module (their provenance is in ``data/README.md``). Chapters 3, 4 and 5 read
the authors' numbers through these functions only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "LAYOUT_LIKE",
    "PAPER_ALIASES",
    "PAPER_FILE_STACKS",
    "PAPER_GQA",
    "PAPER_LINEAGES",
    "PAPER_MODEL_TYPES",
    "PAPER_RANDOM_WEIGHTS",
    "fused_qkv_layout",
    "paper_init_runs",
    "paper_lineage",
    "paper_model_type",
    "paper_models",
    "paper_per_layer",
    "paper_scores",
]

_DATA = Path(__file__).with_name("data")

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


def paper_scores(one_per_model: bool = False) -> Any:
    """The paper's reported per-model medians and IQR sides (package data ``data/paper_scores.csv``, with notes
    on where each number comes from beside it), with a ``hub_id`` column (short names mapped through :data:`PAPER_ALIASES`).

    The authors' table lists many models twice, under a short name and under the Hub id. ``one_per_model=True``
    keeps one row per Hub id, the one listed under the Hub id where there is one (those rows match the per-layer
    result files), and adds ``listed_twice_as`` (the other listing's name, ``""`` when there is none) with
    ``other_symmetry_median`` / ``other_directionality_median``, that listing's values. Six models carry
    different values under their two names (directionality by up to 0.66); rows with no Hub id are dropped.
    Chapter 4, "The paper's table, reproduced".
    """
    import pandas as pd

    frame = pd.read_csv(_DATA / "paper_scores.csv")
    frame.insert(1, "hub_id", frame["model_as_reported"].map(lambda m: PAPER_ALIASES.get(m, m if "/" in m else None)))
    if not one_per_model:
        return frame
    frame = frame.dropna(subset=["hub_id"])
    under_hub_id = frame["model_as_reported"] == frame["hub_id"]
    kept = frame.assign(_rank=~under_hub_id).sort_values("_rank", kind="stable").drop_duplicates("hub_id")
    other = frame.drop(index=kept.index).drop_duplicates("hub_id").set_index("hub_id")
    kept = kept.drop(columns="_rank").sort_index()
    kept["listed_twice_as"] = kept["hub_id"].map(other["model_as_reported"]).fillna("")
    for score in ("symmetry_median", "directionality_median"):
        kept[f"other_{score}"] = kept["hub_id"].map(other[score])
    return kept.reset_index(drop=True)


def paper_per_layer(group: str | None = None) -> Any:
    """Every per-layer score in the authors' result files (package data ``data/paper_per_layer.csv.gz``), in the
    book's conventions (Notation page): one row per (file, model, checkpoint, layer).

    Columns: ``group`` (``language-models``, ``vision-models``, ``audio-models`` or ``custom-models``, the authors'
    own training runs), ``file``, ``model``, ``checkpoint``, ``step`` (the integer in ``checkpoint-N``; <NA> for
    pretrained models), ``layer``, ``symmetry``, ``directionality``, ``parameters``. ``group`` filters the rows.
    Chapters 3, 4 and 5 read the authors' numbers through this function only.
    """
    import pandas as pd

    frame = pd.read_csv(_DATA / "paper_per_layer.csv.gz")
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

    return pd.read_csv(_DATA / "paper_init_runs.csv.gz",
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

#: Hub-id fragment -> the ``model_type`` of the config.json of the paper's models whose architecture decides their
#: Q/K layout (first match wins, so more specific fragments come first: ``albert``, ``roberta`` and ``deberta`` all
#: contain ``bert``). :func:`fused_qkv_layout` reads the layout of each type from the architecture registry.
PAPER_MODEL_TYPES: dict[str, str] = {
    "ModernBERT": "modernbert", "albert": "albert", "xlm-roberta": "xlm-roberta", "roberta": "roberta",
    "deberta-v2": "deberta-v2", "deberta-v3": "deberta-v2", "microsoft/deberta-": "deberta",
    "distilbert-base": "distilbert", "bert_uncased": "bert", "bert-base": "bert", "bert-large": "bert",
    "distilgpt2": "gpt2", "imagegpt": "imagegpt", "openai-gpt": "openai-gpt", "gpt2": "gpt2",
    "gpt-neo-": "gpt_neo", "TinyStories": "gpt_neo", "gpt-j-": "gptj", "pythia": "gpt_neox",
    "Phi-3": "phi3", "microsoft/phi-": "phi",
    "Llama-3.2-11B-Vision": "mllama", "meta-llama/": "llama", "Mixtral": "mixtral", "Mistral": "mistral",
    "speecht5": "speecht5", "google-t5/": "t5", "google/t5-": "t5", "mbart": "mbart", "facebook/bart-": "bart",
    "whisper": "whisper", "vit-mae": "vit_mae", "dinov2": "dinov2", "dino-vit": "vit", "google/vit-": "vit",
    "microsoft/dit-": "beit", "microsoft/beit-": "beit",
}

#: Model types with no adapter in the architecture registry whose fused Q/K/V weight is laid out like a registered
#: type's, read from their transformers forward code: ImageGPT's ``c_attn`` is GPT-2's Conv1D, and DeBERTa (v1)'s
#: ``in_proj`` is split per head into [q, k, v] (interleaved), like GPT-NeoX's ``query_key_value``.
LAYOUT_LIKE: dict[str, str] = {"imagegpt": "gpt2", "deberta": "gpt_neox"}

#: Entries of the authors' files scored from a randomly initialised model (built with ``from_config`` in their
#: notebook), not from the released weights.
PAPER_RANDOM_WEIGHTS: tuple[str, ...] = ("microsoft/Phi-3-mini-4k-instruct",)


def paper_model_type(model: str) -> str:
    """The ``model_type`` of the paper's model ``model`` (Hub id) from :data:`PAPER_MODEL_TYPES`, or ``""`` when
    it is not listed there."""
    return next((model_type for fragment, model_type in PAPER_MODEL_TYPES.items() if fragment in model), "")


def fused_qkv_layout(model: str) -> str:
    """The fused Q/K/V layout of the paper's model ``model`` (Hub id), or ``""`` when Q and K are separate
    weights (or its architecture is not known here): ``"conv1d_fused"``, ``"fused_blocked"`` or
    ``"fused_interleaved"`` (see :data:`qkgeometry.architectures.Layout`), read from the architecture registry for
    the model's type (:func:`paper_model_type`, :data:`LAYOUT_LIKE`). Chapter 4, "The paper's table".

    >>> fused_qkv_layout("EleutherAI/pythia-160m"), fused_qkv_layout("google-bert/bert-base-uncased")
    ('fused_interleaved', '')
    """
    from ..architectures import REGISTRY  # torch: imported on first use only

    model_type = paper_model_type(model)
    arch = REGISTRY.get(LAYOUT_LIKE.get(model_type, model_type))
    layout = "linear" if arch is None else arch.blocks[0].layout
    return "" if layout == "linear" else layout


def _duplicate_stacks(per_layer: Any, stacks: Any) -> list[str]:
    """For each row of ``stacks`` (one per model and stack), the earlier model with identical per-layer scores."""
    first_seen: dict[tuple, str] = {}
    arrays = {key: tuple(np.round(group.sort_values("layer")[["symmetry", "directionality"]].to_numpy(), 12).ravel())
              for key, group in per_layer.groupby(["model", "stack"], sort=False)}
    rank = stacks["modality"].map({"language": 0, "vision": 1, "audio": 2}).fillna(3)
    for i in rank.sort_values(kind="stable").index:
        first_seen.setdefault((stacks.at[i, "stack"], arrays[(stacks.at[i, "model"], stacks.at[i, "stack"])]),
                              stacks.at[i, "model"])
    out = []
    for model, stack in zip(stacks["model"], stacks["stack"]):
        original = first_seen[(stack, arrays[(model, stack)])]
        out.append("" if original == model else original)
    return out


#: Result files of one model lineage under two names, merged so that a lineage counts once where evidence is counted
#: by family: Whisper v1-v3 (one architecture and recipe, retrained), ViT pre-trained on ImageNet-21k and its
#: ImageNet-1k fine-tunes, and phi-1, phi-2 and phi-3 (one small-decoder lineage). Keys are :func:`paper_lineage`'s
#: file stems.
PAPER_LINEAGES = {"whisperv2": "whisper", "whisperv3": "whisper", "vit-21k": "vit", "phi-1": "phi", "phi-2": "phi",
                  "phi-3": "phi"}


def paper_lineage(file: str, merge: bool = True) -> str:
    """The model family of one of the authors' result files: ``BARTEncoder.pkl`` and ``BARTDecoder.pkl`` are one
    family (``"bart"``), and with ``merge`` the files of one lineage are one (:data:`PAPER_LINEAGES`). Chapter 4.

    >>> paper_lineage("BARTDecoder.pkl"), paper_lineage("WhisperV3-encoder.pkl"), paper_lineage("Phi-2.pkl", merge=False)
    ('bart', 'whisper', 'phi-2')
    """
    stem = file.removesuffix(".pkl")
    for part in ("-encoder", "-decoder", "Encoder", "Decoder", "-Encoder", "-Decoder"):
        stem = stem.removesuffix(part)
    stem = stem.lower()
    return PAPER_LINEAGES.get(stem, stem) if merge else stem


def paper_models() -> Any:
    """The authors' pretrained models, one row per (model, attention stack), summarised over layers.

    Built from :func:`paper_per_layer` (the language, vision and audio groups; the training runs are left out), with
    short names mapped to Hub ids (:data:`PAPER_ALIASES`) and each file's stack from :data:`PAPER_FILE_STACKS`. A
    model listed in two files of the same stack (BEiT in ``BERT.pkl`` and ``BEiT.pkl``, DINOv2 and DiT in
    ``DINO.pkl``) is kept once, under the vision group when it is in one.

    Columns: ``model``, ``file``, ``family`` (the file's family, :func:`paper_lineage` unmerged), ``lineage``
    (families of one lineage merged, :data:`PAPER_LINEAGES`), ``modality`` (``language``, ``vision``, ``audio``), ``stack`` (``encoder``,
    ``decoder``, ``decoder, not causal``), ``paired`` (True for a stack of an encoder-decoder model whose other
    stack is also in the files), ``layers``, ``symmetry_median``, ``symmetry_q25``, ``symmetry_q75`` and the same
    three for ``directionality``, and four flags: ``gqa`` (:data:`PAPER_GQA`), ``fused_qkv``
    (:func:`fused_qkv_layout`, ``""`` when not fused), ``random_weights`` (:data:`PAPER_RANDOM_WEIGHTS`) and
    ``duplicate_of``: the model whose stack has the same per-layer scores to twelve digits, the first such stack in
    the order language, vision, audio, then the files' order (``""`` for that first one and for every distinct
    stack): audio models reuse language models' text encoders, not the other way round. Six MusicGen text encoders repeat
    ``google-t5/t5-base``'s encoder (MusicGen conditions on a frozen T5) and ``microsoft/wavlm-base-plus-sd``
    repeats ``microsoft/wavlm-base-plus``; a test that counts models as independent drops these rows. Chapter 4.
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
    out["duplicate_of"] = _duplicate_stacks(frame, out)
    out["family"] = out["file"].map(lambda f: paper_lineage(f, merge=False))
    out["lineage"] = out["file"].map(paper_lineage)
    columns = ["model", "file", "family", "lineage", "modality", "stack", "paired", "layers", "symmetry_median",
               "symmetry_q25", "symmetry_q75", "directionality_median", "directionality_q25", "directionality_q75",
               "gqa", "fused_qkv", "random_weights", "duplicate_of"]
    return pd.DataFrame(out[columns]).reset_index(drop=True)

