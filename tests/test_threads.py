"""The scoring kernel's thread pool: the same numbers however the groups are split, one BLAS thread per worker."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from threadpoolctl import threadpool_info

import qkgeometry as qg
from qkgeometry import _threads
from qkgeometry import scores as scores_module


def numpy_blas_threads() -> int:
    return max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas" and "numpy" in i["filepath"])


def weights(seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((3, 8, 40, 5)), rng.standard_normal((3, 4, 40, 5))  # 3 layers, 8/4 heads


@pytest.mark.parametrize("cores", [2, 3, 5])
def test_the_pool_gives_the_numbers_of_one_thread(monkeypatch, cores):
    wq, wk = weights()
    monkeypatch.setattr(_threads, "usable_cores", lambda: 1)
    ref = qg.layer_scores(wq, wk)
    monkeypatch.setattr(_threads, "usable_cores", lambda: cores)
    got = qg.layer_scores(wq, wk)
    for part in ("heads", "layer"):
        for field in ("symmetry", "directionality"):
            np.testing.assert_array_equal(getattr(getattr(got, part), field), getattr(getattr(ref, part), field))


def test_slices_run_side_by_side_with_one_blas_thread_each(monkeypatch):
    monkeypatch.setattr(_threads, "usable_cores", lambda: 2)
    seen: list[tuple[str, int, int]] = []
    inner = scores_module._factored_norms_in
    barrier = threading.Barrier(2, timeout=10)  # both workers inside at once, or this times out

    def spy(at, bt, heads, layer, offset=0):
        seen.append((threading.current_thread().name, numpy_blas_threads(), offset))
        if len(seen) <= 2:
            barrier.wait()
        return inner(at, bt, heads, layer, offset=offset)

    monkeypatch.setattr(scores_module, "_factored_norms_in", spy)
    before = numpy_blas_threads()
    wq, wk = weights(1)
    qg.layer_scores(wq, wk, layer=False)
    assert len({name for name, _, _ in seen}) == 2
    assert all(name.startswith("qkgeometry-kernel") for name, _, _ in seen)
    assert {blas for _, blas, _ in seen} == {1}
    assert sorted(offset for _, _, offset in seen) == [0, 12]  # 12 groups of 2 heads, split in two slices
    assert numpy_blas_threads() == before


def test_one_item_runs_in_the_calling_thread(monkeypatch):
    monkeypatch.setattr(_threads, "usable_cores", lambda: 4)
    names = []
    with _threads.kernel_pool(1, 3) as (run, step):
        run(lambda s: names.append(threading.current_thread().name), [0])
    assert step == 3 and names == [threading.current_thread().name]


@pytest.mark.parametrize("which", ["wq", "wk_kv"])
def test_a_bad_entry_in_a_later_slice_is_named_by_its_place_in_the_stack(monkeypatch, which):
    monkeypatch.setattr(_threads, "usable_cores", lambda: 2)
    wq, wk = weights(2)
    if which == "wq":
        wq[2, 7, 3, 1] = np.nan  # layer 2, query head 7: head 23 counting through the layers
        match = r"`wq` contains NaN or Inf entries \(first in head 23,"
    else:
        wk[2, 1, 0, 0] = np.inf  # layer 2, KV head 1: KV head 9 through the layers
        match = r"`wk_kv` contains NaN or Inf entries \(first in head 9,"
    with pytest.raises(ValueError, match=match):
        qg.layer_scores(wq, wk)


def test_read_ahead_keeps_the_order_and_holds_one_item_ahead():
    produced: list[int] = []

    def source():
        for i in range(6):
            produced.append(i)
            yield i

    got = []
    for item in _threads.read_ahead(source()):
        got.append(item)
        deadline = time.monotonic() + 5
        while len(produced) < min(item + 2, 6) and time.monotonic() < deadline:  # the next one arrives
            time.sleep(0.001)
        time.sleep(0.02)
        assert len(produced) <= item + 2  # and never the one after it
    assert got == list(range(6))


def test_read_ahead_raises_at_the_item_that_failed():
    def source():
        yield 0
        yield 1
        raise OSError("disk went away")

    got = []
    with pytest.raises(OSError, match="disk went away"):
        for item in _threads.read_ahead(source()):
            got.append(item)
    assert got == [0, 1]


def test_stopping_early_closes_the_source():
    closed = threading.Event()

    def source():
        try:
            yield from range(100)
        finally:
            closed.set()

    for item in _threads.read_ahead(source()):
        if item == 2:
            break
    assert closed.wait(5)
    assert threading.active_count() < 50  # the producer thread ended (joined), not left waiting

