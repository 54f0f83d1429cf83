"""What a training trajectory costs before anything is fetched: ``qkgeometry trajectory REPO --plan`` for Pythia-shaped
repos whose branches are the suite's checkpoints, served by the loopback Hub emulator of the test suite.

Each revision is a synthetic checkpoint with the real safetensors header of its model (GPT-NeoX, row-fused
``query_key_value`` in fp16; zero data, generated as it is served) and its own commit, on the branch names of the
Pythia suite: ``step0``, ``step1``, ``step2``, ``step4`` … ``step512`` and ``step1000`` … ``step143000`` every 1,000
(154 branches). The plan reads one header per revision and fetches no tensor data; its table gives, per revision and
in total, the checkpoint's bytes, the Q/K bytes (only the Q and K rows of the fused tensor), and the HTTP requests a
cold fetch sends. Run from the repository root:

    python benchmarks/bench_trajectory_plan.py [--model 160m|1.4b] [--log-spaced K]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

#: name -> (d_model, heads, layers); vocabulary 50,304 and MLP 4·d for every Pythia size
SIZES = {"160m": (768, 12, 12), "1.4b": (2048, 16, 24)}
STEPS = [0, *[2 ** k for k in range(10)], *range(1000, 143001, 1000)]


def pythia_shaped(size: str) -> tuple[dict, dict]:
    """The shards of a Pythia checkpoint of ``size`` (the shapes of bench_hub_requests.py) and its config."""
    from bench_hub_requests import pythia

    shards, files = pythia(*SIZES[size])
    return shards, json.loads(files["config.json"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(SIZES), default="160m")
    parser.add_argument("--log-spaced", type=int, help="plan K log-spaced revisions instead of all 154")
    args = parser.parse_args()
    from hub_emulator import HubEmulator

    shards, config = pythia_shaped(args.model)
    repo = f"bench/pythia-{args.model}-shaped"
    with HubEmulator() as hub, tempfile.TemporaryDirectory() as home:
        for step in STEPS:  # one commit per branch: config.json says which step it is
            files = {"config.json": json.dumps({**config, "_step": step}).encode()}
            hub.add_synthetic(repo, shards, files, branch=f"step{step}")
        env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HOME": f"{home}/hf", "QKGEOMETRY_CACHE": f"{home}/qk",
               "PYTHONPATH": str(ROOT / "src"), "HF_HUB_DISABLE_PROGRESS_BARS": "1", "OMP_NUM_THREADS": "1"}
        for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN"):
            env.pop(var, None)
        argv = [sys.executable, "-m", "qkgeometry", "trajectory", repo, "--out", f"{home}/t.sqlite", "--plan"]
        if args.log_spaced:
            argv += ["--log-spaced", str(args.log_spaced)]
        t = time.perf_counter()
        proc = subprocess.run(argv, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t
        if proc.returncode != 0:
            raise SystemExit(proc.stderr[-2000:])
        lines = proc.stdout.rstrip().splitlines()
        print("\n".join([*lines[:4], "...", *lines[-3:]]))
        data = sum(1 for r in hub.log if r.is_data and r.range and not r.range.startswith("bytes=0-"))
        print(f"planned in {wall:.1f} s with {len(hub.log)} HTTP requests to the emulator "
              f"({len(hub.resolves())} /resolve); tensor data fetched by the plan: {hub.bytes_served() / 1e6:.1f} MB "
              f"({data} ranges beyond a header)")


if __name__ == "__main__":
    main()
