"""qkgeometry._arrays: the one widening of stored floats (bfloat16 from its codes or from ml_dtypes, float8,
float16) to float32, which every reader uses."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from qkgeometry._arrays import bfloat16_to_float32, widened

VALUES = np.array([1.5, -2.25, 0.0078125, -0.0, np.inf, 3.0e38, 1e-40], dtype=np.float32)


def test_bfloat16_is_widened_one_way_from_codes_and_from_ml_dtypes():
    b = VALUES.astype(ml_dtypes.bfloat16)
    expected = b.astype(np.float32)  # ml_dtypes' own conversion
    from_codes = bfloat16_to_float32(b.view(np.uint16))
    np.testing.assert_array_equal(from_codes, expected)
    np.testing.assert_array_equal(widened(b), expected)
    big_endian = b.view(np.uint16).astype(">u2")  # a file's codes, in either byte order
    np.testing.assert_array_equal(bfloat16_to_float32(big_endian), expected)
    assert np.signbit(from_codes[3])


@pytest.mark.parametrize("dtype", [ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, np.float16])
def test_other_narrow_floats_widen_exactly(dtype):
    a = np.array([1.5, -2.25, 0.125], dtype=dtype)
    assert widened(a).dtype == np.float32
    np.testing.assert_array_equal(widened(a), a.astype(np.float32))


def test_wide_floats_and_integers_are_kept():
    for a in (VALUES, VALUES.astype(np.float64), np.arange(3), np.array([True])):
        assert widened(a) is a or widened(a).dtype == a.dtype
    with pytest.raises(TypeError, match="uint16 codes"):
        bfloat16_to_float32(np.zeros(2, dtype=np.int32))
