"""ONNX graphs built to break the reader: cycles, shadowed tensors, short input lists, bad fused-attention
attributes, STRING weights, decompression bombs and external data that must never be opened.

Each graph is built here with the ``onnx`` helper API, and each case is asserted the same way: ``qkgeometry score``
exits 2 with one line naming the file and what was wrong, within a time bound, and never materialises more than
the bounds of :mod:`qkgeometry.limits` allow.
"""

from __future__ import annotations

import math
import os
import tracemalloc

import numpy as np
import pytest
import torch

import qkgeometry as qg
from bounded import no_hang, one_line_error
from qkgeometry.cli import main
from qkgeometry.errors import SourceError
from qkgeometry.limits import MAX_COMPUTED_ELEMENTS

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

D, T, H, HD = 8, 3, 2, 4


def weights(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {s: rng.normal(size=(D, H * HD)).astype(np.float32) for s in "qk"}


def attention(q_weight: str = "wq", k_weight: str = "wk", extra_nodes=(), extra_inits=(), opset: int = 17,
              reshape_as_attribute: bool = False, k_input: str = "k_proj"):
    """x -> softmax((x Wq)(x Wk)ᵀ) split into H heads: nodes, initializers and the model, built without checks."""
    w = weights()
    inits = [numpy_helper.from_array(w["q"], "wq"), numpy_helper.from_array(w["k"], "wk"),
             numpy_helper.from_array(np.array([0, 0, H, HD], np.int64), "heads"), *extra_inits]
    if reshape_as_attribute:
        reshape = [helper.make_node("Reshape", ["q_proj"], ["q4"], shape=[0, 0, H, HD]),
                   helper.make_node("Reshape", [k_input], ["k4"], shape=[0, 0, H, HD])]
    else:
        reshape = [helper.make_node("Reshape", ["q_proj", "heads"], ["q4"]),
                   helper.make_node("Reshape", [k_input, "heads"], ["k4"])]
    nodes = [helper.make_node("MatMul", ["x", q_weight], ["q_proj"]),
             helper.make_node("MatMul", ["x", k_weight], ["k_proj"]),
             *extra_nodes, *reshape,
             helper.make_node("Transpose", ["q4"], ["qh"], perm=[0, 2, 1, 3]),
             helper.make_node("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]),
             helper.make_node("MatMul", ["qh", "kt"], ["scores"]),
             helper.make_node("Softmax", ["scores"], ["probs"], axis=-1)]
    graph = helper.make_graph(nodes, "attention", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, T, D])],
                              [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, H, T, T])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model, w


def save(model, path) -> str:
    onnx.save(model, str(path))
    return str(path)


def refused(capsys, path: str, *needles: str, seconds: int = 30) -> str:
    with no_hang(seconds):
        rc = main(["score", path])
    return one_line_error(capsys, rc, os.path.basename(path), *needles)


# ------------------------------------------------------------------------------------------------ hangs
def test_a_self_loop_is_refused_not_walked_forever(tmp_path, capsys):
    model, _ = attention(extra_nodes=[helper.make_node("Identity", ["k_loop"], ["k_loop"])])
    refused(capsys, save(model, tmp_path / "self.onnx"), "cycle", "acyclic")


def test_a_cycle_on_the_key_path_is_refused(tmp_path, capsys):
    extra = [helper.make_node("Add", ["k_proj", "k_back"], ["k_sum"]),
             helper.make_node("Relu", ["k_sum"], ["k_relu"]),
             helper.make_node("Identity", ["k_relu"], ["k_back"])]
    model, _ = attention(extra_nodes=extra, k_input="k_sum")
    refused(capsys, save(model, tmp_path / "loop.onnx"), "has a cycle", "acyclic")


def test_a_cycle_among_constant_ops_is_refused(tmp_path, capsys):
    extra = [helper.make_node("Mul", ["wk_raw", "c2"], ["c1"]),
             helper.make_node("Identity", ["c1"], ["c2"]),
             helper.make_node("Cast", ["c1"], ["wk_c"], to=TensorProto.FLOAT)]
    model, _ = attention(k_weight="wk_c", extra_nodes=extra,
                         extra_inits=[numpy_helper.from_array(np.ones((D, H * HD), np.float32), "wk_raw")])
    nodes = list(model.graph.node)  # the constant cone first, as an exporter would order it
    model.graph.ClearField("node")
    model.graph.node.extend(nodes[2:5] + nodes[:2] + nodes[5:])
    refused(capsys, save(model, tmp_path / "constloop.onnx"), "has a cycle", "acyclic")


