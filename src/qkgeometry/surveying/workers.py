"""Scoring models on workers: a process pool of this machine, or any ``concurrent.futures`` executor. Chapter 4.

:func:`run_tasks` submits one task per model and hands each outcome to the one writer as it arrives. It makes two
promises that a plain :class:`~concurrent.futures.ProcessPoolExecutor` does not keep:

* **A worker that dies fails only its model, and only if it happens again.** When a worker process is killed
  (``kill -9``, the out-of-memory killer), the pool breaks and every pending task fails with ``BrokenProcessPool``,
  healthy and queued ones alike. Each task records, at its start, the process it runs in; after a break the tasks
  whose process died (any exit other than the pool's own SIGTERM to its remaining workers) are suspects, or, when
  no running task's process died (an idle worker was killed), every task that had started. Every task of the
  broken pool is run again on a fresh pool with the same settings, except a task that is a suspect for the second
  time: that one is reported as failed. So a worker killed while idle, or one stray kill, fails no model, and a
  model that kills every worker it meets fails after two pools, never loops.
* **A task that exits fails only its model.** A ``SystemExit`` raised by a task (a library calling ``sys.exit``)
  is that task's error, not the end of the survey.
* **Workers do not outlive this process.** :func:`worker_pool`'s workers watch their parent and exit when it is
  gone (``kill -9`` or SIGTERM of the survey), so no worker, nor the resource tracker they keep open, is left
  running.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from .._threads import passive_openmp

__all__ = ["check_scheduler_address", "executor_for", "run_tasks", "watch_parent", "worker_pool"]

#: seconds between two checks of a worker that its parent is still alive
PARENT_POLL_S = 0.5


def watch_parent(parent: int) -> None:
    """Pool initializer: end this worker process as soon as the process ``parent`` is gone (its parent process id
    changes when it dies). Runs a daemon thread; returns at once. The worker ignores Ctrl-C (the terminal sends it
    to the whole process group): the survey stops its workers itself, and a worker's own traceback would only add
    a stray "Process SpawnProcess-1:" report to the survey's one line."""
    passive_openmp()  # in the worker, before it loads torch; the caller's environment is left as it was
    with contextlib.suppress(ValueError, OSError):  # not the main thread of the worker: keep its handlers
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(1)  # the survey that started this worker is gone: nothing will read what it computes

    threading.Thread(target=watch, name="qkgeometry-parent-watch", daemon=True).start()


def _watched(initializer: Callable[..., Any] | None, initargs: tuple, parent: int) -> None:
    watch_parent(parent)
    if initializer is not None:
        initializer(*initargs)


@contextlib.contextmanager
def worker_pool(workers: int) -> Iterator[Executor]:
    """A :class:`concurrent.futures.ProcessPoolExecutor` of ``workers`` processes for :func:`qkgeometry.survey`
    (``qkgeometry survey --workers N``). Its processes are started fresh (``spawn``: no copy of this process's
    threads or open files), with ``OMP_WAIT_POLICY=PASSIVE`` in their own environment unless it is set, and exit when this process is gone
    (:func:`watch_parent`). Leaving the block on an error or Ctrl-C stops the workers at once instead of waiting
    for the models in progress."""
    import multiprocessing

    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"`workers` must be a whole number >= 1; got {workers!r}.")
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=watch_parent, initargs=(os.getpid(),))
    try:
        yield pool
    except BaseException:
        _stop(pool)
        raise
    else:
        pool.shutdown(wait=True)


#: what a dask.distributed scheduler address looks like: [protocol://]host:port (a host name, IPv4 or [IPv6])
_SCHEDULER_ADDRESS = re.compile(r"^(?:(?:tcp|tls|ws|wss)://)?(?:[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|"
                                r"\[[0-9A-Fa-f:.]+\]):(\d{1,5})$")


def check_scheduler_address(address: str, what: str = "--dask-scheduler") -> None:
    """Refuse a scheduler address that is not one (empty, no port, a port over 65535, a URL of another protocol)
    before anything is created or contacted; the message names ``what``."""
    if address.lower().startswith("ucx://"):  # a dask protocol, but one that needs its own package and setup
        raise ValueError(f"{what} {address!r}: the ucx:// protocol is not supported (UCX needs the separate "
                         "distributed-ucxx package and its own network setup); pass tcp://HOST:PORT, or tls://, ws:// "
                         "or wss://.")
    match = _SCHEDULER_ADDRESS.match(address)
    if match is None or not 0 < int(match.group(1)) < 65536:
        raise ValueError(f"{what} {address!r} is not a scheduler address; pass tcp://HOST:PORT (e.g. "
                         "tcp://10.0.0.5:8786, the address the scheduler prints), or leave the option out to "
                         "score in this process.")


