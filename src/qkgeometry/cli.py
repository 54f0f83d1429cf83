"""``qkgeometry`` command line.

    qkgeometry score SOURCE [--per layer|head] [--out FILE.csv] [--num-std 2]
    qkgeometry architectures
    qkgeometry survey [SOURCES...] [--preset offline|paper-language|paper-vision|paper-audio] [--per head] [--out F.csv]
    qkgeometry plot results.csv [--out-dir DIR]

SOURCE is anything :func:`qkgeometry.load_qk` accepts: a model folder, a .gguf file, ``offline:<name>`` or a Hub id.
Other chapters register more subcommands through :data:`SUBCOMMANDS`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pandas is imported where it is used: `qkgeometry --help` should not pay for it
    import pandas as pd

# Idle OpenMP threads sleep instead of spinning (set before torch loads its OpenMP runtime; an explicit setting
# wins). On a machine with more runnable processes than cores, spinning threads took the CPU from the working ones
# and made the per-head scoring 2-5x slower.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

#: Extra subcommands: name -> function(subparsers) that adds the parser and sets ``func``.
SUBCOMMANDS: dict[str, Callable[[argparse._SubParsersAction], None]] = {}


def _add_score(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("score", help="score every attention layer (or head) of one model",
                       description="Score one model. Prints median and IQR per component and writes the tidy CSV.")
    p.add_argument("source", help="model folder, .gguf file, offline:<name> alias or Hub id")
    p.add_argument("--per", choices=("layer", "head"), default="layer", help="score layers (default) or heads")
    p.add_argument("--out", type=Path, help="write the tidy per-row results to this CSV file")
    p.add_argument("--num-std", type=float, default=2.0, help="directionality outlier threshold (default 2)")
    _add_device(p)
    p.set_defaults(func=_cmd_score)


def _cmd_score(args: argparse.Namespace) -> int:
    from .survey import score_model, summarize

    frame = score_model(args.source, per=args.per, num_std=args.num_std, progress=sys.stderr.isatty(),
                        device=args.device)
    summary = summarize(frame)
    print(f"{summary.iloc[0]['model']} ({summary.iloc[0]['family']}), per {args.per}, "
          f"{len(frame)} rows; scores are median [q25, q75]")
    print(format_summary(summary))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        frame.to_csv(args.out, index=False)
        print(f"wrote {len(frame)} rows to {args.out}")
    return 0


def _add_device(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="cpu",
                   help="where to compute: cpu (default), cuda or cuda:N; float64 on every device")


def format_summary(summary: pd.DataFrame) -> str:
    """Human table: one line per (model, component) with median [IQR] of both scores."""
    import pandas as pd

    def cell(row, score: str) -> str:
        return f"{row[f'{score}_median']:+.3f} [{row[f'{score}_q25']:+.3f}, {row[f'{score}_q75']:+.3f}]"

    table = pd.DataFrame({
        "component": summary["component"],
        "n": summary["n"],
        "symmetry": [cell(r, "symmetry") for _, r in summary.iterrows()],
        "directionality": [cell(r, "directionality") for _, r in summary.iterrows()],
    })
    return table.to_string(index=False)


def _add_architectures(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("architectures", help="list the supported model types and where their Q/K live")
    p.set_defaults(func=_cmd_architectures)


def _cmd_architectures(args: argparse.Namespace) -> int:
    import pandas as pd

    from .architectures import REGISTRY

    rows = []
    for key in sorted(REGISTRY):
        arch = REGISTRY[key]
        for block in arch.blocks:
            rows.append({"model_type": key, "family": arch.family, "component": block.component,
                         "layout": block.layout, "query tensor": block.q,
                         "gguf": arch.gguf.arch if arch.gguf else "", "notes": arch.notes})
    print(pd.DataFrame(rows).to_string(index=False))
    return 0


# ------------------------------------------------------------------------------------------------ survey / plot
def _add_survey(sub: argparse._SubParsersAction) -> None:
    from .zoo import PRESETS

    p = sub.add_parser("survey", help="score many models (a preset or listed sources) into one resumable CSV",
                       description="Score every model of a preset (or the SOURCES given), streaming one layer at a "
                                   "time. Finished models are written to --out at once (atomically); rerunning the "
                                   "same command resumes and recomputes nothing that finished. A model that fails "
                                   "is reported and skipped.")
    p.add_argument("sources", nargs="*", help="model folders, .gguf files, offline:<name>, random:<source> or Hub ids")
    p.add_argument("--preset", choices=sorted(PRESETS), help="a named model list from qkgeometry.zoo.PRESETS")
    p.add_argument("--per", choices=("layer", "head"), default="layer", help="score layers (default) or heads")
    p.add_argument("--out", type=Path, default=Path("results.csv"), help="CSV cache and result (default results.csv)")
    p.add_argument("--max-params", type=float, help="skip preset models above this many billion parameters")
    p.add_argument("--num-std", type=float, default=2.0, help="directionality outlier threshold (default 2)")
    _add_device(p)
    p.set_defaults(func=_cmd_survey)


def _cmd_survey(args: argparse.Namespace) -> int:
    from .survey import summarize, survey
    from .zoo import preset

    if not args.preset and not args.sources:
        raise ValueError("give --preset NAME or one or more SOURCES (e.g. `qkgeometry survey --preset offline`).")
    entries = (preset(args.preset, max_params_b=args.max_params) if args.preset else []) + list(args.sources)
    frame = survey(entries, per=args.per, cache=args.out, num_std=args.num_std, progress=sys.stderr.isatty(),
                   device=args.device)
    computed = frame.attrs["computed"]
    cached = [m for m in dict.fromkeys(frame["model"]) if m not in computed]
    if len(frame):
        summary = summarize(frame)
        summary.insert(0, "model / component", summary["model"] + " [" + summary["component"] + "]")
        print(summary[["model / component", "n", "symmetry_median", "directionality_median"]].round(3)
              .to_string(index=False))
    print(f"computed {len(computed)} model(s), reused {len(cached)} from {args.out}"
          + (f": {', '.join(cached)}" if cached else ""))
    failures = frame.attrs["failures"]
    if len(failures):
        print(f"{len(failures)} model(s) failed and were skipped:")
        print(failures.to_string(index=False))
    print(f"{args.out} holds {len(frame)} rows for these models")
    return 1 if len(failures) and not len(frame) else 0


def _add_plot(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plot", help="draw the survey figures of a results CSV into files",
                       description="Write chapter 4's figures (layer curves, scatter with IQR bars, random-init "
                                   "twins, per-head heatmaps when the CSV is per head) as PNG files.")
    p.add_argument("results", type=Path, help="a CSV written by `qkgeometry survey`")
    p.add_argument("--out-dir", type=Path, default=Path("figures"), help="folder for the PNG files (default figures)")
    p.set_defaults(func=_cmd_plot)


def _cmd_plot(args: argparse.Namespace) -> int:
    if not args.results.is_file():
        raise FileNotFoundError(f"results file {str(args.results)!r} does not exist; write one with "
                                "`qkgeometry survey --preset offline --out results.csv`.")
    import matplotlib

    matplotlib.use("Agg")
    from .plotting import plt, survey_figures
    from .survey import _read_cache

    frame = _read_cache(args.results)
    if not len(frame):
        raise ValueError(f"{str(args.results)!r} has no rows to plot.")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for stem, fig in survey_figures(frame).items():
        path = args.out_dir / f"{stem}.png"
        fig.savefig(path, bbox_inches="tight")
        plt.close(fig)
        print(f"wrote {path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="qkgeometry",
        description="Symmetry and directionality of the query-key bilinear form W_qk = W_Q W_K^T.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    _add_score(sub)
    _add_architectures(sub)
    _add_survey(sub)
    _add_plot(sub)
    from .training.cli import add_train_parser  # chapter 5: `qkgeometry train`

    add_train_parser(sub)
    for add in SUBCOMMANDS.values():
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``qkgeometry`` console script. Errors print one clear line and exit with status 2."""
    args = build_parser().parse_args(argv)
    from .loading import SourceError

    try:
        return int(args.func(args) or 0)
    except (SourceError, ValueError, TypeError, FileNotFoundError, IndexError) as e:
        print(f"qkgeometry {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
