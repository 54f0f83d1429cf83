"""catalogue.paper: the paper's tables, per-layer scores and training curves, shipped as package data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from qkgeometry.architectures import REGISTRY
from qkgeometry.catalogue import paper


def test_paper_per_layer_ships_every_group_in_book_conventions():
    frame = paper.paper_per_layer()
    assert set(frame["group"]) == {"language-models", "vision-models", "audio-models", "custom-models"}
    assert frame["symmetry"].between(-1, 1).all() and frame["directionality"].between(-1, 1).all()
    runs = paper.paper_per_layer("custom-models")
    assert runs["model"].nunique() == 12 and runs["step"].min() == 1000 and runs["step"].max() == 200_000
    with pytest.raises(ValueError, match="group"):
        paper.paper_per_layer("nonsense")


def test_paper_init_runs_are_twelve_paired_encoder_curves():
    runs = paper.paper_init_runs()
    assert list(runs.columns) == ["size", "layers", "d_model", "corpus", "init", "step", "train_loss"]
    assert len(runs) == 12 * 1000
    keys = ["size", "corpus", "init"]
    assert runs.groupby(keys).ngroups == 12 and not runs.duplicated([*keys, "step"]).any()
    assert set(runs["init"]) == {"default", "symmetric"}
    assert set(runs["corpus"]) == {"jigsaw", "wikipedia", "red_pajama"}
    shape = runs.groupby("size")[["layers", "d_model"]].agg(lambda v: set(v)).to_dict("index")
    assert shape == {"bert_small": {"layers": {4}, "d_model": {256}}, "bert": {"layers": {12}, "d_model": {768}}}
    assert np.isfinite(runs["train_loss"]).all() and (runs["train_loss"] > 0).all()
    for (size, corpus), pair in runs.groupby(["size", "corpus"]):
        grids = {init: g.sort_values("step")["step"].to_numpy() for init, g in pair.groupby("init")}
        assert np.array_equal(grids["default"], grids["symmetric"]), f"{size}/{corpus}: step grids differ"
        assert np.array_equal(grids["default"], np.arange(200, 200_001, 200)), f"{size}/{corpus}: not every 200 steps"
    # the 12-layer Jigsaw pair as logged: the symmetric run ends above the default run
    last = runs[(runs["size"] == "bert") & (runs["corpus"] == "jigsaw") & (runs["step"] == 200_000)]
    assert last.set_index("init")["train_loss"].to_dict() == {"default": 1.4195, "symmetric": 1.4303}


def test_paper_data_files_are_declared_package_data():
    """Every file in the package's data folders matches a package-data pattern of pyproject.toml, so a wheel (a
    Colab install) carries it: the paper's files beside the catalogue, the null table where it was."""
    import fnmatch

    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    root = Path(__file__).resolve().parents[2]
    declared = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    shipped = {}
    for package in ("qkgeometry", "qkgeometry.catalogue"):
        data = root / "src" / Path(*package.split(".")) / "data"
        files = sorted(p.relative_to(data.parent).as_posix() for p in data.iterdir() if p.is_file())
        shipped[package] = files
        unshipped = [f for f in files if not any(fnmatch.fnmatch(f, pat) for pat in declared[package])]
        assert not unshipped, f"{package}: not declared as package data in pyproject.toml: {unshipped}"
    assert shipped["qkgeometry.catalogue"] == ["data/README.md", "data/paper_init_runs.csv.gz",
                                              "data/paper_per_layer.csv.gz", "data/paper_scores.csv"]
    assert shipped["qkgeometry"] == ["data/directionality_null_quantiles.csv"]


def test_paper_models_classify_every_stack_and_keep_each_model_once():
    models = paper.paper_models()
    assert not models.duplicated(["model", "stack"]).any()
    assert set(models["stack"]) == {"encoder", "decoder", "decoder, not causal"}
    assert set(models["modality"]) == {"language", "vision", "audio"}
    by = models.set_index(["model", "stack"])
    # BEiT is listed in the language folder's BERT.pkl too: kept once, as vision
    assert by.loc[("microsoft/beit-base-patch16-224", "encoder"), "modality"] == "vision"
    assert by.loc[("microsoft/beit-base-patch16-224", "encoder"), "file"] == "BEiT.pkl"
    # the vision folder's LLAMA.pkl is Llama-3.2-Vision's vision encoder, the language folder's are decoders
    assert by.loc[("meta-llama/Llama-3.2-11B-Vision", "encoder"), "layers"] == 32
    assert by.loc[("meta-llama/Llama-3.2-1B", "decoder"), "modality"] == "language"
    # short names are mapped to Hub ids, so that the reported table joins
    assert ("openai-community/gpt2", "decoder") in by.index and ("gpt2", "decoder") not in by.index
    # summaries are over the layers of one file
    frame = paper.paper_per_layer("language-models")
    bart = frame[(frame["file"] == "BARTEncoder.pkl") & (frame["model"] == "facebook/bart-large")]
    row = by.loc[("facebook/bart-large", "encoder")]
    assert row["layers"] == len(bart) == 12
    assert row["symmetry_median"] == pytest.approx(bart["symmetry"].median())
    assert row["directionality_q25"] == pytest.approx(bart["directionality"].quantile(0.25))


