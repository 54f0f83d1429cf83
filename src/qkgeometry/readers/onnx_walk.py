"""Find every attention's Q and K weights in an ONNX graph, from the graph's structure alone.

Exported ONNX files often name their weights anonymously (``onnx::MatMul_1966``, ``val_108``), so nothing here reads
tensor names. Instead, for each attention:

1. **The query-key product.** A ``MatMul`` (or ``com.microsoft.FusedMatMul``) of two computed tensors whose result
   reaches a ``Softmax`` through element-wise ops only (scale, mask, soft-cap). Its first operand holds the queries
   (rows of the logit matrix), its second the keys. Fused ops are read from their inputs and attributes instead:
   ``com.microsoft`` ``Attention`` (packed QKV weight), ``MultiHeadAttention`` and ``GroupQueryAttention``, and the
   standard ``Attention`` of opset 23.
2. **The projections.** From each operand the walk goes back through ``Transpose``, ``Reshape``, ``Mul``/``Div``
   (scales), ``Add`` (biases), the ``Slice``/``Neg``/``Concat``/``Mul`` of rotary embeddings, and the
   ``Unsqueeze``/``Expand`` that repeat grouped KV heads, until it meets a ``MatMul`` or ``Gemm`` whose other input is a
   constant: the projection of the hidden state. Every branch must end at the same projection, or the graph is
   ambiguous and refused. A normalisation on the way (QK-norm) is refused too: its gains would belong in W_qk.
3. **The heads.** The first ``Reshape`` after the projection splits its output columns into (n_heads, head_dim)
   (a ``-1`` is resolved from the width); a ``Split`` or ``Slice`` of the last axis before it selects Q or K out of a
   fused [Q | K | V] projection. Fused ops give the head counts as attributes.

The weight is any constant expression: an initializer (fp32, fp16, bf16; inline or in external-data files next to
the model), or initializers through ``Cast``, ``DequantizeLinear``, ``Mul`` by scales and the like, evaluated with
``onnx.reference`` on the constants only (the model itself is never run, and nothing is unpickled). Blockwise
4-bit ``MatMulNBits`` weights are refused with the op named.

Layers are ordered by graph position. Each projection weight ``W`` (d_model, n·head_dim) computes ``x @ W``, so
``W[:, h·head_dim:(h+1)·head_dim]`` is ``W_Q^h`` itself (the book's Notation page); grouped KV heads are repeated
(g(h) = h // group), as every exporter of Hugging Face models and ``GroupQueryAttention`` do. The scores describe
W_qk = W_Q W_Kᵀ alone: biases, rotary embeddings and the logit scale are outside it.

The checked graph and its constant evaluation are :mod:`qkgeometry.readers.onnx_graph`; the reader on top of both,
:mod:`qkgeometry.readers.onnx`, is a few lines.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import numpy as np

from ..errors import ONNXGraphError
from ..limits import MAX_WALK
from ..model import BlockPlan
from .onnx_graph import AttentionSite, OnnxGraph, Projection

__all__ = ["MAX_WALK", "find_attention", "onnx_blocks"]


#: ops the walk from a score operand back to its projection passes through (rotary, GQA repeat, scales, biases)
PASS_THROUGH = frozenset({
    "Transpose", "Reshape", "Mul", "Div", "Add", "Sub", "Neg", "Slice", "Concat", "Split", "Squeeze", "Unsqueeze",
    "Expand", "Cast", "Identity", "Flatten", "Where", "Tile",
})
#: ops whose data input is their first input only (the others are shapes, indices, axes)
FIRST_INPUT_ONLY = frozenset({"Reshape", "Slice", "Split", "Squeeze", "Unsqueeze", "Expand", "Tile", "Flatten"})
#: normalisations: met between a projection and the product, they mean QK-norm, whose gains this reader does not fold
NORMALISATIONS = frozenset({"ReduceMean", "LayerNormalization", "SimplifiedLayerNormalization", "RMSNormalization",
                            "SkipLayerNormalization", "SkipSimplifiedLayerNormalization", "ReduceL2",
                            "LpNormalization", "GroupNormalization", "InstanceNormalization"})
#: element-wise ops allowed between the product and the Softmax (scale, additive mask, soft-capping)
TO_SOFTMAX = frozenset({"Mul", "Div", "Add", "Sub", "Where", "Cast", "Tanh", "Identity", "Max", "Min", "Clip"})
#: quantised matrix products whose weights this reader does not decode
QUANTIZED_PRODUCTS = frozenset({"MatMulNBits", "MatMulInteger", "QLinearMatMul", "DynamicQuantizeMatMul",
                                "MatMulIntegerToFloat", "QGemm", "MatMulBnb4", "MatMulFpQ4", "QAttention"})
#: fused attention ops we know of but cannot read
UNSUPPORTED_FUSED = frozenset({"PackedAttention", "PackedMultiHeadAttention", "DecoderMaskedMultiHeadAttention",
                               "DecoderMaskedSelfAttention", "LongformerAttention", "SparseAttention",
                               "PagedAttention", "QOrderedAttention", "DecoderAttention", "QAttention"})


def _reaches_softmax(g: OnnxGraph, tensor: str) -> str | None:
    """The tensor fed to a Softmax when ``tensor`` reaches one through :data:`TO_SOFTMAX` ops (else None)."""
    frontier, seen = [tensor], set()
    for _ in range(8):
        nxt = []
        for t in frontier:
            for k in g.consumers.get(t, ()):
                node = g.nodes[k]
                if node.op_type == "Softmax":
                    return t
                if node.op_type in TO_SOFTMAX and k not in seen:
                    seen.add(k)
                    nxt.extend(o for o in node.output if o)
        frontier = nxt
    return None


def _projection_of(g: OnnxGraph, operand: str, side: str, where: str) -> tuple[int, set[int]]:
    """Walk back from ``operand`` to the single projection that produces it; return its node and the nodes on the way."""
    found: set[int] = set()
    visited: set[int] = set()
    stops: set[str] = set()
    stack = [operand]
    while stack:
        t = stack.pop()
        if not t or g.is_const(t):
            continue
        if t not in g.producer:
            stops.add(f"graph input {t!r}")  # e.g. cached keys of earlier steps, concatenated with new ones
            continue
        k = g.producer[t][0]
        if k in visited or k in found:
            continue
        node = g.nodes[k]
        op = node.op_type
        if op in ("MatMul", "Gemm") and node.domain in ("", "ai.onnx"):
            a, b = node.input[0], node.input[1]
            if g.is_const(b) and not g.is_const(a):
                found.add(k)
                continue
            if g.is_const(a) and not g.is_const(b):
                raise ONNXGraphError(f"{where}: the {side} projection {g.describe(k)} multiplies a constant from the "
                                     "left (W @ x); only x @ W projections are supported.")
        if op in QUANTIZED_PRODUCTS:
            raise ONNXGraphError(f"{where}: the {side} projection is a quantised {g.describe(k)}, whose packed "
                                 "weights this reader does not decode. Export the model with float (or "
                                 "DequantizeLinear) weights.")
        if op in NORMALISATIONS:
            raise ONNXGraphError(f"{where}: a normalisation ({g.describe(k)}) sits between the {side} projection and "
                                 "the query-key product (QK-norm); its gains belong in W_qk and this reader does not "
                                 "fold them. Load the model from safetensors or GGUF instead.")
        visited.add(k)
        if len(visited) > MAX_WALK:
            raise ONNXGraphError(f"{where}: the walk back from the query-key product to the {side} projection "
                                 f"visits more than {MAX_WALK} nodes; this graph's attention is not in a form this "
                                 "reader knows (or the graph is malformed).")
        if op not in PASS_THROUGH or node.domain not in ("", "ai.onnx"):
            stops.add(g.describe(k))
            continue
        data = node.input[:1] if op in FIRST_INPUT_ONLY else node.input
        if op == "Where":
            data = node.input[1:]
        stack.extend(data)
    if not found:
        detail = f" (the walk stopped at {', '.join(sorted(stops)[:4])})" if stops else ""
        raise ONNXGraphError(f"{where}: no projection (MatMul or Gemm with a constant weight) produces the {side}"
                             f"{detail}. This graph's attention is not in a form this reader knows.")
    if len(found) > 1:
        names = ", ".join(g.describe(k) for k in sorted(found))
        raise ONNXGraphError(f"{where}: the {side} is computed from several projections ({names}); the graph is "
                             "ambiguous (a sum of projections?) and cannot be read as one W.")
    return found.pop(), visited


def _weight_shape(g: OnnxGraph, k: int) -> tuple[int, int, bool]:
    """(d_model, n_out, transposed) of projection node ``k``."""
    node = g.nodes[k]
    attrs = g.attrs(k)
    transposed = node.op_type == "Gemm" and bool(attrs.get("transB", 0))
    if node.op_type == "Gemm" and attrs.get("transA", 0):
        raise ONNXGraphError(f"{str(g.path)!r}: {g.describe(k)} projects with transA=1, which this reader does not "
                             "support.")
    shape = g.value(node.input[1]).shape
    if len(shape) != 2:
        raise ONNXGraphError(f"{str(g.path)!r}: the weight of {g.describe(k)} has shape {shape}; a projection weight "
                             "must be 2-D.")
    d, n = (shape[1], shape[0]) if transposed else shape
    return int(d), int(n), transposed


def _trailing_dims(g: OnnxGraph, shape_name: str) -> list[int | None]:
    """The known trailing entries of a Reshape target (a constant, or a Concat of pieces some of which are constant)."""
    const = g.ints(shape_name)
    if const is not None:
        return const
    if shape_name not in g.producer:
        return []
    node = g.nodes[g.producer[shape_name][0]]
    if node.op_type != "Concat":
        return []
    out: list[int | None] = []
    for piece in reversed(node.input):
        v = g.ints(piece)
        if v is None:
            break
        out = v + out
    return out


def _head_layout(g: OnnxGraph, proj: int, path: set[int], width: int, side: str, where: str
                 ) -> tuple[tuple[int, int], int, int]:
    """Follow the projection's output forward along ``path``: the (start, stop) of its columns used by this side
    (fused [Q | K | V] split by Split/Slice on the last axis), then the head-splitting Reshape: (columns, n, head_dim)."""
    start, stop = 0, width
    tensor = g.nodes[proj].output[0]
    for _ in range(32):
        nxt = [k for k in g.consumers.get(tensor, ()) if k in path]
        if not nxt:
            break
        k = nxt[0]
        node = g.nodes[k]
        op = node.op_type
        if op == "Reshape":
            dims = (_trailing_dims(g, node.input[1]) if len(node.input) > 1 and node.input[1]
                    else [int(n) for n in g.attrs(k).get("shape", [])])  # opset 1-4: the target is an attribute
            cur = stop - start
            if dims and dims[-1] == cur:  # keeps the columns together (e.g. (b·t, n) -> (b, t, n))
                tensor = node.output[0]
                continue
            if len(dims) >= 2:
                h, hd = dims[-2], dims[-1]
                if h == -1 and hd and hd > 0 and cur % hd == 0:
                    h = cur // hd
                elif hd == -1 and h and h > 0 and cur % h == 0:
                    hd = cur // h
                if h and hd and h > 0 and hd > 0 and h * hd == cur:
                    return (start, stop), h, hd
            raise ONNXGraphError(f"{where}: the {side} Reshape {g.describe(k)} does not split the {cur} projected "
                                 f"columns into (heads, head_dim) (its target ends in {dims}); the head layout "
                                 "cannot be read.")
        if op in ("Split", "Slice"):
            offset = _column_selection(g, k, tensor, path, stop - start, where)
            start, stop = start + offset[0], start + offset[1]
            tensor = next(o for o in node.output if o and (o in _inputs_of(g, path) or False))
            continue
        if op in ("Add", "Sub", "Mul", "Div", "Cast", "Identity"):
            tensor = node.output[0]
            continue
        break
    raise ONNXGraphError(f"{where}: found no Reshape that splits the {side} projection into heads; the graph's "
                         "attention is not in a form this reader knows.")


def _inputs_of(g: OnnxGraph, nodes: Iterable[int]) -> set[str]:
    return {i for k in nodes for i in g.nodes[k].input}


def _column_selection(g: OnnxGraph, k: int, tensor: str, path: set[int], width: int, where: str) -> tuple[int, int]:
    """(start, stop) of the columns that a Split or Slice on the last axis keeps for the output on ``path``."""
    node = g.nodes[k]
    attrs = g.attrs(k)
    used = _inputs_of(g, path)
    if node.op_type == "Split":
        axis = attrs.get("axis", 0)
        sizes = attrs.get("split") or (g.ints(node.input[1]) if len(node.input) > 1 and node.input[1] else None)
        outs = list(node.output)
        if sizes is None:
            sizes = [width // len(outs)] * len(outs)
        if axis not in (-1, 2) or sum(sizes) != width:
            raise ONNXGraphError(f"{where}: {g.describe(k)} does not split the last axis of the fused projection "
                                 f"into [Q | K | V] (axis {axis}, sizes {sizes}); unsupported fused layout.")
        j = next(i for i, o in enumerate(outs) if o in used)
        return int(sum(sizes[:j])), int(sum(sizes[:j + 1]))
    if len(node.input) < 3:  # opset 1-9: starts, ends and axes are attributes
        starts, ends = attrs.get("starts"), attrs.get("ends")
        axes, steps = attrs.get("axes") or [0], [1]
    else:
        starts, ends = g.ints(node.input[1]), g.ints(node.input[2])
        axes = g.ints(node.input[3]) if len(node.input) > 3 and node.input[3] else [0]
        steps = g.ints(node.input[4]) if len(node.input) > 4 and node.input[4] else [1]
    starts, ends, axes = (None if v is None else list(v) for v in (starts, ends, axes))
    if None in (starts, ends, axes, steps) or len(starts) != 1 or axes[0] not in (-1, 2) or steps != [1]:
        raise ONNXGraphError(f"{where}: {g.describe(k)} slices the fused projection in a way this reader does not "
                             "know (only a constant Slice of the last axis, step 1).")
    lo, hi = starts[0], ends[0]
    lo, hi = (lo + width if lo < 0 else lo), (hi + width if hi < 0 else min(hi, width))
    return lo, hi


def _causal_mask(g: OnnxGraph, logits: str | None) -> bool:
    """True when a constant additive mask on the logits forbids every key after its query (a causal mask)."""
    if logits is None or logits not in g.producer:
        return False
    frontier = [logits]
    for _ in range(4):
        nxt = []
        for t in frontier:
            if t not in g.producer:
                continue
            node = g.nodes[g.producer[t][0]]
            if node.op_type in ("Add", "Where"):
                for i in node.input:
                    if i and g.is_const(i):
                        try:
                            v = g.value(i)
                        except ONNXGraphError:
                            continue
                        if v.ndim >= 2 and v.shape[-1] == v.shape[-2] and v.shape[-1] > 1 and v.dtype.kind == "f":
                            m = v.reshape(-1, *v.shape[-2:])[0]
                            upper = np.triu(np.ones_like(m, dtype=bool), 1)
                            if (m[upper] < -1e3).all() and (np.abs(m[~upper]) < 1e-6).all():
                                return True
            nxt.extend(i for i in node.input if i and not g.is_const(i))
        frontier = nxt
    return False


def find_attention(g: OnnxGraph) -> list[AttentionSite]:
    """Every attention of ``g`` in graph order (see the module docstring for how each is found)."""
    where = str(g.path)
    sites: list[AttentionSite] = []
    for k, node in enumerate(g.nodes):
        op, domain = node.op_type, node.domain
        if op in UNSUPPORTED_FUSED and domain == "com.microsoft":
            raise ONNXGraphError(f"{where!r}: the graph uses the fused {g.describe(k)}, which this reader does not "
                                 "support; export the model without that fusion (plain MatMul/Softmax attention, or "
                                 "Attention / MultiHeadAttention / GroupQueryAttention).")
        if (op == "MatMul" and domain in ("", "ai.onnx")) or (op == "FusedMatMul" and domain == "com.microsoft"):
            a, b = node.input[0], node.input[1]
            if g.is_const(a) or g.is_const(b):
                continue
            logits = _reaches_softmax(g, node.output[0])
            if logits is None:
                continue
            sites.append(_site_from_product(g, k, a, b, logits))
        elif (op in ("Attention", "MultiHeadAttention", "GroupQueryAttention") and domain == "com.microsoft") \
                or (op == "Attention" and domain in ("", "ai.onnx")):
            sites.append(_site_from_fused(g, k))
    return sites


def _site_from_product(g: OnnxGraph, k: int, a: str, b: str, logits: str) -> AttentionSite:
    where = f"{str(g.path)!r}, attention at {g.describe(k)}"
    sides = {}
    for side, operand in (("query", a), ("key", b)):
        proj, path = _projection_of(g, operand, side, where)
        d, n, transposed = _weight_shape(g, proj)
        cols, heads, hd = _head_layout(g, proj, path, n, side, where)
        if any(g.nodes[j].op_type == "Tile" for j in path):
            raise ONNXGraphError(f"{where}: the {side}s are tiled (Tile) across heads; only repeated KV heads "
                                 "(g(h) = h // group) are supported.")
        sides[side] = (Projection(proj, g.nodes[proj].input[1], transposed, g.nodes[proj].input[0], cols),
                       heads, hd, d)
    (q, hq, hdq, dq), (kk, hk, hdk, dk) = sides["query"], sides["key"]
    if hdq != hdk or hq % hk:
        raise ONNXGraphError(f"{where}: queries have {hq} heads of {hdq} and keys {hk} heads of {hdk}; they must "
                             "share head_dim and the key heads must divide the query heads.")
    if dq != dk and q.hidden == kk.hidden:
        raise ONNXGraphError(f"{where}: Q and K project the same tensor but from widths {dq} and {dk}.")
    return AttentionSite(k, g.nodes[k].op_type, q, kk, hq, hk, hdq, dq, logits, _causal_mask(g, logits))


def _site_from_fused(g: OnnxGraph, k: int) -> AttentionSite:
    node = g.nodes[k]
    attrs = g.attrs(k)
    op = node.op_type
    where = f"{str(g.path)!r}, {g.describe(k)}"
    inputs = list(node.input) + [""] * 3

    def proj(operand: str, side: str) -> tuple[Projection, int]:
        j, _ = _projection_of(g, operand, side, where)
        _, n, transposed = _weight_shape(g, j)
        return Projection(j, g.nodes[j].input[1], transposed, g.nodes[j].input[0]), n

    def heads(key: str, default: int | None = None) -> int:
        value = attrs.get(key, default)
        if value is None:
            raise ONNXGraphError(f"{where}: the attribute {key!r} is missing; {op} needs it to split its heads. "
                                 "The graph is malformed: export it again.")
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ONNXGraphError(f"{where}: the attribute {key!r} is {value!r}; a head count must be a positive "
                                 "integer. The graph is malformed: export it again.")
        return int(value)

    if op == "Attention" and node.domain == "com.microsoft":  # packed weight (d, q + k + v)
        h = heads("num_heads")
        weight = inputs[1]
        if not weight or not g.is_const(weight):
            raise ONNXGraphError(f"{where}: its weight input is missing or not a constant.")
        shape = g.value(weight).shape
        if len(shape) != 2:
            raise ONNXGraphError(f"{where}: its packed QKV weight {weight!r} has shape {shape}; it must be 2-D "
                                 "(d_model, q + k + v).")
        d, n = shape
        sizes = attrs.get("qkv_hidden_sizes") or [n // 3] * 3
        if len(sizes) != 3 or any(int(v) <= 0 for v in sizes) or sum(int(v) for v in sizes) != n:
            raise ONNXGraphError(f"{where}: qkv_hidden_sizes {list(sizes)} do not split the packed weight's {n} "
                                 "columns into Q, K and V.")
        qh, kh = int(sizes[0]), int(sizes[1])
        if qh != kh or qh % h:
            raise ONNXGraphError(f"{where}: qkv_hidden_sizes {sizes} do not give Q and K heads of one size.")
        q = Projection(k, weight, False, inputs[0], (0, qh))
        kk = Projection(k, weight, False, inputs[0], (qh, qh + kh))
        return AttentionSite(k, op, q, kk, h, h, qh // h, int(d), None, bool(attrs.get("unidirectional", 0)))
    if op == "Attention":  # opset 23: Q, K, V as (b, T, heads·head_dim) or (b, heads, T, head_dim)
        if attrs.get("q_num_heads") is not None or attrs.get("kv_num_heads") is not None:
            hq, hk = heads("q_num_heads"), heads("kv_num_heads")
        else:
            hq = hk = None
        if hq is None or hk is None:  # 4-D inputs: read the heads from the Reshapes, as for a plain product
            site = _site_from_product(g, k, inputs[0], inputs[1], "")
            return AttentionSite(k, op, site.query, site.key, site.n_heads, site.n_kv_heads, site.head_dim,
                                 site.d_model, None, bool(attrs.get("is_causal", 0)))
        (q, nq), (kk, nk) = proj(inputs[0], "query"), proj(inputs[1], "key")
        return _fused_site(g, k, op, q, kk, int(hq), int(hk), nq, nk, bool(attrs.get("is_causal", 0)), where)
    h = heads("num_heads")
    if op == "MultiHeadAttention":
        if not inputs[1]:
            raise ONNXGraphError(f"{where}: packed QKV MultiHeadAttention (no key input) is not supported.")
        (q, nq), (kk, nk) = proj(inputs[0], "query"), proj(inputs[1], "key")
        return _fused_site(g, k, op, q, kk, h, h, nq, nk, bool(attrs.get("unidirectional", 0)), where)
    hk = heads("kv_num_heads", h)  # GroupQueryAttention: always causal
    if inputs[1]:
        (q, nq), (kk, nk) = proj(inputs[0], "query"), proj(inputs[1], "key")
        return _fused_site(g, k, op, q, kk, h, hk, nq, nk, True, where)
    packed, n = proj(inputs[0], "packed query/key/value")
    hd = n // (h + 2 * hk)
    if hd * (h + 2 * hk) != n:
        raise ONNXGraphError(f"{where}: packed QKV width {n} is not (num_heads + 2·kv_num_heads)·head_dim.")
    q = Projection(packed.node, packed.weight, packed.transposed, packed.hidden, (0, h * hd))
    kk = Projection(packed.node, packed.weight, packed.transposed, packed.hidden, (h * hd, (h + hk) * hd))
    d = _weight_shape(g, packed.node)[0]
    return AttentionSite(k, op, q, kk, h, hk, hd, d, None, True)


def _fused_site(g: OnnxGraph, k: int, op: str, q: Projection, kk: Projection, hq: int, hk: int, nq: int, nk: int,
                causal: bool, where: str) -> AttentionSite:
    if hq <= 0 or hk <= 0 or nq % hq or nk % hk or nq // hq != nk // hk or hq % hk:
        raise ONNXGraphError(f"{where}: widths {nq} (Q) and {nk} (K) do not split into {hq} and {hk} heads of one "
                             "head_dim.")
    return AttentionSite(k, op, q, kk, hq, hk, nq // hq, _weight_shape(g, q.node)[0], None, causal)


# ------------------------------------------------------------------------------------------------ loader glue
def _heads(g: OnnxGraph, p: Projection, n: int, hd: int) -> np.ndarray:
    """The projection's weight as (n, d_model, head_dim): ``x @ W``, column block h is head h."""
    w = g.value(p.weight)
    if p.transposed:
        w = w.T
    if p.columns is not None:
        w = w[:, p.columns[0]:p.columns[1]]
    d = w.shape[0]
    if w.shape[1] != n * hd:
        raise ONNXGraphError(f"{str(g.path)!r}: weight {p.weight!r} has {w.shape[1]} columns for {n} heads of {hd}.")
    return np.ascontiguousarray(w.reshape(d, n, hd).transpose(1, 0, 2))


