"""``qkgeometry train``: train one run, or a grid of runs round-robin. Chapter 5.

    qkgeometry train --arch encoder --init symmetric --seed 0 --steps 2000 --out runs/enc-sym-s0
    qkgeometry train --arch encoder --init default symmetric shared --seed 0 1 2 --steps 10000 --out results/B
    torchrun --nproc_per_node=8 -m qkgeometry.training.cli --hidden 256 --seq-len 128 ... --out runs/paper
    torchrun --nproc_per_node=8 -m qkgeometry train --hidden 256 --seq-len 128 ... --out runs/paper   (the
    same)

With one (arch, init, seed) the run logs to ``--out``; with several, each logs to
``--out/<arch>-<init>-s<seed>`` and the runs advance ``--chunk`` steps each in turn. Runs resume from their
checkpoints (in the cache) unless ``--no-resume``. The options are derived from
:class:`~qkgeometry.training.loop.TrainConfig` (names, defaults, help texts and choices), so the command line
and the library cannot disagree.

Bitwise reproducibility on CPU: without Conditional Numerical Reproducibility, MKL's sgemm may pick a code
path by memory alignment, so two runs with the same seed can differ in the last bits. This module sets
``MKL_CBWR=AUTO`` (unless already set) before torch makes its first MKL call.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
from collections.abc import Sequence
from pathlib import Path

os.environ.setdefault("MKL_CBWR", "AUTO")

__all__ = ["GRID_FIELDS", "add_train_parser", "configs_from_args", "flag", "main", "run_train"]


#: Option groups of ``qkgeometry train``, by :class:`~qkgeometry.training.loop.TrainConfig` field.
_GROUPS = {
    "what to train": ("arch", "init", "seed", "corpus"),
    "optimisation": ("steps", "lr", "warmup", "weight_decay", "batch_size", "schedule"),
    "model shape (defaults: the book's CPU-sized BERT)": ("seq_len", "hidden", "layers", "heads", "ffn",
                                                          "vocab_size"),
    "logging": ("log_every", "eval_batches"),
}
#: Fields that take several values on the command line: every combination is one run (a round-robin grid).
GRID_FIELDS = ("arch", "init", "seed")


def flag(name: str) -> str:
    """The command-line option of a :class:`~qkgeometry.training.loop.TrainConfig` field (``batch_size`` ->
    ``--batch-size``)."""
    return "--" + name.replace("_", "-")


def _configure(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add one option per ``TrainConfig`` field (type, default, help and choices from the field) plus the
    options of the command itself (where to write, cache, threads, round-robin chunk, resume, progress)."""
    import dataclasses

    from .config import TrainConfig

    fields = {f.name: f for f in dataclasses.fields(TrainConfig)}
    missing = set(fields) - {n for names in _GROUPS.values() for n in names}
    assert not missing, f"TrainConfig fields without a command-line group: {sorted(missing)}"
    for title, names in _GROUPS.items():
        g = p.add_argument_group(title)
        for name in names:
            f = fields[name]
            kind = type(f.default)
            kw = {"type": kind, "help": f.metadata["help"], "choices": f.metadata.get("choices")}
            if name in GRID_FIELDS:
                kw.update(nargs="+", default=[f.default], help=f"{kw['help']} (several values: one run each)")
            else:
                kw["default"] = f.default
            g.add_argument(flag(name), **kw)
    g = p.add_argument_group("running")
    g.add_argument("--out", type=Path, required=True, help="run folder (log.csv, provenance.json)")
    g.add_argument("--cache", type=Path, default=None,
                   help="cache for tokenizer, tokens, checkpoints (default: $QKGEOMETRY_CACHE or "
                        ".cache/qkgeometry)")
    g.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    g.add_argument("--chunk", type=int, default=100,
                   help="round-robin chunk in steps when training several runs")
    g.add_argument("--no-resume", action="store_true", help="start from scratch even if a checkpoint exists")
    g.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def configs_from_args(args: argparse.Namespace) -> dict:
    """One :class:`~qkgeometry.training.loop.TrainConfig` per (arch, init, seed) of ``args``, named
    ``<arch>-<init>-s<seed>``. Invalid values raise ValueError naming the command-line option."""
    import dataclasses

    from .config import TrainConfig

    if args.chunk < 1:
        raise ValueError(f"--chunk must be a positive number of steps; got {args.chunk}.")
    if args.threads is not None and args.threads < 1:
        raise ValueError(f"--threads must be a positive number of CPU threads; got {args.threads}.")
    shared = {f.name: getattr(args, f.name) for f in dataclasses.fields(TrainConfig)
              if f.name not in GRID_FIELDS}
    configs = {}
    for arch, init, seed in itertools.product(args.arch, args.init, args.seed):
        try:
            configs[f"{arch}-{init}-s{seed}"] = TrainConfig(arch=arch, init=init, seed=seed, **shared)
        except ValueError as e:  # "hidden must be ..." -> "--hidden must be ..."
            name, _, rest = str(e).partition(" ")
            known = name in shared or name in GRID_FIELDS
            raise ValueError(f"{flag(name)} {rest}" if known else str(e)) from None
    return configs


def add_train_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``train`` subcommand to a ``qkgeometry`` sub-parser set; its ``func`` is :func:`run_train`."""
    p = subparsers.add_parser("train", help="train small BERT encoders/decoders with default/symmetric init",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    _configure(p)
    p.set_defaults(func=run_train)
    return p


def run_train(args: argparse.Namespace) -> int:
    """Run the ``train`` subcommand. Prints the final validation loss and symmetry score of each run."""
    configs = configs_from_args(args)  # validate everything before any work
    import torch

    from .loop import train, train_round_robin

    if args.threads:
        torch.set_num_threads(args.threads)
    progress = not args.no_progress and sys.stderr.isatty()
    if len(configs) == 1:
        (name, cfg), = configs.items()
        log = train(cfg, args.out, cache=args.cache, resume=not args.no_resume, progress=progress)
        log = log.assign(run=name)
    else:
        log = train_round_robin(configs, args.out, chunk=args.chunk, cache=args.cache,
                                resume=not args.no_resume, progress=progress)
    if int(os.environ.get("RANK", "0")):
        return 0  # under torchrun only rank 0 reports
    last = log.sort_values("step").groupby("run").tail(1)
    print(last[["run", "step", "val_loss", "symmetry_mean", "seconds"]].to_string(index=False))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m qkgeometry.training.cli ...`` (what ``torchrun -m`` needs): the ``train`` subcommand alone.
    Invalid settings print one line and exit with status 2, like ``qkgeometry train``."""
    parser = _configure(argparse.ArgumentParser(prog="qkgeometry train", description=__doc__,
                                                formatter_class=argparse.RawDescriptionHelpFormatter))
    args = parser.parse_args(argv)
    try:
        return run_train(args)
    except ValueError as e:
        print(f"qkgeometry train: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
