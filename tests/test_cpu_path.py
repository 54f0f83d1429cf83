"""The CPU scoring path: weights from files are read into numpy and scored with numpy, without importing torch
(or transformers); bf16 is widened exactly; chapter 6's small problems run with one BLAS thread."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import qkgeometry as qg

SRC = str(Path(qg.__file__).resolve().parents[1])


def write_llama(folder: Path, layers: int = 3, d: int = 64, heads: int = 8, kv: int = 2) -> dict:
    from safetensors.torch import save_file

    hd = d // heads
    gen = torch.Generator().manual_seed(0)
    tensors = {}
    for i in range(layers):
        tensors[f"model.layers.{i}.self_attn.q_proj.weight"] = torch.randn(heads * hd, d, generator=gen).bfloat16()
        tensors[f"model.layers.{i}.self_attn.k_proj.weight"] = torch.randn(kv * hd, d, generator=gen).bfloat16()
        tensors[f"model.layers.{i}.input_layernorm.weight"] = (1 + 0.1 * torch.randn(d, generator=gen)).bfloat16()
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({
        "model_type": "llama", "hidden_size": d, "num_hidden_layers": layers, "num_attention_heads": heads,
        "num_key_value_heads": kv, "intermediate_size": 2 * d, "vocab_size": 32}))
    return tensors


def run_child(code: str, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": SRC, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=300,
                         check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip().splitlines()[-1]


HEAVY = "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"


def test_scoring_a_safetensors_folder_never_imports_torch(tmp_path):
    write_llama(tmp_path / "m")
    code = ("import sys, qkgeometry as qg\n"
            "for per in ('head', 'layer'):\n"
            "    qg.score_model(sys.argv[1], per=per)\n"
            "    qg.score_model(sys.argv[1], per=per, input_norm='folded')\n" + HEAVY)
    assert run_child(code, str(tmp_path / "m")) == "[]"


def test_the_score_command_never_imports_torch(tmp_path):
    write_llama(tmp_path / "m")
    code = ("import sys\nfrom qkgeometry.cli import main\n"
            "assert main(['score', sys.argv[1], '--per', 'head', '--out', sys.argv[2]]) == 0\n" + HEAVY)
    assert run_child(code, str(tmp_path / "m"), str(tmp_path / "out.csv")) == "[]"
    assert len((tmp_path / "out.csv").read_text().splitlines()) == 1 + 3 * 8


@pytest.mark.slow
def test_gguf_onnx_and_ctranslate2_sources_never_import_torch(tmp_path):
    """The other file formats read into numpy as well: a quantised GGUF (the offline Gemma 3), an ONNX graph (the
    offline MiniLM-L3) and a CTranslate2 Whisper file with an int8 layer."""
    sys.path.insert(0, str(Path(__file__).parent))
    from ct2_writer import write_ctranslate2

    rng = np.random.default_rng(0)
    d, heads = 32, 4
    variables = {"encoder/num_heads": np.array(heads, np.int16), "decoder/num_heads": np.array(heads, np.int16)}
    for i in range(2):
        variables[f"encoder/layer_{i}/self_attention/linear_0/weight"] = rng.normal(size=(3 * d, d)).astype(
            np.float32)
        fused = rng.normal(size=(3 * d, d)).astype(np.float32)
        scale = (127 / np.abs(fused).max(axis=1)).astype(np.float32)
        name = f"decoder/layer_{i}/self_attention/linear_0/weight"
        variables[name], variables[name + "_scale"] = np.round(fused * scale[:, None]).astype(np.int8), scale
        variables[f"decoder/layer_{i}/attention/linear_0/weight"] = rng.normal(size=(d, d)).astype(np.float32)
        variables[f"decoder/layer_{i}/attention/linear_1/weight"] = rng.normal(size=(2 * d, d)).astype(np.float32)
    write_ctranslate2(tmp_path / "model.bin", "WhisperSpec", variables, revision=3)
    code = ("import sys, qkgeometry as qg\n"
            "for source in sys.argv[1:]:\n"
            "    assert len(qg.score_model(source, per='head')) > 0, source\n" + HEAVY)
    assert run_child(code, "offline:gemma3-270m", "offline:minilm-l3", str(tmp_path / "model.bin")) == "[]"


def test_a_device_or_a_torch_model_brings_torch_and_the_same_scores(tmp_path):
    write_llama(tmp_path / "m")
    code = ("import sys, qkgeometry as qg\nqg.score_model(sys.argv[1], per='head', device='cpu')\n" + HEAVY)
    assert run_child(code, str(tmp_path / "m")) == "['torch']"
    numpy_path = qg.score_model(tmp_path / "m", per="head")
    torch_path = qg.score_model(tmp_path / "m", per="head", device="cpu")
    for col in ("symmetry", "directionality"):
        np.testing.assert_allclose(numpy_path[col], torch_path[col], atol=1e-12, rtol=0)


def test_layers_from_files_are_numpy_and_bf16_is_widened_exactly(tmp_path):
    tensors = write_llama(tmp_path / "m")
    with qg.load_qk(tmp_path / "m") as model:
        raw = list(model.iter_layers(convert=False))[1]  # the scoring path: as read
        layer = model.layer(1)  # float64 torch tensors, as before
    assert isinstance(raw.wq, np.ndarray) and raw.wq.dtype == np.float32  # bf16 -> float32, 2 bytes -> 4
    q = tensors["model.layers.1.self_attn.q_proj.weight"].float().numpy()  # torch's own bf16 -> float32
    np.testing.assert_array_equal(raw.wq[3], q[24:32].T)
    # the kernel's layout: W_Qᵀ per head is contiguous
    assert raw.wq.swapaxes(1, 2).flags.c_contiguous and raw.wk_kv.swapaxes(1, 2).flags.c_contiguous
    assert isinstance(layer.wq, torch.Tensor) and layer.wq.dtype == torch.float64
    np.testing.assert_array_equal(layer.wq.numpy(), raw.wq.astype(np.float64))
    with qg.load_qk(tmp_path / "m", device="cpu") as model:
        on_device = next(model.iter_layers(convert=False))
    assert isinstance(on_device.wq, torch.Tensor) and on_device.wq.dtype == torch.float32


def test_bf16_special_values_are_exact(tmp_path):
    from safetensors.torch import save_file

    values = torch.tensor([0.0, -0.0, 1.0, -2.5, 3.0e38, 1.0e-40, float("inf"), float("-inf")]).bfloat16()
    save_file({"x": values, "y": torch.tensor([1.5, -0.25]).to(torch.float8_e4m3fn)}, str(tmp_path / "t.safetensors"))
    from qkgeometry.readers.safetensors import SafetensorsIndex

    index, handles = SafetensorsIndex.open([tmp_path / "t.safetensors"])
    got = index.get("x")
    np.testing.assert_array_equal(got, values.float().numpy())
    assert np.signbit(got[1]) and got.dtype == np.float32
    np.testing.assert_array_equal(index.get("y"), np.array([1.5, -0.25], dtype=np.float32))
    handles.clear()


def test_configs_answered_without_transformers_match_transformers():
    """For the model types whose missing head_dim / num_key_value_heads are answered without importing
    transformers, transformers' own config class has neither."""
    from transformers import AutoConfig

    from qkgeometry.readers.hf_config import ConfigView

    for model_type in sorted(ConfigView.NO_KV_HEADS_OR_HEAD_DIM):
        config = AutoConfig.for_model(model_type)
        assert not hasattr(config, "num_key_value_heads") and not hasattr(config, "head_dim"), model_type


