"""Record chapter 8's intuition figure: one head of one recorded run at a few steps.

``python -m tools.record_snapshots --seed 0 --layer 0 --head 1 --steps 0 60 2000 --out FILE.npz`` trains the run
of ``qkgeometry train-induction --seed 0`` (its defaults) again and keeps that head's attention pattern on one probe
sequence and the symmetric and skew parts of its logits at each step (see
:func:`qkgeometry.training.induction_runs.snapshots`). The file ships in ``qkgeometry/data/recorded/ch8-induction``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from qkgeometry.training.config import InductionConfig
from qkgeometry.training.induction_runs import snapshots


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.record_snapshots", description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", default="repeat")
    parser.add_argument("--layer", type=int, required=True)
    parser.add_argument("--head", type=int, required=True)
    parser.add_argument("--probe", default="text", choices=("text", "repeat"))
    parser.add_argument("--steps", type=int, nargs="+", required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    cfg = InductionConfig(data=args.data, seed=args.seed)
    found = snapshots(cfg, args.steps, args.layer, args.head, args.probe)
    np.savez_compressed(args.out, layer=args.layer, head=args.head, seed=args.seed, probe=args.probe,
                        **{k: (v.astype(np.float32) if v.dtype.kind == "f" else v) for k, v in found.items()})
    print(f"wrote {args.out}: steps {list(found['steps'])}, symmetry {np.round(found['symmetry'], 4).tolist()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
