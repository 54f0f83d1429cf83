"""How fast ``qkgeometry score FOLDER`` of a local model starts and finishes, against ``python -c "import numpy"``.

Both commands run as fresh processes, round-robin (the machine's load drifts; each round's two runs are adjacent in
time), and each is measured by the CPU time it used (user + system, from ``os.wait4``) and by its wall time. Printed:
the median of each and the ratio score / numpy, as the ratio of medians and as the median of the per-round ratios.
The goal: ``qkgeometry score`` of one local model in at most 0.5 s of CPU, a few times numpy's import alone (it reads
and scores the model without importing pandas or the survey machinery).

    python benchmarks/bench_score_start.py [FOLDER] [--repeats 7] [--per layer|head]

FOLDER defaults to the offline MiniLM-L6 (``offline:minilm-l6``'s folder: 6 layers, d = 384). It is a benchmark,
not a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def run(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """``(cpu seconds, wall seconds)`` of one fresh process running ``command``; its output is discarded."""
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(command)} failed: {proc.stderr.read().decode(errors='replace')[-500:]}")
    proc.stderr.close()
    return usage.ru_utime + usage.ru_stime, wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", type=Path, help="a local model folder (default: offline MiniLM-L6)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--per", choices=("layer", "head"), default="layer")
    args = parser.parse_args(argv)
    folder = args.folder
    if folder is None:
        from qkgeometry.catalogue import offline_path

        folder = offline_path("minilm-l6")
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    commands = {"numpy": [sys.executable, "-c", "import numpy"],
                "score": [sys.executable, "-m", "qkgeometry", "score", str(folder), "--per", args.per]}
    for command in commands.values():  # warm the file cache (and the bytecode) once, unmeasured
        run(command, env)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for _ in range(args.repeats):
        for name, command in commands.items():
            times[name].append(run(command, env))
    print(f"qkgeometry score {folder} --per {args.per} against `python -c \"import numpy\"`, {args.repeats} rounds "
          f"(load average {os.getloadavg()[0]:.2f})")
    for k, what in ((0, "CPU"), (1, "wall")):
        med = {name: statistics.median(t[k] for t in values) for name, values in times.items()}
        per_round = statistics.median(s[k] / n[k] for s, n in zip(times["score"], times["numpy"]))
        print(f"  {what:>4}: score {med['score']:.3f} s, numpy {med['numpy']:.3f} s; ratio of medians "
              f"{med['score'] / med['numpy']:.2f}, median of per-round ratios {per_round:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
