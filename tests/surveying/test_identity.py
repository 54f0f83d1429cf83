"""qkgeometry.surveying.identity: a model is keyed by its resolved source (one model however its path is spelled, two
models when two folders share a name), tables and figures tell same-named models apart, and a figure shows one level
and one form (a results file that mixes them is refused, naming the option that picks one)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest
import torch
from safetensors.torch import save_file

import qkgeometry as qg
from bounded import one_line_error
from qkgeometry.cli import main
from qkgeometry.surveying.store import SurveyStore, read_store

D, HEADS, LAYERS = 8, 2, 2


def make_model(folder: Path, seed: int) -> str:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(
        {"model_type": "llama", "hidden_size": D, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
         "num_key_value_heads": HEADS, "intermediate_size": 16, "vocab_size": 20}))
    gen = torch.Generator().manual_seed(seed)
    tensors = {f"model.layers.{i}.self_attn.{p}_proj.weight": torch.randn(D, D, generator=gen)
               for i in range(LAYERS) for p in "qk"}
    tensors |= {f"model.layers.{i}.input_layernorm.weight": torch.rand(D, generator=gen) + 0.5 for i in range(LAYERS)}
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return str(folder)


def test_three_spellings_of_one_path_are_one_stored_model(tmp_path, monkeypatch):
    make_model(tmp_path / "m0", seed=0)
    monkeypatch.chdir(tmp_path)
    store = tmp_path / "r.sqlite"
    computed = [qg.survey([s], cache=store, progress=False).attrs["computed"]
                for s in ("m0", "./m0", str(tmp_path / "m0"))]
    assert computed == [["m0"], [], []]
    with SurveyStore(store) as s:
        assert s.counts() == (1, LAYERS)
    assert read_store(store)["source"].unique().tolist() == [str(tmp_path / "m0")]


def test_one_relative_name_in_two_working_folders_is_two_models(tmp_path, monkeypatch):
    a = make_model(tmp_path / "a" / "model", seed=1)
    b = make_model(tmp_path / "b" / "model", seed=2)
    store = tmp_path / "r.sqlite"
    monkeypatch.chdir(tmp_path / "a")
    assert main(["survey", "model", "--out", str(store)]) == 0
    monkeypatch.chdir(tmp_path / "b")
    assert main(["survey", "model", "--out", str(store)]) == 0
    stored = read_store(store)
    assert sorted(stored["source"].unique()) == [a, b] and len(stored) == 2 * LAYERS
    summary = qg.summarize(stored)
    assert summary["model"].tolist() == ["a/model", "b/model"] and summary["n"].tolist() == [LAYERS, LAYERS]


def test_two_folders_of_one_name_are_two_rows_of_every_table(tmp_path, monkeypatch, capsys):
    make_model(tmp_path / "x" / "m", seed=3)
    make_model(tmp_path / "y" / "m", seed=4)
    monkeypatch.chdir(tmp_path)
    frame = qg.survey(["x/m", "y/m"], per="head", progress=False)
    assert frame["model"].unique().tolist() == ["x/m", "y/m"] and frame.attrs["computed"] == ["x/m", "y/m"]
    summary = qg.summarize(frame)
    assert summary["model"].tolist() == ["x/m", "y/m"] and (summary["n"] == LAYERS * HEADS).all()
    capsys.readouterr()
    assert main(["survey", "x/m", "y/m", "--out", str(tmp_path / "r.sqlite")]) == 0
    out = capsys.readouterr().out
    assert "computed 2 model(s), reused 0" in out and "x/m [self]" in out and "y/m [self]" in out, out
    alone = qg.score_model("y/m", per="head")
    assert summary["symmetry_median"].iloc[1] == pytest.approx(alone["symmetry"].median(), abs=1e-12)


@pytest.fixture()
def mixed_store(tmp_path) -> Path:
    source = make_model(tmp_path / "m", seed=5)
    store = tmp_path / "mixed.sqlite"
    qg.survey([source], per="layer", cache=store, progress=False)
    qg.survey([source], per="head", cache=store, progress=False)
    qg.survey([source], per="layer", input_norm="folded", cache=store, progress=False)
    return store


def test_plot_refuses_a_file_that_mixes_levels_or_forms_and_plots_one_when_named(mixed_store, tmp_path, capsys):
    out = tmp_path / "figs"
    one_line_error(capsys, main(["plot", str(mixed_store), "--out-dir", str(out)]), "mixed.sqlite",
                   "per = head and layer", "--per head")
    assert not out.exists()
    one_line_error(capsys, main(["plot", str(mixed_store), "--per", "layer", "--out-dir", str(out)]),
                   "input_norm = folded and raw", "--input-norm folded")
    assert not out.exists()
    one_line_error(capsys, main(["plot", str(mixed_store), "--per", "head", "--input-norm", "folded",
                                 "--out-dir", str(out)]), "no rows of input_norm = folded")
    assert not out.exists()
    assert main(["plot", str(mixed_store), "--per", "head", "--input-norm", "raw", "--out-dir", str(out)]) == 0
    assert (out / "head_heatmaps_symmetry.png").exists()
    assert main(["plot", str(mixed_store), "--per", "layer", "--input-norm", "folded", "--out-dir",
                 str(tmp_path / "f2")]) == 0
    assert not (tmp_path / "f2" / "head_heatmaps_symmetry.png").exists()


def test_survey_figures_refuses_a_mixed_frame(mixed_store):
    frame = read_store(mixed_store)
    with pytest.raises(ValueError, match=r"`frame` holds rows of per = head and layer.*frame\[frame\['per'\]"):
        qg.plotting.survey_figures(frame)
    one = frame[(frame["per"] == "layer") & (frame["input_norm"] == "raw")]
    curves = qg.plotting.survey_figures(one)["layer_curves"]
    assert curves is not None
    pd.testing.assert_frame_equal(one.reset_index(drop=True), frame.iloc[:LAYERS].reset_index(drop=True))


def test_a_random_twin_is_keyed_by_its_resolved_source(tmp_path, monkeypatch):
    make_model(tmp_path / "m", seed=6)
    monkeypatch.chdir(tmp_path)
    frame = qg.survey(["random:m", f"random:{tmp_path / 'm'}", "random:./m"], progress=False)
    assert frame["source"].unique().tolist() == [f"random:{tmp_path / 'm'}"]
    assert len(frame.attrs["repeated"]) == 2 and os.path.isabs(frame["source"].iloc[0][len("random:"):])


def test_five_spellings_of_one_hub_model_are_one_stored_model(tmp_path, monkeypatch):
    from qkgeometry.surveying.identity import source_identity

    monkeypatch.chdir(tmp_path)  # no local folder of these names
    spellings = ["hf://org/m", "org/m", "hf://org/m@main", "hf://models/org/m", "Org/M"]
    assert {source_identity(s) for s in spellings} == {"org/m"}
    assert source_identity("GPT2") == source_identity("gpt2") == "gpt2"
    assert source_identity("hf://org/m@v1.0") != source_identity("org/m")  # another revision, another model
    assert source_identity("random:hf://Org/M") == "random:org/m"
    assert source_identity("offline:minilm-l6") == "offline:minilm-l6"