@contextlib.contextmanager
def executor_for(workers: int = 1, dask_scheduler: str | None = None) -> Iterator[Executor | None]:
    """What ``qkgeometry survey`` / ``trajectory`` score on: None (this process), a :func:`worker_pool` of
    ``workers`` processes, or the executor of a ``dask.distributed`` client of ``dask_scheduler`` (the wait for the
    scheduler is bounded by ``QKGEOMETRY_DASK_TIMEOUT``, default 30s; one that cannot be reached raises
    ``ValueError`` naming ``--dask-scheduler``)."""
    from ..errors import first_line

    if dask_scheduler is not None:
        check_scheduler_address(dask_scheduler)
        try:
            from distributed import Client
        except ImportError as e:
            raise ValueError("--dask-scheduler needs dask.distributed; install it with `pip install "
                             "qkgeometry[cluster]` (or `pip install distributed`).") from e
        try:
            client = Client(dask_scheduler, timeout=os.environ.get("QKGEOMETRY_DASK_TIMEOUT", "30s"))
        except (OSError, TimeoutError, ValueError, TypeError) as e:
            raise ValueError(f"--dask-scheduler {dask_scheduler!r}: cannot reach the scheduler ({first_line(e)}); "
                             "check the address (tcp://host:8786) and that it runs.") from e
        try:
            yield client.get_executor()
        finally:
            client.close()
    elif workers > 1:
        with worker_pool(workers) as pool:
            yield pool
    else:
        yield None


def _stop(pool: ProcessPoolExecutor) -> None:
    """Terminate the pool's workers now and shut it down (quick: the pool sees its workers gone)."""
    for process in _processes(pool).values():
        with contextlib.suppress(Exception):
            process.terminate()
    pool.shutdown(wait=True, cancel_futures=True)


def _processes(pool: Executor) -> dict[int, Any]:
    """The worker processes of a process pool by pid (no public way before Python 3.14; empty for other
    executors)."""
    return dict(getattr(pool, "_processes", None) or {})


def _fresh_like(pool: ProcessPoolExecutor) -> ProcessPoolExecutor:
    """A new pool with the settings of the broken ``pool`` (size, start method, initializer), watching this
    process."""
    initializer, initargs = getattr(pool, "_initializer", None), getattr(pool, "_initargs", ())
    if initializer is not watch_parent:
        initializer, initargs = _watched, (initializer, initargs, os.getpid())
    return ProcessPoolExecutor(max_workers=getattr(pool, "_max_workers", None),
                               mp_context=getattr(pool, "_mp_context", None), initializer=initializer,
                               initargs=initargs)


def _marked(task: Callable[..., Any], marker: str | None, *args: Any) -> Any:
    """Run ``task(*args)`` in a worker after writing this process's id into the file ``marker``."""
    if marker is not None:
        Path(marker).write_text(str(os.getpid()))
    return task(*args)


def run_tasks(executor: Executor, task: Callable[..., Any], args_of: dict[int, tuple],
              on_result: Callable[[int, Any], None], on_error: Callable[[int, BaseException], None],
              futures: dict[Any, int]) -> None:
    """Run ``task(*args_of[i])`` for every ``i`` on ``executor`` and call ``on_result(i, result)`` (or
    ``on_error(i, error)`` when the task could not run or return) as each finishes. ``futures`` is filled with the
    live futures (the caller cancels them on Ctrl-C). A process pool that breaks is replaced as the module
    docstring says; the replacement pools are shut down before returning."""
    pending = dict(args_of)
    strikes: dict[int, int] = {}  # pools a task was a suspect of breaking
    pool, own = executor, False
    with tempfile.TemporaryDirectory(prefix="qkgeometry-tasks-") as marks:
        try:
            while pending:
                tracked = isinstance(pool, ProcessPoolExecutor)
                markers = {i: os.path.join(marks, f"{i}.{id(pool)}") if tracked else None for i in pending}
                futures.clear()
                for i, args in pending.items():
                    futures[pool.submit(_marked, task, markers[i], *args)] = i
                seen = _processes(pool)
                pending, broken = {}, {}
                for future in as_completed(list(futures)):
                    seen.update(_processes(pool))
                    i = futures[future]
                    error = _error_of(future)
                    if isinstance(error, BrokenProcessPool) and tracked:
                        broken[i] = error
                    elif error is not None:
                        on_error(i, error)
                    else:
                        on_result(i, future.result())
                if not broken:
                    break
                pool.shutdown(wait=True)  # a broken pool is unusable; once shut down, its workers' exit codes are final
                for i in _suspects(broken, markers, seen):
                    strikes[i] = strikes.get(i, 0) + 1
                blamed = {i: broken[i] for i in sorted(broken) if strikes.get(i, 0) >= 2}
                for i, error in blamed.items():
                    on_error(i, error)
                pending = {i: args_of[i] for i in broken if i not in blamed}
                pool, own = _fresh_like(pool), True
        finally:
            if own:
                _stop(pool)


def _error_of(future: Future) -> BaseException | None:
    try:
        future.result()
    except Exception as e:  # the worker died, or the task could not be sent or returned
        return e
    except SystemExit as e:  # a task that called sys.exit: its model's error, not the survey's end
        return RuntimeError(f"the task exited (SystemExit {e.code!r}) instead of returning a result")
    return None


def _suspects(broken: dict[int, BaseException], markers: dict[int, str | None], seen: dict[int, Any]) -> set[int]:
    """The tasks of a broken pool that may have broken it: those that ran in a worker which died of something other
    than the pool's own SIGTERM; when none did (an idle worker died), every task that had started; when none had,
    every task of the pool (so that a pool that keeps breaking ends)."""
    started: dict[int, int] = {}
    for i in broken:
        with contextlib.suppress(OSError, ValueError, TypeError):
            started[i] = int(Path(str(markers[i])).read_text())
    killed = {i for i, pid in started.items()
              if pid in seen and seen[pid].exitcode not in (None, -signal.SIGTERM)}
    return killed or set(started) or set(broken)
