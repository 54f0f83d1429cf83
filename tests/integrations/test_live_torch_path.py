"""The live scorer's torch path: on a GPU runtime the model's weights are on the GPU, so they are read there as torch
tensors and scored by the torch kernel instead of numpy views. Here that path is taken on the CPU (the device lookup
and the conversion to numpy replaced), and gives the numpy path's scores; where a GPU exists, the test marked
``device`` runs it on the GPU itself."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from qkgeometry.integrations import live


def _tiny_bert():
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=32)
    return BertModel(config).eval()


def test_the_path_a_gpu_takes_scores_as_the_cpu_path_does(monkeypatch):
    model = _tiny_bert()
    cpu = live.LiveScorer(per="head").score(model, 0, run="cpu")
    seen = []

    def as_is(weights):  # what a GPU tensor gets: left as a torch tensor
        seen.append(type(weights))
        return weights

    monkeypatch.setattr(live, "_device_of", lambda m: torch.device("cpu"))
    monkeypatch.setattr(live, "_as_numpy", as_is)
    scorer = live.LiveScorer(per="head")
    device = scorer.score(model, 0, run="device")
    assert seen and all(issubclass(t, torch.Tensor) for t in seen)
    assert cpu.keys() == device.keys()
    np.testing.assert_allclose(list(device.values()), list(cpu.values()), rtol=0, atol=1e-12)
    rows = scorer.frames[0]
    assert len(rows) == 2 * 4 and rows["symmetry"].between(-1, 1).all()


def test_the_device_is_the_cuda_device_of_the_weights_and_none_on_the_cpu():
    model = _tiny_bert()
    assert live._device_of(model) is None
    assert live._device_of(object()) is None


@pytest.mark.device
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (the `device` tests run where one exists)")
def test_a_model_on_the_gpu_is_scored_there_as_on_the_cpu():
    """Nothing replaced: a model whose weights live on the GPU is scored from them there (its device is found, its
    weights stay torch tensors on it) and gives the CPU's scores."""
    model = _tiny_bert()
    cpu = live.LiveScorer(per="head").score(model, 0, run="cpu")
    gpu_model = model.to("cuda")
    assert live._device_of(gpu_model).type == "cuda"
    gpu = live.LiveScorer(per="head").score(gpu_model, 0, run="gpu")
    assert cpu.keys() == gpu.keys()
    np.testing.assert_allclose(list(gpu.values()), list(cpu.values()), rtol=0, atol=1e-10)

