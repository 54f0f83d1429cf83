"""An ONNX graph as the attention walk sees it (:mod:`qkgeometry.readers.onnx_walk`): nodes, producers and consumers,
initializers, and constant expressions evaluated on demand.

Before any walk the graph itself is checked: acyclic, one producer per tensor, no initializer overwritten by a
node, enough inputs for each op; and a constant is evaluated one node at a time, each only after its output is known
to fit the bounds of :mod:`qkgeometry.limits` (so a few bytes cannot declare gigabytes). A weight is any constant
expression: an initializer (fp32, fp16, bf16; inline or in external-data files next to the model), or initializers
through ``Cast``, ``DequantizeLinear``, ``Mul`` by scales and the like, evaluated with ``onnx.reference`` on the
constants only (the model itself is never run, and nothing is unpickled).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .._arrays import widened
from ..errors import LimitExceeded, ONNXGraphError
from ..limits import (
    MAX_COMPUTED_ELEMENTS,
    MAX_GRAPH_NODES,
    MAX_TENSOR_ELEMENTS,
    check_elements,
)

__all__ = ["CONST_OPS", "MIN_INPUTS", "AttentionSite", "ONNXGraphError", "OnnxGraph", "Projection",
           "external_files"]


#: ops evaluated on constants to produce a weight (dequantisation, casts, reshapes of stored tensors)
CONST_OPS = frozenset({
    "Identity", "Cast", "CastLike", "Mul", "Div", "Add", "Sub", "Neg", "Transpose", "Reshape", "Squeeze",
    "Unsqueeze", "DequantizeLinear", "Concat", "Slice", "Gather", "Split", "Flatten", "Expand", "Sqrt",
    "Reciprocal", "Constant", "ConstantOfShape", "Range", "Tile", "Shape",
})
#: the fewest inputs each op the walk reads must have (the ONNX operator specifications' minimum)
MIN_INPUTS = {"MatMul": 2, "Gemm": 2, "FusedMatMul": 2, "Attention": 2, "MultiHeadAttention": 1,
              "GroupQueryAttention": 1, "Softmax": 1, "Split": 1, "Slice": 1, "Transpose": 1, "Concat": 1,
              "DequantizeLinear": 2, "ConstantOfShape": 1, "Expand": 2, "Tile": 2, "Gather": 2, "Range": 3,
              "Where": 3, "Add": 2, "Sub": 2, "Mul": 2, "Div": 2}


@dataclass(frozen=True)
class Projection:
    """The ``MatMul``/``Gemm`` that projects a hidden state onto queries or keys.

    ``weight`` names the constant tensor; ``transposed`` is True when it is stored (n_out, d_model) (``Gemm`` with
    ``transB=1``); ``hidden`` names the projected activation; ``columns`` is the (start, stop) range of output
    columns that hold this side (Q or K) of a fused projection.
    """

    node: int
    weight: str
    transposed: bool
    hidden: str
    columns: tuple[int, int] | None = None


@dataclass(frozen=True)
class AttentionSite:
    """One attention found in the graph: the node that computes its logits and both projections.

    ``softmax_input`` names the tensor passed to Softmax (None for fused ops); ``n_heads`` / ``n_kv_heads`` /
    ``head_dim`` come from the head-splitting Reshape or from the fused op's attributes; ``d_model`` from the weights.
    """

    node: int
    op: str
    query: Projection
    key: Projection
    n_heads: int
    n_kv_heads: int
    head_dim: int
    d_model: int
    softmax_input: str | None = None
    causal: bool = False

    @property
    def component(self) -> str:
        """``self`` when Q and K project the same hidden state, else ``cross``."""
        return "self" if self.query.hidden == self.key.hidden else "cross"


@dataclass
class OnnxGraph:
    """An ONNX model loaded without running it: node table, producers, consumers and a constant evaluator.

    External data (``location`` entries of initializers) is read from files next to ``path`` on demand; a location
    that leaves the model's folder is refused.
    """

    path: Path
    model: Any
    nodes: list[Any] = field(init=False)
    producer: dict[str, tuple[int, int]] = field(init=False)
    consumers: dict[str, list[int]] = field(init=False)
    initializers: dict[str, Any] = field(init=False)
    _const: dict[str, bool] = field(init=False, default_factory=dict)
    _values: dict[str, np.ndarray] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        g = self.model.graph
        where = str(self.path)
        if len(g.node) > MAX_GRAPH_NODES:
            raise ONNXGraphError(f"{where!r} declares {len(g.node):,} graph nodes, over the bound of "
                                 f"{MAX_GRAPH_NODES:,}; the file is corrupt or not a model export.")
        self.nodes = list(g.node)
        self.initializers = {t.name: t for t in g.initializer}
        self.graph_inputs = {i.name for i in g.input} - set(self.initializers)
        self.producer, self.consumers = {}, {}
        for k, node in enumerate(self.nodes):
            for j, out in enumerate(node.output):
                if not out:
                    continue
                if out in self.producer or out in self.initializers:
                    first = ("an initializer" if out in self.initializers
                             else self.describe(self.producer[out][0]))
                    raise ONNXGraphError(f"{where!r}: tensor {out!r} is produced by {self.describe(k)} and also by "
                                         f"{first}; every tensor of an ONNX graph has one producer. The graph is "
                                         "malformed: export it again.")
                self.producer[out] = (k, j)
            for name in node.input:
                if name:
                    self.consumers.setdefault(name, []).append(k)
        self._check_inputs(where)
        self._check_acyclic(where)

    def _check_inputs(self, where: str) -> None:
        """Refuse a node with fewer inputs than its op needs (a one-input MatMul)."""
        for k, node in enumerate(self.nodes):
            standard = node.domain in ("", "ai.onnx")
            fused = node.domain == "com.microsoft" and node.op_type in (
                "FusedMatMul", "Attention", "MultiHeadAttention", "GroupQueryAttention")
            need = MIN_INPUTS.get(node.op_type, 0) if standard or fused else 0
            if standard and node.op_type == "Reshape" and not (len(node.input) > 1 and node.input[1]) \
                    and not any(a.name == "shape" for a in node.attribute):  # opset 1-4: the shape is an attribute
                raise ONNXGraphError(f"{where!r}: {self.describe(k)} has no target shape (no second input and "
                                     "no shape attribute); the graph is malformed: export it again.")
            if sum(1 for i in node.input[:need] if i) < need:
                raise ONNXGraphError(f"{where!r}: {self.describe(k)} has {len(node.input)} input(s); {node.op_type} "
                                     f"needs at least {need}. The graph is malformed: export it again.")

    def _check_acyclic(self, where: str) -> None:
        """Refuse a graph whose nodes form a cycle (``t = Identity(t)``, or a loop through any ops): ONNX graphs are
        acyclic, and every walk of this module relies on it (Kahn's algorithm, linear in the graph's size)."""
        waiting = [0] * len(self.nodes)
        for k, node in enumerate(self.nodes):
            waiting[k] = sum(1 for i in node.input if i in self.producer)
        ready = [k for k, n in enumerate(waiting) if n == 0]
        done = 0
        while ready:
            k = ready.pop()
            done += 1
            for out in self.nodes[k].output:
                for c in self.consumers.get(out, ()) if out else ():
                    waiting[c] -= 1
                    if waiting[c] == 0:
                        ready.append(c)
        if done < len(self.nodes):
            stuck = next(k for k, n in enumerate(waiting) if n > 0)
            raise ONNXGraphError(f"{where!r}: the graph has a cycle (through {self.describe(stuck)}); ONNX graphs "
                                 "must be acyclic. The file is malformed: export it again.")

    @classmethod
    def open(cls, path: str | os.PathLike) -> OnnxGraph:
        """Parse ``path`` (external data left on disk). Raises :class:`ONNXGraphError` for anything unreadable."""
        import onnx
        from google.protobuf.message import DecodeError

        path = Path(path)
        try:
            model = onnx.load(str(path), load_external_data=False)
        except (DecodeError, RuntimeWarning, ValueError, TypeError) as e:
            raise ONNXGraphError(f"{str(path)!r} is not a readable ONNX model ({type(e).__name__}: {e}); the file is "
                                 "truncated or not ONNX: export or download it again.") from e
        if not model.graph.node:
            raise ONNXGraphError(f"{str(path)!r} holds no graph nodes: it is not an ONNX model (or an empty one).")
        return cls(path, model)

    # ------------------------------------------------------------------------------------------ constants
    def is_const(self, name: str) -> bool:
        """True when tensor ``name`` depends on no graph input (an initializer, or ops on initializers only)."""
        if not name:
            return True
        if name in self._const:
            return self._const[name]
        if name in self.initializers:
            return True
        stack, in_progress = [name], set()
        while stack:  # iterative: a long chain of constant ops must not hit the recursion limit
            t = stack[-1]
            if t in self._const or t in self.initializers or not t:
                stack.pop()
                continue
            if t not in self.producer:
                self._const[t] = False
                stack.pop()
                continue
            node = self.nodes[self.producer[t][0]]
            if node.op_type not in CONST_OPS or node.domain not in ("", "ai.onnx"):
                self._const[t] = False
                stack.pop()
                continue
            pending = [i for i in node.input if i and i not in self._const and i not in self.initializers]
            if pending and t not in in_progress:
                in_progress.add(t)  # its inputs are pushed once; a tensor met again while in progress is a cycle
                stack.extend(i for i in pending if i not in in_progress)
                continue
            self._const[t] = all(not i or i in self.initializers or self._const.get(i, False) for i in node.input)
            in_progress.discard(t)
            stack.pop()
        return self._const.get(name, False)

    def value(self, name: str) -> np.ndarray:
        """The value of constant tensor ``name`` as a NumPy array (initializers read directly; other constants
        evaluated with ``onnx.reference`` on the cone of constant ops that produces them)."""
        if name in self._values:
            return self._values[name]
        if not self.is_const(name):
            raise ONNXGraphError(f"{str(self.path)!r}: tensor {name!r} is computed from the graph's inputs, not "
                                 "stored; it cannot be read as a weight.")
        if name in self.initializers:
            out = self._initializer(name)
        else:
            out = self._evaluate(name)
        self._values[name] = out
        return out

    def forget(self) -> None:
        """Drop cached weight values (keeps small shape constants)."""
        self._values = {k: v for k, v in self._values.items() if v.size <= 64}

    def _initializer(self, name: str) -> np.ndarray:
        from onnx import TensorProto, numpy_helper

        tensor = self.initializers[name]
        base = self.path.parent
        where = f"{str(self.path)!r}: initializer {name!r}"
        if tensor.data_type in (TensorProto.STRING, TensorProto.UNDEFINED) or \
                tensor.data_type not in TensorProto.DataType.values():
            kind = TensorProto.DataType.Name(tensor.data_type) if tensor.data_type in \
                TensorProto.DataType.values() else f"type {tensor.data_type}"
            raise ONNXGraphError(f"{where} holds {kind} data, not numbers; it cannot be read as a weight.")
        try:
            check_elements(tensor.dims, MAX_TENSOR_ELEMENTS, where)
        except LimitExceeded as e:
            raise ONNXGraphError(str(e)) from None
        for entry in tensor.external_data:
            if entry.key == "location":
                self._external_path(name, entry.value)
        try:
            array = numpy_helper.to_array(tensor, base_dir=str(base))
        except (OSError, ValueError, TypeError) as e:
            raise ONNXGraphError(f"{where} could not be read ({type(e).__name__}: {e}); the file or its external "
                                 "data is truncated: export or download it again.") from e
        return _widen(array)

    def _external_path(self, name: str, location: str) -> Path:
        """The external-data file ``location`` of initializer ``name``: inside the model's folder, a regular file."""
        base = self.path.parent
        target = (base / location).resolve()
        if base.resolve() not in target.parents:
            raise ONNXGraphError(f"{str(self.path)!r}: initializer {name!r} points at external data {location!r}, "
                                 "outside the model's folder; refused.")
        if not target.is_file():
            raise ONNXGraphError(f"{str(self.path)!r}: the external data file {location!r} of initializer {name!r} "
                                 "is missing (or not a regular file); keep it next to the .onnx file.")
        return target

    def _evaluate(self, name: str) -> np.ndarray:
        """Evaluate the cone of constant ops that produces ``name``, one node at a time in graph order, each only
        after the size of what it would produce is known to be within :data:`~qkgeometry.limits.MAX_COMPUTED_ELEMENTS`
        (a graph can declare a huge tensor in a few bytes)."""
        cone: set[int] = set()
        leaves: set[str] = set()
        stack = [name]
        while stack:
            t = stack.pop()
            if not t or t in leaves:
                continue
            if t in self.initializers or t in self._values:
                leaves.add(t)
                continue
            k = self.producer[t][0]
            if k in cone:
                continue
            cone.add(k)
            stack.extend(self.nodes[k].input)
        values = {t: self.value(t) if t not in self._values else self._values[t] for t in sorted(leaves)}
        for k in sorted(cone):  # graph order is a topological order (the graph was checked to be acyclic)
            node = self.nodes[k]
            inputs = [values.get(i) if i else None for i in node.input]
            bound = _output_bound(node, inputs, self.attrs(k))
            if bound > MAX_COMPUTED_ELEMENTS:
                raise ONNXGraphError(f"{str(self.path)!r}: {self.describe(k)} would compute {bound:,} entries from "
                                     f"constants, over the bound of {MAX_COMPUTED_ELEMENTS:,}; the graph is corrupt or "
                                     "built to exhaust memory. Refused before evaluating it.")
            values.update(self._run_node(node, inputs, name))
        return _widen(np.asarray(values[name]))

    def _run_node(self, node: Any, inputs: list[np.ndarray | None], name: str) -> dict[str, np.ndarray]:
        import onnx
        from onnx.reference import ReferenceEvaluator

        feeds = {i: v for i, v in zip(node.input, inputs) if i}
        graph = onnx.helper.make_graph(
            [node], "weight", [onnx.helper.make_tensor_value_info(t, _proto_dtype(v), v.shape) for t, v in feeds.items()],
            [onnx.helper.make_tensor_value_info(o, 0, None) for o in node.output if o])
        opsets = [o for o in self.model.opset_import if o.domain in ("", "ai.onnx")]
        model = onnx.helper.make_model(graph, opset_imports=opsets, ir_version=self.model.ir_version)
        try:
            outs = ReferenceEvaluator(model, new_ops=[_dequantize_linear()]).run(None, feeds)
        except Exception as e:  # any failure of the reference ops on odd constants
            raise ONNXGraphError(f"{str(self.path)!r}: could not evaluate the constant expression that produces "
                                 f"{name!r} ({type(e).__name__}: {e}).") from e
        return dict(zip([o for o in node.output if o], (np.asarray(o) for o in outs)))

    def ints(self, name: str) -> list[int] | None:
        """A small constant integer tensor as a list, or None when it is not constant."""
        if not name or not self.is_const(name):
            return None
        v = self.value(name)
        return [int(x) for x in np.asarray(v).reshape(-1)] if v.size <= 64 else None

    def attrs(self, k: int) -> dict[str, Any]:
        import onnx

        return {a.name: onnx.helper.get_attribute_value(a) for a in self.nodes[k].attribute}

    def describe(self, k: int) -> str:
        node = self.nodes[k]
        op = f"{node.domain}.{node.op_type}" if node.domain not in ("", "ai.onnx") else node.op_type
        return f"{op} node {node.name!r} (#{k})" if node.name else f"{op} node #{k}"