def test_is_const_terminates_on_a_cycle_even_without_the_graph_check(tmp_path):
    """The constant test tracks what is in progress: a cycle of constant ops is not constant, and it ends."""
    from qkgeometry.readers.onnx_graph import OnnxGraph

    model, _ = attention()
    onnx.save(model, str(tmp_path / "ok.onnx"))
    g = OnnxGraph.open(tmp_path / "ok.onnx")
    g.nodes.append(helper.make_node("Identity", ["loop_b"], ["loop_a"]))
    g.nodes.append(helper.make_node("Neg", ["loop_a"], ["loop_b"]))
    g.producer.update({"loop_a": (len(g.nodes) - 2, 0), "loop_b": (len(g.nodes) - 1, 0)})
    with no_hang(10):
        assert g.is_const("loop_a") is False and g.is_const("loop_b") is False
        assert g.is_const("wk") is True


# ------------------------------------------------------------------------------------------------ malformed tables
def test_an_initializer_shadowed_by_a_node_output_is_refused(tmp_path, capsys):
    model, _ = attention(extra_nodes=[helper.make_node("Relu", ["x"], ["wk"])])
    refused(capsys, save(model, tmp_path / "shadow.onnx"), "'wk'", "one producer")


def test_a_tensor_with_two_producers_is_refused(tmp_path, capsys):
    model, _ = attention(extra_nodes=[helper.make_node("Relu", ["x"], ["k_proj"])])
    refused(capsys, save(model, tmp_path / "twice.onnx"), "'k_proj'", "one producer")


def test_a_one_input_matmul_and_a_reshape_without_shape_are_refused(tmp_path, capsys):
    model, _ = attention()
    next(n for n in model.graph.node if n.op_type == "MatMul" and n.input[1] == "wk").input.pop()
    refused(capsys, save(model, tmp_path / "short.onnx"), "MatMul", "needs at least 2")
    model, _ = attention()
    next(n for n in model.graph.node if n.op_type == "Reshape" and n.input[0] == "k_proj").input.pop()
    refused(capsys, save(model, tmp_path / "noshape.onnx"), "Reshape", "no target shape")


def test_an_opset_1_reshape_with_its_shape_as_an_attribute_is_read(tmp_path):
    model, w = attention(opset=4, reshape_as_attribute=True)
    onnx.checker.check_model(model)  # valid ONNX
    layer = qg.load_qk(save(model, tmp_path / "opset4.onnx")).layer(0)
    expected = torch.from_numpy(w["k"].astype(np.float64).reshape(D, H, HD).transpose(1, 0, 2))
    assert layer.n_heads == H and torch.equal(layer.wk_kv, expected)


def test_a_string_weight_is_refused_by_name(tmp_path, capsys):
    model, _ = attention()
    inits = [t for t in model.graph.initializer if t.name != "wk"]
    inits.append(helper.make_tensor("wk", TensorProto.STRING, [D, H * HD], [b"w"] * (D * H * HD)))
    model.graph.ClearField("initializer")
    model.graph.initializer.extend(inits)
    refused(capsys, save(model, tmp_path / "string.onnx"), "'wk'", "STRING")


