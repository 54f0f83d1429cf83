"""qkgeometry.devices.default_device: the GPU when torch sees one, else the CPU; QKGEOMETRY_DEVICE overrides."""

from __future__ import annotations

import pytest
import torch

from qkgeometry.devices import default_device


def test_cpu_without_a_gpu_and_the_gpu_with_one(monkeypatch):
    monkeypatch.delenv("QKGEOMETRY_DEVICE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert default_device() == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert default_device() == "cuda:0" and default_device(local_rank=3) == "cuda:3"


def test_the_environment_variable_wins(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setenv("QKGEOMETRY_DEVICE", "cpu")
    assert default_device() == "cpu"
    monkeypatch.setenv("QKGEOMETRY_DEVICE", "cuda:1")
    assert default_device() == "cuda:1"


@pytest.mark.parametrize("value, needle", [("tpu", "expected cpu, cuda or cuda:N"), ("cuda:x", "expected cpu")])
def test_a_bad_setting_is_one_line(monkeypatch, value, needle):
    monkeypatch.setenv("QKGEOMETRY_DEVICE", value)
    with pytest.raises(ValueError, match=f"^QKGEOMETRY_DEVICE: {needle}"):
        default_device()


def test_a_gpu_that_is_not_there_is_refused(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("QKGEOMETRY_DEVICE", "cuda")
    with pytest.raises(ValueError, match="sees no CUDA GPU"):
        default_device()


def test_a_training_run_uses_it(monkeypatch, tmp_path):
    """The training loop asks default_device when no device is given (Colab's GPU runtime trains on the GPU)."""
    from qkgeometry.training import loop

    class Chosen(Exception):
        pass

    def choose(rank=0):
        raise Chosen(rank)

    monkeypatch.setattr(loop, "default_device", choose)
    with pytest.raises(Chosen):  # stops the run right there, before any data is prepared
        loop.Run(loop.TrainConfig(), tmp_path / "run")
