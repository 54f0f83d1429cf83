"""qkgeometry.integrations.LiveScorer, the part every callback shares: the documented call scores a model of any
training loop; the path weights on a GPU take gives the CPU path's scores; undefined scores are NaN with one
warning; the rows of a run go to one store connection, and memory keeps only the latest step when they do."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import torch

from qkgeometry.integrations import LiveScorer
from qkgeometry.readers import module
from qkgeometry.surveying.runs import RunId
from tiny_models import tiny_model


def _tiny_bert():
    from transformers import BertModel

    return tiny_model("bert", BertModel, vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=64, max_position_embeddings=32)


def test_the_documented_call_scores_a_model_of_any_training_loop(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scorer = LiveScorer(every=10)
    medians = scorer.score(_tiny_bert(), 0)
    assert set(medians) == {"qkgeometry/symmetry_median", "qkgeometry/directionality_median"}
    assert RunId.parse(str(scorer.run)).name == str(tmp_path) and scorer.scored == [0]
    assert len(scorer.trajectory()) == 2


def test_the_path_weights_on_a_gpu_take_scores_as_the_cpu_path_does(monkeypatch):
    """On a GPU the weights stay torch tensors, scored by the torch kernel; here that path runs on the CPU (the
    weights left as tensors, not numpy views) and must give the numpy path's scores."""
    model = _tiny_bert()
    cpu = LiveScorer(per="head").score(model, 0)
    seen = []
    readable = module._readable

    def as_on_a_gpu(t, numpy):
        seen.append(type(readable(t, False)))
        return readable(t, False)

    monkeypatch.setattr(module, "_readable", as_on_a_gpu)
    scorer = LiveScorer(per="head")
    device = scorer.score(model, 0)
    assert seen and all(issubclass(t, torch.Tensor) for t in seen)
    assert cpu.keys() == device.keys()
    np.testing.assert_allclose(list(device.values()), list(cpu.values()), rtol=0, atol=1e-12)
    assert len(scorer.frames[0]) == 2 * 4 and scorer.frames[0]["symmetry"].between(-1, 1).all()


@pytest.mark.device
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_model_on_a_gpu_is_scored_there_as_on_the_cpu():
    model = _tiny_bert()
    cpu = LiveScorer(per="head").score(model, 0)
    gpu = LiveScorer(per="head").score(model.to("cuda"), 0)
    np.testing.assert_allclose(list(gpu.values()), list(cpu.values()), rtol=0, atol=1e-12)


def test_an_all_zero_query_gives_nan_and_one_warning_naming_the_step_and_layer(tmp_path):
    from qkgeometry.surveying.trajectories import read_trajectory

    model = _tiny_bert()
    with torch.no_grad():
        model.encoder.layer[1].attention.self.query.weight.zero_()
    scorer = LiveScorer(tmp_path / "s.sqlite", every=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = scorer.score(model, 7)
        scorer.score(model, 8)
    said = [str(w.message) for w in caught]
    assert len(said) == 1 and "at step 7, self layer 1 has an all-zero W_qk" in said[0]
    assert "initialised" in said[0] and "\n" not in said[0]
    assert np.isnan(first["qkgeometry/symmetry_median"])
    scorer.close()
    rows = read_trajectory(tmp_path / "s.sqlite")
    assert rows.groupby("layer")["symmetry"].apply(lambda s: s.isna().all()).tolist() == [False, True]


def test_a_run_holds_one_store_connection_and_memory_keeps_only_the_latest_step(tmp_path, monkeypatch):
    from qkgeometry.surveying import store

    opened = []
    real = store.SurveyStore.__init__

    def counting(self, *a, **k):
        opened.append(a)
        real(self, *a, **k)

    monkeypatch.setattr(store.SurveyStore, "__init__", counting)
    model = _tiny_bert()
    with LiveScorer(tmp_path / "s.sqlite", every=1) as scorer:
        scorer.start("run", seed=3, config="abc")
        for step in range(5):
            scorer.score(model, step)
        assert len(opened) == 1 and len(scorer.frames) == 1 and scorer.frames[0]["step"].iloc[0] == 4
        assert scorer.trajectory()["step"].drop_duplicates().tolist() == [0, 1, 2, 3, 4]
    unstored = LiveScorer(every=1)
    assert unstored.latest is None
    for step in range(3):
        unstored.score(model, step)
    assert [int(f["step"].iloc[0]) for f in unstored.frames] == [0, 1, 2]
    pd.testing.assert_frame_equal(unstored.latest, unstored.frames[-1])


@pytest.mark.parametrize("kwargs", [{"per": "block"}, {"num_std": -1}, {"input_norm": "both"},
                                    {"store": "x.txt"}])
def test_the_arguments_are_checked_as_a_survey_checks_them(kwargs, tmp_path):
    import qkgeometry as qg

    with pytest.raises(ValueError) as live:
        LiveScorer(**kwargs)
    survey = {"store": "cache"}.get(next(iter(kwargs)), next(iter(kwargs)))
    with pytest.raises(ValueError) as surveyed:
        qg.survey([], **{survey: next(iter(kwargs.values()))})
    assert str(live.value).replace("`store`", "`cache`") == str(surveyed.value)