def test_chapter_6_small_problems_run_with_one_blas_thread(monkeypatch):
    from threadpoolctl import threadpool_info

    from qkgeometry.analyses import spectrum

    def numpy_blas_threads() -> int:  # the BLAS that numpy.linalg calls
        return max(i["num_threads"] for i in threadpool_info()
                   if i["user_api"] == "blas" and "numpy" in i["filepath"])

    seen = []
    eigvalsh = np.linalg.eigvalsh

    def spy(x):
        seen.append(numpy_blas_threads())
        return eigvalsh(x)

    monkeypatch.setattr(np.linalg, "eigvalsh", spy)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((40, 4)), rng.standard_normal((40, 4))
    spectrum.positive_share_rotation_null(a, b, 20)
    assert seen and set(seen) == {1}
    before = numpy_blas_threads()
    spectrum.spectral_summary(a, b)  # outside the decorated tables: the caller's setting
    assert seen[-1] == before


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_one_kernel_for_numpy_and_torch(backend):
    rng = np.random.default_rng(3)
    wq, wk = rng.standard_normal((2, 8, 48, 6)), rng.standard_normal((2, 2, 48, 6))
    ref = qg.layer_scores(wq, wk)
    args = (wq, wk) if backend == "numpy" else (torch.from_numpy(wq), torch.from_numpy(wk))
    got = qg.layer_scores(*args) if backend == "numpy" else qg.layer_scores(*args, device="cpu")
    for part in ("heads", "layer"):
        for field in ("symmetry", "directionality"):
            np.testing.assert_allclose(getattr(getattr(got, part), field), getattr(getattr(ref, part), field),
                                       atol=1e-12, rtol=0)
