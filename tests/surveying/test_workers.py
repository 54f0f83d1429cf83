"""qkgeometry.surveying.workers: a worker killed in the middle of a model fails that model only (the healthy and the
queued models are scored and stored), and killing the survey itself (SIGTERM or kill -9) leaves no worker and no
resource tracker running."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pandas as pd
import pytest

import qkgeometry as qg
from bounded import no_hang
from qkgeometry.surveying.store import read_store

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_store import HEADS, LAYERS, SRC, TESTS, hanging_survey, make_model

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> list[str]:
    root = tmp_path_factory.mktemp("models")
    return [str(make_model(root / f"m{k}", seed=k)) for k in range(5)]


def test_a_worker_killed_while_others_are_queued_fails_only_its_model(models, tmp_path):
    import survey_workers

    store = tmp_path / "r.sqlite"
    markers = tmp_path / "markers"
    markers.mkdir()
    pool = ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn"),
                               initializer=survey_workers.hang_on, initargs=("m1", str(markers), 1.0))
    killed = []

    def kill_the_hanging_worker():  # at once, each time m1 runs (twice: a task is blamed after two broken pools)
        deadline = time.time() + 240
        while time.time() < deadline and len(killed) < 2:
            for marker in markers.iterdir():
                if marker.name not in killed:
                    os.kill(int(marker.name), signal.SIGKILL)
                    killed.append(marker.name)
            time.sleep(0.05)

    killer = threading.Thread(target=kill_the_hanging_worker, daemon=True)
    killer.start()
    try:
        with no_hang(300), pytest.warns(UserWarning, match=r"skipped '.*m1': BrokenProcessPool"):
            frame = qg.survey(models, per="head", cache=store, progress=False, executor=pool)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        killer.join(timeout=10)
    assert len(killed) == 2, "m1 was not run twice"
    assert sorted(frame.attrs["computed"]) == ["m0", "m2", "m3", "m4"]
    failures = frame.attrs["failures"]
    assert failures["source"].tolist() == [models[1]] and failures["error"].tolist() == ["BrokenProcessPool"]
    stored = read_store(store)
    assert sorted(stored["model"].unique()) == ["m0", "m2", "m3", "m4"] and len(stored) == 4 * LAYERS * HEADS
    serial = qg.survey([m for k, m in enumerate(models) if k != 1], per="head", progress=False)
    pd.testing.assert_frame_equal(frame, serial, check_exact=True)


def test_a_worker_killed_while_idle_fails_no_model(models, tmp_path):
    import survey_workers

    markers = tmp_path / "markers"
    markers.mkdir()
    pool = ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn"),
                               initializer=survey_workers.slow_on, initargs=("m1", str(markers), 4.0))
    killed = []

    def kill_an_idle_worker():  # m1 runs for 4 s in one worker; m0, done, left the other one idle
        deadline = time.time() + 240
        while time.time() < deadline and not killed:
            busy = {int(m.name) for m in markers.iterdir()}
            idle = [pid for pid in dict(pool._processes) if busy and pid not in busy]
            if idle:
                time.sleep(0.5)
                os.kill(idle[0], signal.SIGKILL)
                killed.append(idle[0])
            time.sleep(0.05)

    killer = threading.Thread(target=kill_an_idle_worker, daemon=True)
    killer.start()
    try:
        with no_hang(300):
            frame = qg.survey(models[:2], per="head", cache=tmp_path / "r.sqlite", progress=False, executor=pool)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        killer.join(timeout=10)
    assert killed, "no worker was idle"
    assert sorted(frame.attrs["computed"]) == ["m0", "m1"] and not len(frame.attrs.get("failures", []))


def test_a_task_that_exits_fails_only_its_model():
    import survey_workers
    from qkgeometry.surveying.workers import run_tasks

    results, errors = {}, {}
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool, no_hang(120):
        run_tasks(pool, survey_workers.exit_on, {i: (i,) for i in range(3)}, results.__setitem__,
                  errors.__setitem__, {})
    assert results == {0: 0, 2: 2} and list(errors) == [1] and "SystemExit 3" in str(errors[1])


def test_workers_sleep_idle_openmp_threads_and_leave_the_callers_environment_alone(monkeypatch):
    import survey_workers
    from qkgeometry.surveying.workers import worker_pool

    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    with worker_pool(1) as pool, no_hang(120):
        seen = pool.submit(survey_workers.omp_wait_policy).result()
    assert seen == "PASSIVE" and "OMP_WAIT_POLICY" not in os.environ
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")  # an explicit setting wins
    with worker_pool(1) as pool, no_hang(120):
        assert pool.submit(survey_workers.omp_wait_policy).result() == "ACTIVE"


_HANGING_SURVEY = textwrap.dedent("""
    import concurrent.futures as cf, sys
    import survey_workers
    class Hanging(cf.ProcessPoolExecutor):  # every pool's workers hang on the model named in argv[1]
        def __init__(self, *args, initializer=None, initargs=(), **kwargs):
            super().__init__(*args, initializer=survey_workers.hang_on_after,
                             initargs=(sys.argv[1], sys.argv[2], initializer, initargs), **kwargs)
    cf.ProcessPoolExecutor = Hanging
    from qkgeometry.cli import main
    sys.exit(main(sys.argv[3:]))
""")


def _children(pid: int) -> set[int]:
    """Every live descendant of ``pid`` (from /proc; zombies count as gone)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                parents.setdefault(int(fields[1]), []).append(int(entry.name))
    out, todo = set(), [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.add(child)
            todo.append(child)
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_killing_the_survey_leaves_no_worker_and_no_resource_tracker(models, tmp_path, sig):
    store = tmp_path / "r.sqlite"
    markers = tmp_path / "markers"
    markers.mkdir()
    args = ["survey", *models[:3], "--workers", "2", "--out", str(store)]
    proc = subprocess.Popen([sys.executable, "-c", _HANGING_SURVEY, "m1", str(markers), *args],
                            env={**os.environ, "PYTHONPATH": os.pathsep.join([SRC, TESTS])},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    children: set[int] = set()
    try:
        deadline = time.time() + 240
        while time.time() < deadline and proc.poll() is None and not list(markers.iterdir()):
            time.sleep(0.1)
        assert list(markers.iterdir()), "no worker reached m1"
        children = _children(proc.pid)
        assert len(children) >= 3, children  # two workers and the resource tracker
        proc.send_signal(sig)
        proc.wait(timeout=30)
        deadline = time.time() + 20
        while time.time() < deadline and any(_alive(c) for c in children):
            time.sleep(0.2)
        left = sorted(c for c in children if _alive(c))
    finally:
        if proc.poll() is None:
            proc.kill()
        for child in children:
            if _alive(child):
                os.kill(child, signal.SIGKILL)
    assert not left, f"left running after the survey was killed: {left}"


def test_ctrl_c_at_a_terminal_prints_one_line_and_no_worker_traceback(models, tmp_path):
    """Ctrl-C reaches every process of the terminal's group, the idle worker's too."""
    proc, _, _ = hanging_survey(models, tmp_path, new_session=True)
    try:
        os.killpg(proc.pid, signal.SIGINT)  # as the terminal sends it
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert proc.returncode == 130 and len(lines) == 1 and "interrupted" in lines[0], stderr