def test_paper_models_pair_the_stacks_of_encoder_decoder_models():
    models = paper.paper_models()
    paired = models[models["paired"]]
    wide = paired.pivot(index="model", columns="stack", values="symmetry_median")
    assert len(wide) == 29 and wide.notna().sum(axis=1).eq(2).all()  # BART 4, T5 9, MusicGen 6, SpeechT5 3,
    families = wide.index.str.extract(r"(bart|speecht5|t5|musicgen|whisper|detr)", expand=False)  # Whisper 6, DETR 1
    assert families.value_counts().to_dict() == {"t5": 9, "musicgen": 6, "whisper": 6, "bart": 4, "speecht5": 3,
                                                 "detr": 1}
    assert set(paired.loc[paired["model"] == "facebook/detr-resnet-50", "stack"]) == {"encoder",
                                                                                      "decoder, not causal"}
    assert not models.loc[~models["paired"] & models["model"].str.contains("bert"), "paired"].any()


def test_paper_models_flag_gqa_fused_qkv_and_random_weights():
    models = paper.paper_models().set_index("model")
    assert models.loc["meta-llama/Meta-Llama-3-8B", "gqa"] and models.loc["mistralai/Mistral-7B-v0.1", "gqa"]
    assert not models.loc["meta-llama/Llama-2-7b-hf", "gqa"] and not models.loc["meta-llama/Llama-2-13b-chat-hf",
                                                                                 "gqa"]
    for heads, kv in paper.PAPER_GQA.values():
        assert 1 <= kv < heads and heads % kv == 0
    assert models.loc["openai-community/gpt2", "fused_qkv"] == REGISTRY["gpt2"].blocks[0].layout == "conv1d_fused"
    assert models.loc["EleutherAI/pythia-160m", "fused_qkv"] == "fused_interleaved"
    assert models.loc["microsoft/Phi-3-mini-128k-instruct", "fused_qkv"] == "fused_blocked"
    assert models.loc["answerdotai/ModernBERT-base", "fused_qkv"] == "fused_blocked"
    assert models.loc["microsoft/deberta-base", "fused_qkv"] == "fused_interleaved"
    assert models.loc["microsoft/deberta-v2-xlarge", "fused_qkv"] == ""  # v2: separate query_proj / key_proj
    assert models.loc["openai/imagegpt-small", "fused_qkv"] == "conv1d_fused"
    assert models.loc["EleutherAI/gpt-neo-125m", "fused_qkv"] == ""
    assert models.index[models["random_weights"]].tolist() == ["microsoft/Phi-3-mini-4k-instruct"]
    assert paper.fused_qkv_layout("google-bert/bert-base-uncased") == ""


def test_fused_layouts_come_from_the_architecture_registry():
    """Each paper model's fused layout is its model type's layout in the registry: no layout is written twice."""
    for model_type in {*paper.PAPER_MODEL_TYPES.values(), *paper.LAYOUT_LIKE.values()} - set(paper.LAYOUT_LIKE):
        if model_type in REGISTRY:
            layout = REGISTRY[model_type].blocks[0].layout
            fragment = next(f for f, t in paper.PAPER_MODEL_TYPES.items() if t == model_type)
            assert paper.fused_qkv_layout(f"org/{fragment}x") == ("" if layout == "linear" else layout), model_type
    for model_type, like in paper.LAYOUT_LIKE.items():
        assert model_type not in REGISTRY and like in REGISTRY, "a registered type needs no stand-in"
    # a more specific fragment wins: every BERT relative contains "bert"
    types = {m: paper.paper_model_type(m) for m in ("albert/albert-base-v2", "FacebookAI/roberta-base",
                                                  "microsoft/deberta-v2-xlarge", "microsoft/deberta-base",
                                                  "distilbert/distilbert-base-uncased", "answerdotai/ModernBERT-base",
                                                  "meta-llama/Llama-3.2-11B-Vision", "facebook/mbart-large-50")}
    assert types == {"albert/albert-base-v2": "albert", "FacebookAI/roberta-base": "roberta",
                     "microsoft/deberta-v2-xlarge": "deberta-v2", "microsoft/deberta-base": "deberta",
                     "distilbert/distilbert-base-uncased": "distilbert", "answerdotai/ModernBERT-base": "modernbert",
                     "meta-llama/Llama-3.2-11B-Vision": "mllama", "facebook/mbart-large-50": "mbart"}


