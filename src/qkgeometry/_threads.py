"""BLAS thread pools sized per call for the analyses that solve many small problems.

Chapter 6's analyses run thousands of eigendecompositions, SVDs and products of head-sized matrices (head_dim ×
head_dim, a few hundred at most). On such sizes a multi-threaded BLAS spends more time waking and synchronising its
threads than computing, and far more when the cores are shared with other work: OpenBLAS with 2 threads was up to
44× slower than with 1 on a loaded 2-core machine. :func:`small_problems` runs a function with one BLAS thread
(``threadpoolctl``) and restores the previous setting afterwards; the large products of the scoring kernel keep
every thread.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["small_problems"]

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
