"""ONNX graphs: Q/K found from the graph structure equal the safetensors path, and reproduce onnxruntime's logits.

Three kinds of check:

* tiny random Hugging Face models exported with ``torch.onnx.export`` (BERT and ViT with the TorchScript exporter,
  whose weights are anonymous ``onnx::MatMul_*``; BERT, ViT and a grouped-query Llama with the dynamo exporter,
  whose weights go to an external-data file) load to the same W_Q, W_K as ``save_pretrained`` -> ``load_qk``, to
  1e-10, every layer and head;
* hand-built graphs (fp16 and int8 ``DequantizeLinear`` weights, ``Gemm`` with ``transB``, a fused [Q | K | V]
  projection split on its last axis, fused ``MultiHeadAttention`` / ``GroupQueryAttention`` / ``Attention``): the
  loader returns the weights the graph was built from, and onnxruntime's pre-softmax logits agree with them;
* the real ONNX models shipped offline: onnxruntime's pre-softmax logits of every layer and head are reproduced by
  the loader's W_qk (bias terms cancel in a double difference, see :func:`check_ort_logits`).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import qkgeometry as qg
from qkgeometry.errors import SourceError
from tiny_models import tiny_model

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from qkgeometry.readers.onnx_graph import OnnxGraph  # noqa: E402
from qkgeometry.readers.onnx_walk import find_attention  # noqa: E402


# ------------------------------------------------------------------------------------------------ helpers
def check_ort_logits(path, feeds: dict[str, np.ndarray], rel: float = 2e-4) -> int:
    """Run ``path`` in onnxruntime with every attention's projected hidden state and Softmax input as extra outputs,
    and compare the Softmax input L (batch, heads, T, T) with the loader's bilinear form, head by head.

    Biases and additive masks that depend on the key only cancel in the double difference
    ``L[i, j] − L[i, 0] − L[0, j] + L[0, 0] = scale · (x_i − x_0)ᵀ W_qk^h (x_j − x_0)``, scale = 1/sqrt(head_dim).
    Returns the number of (layer, head) pairs checked.
    """
    ort = pytest.importorskip("onnxruntime")
    sites = find_attention(OnnxGraph.open(path))
    qk = qg.load_qk(path)
    model = onnx.load(str(path))
    wanted = list(dict.fromkeys(n for s in sites for n in (s.query.hidden, s.softmax_input)))
    present = {o.name for o in model.graph.output}
    for name in wanted:
        if name not in present:
            model.graph.output.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, None))
    options = ort.SessionOptions()  # the graph as written: no fusions that quantise activations or reorder sums
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    outputs = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
    checked = 0
    for layer, site in zip(qk, sites):
        x = torch.from_numpy(outputs[site.query.hidden]).double()
        x = x.reshape(-1, x.shape[-1])[None] if x.ndim == 2 else x
        logits = torch.from_numpy(outputs[site.softmax_input]).double()
        dd = logits - logits[..., :, :1] - logits[..., :1, :] + logits[..., :1, :1]
        dx = x - x[:, :1]
        w = torch.stack([layer.matrix(h) for h in range(layer.n_heads)])
        predicted = torch.einsum("bid,hde,bje->bhij", dx, w, dx) / math.sqrt(qk.head_dim)
        assert dd.shape == predicted.shape, (layer.index, tuple(dd.shape), tuple(predicted.shape))
        err = (dd - predicted).abs().amax(dim=(0, 2, 3)) / predicted.abs().amax(dim=(0, 2, 3))
        assert (err < rel).all(), f"layer {layer.index}: relative logit error per head {err.tolist()}"
        checked += layer.n_heads
    return checked


def _tiny(model_type: str, **config):
    # non-zero biases, so that a bias mistaken for a weight would show
    return tiny_model(model_type, attn_implementation="eager", bias_std=0.1, **config)


class _LastHidden(torch.nn.Module):
    """One positional input -> last_hidden_state (the TorchScript exporter passes arguments by position)."""

    def __init__(self, model, key: str):
        super().__init__()
        self.model, self.key = model, key

    def forward(self, x):
        return self.model(**{self.key: x}).last_hidden_state


TINY = {
    "bert": (dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=37, vocab_size=50,
                  max_position_embeddings=16), "input_ids", lambda: torch.randint(0, 50, (1, 6))),
    "vit": (dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37, image_size=16,
                 patch_size=8, num_channels=3), "pixel_values", lambda: torch.randn(1, 3, 16, 16)),
    "llama": (dict(hidden_size=48, num_hidden_layers=2, num_attention_heads=6, num_key_value_heads=2,
                   intermediate_size=37, vocab_size=50, max_position_embeddings=32, use_cache=False),
              "input_ids", lambda: torch.randint(0, 50, (1, 6))),
}


def _export_and_compare(tmp_path, model_type: str, dynamo: bool) -> qg.QKModel:
    import warnings

    config, key, example = TINY[model_type]
    model = _tiny(model_type, **config)
    model.save_pretrained(tmp_path / "hf", safe_serialization=True)
    path = tmp_path / f"{model_type}.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if dynamo:
            torch.onnx.export(_LastHidden(model, key), (example(),), str(path), dynamo=True, verbose=False)
        else:
            torch.onnx.export(_LastHidden(model, key), (example(),), str(path), dynamo=False, input_names=["x"])
    from_onnx, reference = qg.load_qk(path), qg.load_qk(tmp_path / "hf")
    assert from_onnx.architecture == "onnx" and from_onnx.family == reference.family
    for field in ("n_layers", "d_model", "n_heads", "n_kv_heads", "head_dim"):
        assert getattr(from_onnx, field) == getattr(reference, field), field
    for a, b in zip(from_onnx, reference, strict=True):
        assert a.index == b.index
        assert (a.wq - b.wq).abs().max().item() < 1e-10, (model_type, a.index)
        assert (a.wk_kv - b.wk_kv).abs().max().item() < 1e-10, (model_type, a.index)
    return from_onnx


# ------------------------------------------------------------------------------------------------ exports
@pytest.mark.parametrize("model_type", ["bert", "vit"])
def test_torchscript_export_equals_safetensors(tmp_path, model_type):
    qk = _export_and_compare(tmp_path, model_type, dynamo=False)
    names = [t.name for t in onnx.load(str(tmp_path / f"{model_type}.onnx")).graph.initializer]
    assert any(n.startswith("onnx::MatMul") for n in names)  # the weights are anonymous: found by structure
    assert qk.family == "encoder"


@pytest.mark.slow
@pytest.mark.parametrize("model_type", ["bert", "vit", "llama"])
def test_dynamo_export_equals_safetensors(tmp_path, model_type):
    qk = _export_and_compare(tmp_path, model_type, dynamo=True)
    if model_type == "llama":  # grouped-query attention: 6 heads over 2 KV heads, rotary, causal
        assert (qk.n_heads, qk.n_kv_heads, qk.family) == (6, 2, "decoder")


def test_torchscript_bert_reproduces_onnxruntime_logits(tmp_path):
    _export_and_compare(tmp_path, "bert", dynamo=False)
    assert check_ort_logits(tmp_path / "bert.onnx", {"x": np.array([[3, 14, 15, 9, 26, 5]], dtype=np.int64)}) == 12


# ------------------------------------------------------------------------------------------------ hand-built graphs
D, T, H, HD = 12, 5, 3, 4


def _weights(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {k: rng.normal(size=(D, H * HD)).astype(np.float32) for k in ("q", "k", "v")}


def _attention_graph(path, storage: str = "fp32", external: bool = False) -> dict[str, np.ndarray]:
    """x (1, T, D) -> softmax(q kᵀ / sqrt(HD)), q/k from x @ W (+ bias). Returns the float weights the model uses."""
    w = _weights()
    nodes, inits = [], [numpy_helper.from_array(np.array([0, 0, H, HD], np.int64), "heads"),
                        numpy_helper.from_array(np.array(1 / math.sqrt(HD), np.float32), "scale"),
                        numpy_helper.from_array(np.full(H * HD, 0.3, np.float32), "bias")]
    used = {}

    def project(side: str) -> str:
        if storage == "fused":
            return f"{side}_proj"
        if storage == "fp16":
            inits.append(numpy_helper.from_array(w[side].astype(np.float16), f"w{side}16"))
            nodes.append(helper.make_node("Cast", [f"w{side}16"], [f"w{side}"], to=TensorProto.FLOAT))
            used[side] = w[side].astype(np.float16).astype(np.float32)
        elif storage == "int8":
            scale = np.abs(w[side]).max() / 127
            inits.extend([numpy_helper.from_array(np.round(w[side] / scale).astype(np.int8), f"w{side}8"),
                          numpy_helper.from_array(np.array(scale, np.float32), f"s{side}"),
                          numpy_helper.from_array(np.array(0, np.int8), f"z{side}")])
            nodes.append(helper.make_node("DequantizeLinear", [f"w{side}8", f"s{side}", f"z{side}"], [f"w{side}"]))
            used[side] = (np.round(w[side] / scale).astype(np.float32) * np.float32(scale))
        elif storage == "gemm":
            inits.append(numpy_helper.from_array(np.ascontiguousarray(w[side].T), f"w{side}T"))
            used[side] = w[side]
            nodes.extend([helper.make_node("Gemm", ["x2d", f"w{side}T", "bias"], [f"{side}2d"], transB=1),
                          helper.make_node("Reshape", [f"{side}2d", "shape3"], [f"{side}_proj"])])
            return f"{side}_proj"
        else:
            inits.append(numpy_helper.from_array(w[side], f"w{side}"))
            used[side] = w[side]
        nodes.append(helper.make_node("MatMul", ["x", f"w{side}"], [f"{side}_mm"]))
        nodes.append(helper.make_node("Add", [f"{side}_mm", "bias"], [f"{side}_proj"]))
        return f"{side}_proj"

    if storage == "gemm":
        inits += [numpy_helper.from_array(np.array([T, D], np.int64), "shape2"),
                  numpy_helper.from_array(np.array([1, T, H * HD], np.int64), "shape3")]
        nodes.append(helper.make_node("Reshape", ["x", "shape2"], ["x2d"]))
    if storage == "fused":
        inits += [numpy_helper.from_array(np.concatenate([w["q"], w["k"], w["v"]], axis=1), "wqkv"),
                  numpy_helper.from_array(np.array([H * HD] * 3, np.int64), "sizes")]
        nodes += [helper.make_node("MatMul", ["x", "wqkv"], ["qkv"]),
                  helper.make_node("Split", ["qkv", "sizes"], ["q_proj", "k_proj", "v_proj"], axis=2)]
        used = {"q": w["q"], "k": w["k"]}
    q, k = project("q"), project("k")
    nodes += [helper.make_node("Reshape", [q, "heads"], ["q4"]),
              helper.make_node("Transpose", ["q4"], ["qh"], perm=[0, 2, 1, 3]),
              helper.make_node("Reshape", [k, "heads"], ["k4"]),
              helper.make_node("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]),
              helper.make_node("MatMul", ["qh", "kt"], ["scores"]),
              helper.make_node("Mul", ["scores", "scale"], ["logits"]),
              helper.make_node("Softmax", ["logits"], ["probs"], axis=-1)]
    graph = helper.make_graph(nodes, "attention", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, T, D])],
                              [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, H, T, T])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save_model(model, str(path), save_as_external_data=external, all_tensors_to_one_file=True,
                    location="weights.bin", size_threshold=0)
    return used


def _heads(w: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(w.astype(np.float64).reshape(D, H, HD).transpose(1, 0, 2))


@pytest.mark.parametrize("storage", ["fp32", "fp16", "int8", "gemm", "fused"])
def test_hand_built_graph_gives_its_weights_and_onnxruntime_logits(tmp_path, storage):
    used = _attention_graph(tmp_path / "model.onnx", storage)
    layer = qg.load_qk(tmp_path / "model.onnx").layer(0)
    assert torch.equal(layer.wq, _heads(used["q"])) and torch.equal(layer.wk_kv, _heads(used["k"]))
    x = np.random.default_rng(1).normal(size=(1, T, D)).astype(np.float32)
    assert check_ort_logits(tmp_path / "model.onnx", {"x": x}) == H


def test_a_walk_longer_than_its_bound_is_refused_not_cut_short(tmp_path):
    from qkgeometry.readers.onnx_walk import MAX_WALK

    _attention_graph(tmp_path / "model.onnx")
    model = onnx.load(str(tmp_path / "model.onnx"))
    nodes = list(model.graph.node)
    reshape = next(n for n in nodes if n.op_type == "Reshape" and n.input[0] == "k_proj")
    chain = [helper.make_node("Identity", ["k_proj" if i == 0 else f"k_chain{i - 1}"], [f"k_chain{i}"])
             for i in range(MAX_WALK + 5)]
    reshape.input[0] = chain[-1].output[0]
    at = nodes.index(reshape)
    model.graph.ClearField("node")
    model.graph.node.extend(nodes[:at] + chain + nodes[at:])
    onnx.checker.check_model(model)
    onnx.save_model(model, str(tmp_path / "long.onnx"))
    with pytest.raises(SourceError, match=f"visits more than {MAX_WALK} nodes"):
        qg.load_qk(tmp_path / "long.onnx")


def test_external_data_and_folder_source(tmp_path):
    used = _attention_graph(tmp_path / "model.onnx", external=True)
    assert (tmp_path / "weights.bin").is_file() and (tmp_path / "model.onnx").stat().st_size < 2000
    qk = qg.load_qk(tmp_path)  # a folder without config.json holding one model.onnx
    assert torch.equal(qk.layer(0).wq, _heads(used["q"]))
    (tmp_path / "config.json").write_text('{"model_type": "bert"}')  # an exporter's folder: config, no safetensors
    assert torch.equal(qg.load_qk(tmp_path).layer(0).wq, _heads(used["q"]))
    (tmp_path / "weights.bin").unlink()
    with pytest.raises(SourceError, match=r"external data file 'weights.bin'.*missing"):
        qg.load_qk(tmp_path / "model.onnx").layer(0)


# ------------------------------------------------------------------------------------------------ fused ops
def _fused_graph(path, op: str) -> dict[str, np.ndarray]:
    w = _weights(2)
    ms = "com.microsoft"
    inits = [numpy_helper.from_array(w[s], f"w{s}") for s in "qkv"]
    nodes = [helper.make_node("MatMul", ["x", f"w{s}"], [s]) for s in "qkv"]
    outputs = ["out"]
    if op == "MultiHeadAttention":
        nodes.append(helper.make_node(op, ["q", "k", "v"], ["out"], domain=ms, num_heads=H))
    elif op == "Attention":  # packed (D, 3·H·HD) weight inside the op
        inits = [numpy_helper.from_array(np.concatenate([w["q"], w["k"], w["v"]], axis=1), "wqkv"),
                 numpy_helper.from_array(np.zeros(3 * H * HD, np.float32), "bqkv")]
        nodes = [helper.make_node(op, ["x", "wqkv", "bqkv"], ["out"], domain=ms, num_heads=H)]
    else:  # GroupQueryAttention with a packed QKV projection, 3 query heads over 1 KV head
        wk, wv = w["k"][:, :HD], w["v"][:, :HD]
        inits = [numpy_helper.from_array(np.concatenate([w["q"], wk, wv], axis=1), "wqkv"),
                 numpy_helper.from_array(np.array([T - 1], np.int32), "seqlens"),
                 numpy_helper.from_array(np.array(T, np.int32), "total")]
        nodes = [helper.make_node("MatMul", ["x", "wqkv"], ["qkv"]),
                 helper.make_node(op, ["qkv", "", "", "", "", "seqlens", "total"], ["out", "pk", "pv"], domain=ms,
                                  num_heads=H, kv_num_heads=1)]
        outputs = ["out", "pk", "pv"]
        w = {"q": w["q"], "k": wk}
    graph = helper.make_graph(nodes, "fused", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, T, D])],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ms, 1)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return w


@pytest.mark.parametrize("op", ["MultiHeadAttention", "Attention", "GroupQueryAttention"])
def test_fused_attention_ops(tmp_path, op):
    w = _fused_graph(tmp_path / "fused.onnx", op)
    qk = qg.load_qk(tmp_path / "fused.onnx")
    layer = qk.layer(0)
    assert torch.equal(layer.wq, _heads(w["q"]))
    n_kv = 1 if op == "GroupQueryAttention" else H
    expected_k = torch.from_numpy(w["k"].astype(np.float64).reshape(D, n_kv, HD).transpose(1, 0, 2))
    assert torch.equal(layer.wk_kv, expected_k)
    assert qk.family == ("decoder" if op == "GroupQueryAttention" else "encoder")


# ------------------------------------------------------------------------------------------------ errors
def test_truncated_and_foreign_files_are_refused(tmp_path):
    _attention_graph(tmp_path / "model.onnx")
    data = (tmp_path / "model.onnx").read_bytes()
    (tmp_path / "cut.onnx").write_bytes(data[: len(data) // 2])
    with pytest.raises(SourceError, match=r"not a readable ONNX model.*truncated"):
        qg.load_qk(tmp_path / "cut.onnx")
    (tmp_path / "text.onnx").write_text("this is not a model")
    with pytest.raises(SourceError, match=r"text\.onnx"):
        qg.load_qk(tmp_path / "text.onnx")


def test_graph_without_attention_is_refused(tmp_path):
    w = numpy_helper.from_array(np.ones((D, D), np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
                              "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, T, D])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "mlp.onnx"))
    with pytest.raises(SourceError, match="no attention found"):
        qg.load_qk(tmp_path / "mlp.onnx")


def test_quantised_and_qk_norm_projections_are_refused_by_name(tmp_path):
    _attention_graph(tmp_path / "model.onnx")
    model = onnx.load(str(tmp_path / "model.onnx"))
    for node in model.graph.node:  # the query projection becomes a (fake) 4-bit MatMulNBits
        if node.op_type == "MatMul" and node.input[1] == "wq":
            node.op_type, node.domain = "MatMulNBits", "com.microsoft"
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    onnx.save(model, str(tmp_path / "nbits.onnx"))
    with pytest.raises(SourceError, match=r"quantised com\.microsoft\.MatMulNBits"):
        qg.load_qk(tmp_path / "nbits.onnx")
    model = onnx.load(str(tmp_path / "model.onnx"))
    nodes = list(model.graph.node)
    k = next(i for i, n in enumerate(nodes) if n.op_type == "Reshape" and n.input[0] == "k_proj")
    nodes[k].input[0] = "k_normed"
    nodes.insert(k, helper.make_node("LayerNormalization", ["k_proj", "gain"], ["k_normed"], axis=-1))
    model.graph.initializer.append(numpy_helper.from_array(np.ones(H * HD, np.float32), "gain"))
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    onnx.save(model, str(tmp_path / "qknorm.onnx"))
    with pytest.raises(SourceError, match=r"normalisation .*LayerNormalization.*QK-norm"):
        qg.load_qk(tmp_path / "qknorm.onnx")


def test_folder_with_several_onnx_files_must_name_one(tmp_path):
    _attention_graph(tmp_path / "a.onnx")
    _attention_graph(tmp_path / "b.onnx")
    with pytest.raises(SourceError, match=r"several ONNX files \(a.onnx, b.onnx\)"):
        qg.load_qk(tmp_path)
    assert qg.load_qk(tmp_path / "b.onnx").n_heads == H


def test_missing_onnx_path_is_a_path_not_a_hub_id(tmp_path):
    with pytest.raises(SourceError, match="does not exist"):
        qg.load_qk("nowhere/model.onnx")


def test_random_twin_of_an_onnx_model(tmp_path):
    _attention_graph(tmp_path / "model.onnx")
    twin = qg.load_qk(tmp_path / "model.onnx").randomized()
    assert twin.architecture == "onnx" and twin.layer(0).wq.shape == (H, D, HD)


# ------------------------------------------------------------------------------------------------ offline models
def _installed(alias: str):
    """The offline model's file: a declared offline part that is missing or corrupt fails the test (PartError)."""
    return qg.catalogue.offline_path(alias)


