"""Record where chapter 8's copying heads look: a recorded run trained again, its heads' copy-offset profiles.

``python -m tools.record_copy_offsets --seed 0 --out FOLDER`` trains the run of ``qkgeometry train-induction
--seed 0`` (its defaults: the same initialisation and training batches) again and writes, every ``--every`` steps,
each head's mean attention at ``src + r`` from copy queries (held-out sequences with a copy, and ``r r``), the
in-context loss, and at the last step the in-context loss with each head zeroed (see
:func:`qkgeometry.training.induction_offsets.retrain_offsets`). It checks that the run it trains is the recorded
one: the training batches' SHA-256 and the in-context loss at every step the recorded ``steps.csv`` holds. The
folders ship in ``qkgeometry/data/recorded/ch8-induction/copy-offsets``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from qkgeometry.training.config import InductionConfig
from qkgeometry.training.induction_offsets import retrain_offsets

#: Significant digits kept in the CSV files (as the recorded runs).
DIGITS = 6
#: The largest relative difference between the in-context loss found here and the recorded one (which keeps six
#: significant digits) that counts as the same run.
TOLERANCE = 1e-5


def recorded_check(cfg: InductionConfig, losses: pd.DataFrame) -> dict:
    """Compare the in-context loss at every step the recorded run logged with the recorded ``steps.csv``."""
    from qkgeometry.recorded_runs import read_record_csv, read_record_json, recorded

    folder = recorded("ch8-induction") / cfg.name
    steps = read_record_csv(folder / "steps.csv").groupby("step")["in_context_loss"].first()
    prov = read_record_json(folder / "provenance.json", needs=("data",))
    both = losses.set_index("step")["in_context_loss"].to_frame("found").join(steps.rename("recorded"), how="inner")
    rel = (both["found"] - both["recorded"]).abs() / both["recorded"].abs()
    last = both.index.max()
    return {"run": cfg.name, "steps_compared": len(both), "max_relative_difference": float(rel.max()),
            "tolerance": TOLERANCE, "in_context_loss_last": {"step": int(last), "found": float(both.loc[last, "found"]),
                                                             "recorded": float(both.loc[last, "recorded"])},
            "recorded_training_batches_sha256": prov["data"]["training_batches_sha256"],
            "same": bool(rel.max() <= TOLERANCE)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.record_copy_offsets", description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, required=True, help="training seed of the recorded run")
    parser.add_argument("--data", default="repeat", choices=("repeat", "no-repeat"))
    parser.add_argument("--every", type=int, default=100, help="measure every N steps (and at the last step)")
    parser.add_argument("--offsets", type=int, nargs="+", default=[-1, 0, 1, 2, 3])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, required=True, help="folder to write (one per run)")
    args = parser.parse_args(argv)

    import torch
    import transformers

    from qkgeometry._version import __version__
    from qkgeometry.training.induction_data import SegmentSpec, stream_fingerprint
    from qkgeometry.training.loop import git_output

    cfg = InductionConfig(data=args.data, seed=args.seed)
    spec = SegmentSpec(cfg.vocab_size, cfg.seq_len, cfg.min_segment, cfg.max_segment, cfg.skip)
    dirty = git_output("status", "--porcelain", "--", "src")
    prov = {
        "experiment": "chapter 8, where the copying heads look (exploratory, after the recorded analysis)",
        "config": cfg.to_dict(), "run": cfg.name, "every": args.every, "offsets": args.offsets,
        "held_out": f"{cfg.eval_sequences} sequences with a copy, the recorded runs' probes (seed 8)",
        "training_batches_sha256": stream_fingerprint(spec, cfg.batch_size, cfg.seed, cfg.steps,
                                                      cfg.data == "repeat"),
        "commit": git_output("rev-parse", "HEAD"), "src_dirty": bool(dirty) if dirty is not None else None,
        "versions": {"python": platform.python_version(), "qkgeometry": __version__, "torch": torch.__version__,
                     "transformers": transformers.__version__, "numpy": np.__version__, "pandas": pd.__version__},
        "hardware": {"platform": platform.platform(), "machine": platform.machine(), "cpu_count": os.cpu_count(),
                     "torch_threads": args.threads, "niceness": os.nice(0)},
        "command": f"python -m tools.record_copy_offsets --seed {args.seed} --data {args.data} --every {args.every} "
                   f"--offsets {' '.join(map(str, args.offsets))} --threads {args.threads} --out <folder>",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    start = time.perf_counter()
    found = retrain_offsets(cfg, every=args.every, offsets=args.offsets, threads=args.threads, progress=True)
    prov["wall_seconds"] = round(time.perf_counter() - start, 1)
    check = recorded_check(cfg, found["losses"])
    check["same"] = check["same"] and check["recorded_training_batches_sha256"] == prov["training_batches_sha256"]
    prov["recorded_check"] = check
    args.out.mkdir(parents=True, exist_ok=True)
    for name, frame in found.items():
        frame.to_csv(args.out / f"{name}.csv", index=False, float_format=f"%.{DIGITS}g")
    (args.out / "provenance.json").write_text(json.dumps(prov, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}: {check['steps_compared']} steps compared with the recorded run, largest relative "
          f"difference {check['max_relative_difference']:.2g} ({'same run' if check['same'] else 'NOT the same run'})")
    return 0 if check["same"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