# ------------------------------------------------------------------------------------------------ fused attributes
def fused(op: str, **attrs):
    w = weights(1)
    ms = "com.microsoft"
    if op == "Attention":
        packed = attrs.pop("packed", np.concatenate([w["q"], w["k"], w["k"]], axis=1))
        inits = [numpy_helper.from_array(packed, "wqkv")]
        nodes = [helper.make_node(op, ["x", "wqkv"], ["out"], domain=ms, **attrs)]
    else:
        inits = [numpy_helper.from_array(w[s], f"w{s}") for s in "qk"]
        nodes = [helper.make_node("MatMul", ["x", "wq"], ["q"]), helper.make_node("MatMul", ["x", "wk"], ["k"]),
                 helper.make_node(op, ["q", "k", "k"], ["out"], domain=ms, **attrs)]
    graph = helper.make_graph(nodes, "fused", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, T, D])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ms, 1)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("op, attrs, needle", [
    ("MultiHeadAttention", {}, "'num_heads' is missing"),
    ("MultiHeadAttention", {"num_heads": 0}, "'num_heads' is 0"),
    ("MultiHeadAttention", {"num_heads": -2}, "'num_heads' is -2"),
    ("GroupQueryAttention", {"num_heads": 2, "kv_num_heads": 0}, "'kv_num_heads' is 0"),
    ("GroupQueryAttention", {"num_heads": -1, "kv_num_heads": 1}, "'num_heads' is -1"),
    ("Attention", {"num_heads": 0}, "'num_heads' is 0"),
    ("Attention", {"num_heads": 2, "packed": np.ones(3 * H * HD, np.float32)}, "must be 2-D"),
    ("Attention", {"num_heads": 2, "qkv_hidden_sizes": [8, 8]}, "qkv_hidden_sizes"),
])
def test_bad_fused_attention_attributes_are_one_clear_line(tmp_path, capsys, op, attrs, needle):
    refused(capsys, save(fused(op, **attrs), tmp_path / "fused.onnx"), needle)


# ------------------------------------------------------------------------------------------------ bombs
def bomb(kind: str):
    """A key weight computed from a few bytes of constants into 20000 × 20000 = 4·10⁸ entries."""
    n = 20000
    i64 = np.int64
    if kind == "ConstantOfShape":
        inits = [numpy_helper.from_array(np.array([n, n], i64), "shape")]
        nodes = [helper.make_node("ConstantOfShape", ["shape"], ["wk_big"])]
    elif kind == "Expand":
        inits = [numpy_helper.from_array(np.ones((1, 1), np.float32), "one"),
                 numpy_helper.from_array(np.array([n, n], i64), "shape")]
        nodes = [helper.make_node("Expand", ["one", "shape"], ["wk_big"])]
    elif kind == "Tile":
        inits = [numpy_helper.from_array(np.ones((1, 1), np.float32), "one"),
                 numpy_helper.from_array(np.array([n, n], i64), "reps")]
        nodes = [helper.make_node("Tile", ["one", "reps"], ["wk_big"])]
    elif kind == "broadcast":
        inits = [numpy_helper.from_array(np.array([n, 1], i64), "col"),
                 numpy_helper.from_array(np.array([1, n], i64), "row")]
        nodes = [helper.make_node("ConstantOfShape", ["col"], ["c"]), helper.make_node("ConstantOfShape", ["row"], ["r"]),
                 helper.make_node("Add", ["c", "r"], ["wk_big"])]
    elif kind == "Gather":
        inits = [numpy_helper.from_array(np.array([1, n], i64), "row"),
                 numpy_helper.from_array(np.array([n], i64), "len")]
        nodes = [helper.make_node("ConstantOfShape", ["row"], ["r"]),
                 helper.make_node("ConstantOfShape", ["len"], ["idx"],
                                  value=numpy_helper.from_array(np.array([0], i64))),
                 helper.make_node("Gather", ["r", "idx"], ["wk_big"], axis=0)]
    elif kind == "Range":
        inits = [numpy_helper.from_array(np.array(v, np.float32), name)
                 for v, name in ((0, "start"), (4e8, "limit"), (1, "delta"))]
        nodes = [helper.make_node("Range", ["start", "limit", "delta"], ["wk_big"])]
    else:  # a sparse Constant declares a dense 20000 × 20000 output
        sparse = helper.make_sparse_tensor(numpy_helper.from_array(np.array([1.0], np.float32), "v"),
                                           numpy_helper.from_array(np.array([0], i64), "i"), [n, n])
        nodes = [helper.make_node("Constant", [], ["wk_big"], sparse_value=sparse)]
        inits = []
    model, _ = attention(k_weight="wk_big", extra_nodes=nodes, extra_inits=inits)
    return model


