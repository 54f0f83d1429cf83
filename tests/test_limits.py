"""The bounded-resources rule: sizes are counted exactly, and each bound refuses with one line naming the field."""

from __future__ import annotations

import pytest

from qkgeometry import limits
from qkgeometry.readers import ctranslate2, onnx_graph, onnx_walk


def test_elements_are_exact_python_integers():
    assert limits.elements((2 ** 31, 2 ** 31, 4)) == 2 ** 64  # an int64 product wraps this to 0
    assert limits.elements(()) == 1 and limits.elements((3, 0, 5)) == 0


def test_check_elements_refuses_negative_sizes_too_many_axes_and_too_many_entries():
    assert limits.check_elements((4, 5), 20, "tensor 'w'") == 20
    with pytest.raises(limits.LimitExceeded, match=r"tensor 'w' declares a negative size in shape \(4, -1\)"):
        limits.check_elements((4, -1), 100, "tensor 'w'")
    with pytest.raises(limits.LimitExceeded, match=r"declares 9 axes .* at most 8"):
        limits.check_elements((1,) * 9, 100, "tensor 'w'")
    with pytest.raises(limits.LimitExceeded, match=r"tensor 'w' declares shape \(5, 5\), 25 entries, over the bound of 20"):
        limits.check_elements((5, 5), 20, "tensor 'w'")
    assert issubclass(limits.LimitExceeded, ValueError)


def test_the_bounds_are_ordered_and_the_readers_use_these_numbers():
    assert limits.MAX_COMPUTED_ELEMENTS < limits.MAX_TENSOR_ELEMENTS
    assert limits.MAX_COMPUTED_ELEMENTS > 8192 * 10240  # a fused int8 QKV weight of a 70B-class model still fits
    assert limits.MAX_COMPUTED_ELEMENTS < 20000 * 20000  # an 805-byte ConstantOfShape bomb does not
    assert onnx_walk.MAX_WALK is limits.MAX_WALK
    for module in (onnx_graph, ctranslate2):
        assert module.check_elements is limits.check_elements
