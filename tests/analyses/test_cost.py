"""What scoring costs (qkgeometry.analyses.cost): both routes give the same scores, every function is timed as often
as asked, bad input is named."""

from __future__ import annotations

import numpy as np
import pytest

from qkgeometry.analyses import cost


def test_round_robin_calls_each_function_in_turn_and_gives_a_median():
    calls = []
    times = cost.round_robin({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, repeats=3)
    assert calls == ["a", "b"] * 3
    assert set(times) == {"a", "b"} and all(t >= 0 for t in times.values())


def test_the_two_routes_score_the_same_form_and_the_rows_say_their_shapes():
    table = cost.dense_vs_factored([16, 40], r=3, repeats=1, seed=5)
    assert list(table["d"]) == [16, 40] and set(table["r"]) == {3}
    assert (table["max |difference|"] < 1e3).all()
    assert table["dense memory (MiB)"].iloc[1] == pytest.approx(40 * 40 * 8 / 2**20)
    assert table["factored memory (MiB)"].iloc[1] == pytest.approx(2 * 40 * 3 * 8 / 2**20)
    # one seed, one table of forms: the differences (not the timings) repeat exactly
    again = cost.dense_vs_factored([16, 40], r=3, repeats=1, seed=5)
    np.testing.assert_array_equal(table["max |difference|"], again["max |difference|"])


@pytest.mark.parametrize("kwargs, name", [({"ds": [1]}, "ds"), ({"ds": []}, "ds"), ({"ds": [8], "r": 0}, "r"),
                                          ({"ds": [8], "repeats": 0}, "repeats")])
def test_bad_input_is_named(kwargs, name):
    with pytest.raises(ValueError, match=name):
        cost.dense_vs_factored(**kwargs)
