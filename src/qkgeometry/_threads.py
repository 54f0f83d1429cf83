"""BLAS thread pools sized per call for the analyses that solve many small problems.

Chapter 6's analyses run thousands of eigendecompositions, SVDs and products of head-sized matrices (head_dim ×
head_dim, a few hundred at most). On such sizes a multi-threaded BLAS spends more time waking and synchronising its
threads than computing, and far more when the cores are shared with other work: OpenBLAS with 2 threads was up to
44× slower than with 1 on a loaded 2-core machine. :func:`small_problems` runs a function with one BLAS thread
(``threadpoolctl``) and restores the previous setting afterwards. The scoring kernel's products (head_dim × d
by d × head_dim) keep every thread on an idle machine and run with one when the machine is oversubscribed
(:func:`kernel_threads`): under load, two OpenBLAS threads ran the kernel at a sixth of one thread's speed.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

__all__ = ["kernel_threads", "oversubscribed", "small_problems"]

F = TypeVar("F", bound=Callable[..., Any])


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


@contextlib.contextmanager
def kernel_threads() -> Iterator[None]:
    """The BLAS threads for the scoring kernel's numpy products: the library's default on an idle machine, one
    thread on an oversubscribed one."""
    if not oversubscribed():
        yield
        return
    with _controller().limit(limits=1, user_api="blas"):
        yield