def _broadcast(*shapes: Iterable[int]) -> int:
    """Entries of the broadcast of ``shapes`` (each aligned axis takes its largest size), as a Python int."""
    shapes = [tuple(int(n) for n in sh) for sh in shapes]
    rank = max((len(sh) for sh in shapes), default=0)
    padded = [(1,) * (rank - len(sh)) + sh for sh in shapes]
    return math.prod(max((sh[i] for sh in padded), default=1) for i in range(rank))


def _output_bound(node: Any, inputs: list[np.ndarray | None], attrs: dict[str, Any]) -> int:
    """An upper bound on the entries node ``node`` outputs from constant ``inputs``, computed from shapes and small
    shape-giving values only (nothing is materialised). Ops that can grow a tensor (``ConstantOfShape``,
    ``Expand``, ``Tile``, ``Range``, ``Gather``, a sparse ``Constant``, broadcasting) are bounded exactly; the
    others output at most as many entries as their inputs hold."""
    op = node.op_type
    present = [v for v in inputs if v is not None]

    def ints(v: np.ndarray | None) -> list[int]:
        return [] if v is None else [int(x) for x in np.asarray(v).reshape(-1)]

    if op == "ConstantOfShape":
        return math.prod(max(0, n) for n in ints(inputs[0])) if inputs and inputs[0] is not None else 1
    if op == "Constant":
        sparse = attrs.get("sparse_value")
        if sparse is not None:
            return math.prod(max(0, int(n)) for n in sparse.dims)
        value = attrs.get("value")
        return math.prod(value.dims) if value is not None and hasattr(value, "dims") else 64
    if op == "Expand" and len(inputs) > 1 and inputs[0] is not None:
        return _broadcast(inputs[0].shape, [max(0, n) for n in ints(inputs[1])])
    if op == "Tile" and len(inputs) > 1 and inputs[0] is not None:
        reps = ints(inputs[1])
        return inputs[0].size * math.prod(max(0, n) for n in reps)
    if op == "Range" and len(inputs) >= 3 and all(v is not None for v in inputs[:3]):
        start, limit, delta = (float(np.asarray(v).reshape(-1)[0]) for v in inputs[:3])
        span = (limit - start) / delta if delta else math.inf
        return int(max(0.0, math.ceil(span))) if math.isfinite(span) else MAX_COMPUTED_ELEMENTS + 1
    if op == "Gather" and len(inputs) > 1 and inputs[0] is not None and inputs[1] is not None:
        data, axis = inputs[0], int(attrs.get("axis", 0))
        if data.ndim == 0 or not -data.ndim <= axis < data.ndim:
            return data.size * inputs[1].size
        return data.size // max(1, data.shape[axis]) * inputs[1].size
    if op == "Concat":
        return sum(v.size for v in present)
    if op in ("Mul", "Div", "Add", "Sub", "Where", "DequantizeLinear", "CastLike"):
        return _broadcast(*(v.shape for v in present))
    return max((v.size for v in present), default=1)