def onnx_blocks(path: str | os.PathLike) -> tuple[str, list[BlockPlan], OnnxGraph]:
    """Family and attention blocks of the ONNX model at ``path``: ``(family, [BlockPlan], graph)`` with one
    :class:`~qkgeometry.model.BlockPlan` per component (``self``, and ``cross`` when some attention's K projects another tensor
    than its Q), where ``split(i)`` returns layer i's ``(wq, wk)`` as numpy arrays (n_heads, d_model, head_dim) and
    (n_kv_heads, d_model, head_dim) in the stored precision. :func:`qkgeometry.load_qk` builds the model from them.

    ``family`` is ``decoder`` when the graph shows causal attention (a constant causal mask on the logits, a
    ``Trilu`` op, a causal attribute of a fused op, ``GroupQueryAttention``, or past-key inputs), else ``encoder``.
    """
    from ..architectures import AttentionBlock, Dims

    g = OnnxGraph.open(path)
    sites = find_attention(g)
    if not sites:
        quant = sorted({n.op_type for n in g.nodes if n.op_type in QUANTIZED_PRODUCTS})
        hint = (f" It uses quantised products ({', '.join(quant)}) this reader does not decode." if quant else "")
        raise ONNXGraphError(f"{str(g.path)!r}: no attention found (no query-key product that feeds a Softmax, and "
                             f"no fused attention op).{hint} Is this a transformer?")
    causal = any(s.causal for s in sites) or any(n.op_type == "Trilu" for n in g.nodes) or any(
        "past" in i.lower() for i in g.graph_inputs)
    blocks = []
    for component in ("self", "cross"):
        group = [s for s in sites if s.component == component]
        if not group:
            continue
        first = group[0]
        shape = (first.d_model, first.n_heads, first.n_kv_heads, first.head_dim)
        odd = [s for s in group if (s.d_model, s.n_heads, s.n_kv_heads, s.head_dim) != shape]
        if odd:
            raise ONNXGraphError(f"{str(g.path)!r}: the {component} attentions differ in size ({g.describe(first.node)}"
                                 f": d_model, heads, KV heads, head_dim = {shape}; {g.describe(odd[0].node)}: "
                                 f"{(odd[0].d_model, odd[0].n_heads, odd[0].n_kv_heads, odd[0].head_dim)}); "
                                 "this reader needs one size per component.")
        dims = Dims(len(group), first.d_model, first.n_heads, first.n_kv_heads, first.head_dim)

        def split(i: int, group: list[AttentionSite] = group) -> tuple[np.ndarray, np.ndarray]:
            s = group[i]
            wq = _heads(g, s.query, s.n_heads, s.head_dim)
            wk = _heads(g, s.key, s.n_kv_heads, s.head_dim)
            g.forget()
            return wq, wk

        def get(name: str) -> np.ndarray:
            return np.array(g.value(name))

        block = AttentionBlock(component, "attention {i}: query projection", "attention {i}: key projection")
        blocks.append(BlockPlan(block, dims, split, get))
    return ("decoder" if causal else "encoder"), blocks, g