def test_every_paper_model_of_a_registered_family_has_its_type():
    """A paper model from a result file of a family this package reads is listed in PAPER_MODEL_TYPES, so that its
    layout is read from the registry and not missed."""
    files = {"ALBERT.pkl", "BERT.pkl", "DEBERTA.pkl", "ModernBERT.pkl", "ROBERTA.pkl", "BARTEncoder.pkl",
             "BARTDecoder.pkl", "T5Encoder.pkl", "T5Decoder.pkl", "GPT-neo.pkl", "GPT.pkl", "LLAMA.pkl", "MISTRAL.pkl",
             "Pythia.pkl", "Tiny-GPT.pkl", "phi-1.pkl", "phi-2.pkl", "phi-3.pkl", "DINO.pkl", "DINOv2.pkl",
             "ViT-21k.pkl", "ViT.pkl", "iGPT.pkl", "whisper-encoder.pkl", "whisper-decoder.pkl"}
    models = paper.paper_models()
    missing = sorted(set(models.loc[models["file"].isin(files), "model"]) - {
        m for m in models["model"] if paper.paper_model_type(m)})
    assert not missing, f"paper models without a model type: {missing}"


def test_paper_models_refuse_an_unclassified_results_file(monkeypatch):
    frame = paper.paper_per_layer()
    extra = frame.iloc[:1].assign(file="NewModel.pkl")
    monkeypatch.setattr(paper, "paper_per_layer", lambda group=None: __import__("pandas").concat([frame, extra]))
    with pytest.raises(ValueError, match=r"NewModel\.pkl"):
        paper.paper_models()


def test_paper_models_flag_stacks_that_repeat_another_models_scores():
    models = paper.paper_models()
    duplicates = models[models["duplicate_of"] != ""]
    # MusicGen conditions on a frozen T5 text encoder; the diarisation WavLM repeats its base model
    assert sorted(duplicates["model"]) == sorted([f"facebook/musicgen-{s}" for s in
                                                  ("small", "medium", "large", "stereo-small", "stereo-medium",
                                                   "stereo-large")] + ["microsoft/wavlm-base-plus-sd"])
    assert set(duplicates["stack"]) == {"encoder"}
    by = models.set_index(["model", "stack"])
    assert by.loc[("facebook/musicgen-small", "encoder"), "duplicate_of"] == "google-t5/t5-base"
    assert by.loc[("google-t5/t5-base", "encoder"), "duplicate_of"] == ""
    assert by.loc[("facebook/musicgen-small", "decoder"), "duplicate_of"] == ""  # trained: its own scores
    # each flagged stack really repeats its original, layer by layer
    per_layer = paper.paper_per_layer()
    for model, original in zip(duplicates["model"], duplicates["duplicate_of"]):
        a, b = (per_layer[(per_layer["model"] == m) & per_layer["file"].str.contains("Encoder|wavlm")]
                .sort_values("layer")[["symmetry", "directionality"]].to_numpy() for m in (model, original))
        np.testing.assert_allclose(a, b, atol=1e-12)


def test_paper_scores_one_per_model_keeps_the_listing_that_matches_the_files():
    reported = paper.paper_scores(one_per_model=True)
    assert not reported["hub_id"].duplicated().any() and reported["hub_id"].notna().all()
    by = reported.set_index("hub_id")
    # listed twice with different values: the Hub-id listing is kept, the short name's values ride along
    row = by.loc["meta-llama/Meta-Llama-3-8B"]
    assert row["model_as_reported"] == "meta-llama/Meta-Llama-3-8B" and row["listed_twice_as"] == "llama3-8b"
    assert row["directionality_median"] == pytest.approx(0.01) and row["other_directionality_median"] == pytest.approx(-0.65)
    names = set(paper.paper_scores()["model_as_reported"])
    assert set(reported["listed_twice_as"]) - {""} <= names
    # every kept row that the per-layer files cover matches their median to the printed two decimals
    models = paper.paper_models()
    recomputed = models[models["stack"] != "decoder, not causal"].drop_duplicates("model").set_index("model")
    common = by.index.intersection(recomputed.index)
    assert len(common) >= 50
    for score in ("symmetry_median", "directionality_median"):
        assert (by.loc[common, score] - recomputed.loc[common, score]).abs().max() <= 0.0051, score
    # the first listing, by contrast, disagrees with the files for six models
    first = paper.paper_scores().dropna(subset=["hub_id"]).drop_duplicates("hub_id").set_index("hub_id")
    off = (first.loc[common, "directionality_median"] - recomputed.loc[common, "directionality_median"]).abs() > 0.0051
    assert off.sum() == 6
