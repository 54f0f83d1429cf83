"""BLAS thread pools sized per call for the analyses that solve many small problems.

Chapter 6's analyses run thousands of eigendecompositions, SVDs and products of head-sized matrices (head_dim ×
head_dim, a few hundred at most). On such sizes a multi-threaded BLAS spends more time waking and synchronising its
threads than computing, and far more when the cores are shared with other work: OpenBLAS with 2 threads was up to
44× slower than with 1 on a loaded 2-core machine. :func:`small_problems` runs a function with one BLAS thread
(``threadpoolctl``) and restores the previous setting afterwards. The scoring kernel's products (head_dim × d
by d × head_dim) are independent per KV group: :func:`kernel_pool` runs groups side by side in one thread per core,
each with one BLAS thread. On an idle 2-core machine that ran the kernel 1.2× faster than one call with two
OpenBLAS threads, and it never oversubscribes: under load, two OpenBLAS threads per call ran the kernel at a sixth
of one thread's speed.
"""

from __future__ import annotations

import contextlib
import functools
import os
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

__all__ = ["kernel_pool", "oversubscribed", "passive_openmp", "read_ahead", "small_problems", "usable_cores"]

F = TypeVar("F", bound=Callable[..., Any])


def passive_openmp() -> None:
    """Let idle OpenMP threads sleep instead of spin (``OMP_WAIT_POLICY=PASSIVE``; an explicit setting wins). For a
    process of its own only (the command line, a survey worker), before torch loads OpenMP: with more runnable
    processes than cores, spinning threads took the CPU from the working ones (per-head scoring 2-5x slower)."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
T = TypeVar("T")


def small_problems(fn: F) -> F:
    """Decorator: ``fn`` runs with one BLAS thread (numpy's and scipy's OpenBLAS, MKL), the caller's thread count
    restored when it returns or raises."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1, user_api="blas"):
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def oversubscribed() -> bool:
    """True when the 1-minute load average is at least the number of cores (other work competes for them)."""
    try:
        return os.getloadavg()[0] >= (os.cpu_count() or 1)
    except OSError:  # no load average on this platform
        return False


@functools.lru_cache(maxsize=1)
def _controller() -> Any:
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()  # inspects the loaded BLAS libraries once (numpy's is loaded by now)


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity mask where the platform has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # no affinity masks on this platform
        return max(1, os.cpu_count() or 1)


@functools.lru_cache(maxsize=4)
def _pool(workers: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix="qkgeometry-kernel")


@contextlib.contextmanager
def kernel_pool(n: int, chunk: int) -> Iterator[tuple[Callable[[Callable[[int], T], Iterable[int]], list[T]], int]]:
    """How the scoring kernel spreads ``n`` independent items (KV groups) over the cores, ``chunk`` at most at once
    per thread. Yields ``(run, step)``: ``run(fn, starts)`` returns ``[fn(s) for s in starts]`` in order, and
    ``step`` is the slice size to give each call.

    With two or more items and cores, the slices run side by side in a pool of threads (numpy releases the GIL in
    BLAS), each with one BLAS thread for the duration (a process-wide setting, restored afterwards). Otherwise the
    one slice runs in the calling thread with the library's default threads on an idle machine and one thread on
    an oversubscribed one.
    """
    workers = min(usable_cores(), n)
    if workers < 2:
        with contextlib.ExitStack() as stack:
            if oversubscribed():
                stack.enter_context(_controller().limit(limits=1, user_api="blas"))
            yield (lambda fn, starts: [fn(s) for s in starts]), max(1, chunk)
        return
    step = max(1, min(chunk, -(-n // workers)))
    pool = _pool(workers)
    with _controller().limit(limits=1, user_api="blas"):
        yield (lambda fn, starts: list(pool.map(fn, starts))), step


def read_ahead(items: Iterable[T]) -> Iterator[T]:
    """The items of ``items`` in order, each next one produced in a background thread while the caller works on
    the current one: reading layer i + 1 from disk (or the network) overlaps scoring layer i. At most one item is
    held ahead. An exception raised while producing an item is raised here, at that item; stopping early (break,
    an exception, ``close()``) stops the producer and closes ``items`` if it is a generator.
    """
    ready: queue.Queue[tuple[bool, Any]] = queue.Queue()
    may_produce = threading.Semaphore(1)  # released each time the caller takes an item: one ahead, no more
    stop = threading.Event()
    done = object()

    def produce() -> None:
        source = iter(items)
        try:
            while True:
                may_produce.acquire()
                if stop.is_set():
                    return
                try:
                    item = next(source)
                except StopIteration:
                    ready.put((True, done))
                    return
                ready.put((True, item))
        except BaseException as e:  # handed to the caller, raised there
            ready.put((False, e))
        finally:
            close = getattr(source, "close", None)
            if close is not None:
                close()

    worker = threading.Thread(target=produce, name="qkgeometry-read-ahead", daemon=True)
    worker.start()
    try:
        while True:
            ok, item = ready.get()
            if not ok:
                raise item
            if item is done:
                return
            may_produce.release()
            yield item
    finally:
        stop.set()
        may_produce.release()
        worker.join()