@pytest.mark.parametrize("kind", ["ConstantOfShape", "Expand", "Tile", "broadcast", "Gather", "Range", "sparse"])
def test_a_decompression_bomb_is_refused_before_it_is_materialised(tmp_path, capsys, kind):
    path = save(bomb(kind), tmp_path / "bomb.onnx")
    assert os.path.getsize(path) < 2000
    tracemalloc.start()
    try:
        line = refused(capsys, path, "over the bound", f"{MAX_COMPUTED_ELEMENTS:,}", seconds=20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2 ** 20, f"{peak / 2 ** 20:.0f} MiB allocated before refusing: {line}"


def test_an_initializer_declaring_a_huge_shape_is_refused_before_reading(tmp_path, capsys):
    model, _ = attention()
    big = next(t for t in model.graph.initializer if t.name == "wk")
    big.ClearField("raw_data")
    big.ClearField("dims")
    big.dims.extend([2 ** 31, 2 ** 31, 4])  # 2**64 entries: wraps to 0 in int64
    refused(capsys, save(model, tmp_path / "huge.onnx"), "'wk'", "over the bound")


def test_computed_constants_within_the_bound_still_evaluate(tmp_path):
    """A weight built from constant ops (ConstantOfShape + Add, Expand) is read exactly: the bound refuses only
    what exceeds it."""
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["zeros"]),
             helper.make_node("Add", ["zeros", "wk"], ["wk_plus"]),
             helper.make_node("Expand", ["wk_plus", "shape"], ["wk_big"])]
    model, w = attention(k_weight="wk_big", extra_nodes=nodes,
                         extra_inits=[numpy_helper.from_array(np.array([D, H * HD], np.int64), "shape")])
    layer = qg.load_qk(save(model, tmp_path / "computed.onnx")).layer(0)
    assert torch.equal(layer.wk_kv, torch.from_numpy(w["k"].astype(np.float64).reshape(D, H, HD).transpose(1, 0, 2)))
    assert math.prod(layer.wk_kv.shape) == D * H * HD


# ------------------------------------------------------------------------------------------------ external data
def test_an_unused_initializer_pointing_outside_the_folder_is_never_opened(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    os.mkfifo(tmp_path / "outside.bin")  # opening it would block: the time bound catches any open
    model, w = attention()
    unused = numpy_helper.from_array(np.zeros(4, np.float32), "unused")
    unused.ClearField("raw_data")
    unused.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "../outside.bin"), ("offset", "0"), ("length", "16")):
        unused.external_data.add(key=key, value=value)
    model.graph.initializer.append(unused)
    path = save(model, folder / "model.onnx")
    with no_hang(20):
        qk = qg.load_qk(path)
        scores = qg.score_model(qk)
    assert len(scores) == 1 and torch.equal(qk.layer(0).wq, torch.from_numpy(
        w["q"].astype(np.float64).reshape(D, H, HD).transpose(1, 0, 2)))
    os.unlink(tmp_path / "outside.bin")  # a regular file outside: not hashed into the model's revision either
    (tmp_path / "outside.bin").write_bytes(b"1" * 16)
    before = qg.load_qk(path).revision
    (tmp_path / "outside.bin").write_bytes(b"2" * 16)
    assert qg.load_qk(path).revision == before


def test_a_used_initializer_pointing_outside_the_folder_is_refused(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (tmp_path / "outside.bin").write_bytes(np.zeros(D * H * HD, np.float32).tobytes())
    model, _ = attention()
    wk = next(t for t in model.graph.initializer if t.name == "wk")
    wk.ClearField("raw_data")
    wk.data_location = TensorProto.EXTERNAL
    wk.external_data.add(key="location", value="../outside.bin")
    with no_hang(20), pytest.raises(SourceError, match=r"'wk' points at external data '../outside.bin', outside"):
        qg.load_qk(save(model, folder / "model.onnx"))


def test_ops_of_other_domains_keep_their_own_input_counts(tmp_path):
    """The input-count check applies to standard ONNX ops only: com.microsoft's Range takes two inputs."""
    extra = [helper.make_node("Range", ["one", "two"], ["unused_range"], domain="com.microsoft")]
    model, w = attention(extra_nodes=extra, extra_inits=[numpy_helper.from_array(np.array(1, np.int64), "one"),
                                                         numpy_helper.from_array(np.array(2, np.int64), "two")])
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    layer = qg.load_qk(save(model, tmp_path / "ms.onnx")).layer(0)
    assert torch.equal(layer.wq, torch.from_numpy(w["q"].astype(np.float64).reshape(D, H, HD).transpose(1, 0, 2)))
