"""zoo: offline models (incl. the assembled gemma-3 GGUF), presets, package list."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import qkgeometry as qg
from qkgeometry import zoo
from qkgeometry.architectures import REGISTRY


def test_presets_are_well_formed():
    assert set(zoo.PRESETS) == {"offline", "offline-all", "paper-language", "paper-vision", "paper-audio"}
    for name, entries in zoo.PRESETS.items():
        assert entries, name
        assert len({e.source for e in entries}) == len(entries), f"duplicate source in {name}"
        for e in entries:
            assert e.family in ("encoder", "decoder", "encoder-decoder") and e.init in ("pretrained", "random")
    offline = zoo.preset("offline")
    surveyed = [a for a in zoo.OFFLINE_MODELS if a not in zoo.NOT_SURVEYED]
    assert set(zoo.NOT_SURVEYED) <= set(zoo.OFFLINE_MODELS)
    assert [e.init for e in offline] == ["pretrained", "random"] * len(surveyed)
    assert all(e.source.startswith(("offline:", "random:offline:")) for e in offline)
    # every offline model, each followed by its random twin (same family and modality, the name says so)
    assert [e.source for e in offline[::2]] == [f"offline:{a}" for a in surveyed]
    assert {e.modality for e in offline} == {"language", "vision", "audio"}
    for real, twin in zip(offline[::2], offline[1::2]):
        assert twin.source == zoo.RANDOM_PREFIX + real.source and twin.name == f"{real.name} (random init)"
        assert (twin.family, twin.modality) == (real.family, real.modality)
    assert {e.modality for e in offline if "whisper" in e.source} == {"audio"}
    assert zoo.PRESETS["offline-all"] == zoo.PRESETS["offline"]  # kept as an alias
    assert {e.modality for e in zoo.PRESETS["paper-audio"]} == {"audio"}
    small = zoo.preset("paper-language", max_params_b=1.0, include_gated=False)
    assert small and all(e.params_b <= 1.0 and not e.gated for e in small)
    with pytest.raises(ValueError, match="unknown preset 'nope'; available: offline"):
        zoo.preset("nope")


#: Hub-id fragment -> the model_type of its config.json (more specific fragments first).
HUB_MODEL_TYPES = {"xlm-roberta": "xlm-roberta", "distilroberta": "roberta", "roberta": "roberta",
                   "distilbert-base": "distilbert", "distilgpt2": "gpt2", "albert": "albert", "ModernBERT": "modernbert",
                   "deberta-v3": "deberta-v2", "bert": "bert", "openai-gpt": "openai-gpt", "gpt2": "gpt2",
                   "gpt-neo-": "gpt_neo", "gpt-j": "gptj", "pythia": "gpt_neox", "Phi-3": "phi3", "phi-": "phi",
                   "Llama": "llama", "Mixtral": "mixtral", "Mistral": "mistral", "t5-": "t5", "bart": "bart",
                   "dinov2": "dinov2", "vit-": "vit", "whisper": "whisper"}


def test_every_paper_preset_model_has_a_registered_adapter():
    """Every Hub model of the paper presets maps to a model_type that the architecture registry can read."""
    hub_entries = [e for name, entries in zoo.PRESETS.items() if not name.startswith("offline") for e in entries]
    assert len(hub_entries) > 50
    for entry in hub_entries:
        model_type = next((t for fragment, t in HUB_MODEL_TYPES.items() if fragment in entry.source), None)
        assert model_type is not None, f"preset model {entry.source} has no known model_type"
        assert model_type in REGISTRY, f"preset model {entry.source} ({model_type}) has no registered adapter"
        assert REGISTRY[model_type].family == entry.family or entry.family == "encoder-decoder", entry.source


def test_offline_packages_are_every_models_package_and_chunks_and_are_installed():
    """OFFLINE_PACKAGES is derived from OFFLINE_MODELS (each model's package, then its chunk packages in order), and
    every one of them is installed here under the import name the zoo looks for."""
    import importlib.util

    expected = []
    for m in zoo.OFFLINE_MODELS.values():
        expected += [m.package] + [module.replace("_", "-") for module in m.parts]
    assert list(zoo.OFFLINE_PACKAGES) == expected and len(set(expected)) == len(expected)
    modules = [m.module for m in zoo.OFFLINE_MODELS.values()] + [p for m in zoo.OFFLINE_MODELS.values()
                                                                  for p in m.parts]
    missing = [module for module in modules if importlib.util.find_spec(module) is None]
    assert not missing, f"offline packages not installed: {missing} (`make install` installs them)"


@pytest.mark.slow  # assembles a 253 MB file
def test_gemma3_assembles_atomically_and_loads(tmp_path, monkeypatch):
    monkeypatch.setenv("QKGEOMETRY_CACHE", str(tmp_path))
    path = zoo.offline_path("gemma3-270m")
    assert path.parent == tmp_path and path.stat().st_size == 253_113_024
    assert not list(tmp_path.glob(".*.tmp"))
    assert zoo.offline_path("gemma3-270m") == path  # second call reuses the file
    model = qg.load_qk("offline:gemma3-270m")
    assert (model.architecture, model.n_layers, model.d_model, model.n_heads, model.n_kv_heads, model.head_dim) == (
        "gemma3_text", 18, 640, 4, 1, 256)
    assert model.qk_norm == "folded"
    folded, raw = model.layer(3), qg.load_qk("offline:gemma3-270m", qk_norm="raw").layer(3)
    ratio = (folded.wq / raw.wq).nanmedian(dim=1).values  # (heads, head_dim); 0/0 where Q4 weights are exactly 0
    assert ratio.min() > 0, "Gemma's gains are 1 + weight (llama.cpp stores them with the 1 added)"
    assert ratio.allclose(ratio[:1].expand_as(ratio), rtol=1e-5), "the q gains are shared by the 4 heads"


@pytest.mark.slow  # hashes the 253 MB of chunks
def test_gemma3_corrupt_chunk_is_a_clear_error(tmp_path, monkeypatch):
    import dataclasses

    monkeypatch.setenv("QKGEOMETRY_CACHE", str(tmp_path))
    bad = dataclasses.replace(zoo.OFFLINE_MODELS["gemma3-270m"], sha256="0" * 64)
    monkeypatch.setitem(zoo.OFFLINE_MODELS, "gemma3-270m", bad)
    with pytest.raises(ValueError, match="sha256"):
        zoo.offline_path("gemma3-270m")
    assert not list(tmp_path.iterdir()), "a failed assembly left a file behind"


def test_chapter4_colab_cell_installs_every_offline_package():
    import json
    from pathlib import Path

    nb = json.loads((Path(__file__).resolve().parents[1] / "notebooks" / "04_model_survey.ipynb").read_text())
    first = "".join(nb["cells"][0]["source"])
    # the packages of the models the chapter surveys (the `offline` preset), chunk packages included
    used = {e.source.removeprefix(zoo.RANDOM_PREFIX).removeprefix("offline:") for e in zoo.preset("offline")}
    needed = [p for a in used for p in (zoo.OFFLINE_MODELS[a].package,
                                        *(m.replace("_", "-") for m in zoo.OFFLINE_MODELS[a].parts))]
    assert len(needed) >= 7
    missing = [p for p in needed if p not in first]
    assert not missing, f"chapter 4's Colab cell does not install {missing}"


def test_paper_per_layer_ships_every_group_in_book_conventions():
    frame = zoo.paper_per_layer()
    assert set(frame["group"]) == {"language-models", "vision-models", "audio-models", "custom-models"}
    assert frame["symmetry"].between(-1, 1).all() and frame["directionality"].between(-1, 1).all()
    runs = zoo.paper_per_layer("custom-models")
    assert runs["model"].nunique() == 12 and runs["step"].min() == 1000 and runs["step"].max() == 200_000
    with pytest.raises(ValueError, match="group"):
        zoo.paper_per_layer("nonsense")


def test_paper_init_runs_are_twelve_paired_encoder_curves():
    runs = zoo.paper_init_runs()
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
    """Every file in the package's data folder matches a package-data pattern of pyproject.toml, so a wheel (a
    Colab install) carries it."""
    import fnmatch

    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    root = Path(__file__).resolve().parents[1]
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["qkgeometry"]
    data = root / "src" / "qkgeometry" / "data"
    files = sorted(p.relative_to(data.parent).as_posix() for p in data.iterdir() if p.is_file())
    assert "data/paper_init_runs.csv.gz" in files
    unshipped = [f for f in files if not any(fnmatch.fnmatch(f, pat) for pat in patterns)]
    assert not unshipped, f"not declared as package data in pyproject.toml: {unshipped}"


def test_paper_models_classify_every_stack_and_keep_each_model_once():
    models = zoo.paper_models()
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
    frame = zoo.paper_per_layer("language-models")
    bart = frame[(frame["file"] == "BARTEncoder.pkl") & (frame["model"] == "facebook/bart-large")]
    row = by.loc[("facebook/bart-large", "encoder")]
    assert row["layers"] == len(bart) == 12
    assert row["symmetry_median"] == pytest.approx(bart["symmetry"].median())
    assert row["directionality_q25"] == pytest.approx(bart["directionality"].quantile(0.25))


def test_paper_models_pair_the_stacks_of_encoder_decoder_models():
    models = zoo.paper_models()
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
    from qkgeometry.architectures import REGISTRY

    models = zoo.paper_models().set_index("model")
    assert models.loc["meta-llama/Meta-Llama-3-8B", "gqa"] and models.loc["mistralai/Mistral-7B-v0.1", "gqa"]
    assert not models.loc["meta-llama/Llama-2-7b-hf", "gqa"] and not models.loc["meta-llama/Llama-2-13b-chat-hf",
                                                                                 "gqa"]
    for heads, kv in zoo.PAPER_GQA.values():
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
    assert zoo.fused_qkv_layout("google-bert/bert-base-uncased") == ""
    # the catalogue's layouts agree with the architecture registry wherever the model type is registered
    for model_type, layout in zoo.PAPER_FUSED_LAYOUTS.values():
        if model_type in REGISTRY:
            assert REGISTRY[model_type].blocks[0].layout == layout, model_type


def test_paper_models_refuse_an_unclassified_results_file(monkeypatch):
    frame = zoo.paper_per_layer()
    extra = frame.iloc[:1].assign(file="NewModel.pkl")
    monkeypatch.setattr(zoo, "paper_per_layer", lambda group=None: __import__("pandas").concat([frame, extra]))
    with pytest.raises(ValueError, match=r"NewModel\.pkl"):
        zoo.paper_models()
