"""Scores: definitions, invariances, factored == dense, and input validation."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import ortho_group

import qkgeometry as qg
from qkgeometry.scores import directionality_from_norms, outlier_threshold

SEEDS = range(20)


def rand(seed: int, *shape: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


# ----------------------------------------------------------------------------------- symmetry score
@pytest.mark.parametrize("seed", SEEDS)
def test_symmetric_scores_one_and_skew_minus_one(seed):
    A = rand(seed, 9, 9)
    assert qg.symmetry_score(A + A.T) == pytest.approx(1.0, abs=1e-14)
    assert qg.symmetry_score(A - A.T) == pytest.approx(-1.0, abs=1e-14)


@pytest.mark.parametrize("seed", SEEDS)
def test_symmetry_invariances(seed):
    M = rand(seed, 12, 12)
    s = qg.symmetry_score(M)
    assert -1.0 <= s <= 1.0
    for alpha in (-3.5, -1e-3, 0.25, 7e4):
        assert qg.symmetry_score(alpha * M) == pytest.approx(s, abs=1e-12)
    assert qg.symmetry_score(M.T) == pytest.approx(s, abs=1e-12)
    Q = ortho_group.rvs(12, random_state=seed)
    assert qg.symmetry_score(Q @ M @ Q.T) == pytest.approx(s, abs=1e-12)


def test_symmetry_equals_energy_difference_and_paper_form():
    M = rand(0, 30, 30)
    e = qg.energies(M)
    s = qg.symmetry_score(M)
    assert s == pytest.approx((e.symmetric - e.skew) / e.total, abs=1e-14)
    assert s == pytest.approx(2 * e.symmetric / e.total - 1, abs=1e-14)  # the paper's plotted form


def test_symmetry_known_value():
    # M = [[1, 2], [0, 1]]: tr(MM) = 1 + 0 + 0 + 1 = 2, ||M||^2 = 6.
    assert qg.symmetry_score(np.array([[1.0, 2.0], [0.0, 1.0]])) == pytest.approx(2 / 6)


def test_gaussian_null_mean_is_one_over_d():
    """E[s(M)] = 1/d for i.i.d. Gaussian M: the diagonal contributes Σ M_ii² ≥ 0 (d of the d² entries)."""
    d, n = 32, 2000
    scores = qg.symmetry_score(rand(1, n, d, d))
    assert abs(scores.mean() - 1 / d) < 4 * scores.std() / np.sqrt(n)
    assert scores.mean() > 0


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 9), st.integers(0, 2**31 - 1), st.floats(0.01, 100))
def test_symmetry_in_range_hypothesis(d, seed, scale):
    M = rand(seed, d, d) * scale
    s = qg.symmetry_score(M)
    assert -1 - 1e-12 <= s <= 1 + 1e-12


# ----------------------------------------------------------------------------- directionality score
@pytest.mark.parametrize("seed", SEEDS)
def test_directionality_antisymmetric_under_transpose_and_scale_invariant(seed):
    M = rand(seed, 40, 40) * np.exp(rand(seed + 100, 40, 1))  # uneven row norms
    d = qg.directionality_score(M)
    assert qg.directionality_score(M.T) == pytest.approx(-d, abs=1e-12)
    assert qg.directionality_score(3.7 * M) == pytest.approx(d, abs=1e-12)
    assert -1.0 <= d <= 1.0


def test_directionality_sign_convention_column_outliers_negative():
    M = rand(3, 50, 50) * 0.1
    M[:, 7] += 5.0  # one dominant key-side (column) direction
    assert qg.directionality_score(M) < -0.9
    assert qg.directionality_score(M.T) > 0.9


def test_directionality_hand_computed():
    rows = np.array([1.0] * 9 + [10.0])
    cols = np.full(10, 2.0)
    tau = rows.mean() + 2 * rows.std(ddof=1)  # ddof = 1, the paper's plotted convention
    excess = max(10.0 - tau, 0.0)
    assert excess > 0
    assert directionality_from_norms(rows, cols) == pytest.approx(1.0)
    # num_std = 1 with both sides having outliers
    cols2 = np.array([1.0] * 9 + [4.0])
    er = 10 - (rows.mean() + rows.std(ddof=1))
    ec = 4 - (cols2.mean() + cols2.std(ddof=1))
    assert directionality_from_norms(rows, cols2, 1.0) == pytest.approx((er - ec) / (er + ec))


def test_outlier_threshold_is_mean_plus_num_std_unbiased_sd_over_the_last_axis():
    norms = np.abs(rand(3, 4, 7))
    for num_std in (0.0, 1.5, 2.0):
        expected = norms.mean(axis=-1) + num_std * norms.std(axis=-1, ddof=1)
        np.testing.assert_allclose(outlier_threshold(norms, num_std), expected, rtol=1e-14)
    tensor = outlier_threshold(torch.tensor(norms[0]))  # a tensor stays a tensor
    assert isinstance(tensor, torch.Tensor) and float(tensor) == pytest.approx(float(outlier_threshold(norms[0])))


def test_directionality_zero_when_no_outliers():
    assert qg.directionality_score(np.eye(6)) == 0.0


def test_num_std_validation():
    with pytest.raises(ValueError, match="num_std"):
        qg.directionality_score(np.eye(3), num_std=float("nan"))
    with pytest.raises(ValueError, match="num_std"):
        qg.directionality_score(np.eye(3), num_std=-1)


# ------------------------------------------------------------------------------------ batching, dtype
def test_batched_matches_loop_and_single_gives_float():
    M = rand(4, 3, 5, 8, 8)
    s, d = qg.symmetry_score(M), qg.directionality_score(M)
    assert s.shape == d.shape == (3, 5)
    assert isinstance(qg.symmetry_score(M[0, 0]), float)
    for i in range(3):
        for j in range(5):
            assert s[i, j] == pytest.approx(qg.symmetry_score(M[i, j]), abs=1e-14)
            assert d[i, j] == pytest.approx(qg.directionality_score(M[i, j]), abs=1e-14)


def test_torch_and_low_precision_inputs_accumulate_in_float64():
    M = torch.randn(64, 64, generator=torch.Generator().manual_seed(0))
    exact = qg.symmetry_score(M.double())
    assert qg.symmetry_score(M) == pytest.approx(exact, abs=1e-12)
    bf = M.to(torch.bfloat16)
    assert qg.symmetry_score(bf) == pytest.approx(qg.symmetry_score(bf.double().numpy()), abs=1e-15)
    assert qg.symmetry_score(M.numpy().astype(np.float16)) == pytest.approx(exact, abs=1e-2)


def test_inputs_are_not_modified():
    M = rand(0, 5, 5)
    copy = M.copy()
    qg.symmetry_score(M), qg.directionality_score(M), qg.decompose(M)
    np.testing.assert_array_equal(M, copy)


# ------------------------------------------------------------------------------------------- factored
@pytest.mark.parametrize("d,r", [(20, 3), (20, 20), (20, 45), (2, 1)])
@pytest.mark.parametrize("seed", range(5))
def test_factored_equals_dense(d, r, seed):
    A, B = rand(seed, d, r), rand(seed + 1000, d, r)
    M = A @ B.T
    assert abs(qg.symmetry_score_factored(A, B) - qg.symmetry_score(M)) < 1e-10
    assert abs(qg.directionality_score_factored(A, B) - qg.directionality_score(M)) < 1e-10
    both = qg.scores_factored(A, B)
    assert both.symmetry == pytest.approx(qg.symmetry_score(M), abs=1e-10)
    assert both.directionality == pytest.approx(qg.directionality_score(M), abs=1e-10)


def test_factored_batched():
    A, B = rand(0, 4, 6, 30, 5), rand(1, 4, 6, 30, 5)
    M = A @ np.swapaxes(B, -1, -2)
    np.testing.assert_allclose(qg.symmetry_score_factored(A, B), qg.symmetry_score(M), atol=1e-10, rtol=0)
    np.testing.assert_allclose(qg.directionality_score_factored(A, B, num_std=1.5),
                               qg.directionality_score(M, num_std=1.5), atol=1e-10, rtol=0)


def test_factored_gqa_grouped_sum():
    """Layer matrix of GQA: Σ_h W_Q^h W_K^{g(h)ᵀ} with g(h) = h // group, via grouped factors."""
    d, hd, n_heads, n_kv = 48, 6, 8, 2
    group = n_heads // n_kv
    wq, wk = rand(0, n_heads, d, hd), rand(1, n_kv, d, hd)
    dense = sum(wq[h] @ wk[h // group].T for h in range(n_heads))
    A = np.concatenate([wq[g * group:(g + 1) * group].sum(0) for g in range(n_kv)], axis=1)
    B = np.concatenate(list(wk), axis=1)
    assert abs(qg.symmetry_score_factored(A, B) - qg.symmetry_score(dense)) < 1e-10
    assert abs(qg.directionality_score_factored(A, B) - qg.directionality_score(dense)) < 1e-10
    layer = qg.QKLayer(0, "self", torch.from_numpy(wq), torch.from_numpy(wk))
    a, b = layer.factors()
    assert a.shape == (d, n_kv * hd)
    np.testing.assert_allclose((a @ b.T).numpy(), dense, atol=1e-10)
    tiled = sum(wq[h] @ wk[h % n_kv].T for h in range(n_heads))
    assert abs(qg.symmetry_score(tiled) - qg.symmetry_score(dense)) > 1e-3  # the pairing matters


# ------------------------------------------------------------------------------------------ validation
@pytest.mark.parametrize("fn", [qg.symmetry_score, qg.directionality_score, qg.decompose])
def test_bad_matrix_inputs(fn):
    with pytest.raises(ValueError, match=r"`M` must have at least 2 dimensions.*got shape \(5,\)"):
        fn(np.ones(5))
    with pytest.raises(ValueError, match=r"`M` must be square.*\(3, 4\).*factored"):
        fn(np.ones((3, 4)))
    with pytest.raises(ValueError, match=r"`M` contains 1 NaN or Inf"):
        fn(np.array([[1.0, np.nan], [0.0, 1.0]]))
    with pytest.raises(ValueError, match=r"`M` contains 1 NaN or Inf"):
        fn(np.array([[1.0, np.inf], [0.0, 1.0]]))
    with pytest.raises(ValueError, match=r"d=1.*d >= 2"):
        fn(np.ones((1, 1)))
    with pytest.raises(TypeError, match=r"`M` has integer dtype.*astype\(float\)"):
        fn(np.ones((3, 3), dtype=int))
    with pytest.raises(TypeError, match=r"`M` has bool dtype"):
        fn(np.ones((3, 3), dtype=bool))
    with pytest.raises(TypeError, match=r"`M` has complex dtype"):
        fn(np.ones((3, 3), dtype=complex))
    with pytest.raises(TypeError, match=r"`M` has integer dtype torch.int64.*double\(\)"):
        fn(torch.ones(3, 3, dtype=torch.int64))


def test_zero_matrix_symmetry_undefined():
    with pytest.raises(ValueError, match=r"`M` is an all-zero matrix.*undefined"):
        qg.symmetry_score(np.zeros((4, 4)))
    with pytest.raises(ValueError, match=r"all-zero matrix \(at batch index \(1,\)\)"):
        qg.symmetry_score(np.stack([np.eye(3), np.zeros((3, 3))]))
    with pytest.raises(ValueError, match=r"`A @ B\^T` is an all-zero matrix"):
        qg.symmetry_score_factored(np.zeros((4, 2)), np.ones((4, 2)))
    assert qg.directionality_score(np.zeros((4, 4))) == 0.0  # defined as 0 when E_r + E_c = 0


def test_bad_factor_inputs():
    with pytest.raises(ValueError, match=r"`A` and `B` must have the same shape.*A\(5, 2\).*B\(5, 3\)"):
        qg.symmetry_score_factored(np.ones((5, 2)), np.ones((5, 3)))
    with pytest.raises(ValueError, match=r"`A` must have at least 2 dimensions"):
        qg.directionality_score_factored(np.ones(5), np.ones(5))
    with pytest.raises(TypeError, match=r"`B` has integer dtype"):
        qg.symmetry_score_factored(np.ones((5, 2)), np.ones((5, 2), dtype=np.int32))
    with pytest.raises(ValueError, match=r"`A` contains 1 NaN"):
        qg.scores_factored(np.array([[np.nan], [1.0]]), np.ones((2, 1)))
    with pytest.raises(ValueError, match=r"d=1"):
        qg.symmetry_score_factored(np.ones((1, 3)), np.ones((1, 3)))


# ------------------------------------------------------------------------------ batched per-layer kernel
def dense_reference(wq: np.ndarray, wk_kv: np.ndarray, num_std: float):
    """Per-head and layer scores by forming every d × d matrix (the definitions), KV head g(h) = h // group."""
    group = wq.shape[-3] // wk_kv.shape[-3]
    heads = np.stack([wq[..., h, :, :] @ np.swapaxes(wk_kv[..., h // group, :, :], -1, -2)
                      for h in range(wq.shape[-3])], axis=-3)
    layer = heads.sum(axis=-3)
    return (qg.symmetry_score(heads), qg.directionality_score(heads, num_std),
            qg.symmetry_score(layer), qg.directionality_score(layer, num_std))


# (n_heads, n_kv_heads, d, head_dim): MHA, GQA groups of 2/4/8, MQA; layer matrix dense (5R >= d) and factored (5R < d)
KERNEL_SHAPES = [(4, 4, 20, 7), (8, 4, 48, 6), (8, 2, 48, 6), (8, 1, 40, 5), (16, 2, 200, 4), (6, 3, 90, 2),
                 (2, 1, 10, 8)]


@pytest.mark.parametrize("shape", KERNEL_SHAPES)
@pytest.mark.parametrize("seed", range(3))
def test_layer_scores_equal_dense(shape, seed):
    n_heads, n_kv, d, hd = shape
    wq = rand(seed, n_heads, d, hd)
    wk = rand(seed + 50, n_kv, d, hd) * np.exp(rand(seed + 99, n_kv, d, 1))  # uneven rows: nonzero directionality
    sym, dirn, layer_sym, layer_dirn = dense_reference(wq, wk, 1.5)
    out = qg.layer_scores(wq, wk, 1.5)
    np.testing.assert_allclose(out.heads.symmetry, sym, atol=1e-10, rtol=0)
    np.testing.assert_allclose(out.heads.directionality, dirn, atol=1e-10, rtol=0)
    assert abs(out.layer.symmetry - layer_sym) < 1e-10 and abs(out.layer.directionality - layer_dirn) < 1e-10
    assert isinstance(out.layer.symmetry, float) and out.heads.symmetry.shape == (n_heads,)
    assert np.abs(dirn).max() > 0.05  # the directionality comparison is not a comparison of zeros


def test_layer_scores_batched_layers_equal_one_by_one():
    """A stack of layers (L, n_heads, d, r) in one call gives each layer's own scores (and the dense ones)."""
    wq, wk = rand(0, 3, 8, 60, 5), rand(1, 3, 2, 60, 5) * np.exp(rand(2, 3, 2, 60, 1))
    out = qg.layer_scores(wq, wk, 2.0)
    assert out.heads.symmetry.shape == (3, 8) and out.layer.directionality.shape == (3,)
    sym, dirn, layer_sym, layer_dirn = dense_reference(wq, wk, 2.0)
    np.testing.assert_allclose(out.heads.symmetry, sym, atol=1e-10, rtol=0)
    np.testing.assert_allclose(out.heads.directionality, dirn, atol=1e-10, rtol=0)
    np.testing.assert_allclose(out.layer.symmetry, layer_sym, atol=1e-10, rtol=0)
    np.testing.assert_allclose(out.layer.directionality, layer_dirn, atol=1e-10, rtol=0)
    for i in range(3):
        one = qg.layer_scores(wq[i], wk[i], 2.0)
        np.testing.assert_array_equal(one.heads.symmetry, out.heads.symmetry[i])
        assert one.layer.symmetry == out.layer.symmetry[i]


def test_layer_scores_agree_with_scores_factored_and_layer_factors():
    wq, wk = rand(3, 8, 64, 8), rand(4, 2, 64, 8)
    layer = qg.QKLayer(0, "self", torch.from_numpy(wq), torch.from_numpy(wk))
    out = qg.layer_scores(layer.wq, layer.wk_kv)
    ref = qg.scores_factored(layer.wq, layer.wk)  # the expanded form, per head
    np.testing.assert_allclose(out.heads.symmetry, ref.symmetry, atol=1e-12, rtol=0)
    np.testing.assert_allclose(out.heads.directionality, ref.directionality, atol=1e-12, rtol=0)
    ref_layer = qg.scores_factored(*layer.factors())
    assert out.layer.symmetry == pytest.approx(ref_layer.symmetry, abs=1e-12)
    assert out.layer.directionality == pytest.approx(ref_layer.directionality, abs=1e-12)


def test_layer_scores_heads_or_layer_only():
    wq, wk = rand(0, 4, 30, 5), rand(1, 2, 30, 5)
    assert qg.layer_scores(wq, wk, heads=False).heads is None
    assert qg.layer_scores(wq, wk, layer=False).layer is None
    np.testing.assert_array_equal(qg.layer_scores(wq, wk, layer=False).heads.symmetry,
                                  qg.layer_scores(wq, wk).heads.symmetry)


def test_layer_scores_low_precision_is_converted_once_to_float64():
    gen = torch.Generator().manual_seed(0)
    wq, wk = torch.randn(8, 64, 16, generator=gen).bfloat16(), torch.randn(2, 64, 16, generator=gen).bfloat16()
    exact = qg.layer_scores(wq.double(), wk.double())
    for dtype in (torch.bfloat16, torch.float32):
        out = qg.layer_scores(wq.to(dtype), wk.to(dtype))  # bf16 values are exact in float32 and float64
        np.testing.assert_array_equal(out.heads.symmetry, exact.heads.symmetry)
        np.testing.assert_array_equal(out.heads.directionality, exact.heads.directionality)
    fp16 = qg.layer_scores(wq.half(), wk.half())
    np.testing.assert_allclose(fp16.heads.symmetry, exact.heads.symmetry, atol=1e-2)
    before = wq.clone()
    qg.layer_scores(wq, wk)
    assert torch.equal(wq, before) and wq.dtype == torch.bfloat16  # inputs untouched


def test_layer_scores_device_cpu_equals_default():
    wq, wk = torch.from_numpy(rand(5, 8, 48, 6)), torch.from_numpy(rand(6, 4, 48, 6))
    default, cpu = qg.layer_scores(wq, wk), qg.layer_scores(wq, wk, device="cpu")
    np.testing.assert_array_equal(default.heads.symmetry, cpu.heads.symmetry)
    np.testing.assert_array_equal(default.heads.directionality, cpu.heads.directionality)
    assert default.layer == cpu.layer
    assert qg.layer_scores(wq, wk, device=torch.device("cpu")).layer == default.layer


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message shown when CUDA is absent")
def test_cuda_requested_without_cuda_is_a_clear_error():
    with pytest.raises(ValueError, match=r"`device` 'cuda' was requested but CUDA is not available.*device='cpu'"):
        qg.layer_scores(np.ones((2, 4, 1)), np.ones((2, 4, 1)), device="cuda")


@pytest.mark.device
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_equals_cpu():  # pragma: no cover (runs only where a GPU is present)
    wq, wk = torch.from_numpy(rand(7, 16, 256, 32)).bfloat16(), torch.from_numpy(rand(8, 4, 256, 32)).bfloat16()
    cpu, gpu = qg.layer_scores(wq, wk), qg.layer_scores(wq, wk, device="cuda")
    np.testing.assert_allclose(gpu.heads.symmetry, cpu.heads.symmetry, atol=1e-10, rtol=0)
    np.testing.assert_allclose(gpu.heads.directionality, cpu.heads.directionality, atol=1e-10, rtol=0)
    np.testing.assert_allclose(gpu.layer.symmetry, cpu.layer.symmetry, atol=1e-10, rtol=0)


@pytest.mark.parametrize("device", ["tpu", "cuda:x", 3.5, "mps"])
def test_bad_device(device):
    with pytest.raises(ValueError, match="`device` must be"):
        qg.layer_scores(np.ones((2, 4, 1)), np.ones((2, 4, 1)), device=device)


def test_layer_scores_bad_inputs():
    with pytest.raises(ValueError, match=r"multiple of n_kv_heads"):
        qg.layer_scores(rand(0, 6, 10, 2), rand(1, 4, 10, 2))
    with pytest.raises(ValueError, match=r"`wq` and `wk_kv` must have shapes.*wq\(4, 10, 2\).*wk_kv\(2, 10, 3\)"):
        qg.layer_scores(rand(0, 4, 10, 2), rand(1, 2, 10, 3))
    with pytest.raises(ValueError, match=r"must have shapes"):
        qg.layer_scores(rand(0, 10, 2), rand(1, 10, 2))
    with pytest.raises(TypeError, match=r"`wk_kv` has integer dtype"):
        qg.layer_scores(rand(0, 4, 10, 2), np.ones((2, 10, 2), dtype=int))
    bad = rand(0, 4, 10, 2)
    bad[3, 5, 1] = np.nan
    with pytest.raises(ValueError, match=r"`wq` contains NaN or Inf entries \(first in head 3,"):
        qg.layer_scores(bad, rand(1, 2, 10, 2))
    bad = rand(1, 2, 10, 2)
    bad[1, 0, 0] = np.inf
    with pytest.raises(ValueError, match=r"`wk_kv` contains NaN or Inf"):
        qg.layer_scores(rand(0, 4, 10, 2), bad)
    zero = rand(0, 4, 10, 2)
    zero[2] = 0
    with pytest.raises(ValueError, match=r"query head 2 \(counting through the layers\) has an all-zero W_qk"):
        qg.layer_scores(zero, rand(1, 2, 10, 2))
    with pytest.raises(ValueError, match="num_std"):
        qg.layer_scores(rand(0, 4, 10, 2), rand(1, 2, 10, 2), num_std=-1)


def test_layer_scores_do_not_expand_kv_heads(monkeypatch):
    """Scoring a layer per head never reads QKLayer.wk (K expanded to every query head) nor repeat_interleave."""
    from qkgeometry.surveying.scoring import score_layer

    monkeypatch.setattr(qg.QKLayer, "wk", property(lambda self: pytest.fail("QKLayer.wk used on the scoring path")))
    monkeypatch.setattr(torch.Tensor, "repeat_interleave", lambda *a, **k: pytest.fail("repeat_interleave used"))
    layer = qg.QKLayer(0, "self", torch.from_numpy(rand(0, 8, 40, 4)), torch.from_numpy(rand(1, 2, 40, 4)))
    rows = score_layer(layer, "head")
    assert [r["head"] for r in rows] == list(range(8))
    sym, dirn, *_ = dense_reference(layer.wq.numpy(), layer.wk_kv.numpy(), 2.0)
    np.testing.assert_allclose([r["symmetry"] for r in rows], sym, atol=1e-10, rtol=0)
    np.testing.assert_allclose([r["directionality"] for r in rows], dirn, atol=1e-10, rtol=0)


# ------------------------------------------------------------------ the read path and the device option
def write_llama_folder(folder, layers=3, d=64, heads=8, kv_heads=2, dtype=torch.bfloat16):
    """A Llama-named checkpoint holding only q_proj/k_proj (what the scores read) and its config.json."""
    import json

    from safetensors.torch import save_file

    hd = d // heads
    gen = torch.Generator().manual_seed(0)
    tensors = {}
    for i in range(layers):
        tensors[f"model.layers.{i}.self_attn.q_proj.weight"] = torch.randn(heads * hd, d, generator=gen).to(dtype)
        tensors[f"model.layers.{i}.self_attn.k_proj.weight"] = torch.randn(kv_heads * hd, d, generator=gen).to(dtype)
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({
        "model_type": "llama", "hidden_size": d, "num_hidden_layers": layers, "num_attention_heads": heads,
        "num_key_value_heads": kv_heads, "intermediate_size": 2 * d, "vocab_size": 32}))
    return tensors


def test_read_path_converts_once_into_the_kernel_layout(tmp_path):
    tensors = write_llama_folder(tmp_path / "m")
    layer = qg.load_qk(tmp_path / "m").layer(1)
    assert layer.wq.dtype == layer.wk_kv.dtype == torch.float64
    assert layer.wq.shape == (8, 64, 8) and layer.wk_kv.shape == (2, 64, 8)
    # W_Qᵀ per head is contiguous: the kernel multiplies it without another copy
    assert layer.wq.mT.is_contiguous() and layer.wk_kv.mT.is_contiguous()
    q = tensors["model.layers.1.self_attn.q_proj.weight"].double()  # (heads·hd, d) = [W_Q^0ᵀ; W_Q^1ᵀ; ...]
    torch.testing.assert_close(layer.wq[3], q[24:32].T, atol=0, rtol=0)


def test_score_model_per_head_and_layer_equal_dense(tmp_path):
    write_llama_folder(tmp_path / "m")
    model = qg.load_qk(tmp_path / "m")
    heads, layers = qg.score_model(model, per="head"), qg.score_model(tmp_path / "m", per="layer")
    assert len(heads) == 3 * 8 and len(layers) == 3
    for layer in model:
        sym, dirn, layer_sym, layer_dirn = dense_reference(layer.wq.numpy(), layer.wk_kv.numpy(), 2.0)
        rows = heads[heads["layer"] == layer.index].sort_values("head")
        np.testing.assert_allclose(rows["symmetry"], sym, atol=1e-10, rtol=0)
        np.testing.assert_allclose(rows["directionality"], dirn, atol=1e-10, rtol=0)
        row = layers[layers["layer"] == layer.index].iloc[0]
        assert abs(row["symmetry"] - layer_sym) < 1e-10 and abs(row["directionality"] - layer_dirn) < 1e-10


def test_device_cpu_equals_default_end_to_end(tmp_path):
    write_llama_folder(tmp_path / "m")
    assert qg.load_qk(tmp_path / "m").device == torch.device("cpu")
    assert qg.load_qk(tmp_path / "m", device="cpu").layer(0).wq.device == torch.device("cpu")
    for per in ("head", "layer"):  # numpy (default) and torch on the CPU: one kernel, equal to round-off
        default = qg.score_model(tmp_path / "m", per=per)
        cpu = qg.score_model(tmp_path / "m", per=per, device="cpu")
        assert default.drop(columns=["symmetry", "directionality"]).equals(
            cpu.drop(columns=["symmetry", "directionality"]))
        for col in ("symmetry", "directionality"):
            np.testing.assert_allclose(default[col], cpu[col], atol=1e-12, rtol=0)
    survey = qg.survey([str(tmp_path / "m")], per="head", progress=False, device="cpu")
    np.testing.assert_allclose(survey["symmetry"], qg.score_model(tmp_path / "m", per="head")["symmetry"],
                               atol=1e-12, rtol=0)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message shown when CUDA is absent")
def test_cuda_without_cuda_fails_before_reading(tmp_path):
    write_llama_folder(tmp_path / "m")
    for call in (lambda: qg.load_qk(tmp_path / "m", device="cuda"),
                 lambda: qg.score_model(tmp_path / "m", device="cuda"),
                 lambda: qg.survey([str(tmp_path / "m")], progress=False, device="cuda")):
        with pytest.raises(ValueError, match=r"CUDA is not available"):
            call()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message shown when CUDA is absent")
def test_cli_device_cuda_without_cuda_is_one_clear_line(tmp_path, capsys):
    from qkgeometry.cli import main

    write_llama_folder(tmp_path / "m")
    assert main(["score", str(tmp_path / "m"), "--device", "cuda"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--device 'cuda' was requested but CUDA is not available" in err[0] and "cpu" in err[0]
    assert main(["score", str(tmp_path / "m"), "--device", "cpu", "--per", "head"]) == 0


@pytest.mark.parametrize("chunk_bytes", [1, 3 * 8 * 2 * 5 * 60])
def test_layer_scores_chunked_equals_one_chunk(monkeypatch, chunk_bytes):
    """A few KV groups at a time (here 1 or 3 per chunk, across layer boundaries) gives the one-chunk numbers."""
    wq = torch.from_numpy(rand(0, 4, 8, 60, 5)).bfloat16()
    wk = torch.from_numpy(rand(1, 4, 4, 60, 5) * np.exp(rand(2, 4, 4, 60, 1))).bfloat16()
    whole = qg.layer_scores(wq, wk)
    monkeypatch.setattr("qkgeometry.scores.CHUNK_BYTES", chunk_bytes)
    parts = qg.layer_scores(wq, wk)
    np.testing.assert_allclose(parts.heads.symmetry, whole.heads.symmetry, atol=1e-14, rtol=0)
    np.testing.assert_allclose(parts.heads.directionality, whole.heads.directionality, atol=1e-14, rtol=0)
    np.testing.assert_allclose(parts.layer.symmetry, whole.layer.symmetry, atol=1e-14, rtol=0)
    sym, dirn, layer_sym, _ = dense_reference(wq.double().numpy(), wk.double().numpy(), 2.0)
    np.testing.assert_allclose(parts.heads.symmetry, sym, atol=1e-10, rtol=0)
    np.testing.assert_allclose(parts.heads.directionality, dirn, atol=1e-10, rtol=0)
    np.testing.assert_allclose(parts.layer.symmetry, layer_sym, atol=1e-10, rtol=0)


def test_layer_scores_rescales_subnormal_weights_instead_of_overflowing():
    """Weights near 2⁻¹⁰³⁰ need a factor 2¹⁰²⁷, which overflows float64 on its own: it is applied in two steps."""
    gen = torch.Generator().manual_seed(3)
    wq = torch.randn(4, 16, 4, generator=gen, dtype=torch.float64)
    wk = torch.randn(2, 16, 4, generator=gen, dtype=torch.float64)
    ref, tiny = qg.layer_scores(wq, wk), qg.layer_scores(wq * 2.0 ** -1030, wk)
    np.testing.assert_allclose(tiny.heads.symmetry, ref.heads.symmetry, atol=1e-9, rtol=0)
    assert tiny.layer.symmetry == pytest.approx(ref.layer.symmetry, abs=1e-9)
    assert qg.symmetry_score_factored(wq[0] * 2.0 ** -1030, wk[0]) == pytest.approx(ref.heads.symmetry[0], abs=1e-9)


@pytest.mark.parametrize(("scale", "rescaled"), [(1.0, False), (2.0 ** 40, False), (2.0 ** -40, False),
                                                 (2.0 ** 70, True), (2.0 ** -70, True), (1e155, True), (1e-170, True)])
def test_layer_scores_skip_the_rescaling_pass_when_the_grams_show_it_would_change_nothing(monkeypatch, scale,
                                                                                           rescaled):
    """The Gram diagonals bound every weight's magnitude: well inside the safe range the scores come from the
    weights as given (no pass to find a factor), outside it from the rescaled weights; both agree with the
    unscaled scores."""
    import qkgeometry.scores as scores_module

    wq, wk = rand(5, 2, 8, 64, 16), rand(6, 2, 2, 64, 16)
    ref = qg.layer_scores(wq, wk)
    calls = []
    real = scores_module.rescale_extremes
    monkeypatch.setattr(scores_module, "rescale_extremes", lambda x, **kw: calls.append(1) or real(x, **kw))
    for q, k in ((wq * scale, wk), (wq, wk * scale)):
        calls.clear()
        got = qg.layer_scores(q, k)
        np.testing.assert_allclose(got.heads.symmetry, ref.heads.symmetry, atol=1e-12, rtol=0)
        np.testing.assert_allclose(got.heads.directionality, ref.heads.directionality, atol=1e-12, rtol=0)
        np.testing.assert_allclose(got.layer.symmetry, ref.layer.symmetry, atol=1e-12, rtol=0)
        assert bool(calls) == rescaled, calls
    calls.clear()
    qg.layer_scores(wq, wk, heads=False)  # no Gram of the heads to read: the pass is made
    assert calls


def test_layer_scores_name_the_head_with_nan_after_the_unscaled_attempt():
    wq, wk = rand(7, 3, 4, 32, 8), rand(8, 3, 2, 32, 8)
    wq[1, 2, 5, 3] = np.nan  # query head 2 of layer 1: head 6 counting through the layers
    with pytest.raises(ValueError, match="`wq` contains NaN or Inf entries \\(first in head 6,"):
        qg.layer_scores(wq, wk)
    huge = rand(8, 3, 2, 32, 8) * 1e300  # finite, but its Grams overflow: rescaled and scored, not refused
    np.testing.assert_allclose(qg.layer_scores(rand(7, 3, 4, 32, 8), huge).heads.symmetry,
                               qg.layer_scores(rand(7, 3, 4, 32, 8), huge / 1e300).heads.symmetry, atol=1e-12)


def test_dense_and_factored_scores_take_tensors_that_require_grad_or_are_not_contiguous():
    gen = torch.Generator().manual_seed(4)
    a = torch.randn(3, 5, 12, generator=gen, dtype=torch.float64).mT.requires_grad_(False)
    b = torch.randn(3, 12, 5, generator=gen, dtype=torch.float64).requires_grad_(True)
    m = (a @ b.mT).detach().mT  # non-contiguous view
    assert not a.is_contiguous() and not m.is_contiguous()
    dense = qg.symmetry_score(m.detach().numpy())
    np.testing.assert_allclose(qg.symmetry_score(m.requires_grad_(True)), dense, atol=1e-12, rtol=0)
    np.testing.assert_allclose(qg.symmetry_score_factored(b, a), dense, atol=1e-12, rtol=0)
    np.testing.assert_allclose(qg.directionality_score_factored(b, a), qg.directionality_score(m), atol=1e-12,
                               rtol=0)


def test_directionality_from_norms_keeps_the_array_kind():
    rng = np.random.default_rng(5)
    rows, cols = rng.random((4, 12)) ** 4, rng.random((4, 12)) ** 4
    ref = directionality_from_norms(rows, cols)
    assert isinstance(ref, np.ndarray) and ref.shape == (4,)
    out = directionality_from_norms(torch.from_numpy(rows), torch.from_numpy(cols))
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float64
    np.testing.assert_allclose(out.numpy(), ref, atol=1e-15, rtol=0)
    np.testing.assert_allclose(directionality_from_norms(rows.tolist(), cols.tolist()), ref, atol=0, rtol=0)


def test_a_factored_form_is_scored_whole():
    """A :class:`qkgeometry.FactoredQK` (what ``QKLayer.factors`` returns) goes to the factored scores as it is,
    and gives the numbers of its two factors; without ``B`` anything but a pair is refused in one line."""
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=(2, 8, 3)), rng.normal(size=(2, 8, 3))
    form = qg.FactoredQK(a, b)
    assert (form.d, form.rank_bound) == (8, 3)
    np.testing.assert_array_equal(qg.scores_factored(form).symmetry, qg.scores_factored(a, b).symmetry)
    np.testing.assert_array_equal(qg.directionality_score_factored(form), qg.directionality_score_factored(a, b))
    np.testing.assert_allclose(qg.symmetry_score_factored(form), qg.symmetry_score(form.matrix()), atol=1e-12)
    with pytest.raises(TypeError, match="`B` is missing"):
        qg.symmetry_score_factored(a)
