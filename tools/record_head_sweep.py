"""Record chapter 7's head sweep for one offline model: ``python -m tools.record_head_sweep --model ALIAS --out DIR``.

Writes ``heads.csv``, and for decoders ``interventions.csv`` and ``sequence_deltas.csv``, with ``provenance.json``
(see :func:`qkgeometry.heads.model_sweep.sweep`). The recorded folders live in ``qkgeometry/data/recorded/ch7-*``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from qkgeometry.heads.model_sweep import sweep
from qkgeometry.heads.models import FORWARD_MODELS


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.record_head_sweep",
                                     description="Record head behaviour, geometry and interventions of one model.")
    parser.add_argument("--model", required=True, choices=FORWARD_MODELS)
    parser.add_argument("--out", required=True, type=Path, help="folder to write the CSV files and provenance into")
    parser.add_argument("--quick", action="store_true", help="smaller inputs (a live check)")
    parser.add_argument("--no-interventions", action="store_true", help="behaviour and geometry only")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    command = " ".join(["python -m tools.record_head_sweep", *(sys.argv[1:] if argv is None else argv)])
    sweep(args.model, args.out, args.quick, interventions=not args.no_interventions, threads=args.threads,
          command=command)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
