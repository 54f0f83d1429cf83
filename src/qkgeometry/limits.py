"""The bounded-resources rule: what a file may declare before the package believes it.

A model file describes itself: a CTranslate2 header lists shapes, an ONNX graph lists nodes and can compute a
tensor from a few bytes (``ConstantOfShape([20000, 20000])`` is 805 bytes on disk and 1.6 GB in memory). The
readers check every such declaration against the numbers below **before** they allocate, read or evaluate
anything, and refuse the file with one line naming the field when a number is exceeded. Stored tensors are also
checked against the file's size (a header cannot promise more bytes than the file holds), so the bounds here are
about what is *declared* or *computed*, not about honest large checkpoints.

Sizes are counted with Python integers, so a shape such as (2³¹, 2³¹, 4) cannot wrap around to 0.

===========================  =========  =====================================================================
name                         value      what it bounds
===========================  =========  =====================================================================
``MAX_TENSOR_ELEMENTS``      2³⁴        entries of one stored tensor a header declares (a 128k × 128k matrix)
``MAX_TENSOR_RANK``          8          axes of one declared tensor
``MAX_COMPUTED_ELEMENTS``    2²⁷        entries of one tensor an ONNX graph computes from its constants
``MAX_GRAPH_NODES``          10⁶        nodes of one ONNX graph
``MAX_WALK``                 400        nodes visited on the walk from a query-key product to its projection
===========================  =========  =====================================================================

A tensor computed from constants is a weight (a dequantised or cast projection) or a small shape constant; the
largest projection weights of published models (a fused 8192 × 10240 QKV, int8) have under 2²⁷ entries.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from .errors import LimitExceeded

__all__ = ["MAX_BATCH_TOKENS", "MAX_COMPUTED_ELEMENTS", "MAX_GRAPH_NODES", "MAX_TENSOR_ELEMENTS", "MAX_TENSOR_RANK", "MAX_WALK",
           "LimitExceeded", "check_elements", "elements"]

#: entries of one stored tensor that a header (CTranslate2, ONNX initializer) may declare
MAX_TENSOR_ELEMENTS = 2 ** 34
#: axes of one declared tensor
MAX_TENSOR_RANK = 8
#: entries of one tensor that an ONNX graph may compute from its constants (ConstantOfShape, Expand, Tile, Range,
#: Gather, broadcasting) before the graph is refused: 2**27 = 134,217,728 (512 MiB in float32)
MAX_COMPUTED_ELEMENTS = 2 ** 27
#: tokens of one training step (batch size × sequence length): 2**22 = 4,194,304, e.g. 8,192 sequences of 512
#: tokens, far beyond what a step of the book's training runs needs; a larger step is refused before any data is
#: read (one step's activations would not fit in memory, or take hours)
MAX_BATCH_TOKENS = 2 ** 22
#: nodes of one ONNX graph
MAX_GRAPH_NODES = 10 ** 6
#: nodes visited per operand on the walk back from a query-key product to its projection: far more than any real
#: projection-to-product path. A walk that needs more is refused (never cut short, which could accept a partial
#: match).
MAX_WALK = 400


def elements(shape: Iterable[int]) -> int:
    """The number of entries of ``shape``, as an exact Python integer (no int64 wrap-around).

    >>> elements((2 ** 31, 2 ** 31, 4)) == 2 ** 64
    True
    """
    return math.prod(int(n) for n in shape)


def check_elements(shape: Iterable[int], limit: int, what: str) -> int:
    """``elements(shape)`` when every axis is >= 0, the rank at most :data:`MAX_TENSOR_RANK` and the count at most
    ``limit``; else :class:`LimitExceeded` with one line that names ``what``, the shape and the bound."""
    dims = tuple(int(n) for n in shape)
    if any(n < 0 for n in dims):
        raise LimitExceeded(f"{what} declares a negative size in shape {dims}.")
    if len(dims) > MAX_TENSOR_RANK:
        raise LimitExceeded(f"{what} declares {len(dims)} axes (shape {dims}); at most {MAX_TENSOR_RANK} are read.")
    n = elements(dims)
    if n > limit:
        raise LimitExceeded(f"{what} declares shape {dims}, {n:,} entries, over the bound of {limit:,}; the file is "
                            "corrupt or built to exhaust memory.")
    return n
