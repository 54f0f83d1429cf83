"""``qkgeometry train``: train one run, or a grid of runs round-robin. Chapter 5.

    qkgeometry train --arch encoder --init symmetric --seed 0 --steps 2000 --out runs/enc-sym-s0
    qkgeometry train --arch encoder --init default symmetric shared --seed 0 1 2 --steps 10000 --out results/B
    torchrun --nproc_per_node=8 -m qkgeometry.training.cli --hidden 256 --seq-len 128 ... --out runs/paper

With one (arch, init, seed) the run logs to ``--out``; with several, each logs to ``--out/<arch>-<init>-s<seed>`` and
the runs advance ``--chunk`` steps each in turn. Runs resume from their checkpoints (in the cache) unless
``--no-resume``. This module imports nothing heavy at import time, so ``qkgeometry --help`` stays fast.

Bitwise reproducibility on CPU: without Conditional Numerical Reproducibility, MKL's sgemm may pick a code path by
memory alignment, so two runs with the same seed can differ in the last bits. This module sets ``MKL_CBWR=AUTO``
(unless already set) before torch makes its first MKL call; the Makefile exports it for tests and the book.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
from collections.abc import Sequence
from pathlib import Path

os.environ.setdefault("MKL_CBWR", "AUTO")

__all__ = ["add_train_parser", "main", "run_train"]


def _configure(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    from .models import ARCHES, INITS

    g = p.add_argument_group("what to train")
    g.add_argument("--arch", nargs="+", choices=ARCHES, default=["encoder"],
                   help="encoder = BertForMaskedLM (MLM); decoder = BertLMHeadModel(is_decoder=True) (causal LM)")
    g.add_argument("--init", nargs="+", choices=INITS, default=["default"],
                   help="default | symmetric (W_Q := W_K at init) | skew (control) | shared (W_Q = W_K always)")
    g.add_argument("--seed", nargs="+", type=int, default=[0], help="seeds (init, data order and masks)")
    g.add_argument("--corpus", default="wikipedia", choices=("wikipedia", "sotu"))
    g = p.add_argument_group("optimisation")
    g.add_argument("--steps", type=int, default=1000, help="total steps (the lr schedule decays to 0 here)")
    g.add_argument("--lr", type=float, default=1e-3, help="peak AdamW learning rate")
    g.add_argument("--warmup", type=float, default=0.05, help="warmup fraction of --steps (then linear decay)")
    g.add_argument("--weight-decay", type=float, default=0.01)
    g.add_argument("--batch-size", type=int, default=32, help="global batch (split over DDP ranks)")
    g = p.add_argument_group("model shape (defaults: the book's CPU-sized BERT)")
    g.add_argument("--seq-len", type=int, default=64)
    g.add_argument("--hidden", type=int, default=128)
    g.add_argument("--layers", type=int, default=4)
    g.add_argument("--heads", type=int, default=4)
    g.add_argument("--ffn", type=int, default=512)
    g.add_argument("--vocab-size", type=int, default=8000)
    g = p.add_argument_group("logging and running")
    g.add_argument("--out", type=Path, required=True, help="run folder (log.csv, provenance.json)")
    g.add_argument("--log-every", type=int, default=50, help="log + checkpoint every N steps")
    g.add_argument("--eval-batches", type=int, default=8, help="validation batches per log row")
    g.add_argument("--cache", type=Path, default=None,
                   help="cache for tokenizer, tokens, checkpoints (default $QKGEOMETRY_CACHE or .cache/qkgeometry)")
    g.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    g.add_argument("--chunk", type=int, default=100, help="round-robin chunk in steps when training several runs")
    g.add_argument("--no-resume", action="store_true", help="start from scratch even if a checkpoint exists")
    g.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def add_train_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``train`` subcommand to a ``qkgeometry`` sub-parser set; its ``func`` is :func:`run_train`."""
    p = subparsers.add_parser("train", help="train small BERT encoders/decoders with default/symmetric init",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    _configure(p)
    p.set_defaults(func=run_train)
    return p


def run_train(args: argparse.Namespace) -> int:
    """Run the ``train`` subcommand. Prints the final validation loss and symmetry score of each run."""
    import torch

    from .loop import TrainConfig, train, train_round_robin

    if args.threads:
        torch.set_num_threads(args.threads)
    configs = {}
    for arch, init, seed in itertools.product(args.arch, args.init, args.seed):
        configs[f"{arch}-{init}-s{seed}"] = TrainConfig(
            arch=arch, init=init, seed=seed, steps=args.steps, lr=args.lr, warmup=args.warmup,
            weight_decay=args.weight_decay, batch_size=args.batch_size, seq_len=args.seq_len, hidden=args.hidden,
            layers=args.layers, heads=args.heads, ffn=args.ffn, vocab_size=args.vocab_size, corpus=args.corpus,
            log_every=args.log_every, eval_batches=args.eval_batches)
    progress = not args.no_progress and sys.stderr.isatty()
    if len(configs) == 1:
        (name, cfg), = configs.items()
        log = train(cfg, args.out, cache=args.cache, resume=not args.no_resume, progress=progress).assign(run=name)
    else:
        log = train_round_robin(configs, args.out, chunk=args.chunk, cache=args.cache,
                                resume=not args.no_resume, progress=progress)
    if int(os.environ.get("RANK", "0")):
        return 0  # under torchrun only rank 0 reports
    last = log.sort_values("step").groupby("run").tail(1)
    print(last[["run", "step", "val_loss", "symmetry_mean", "seconds"]].to_string(index=False))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m qkgeometry.training.cli ...`` (what ``torchrun -m`` needs): the ``train`` subcommand alone."""
    parser = _configure(argparse.ArgumentParser(prog="qkgeometry train", description=__doc__,
                                                formatter_class=argparse.RawDescriptionHelpFormatter))
    return run_train(parser.parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