@pytest.mark.slow
def test_offline_minilm_l3_reproduces_onnxruntime_logits():
    path = _installed("minilm-l3")
    qk = qg.load_qk("offline:minilm-l3")
    assert (qk.family, qk.n_layers, qk.d_model, qk.n_heads, qk.head_dim) == ("encoder", 3, 384, 12, 32)
    ids = np.array([[101, 1996, 4248, 2829, 4419, 14523, 2058, 1996, 13971, 3899, 102]], dtype=np.int64)
    feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    assert check_ort_logits(path, feeds) == 3 * 12


@pytest.mark.slow
def test_offline_dinov2_focus_reproduces_onnxruntime_logits_and_the_papers_dinov2_small():
    path = _installed("dinov2-small-focus")
    qk = qg.load_qk("offline:dinov2-small-focus")
    assert (qk.family, qk.n_layers, qk.d_model, qk.n_heads, qk.head_dim) == ("encoder", 12, 384, 6, 64)
    pixels = np.random.default_rng(0).normal(size=(1, 3, 224, 224)).astype(np.float32)
    assert check_ort_logits(path, {"input_image": pixels}) == 12 * 6
    # its backbone was fine-tuned from DINOv2-small: every layer's symmetry stays near the paper's value for it
    paper = qg.catalogue.paper_per_layer("vision-models")
    paper = paper[(paper["model"] == "facebook/dinov2-small") & (paper["file"] == "DINOv2.pkl")]
    ours = qg.score_model(qk)
    gap = np.abs(ours.sort_values("layer")["symmetry"].to_numpy() - paper.sort_values("layer")["symmetry"].to_numpy())
    assert len(gap) == 12 and gap.max() < 0.02, gap


def test_offline_minilm_l6_int8_matches_the_fp32_model_within_quantisation():
    _installed("minilm-l6-int8")
    reference = qg.load_qk("offline:minilm-l6")
    quantised = qg.load_qk("offline:minilm-l6-int8")
    for a, b in zip(quantised, reference, strict=True):
        step = b.wq.abs().max().item() / 127  # one int8 step of a per-tensor scale
        assert 0 < (a.wq - b.wq).abs().max().item() <= 0.5 * step * 1.01
        assert qg.symmetry_score(a.matrix()) == pytest.approx(qg.symmetry_score(b.matrix()), abs=0.01)