def _dequantize_linear() -> type:
    """``DequantizeLinear`` for every opset: onnx.reference implements it from opset 19 on, and opsets 10 and 13
    (per-tensor and per-axis int8/uint8) compute the same ``(x − zero_point) · scale``."""
    from onnx.reference.ops.op_dequantize_linear import DequantizeLinear_25

    class DequantizeLinear(DequantizeLinear_25):
        op_domain = ""

    return DequantizeLinear


def _widen(array: np.ndarray) -> np.ndarray:
    """Float types NumPy cannot hold natively (bfloat16, float8 from ml_dtypes) as float32
    (:func:`qkgeometry._arrays.widened`); float16, float32, float64 and integers kept; anything else as float32."""
    if array.dtype == np.float16 or array.dtype.kind in "iub":
        return array
    array = widened(array)
    return array if array.dtype.kind == "f" else array.astype(np.float32)


def _proto_dtype(array: np.ndarray) -> int:
    from onnx import helper

    return helper.np_dtype_to_tensor_dtype(array.dtype)


def external_files(graph: OnnxGraph) -> list[Path]:
    """The external-data files that the initializers the graph's nodes read refer to (for the content
    fingerprint). An initializer no node reads is ignored, whatever it points at: it is never opened. A used one
    that points outside the model's folder, or at something that is not a regular file, is refused."""
    found: list[Path] = []
    for name, tensor in graph.initializers.items():
        if name not in graph.consumers:
            continue
        for entry in tensor.external_data:
            if entry.key == "location":
                graph._external_path(name, entry.value)
                p = graph.path.parent / entry.value
                if p not in found:
                    found.append(p)
    return found
