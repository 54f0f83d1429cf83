"""The training command line: ``qkgeometry train`` (chapter 5) and ``qkgeometry train-objectives`` (chapter 3).

    qkgeometry train --arch encoder --init symmetric --seed 0 --steps 2000 --out runs/enc-sym-s0
    qkgeometry train --arch encoder --init default symmetric shared --seed 0 1 2 --steps 10000 --out results/B
    torchrun --nproc_per_node=8 -m qkgeometry train --hidden 256 --seq-len 128 ... --out runs/paper

With one (arch, init, seed) the run logs to ``--out``; with several, each logs to
``--out/<arch>-<init>-s<seed>`` and the runs advance ``--chunk`` steps each in turn. Runs resume from their
checkpoints (in the cache) unless ``--no-resume``. A folder that holds another run's log (a ``log.csv`` whose
``provenance.json`` records a different configuration) is refused, so that a run never overwrites another.

    qkgeometry train-objectives --out results/ch3-objectives --seeds 0 1 2 3 4 --steps 500 --layers 4

trains causal LM, masked LM and replaced-token detection from the same initialisations (chapter 3, "A fair test")
and writes ``scores.csv``, ``gradients.csv`` and ``provenance.json``. Both are subcommands of the one ``qkgeometry``
command (:func:`qkgeometry.cli.main`).

The options are derived from :class:`~qkgeometry.training.config.TrainConfig` and
:class:`~qkgeometry.training.config.ObjectiveConfig` (names, defaults, help texts and choices), so the command
line and the library cannot disagree.

Bitwise reproducibility on CPU: :mod:`qkgeometry.training` sets ``MKL_CBWR=AUTO`` (see there).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import os
import sys
from pathlib import Path

__all__ = [
    "GRID_FIELDS",
    "add_objectives_parser",
    "add_train_parser",
    "check_out_folders",
    "check_train_size",
    "configs_from_args",
    "configure_objectives_parser",
    "configure_train_parser",
    "flag",
    "objective_config_from_args",
    "run_objectives",
    "run_train",
    "train_parameters",
]


#: Option groups of ``qkgeometry train``, by :class:`~qkgeometry.training.config.TrainConfig` field.
_GROUPS = {
    "what to train": ("arch", "init", "seed", "corpus"),
    "optimisation": ("steps", "lr", "warmup", "weight_decay", "batch_size", "schedule"),
    "model shape (defaults: the book's CPU-sized BERT)": ("seq_len", "hidden", "layers", "heads", "ffn",
                                                          "vocab_size"),
    "logging": ("log_every", "eval_batches"),
}
#: Option groups of ``qkgeometry train-objectives``, by :class:`~qkgeometry.training.config.ObjectiveConfig` field.
_OBJECTIVE_GROUPS = {
    "optimisation": ("steps", "lr", "warmup_steps", "weight_decay", "batch_size"),
    "model shape": ("seq_len", "d_model", "n_layers", "n_heads", "d_mlp", "init_std"),
    "objectives": ("mask_prob",),
    "logging": ("log_every",),
}
#: Fields that take several values on the command line: every combination is one run (a round-robin grid).
GRID_FIELDS = ("arch", "init", "seed")
#: Defaults of ``qkgeometry train-objectives``'s own options (those of the recorded chapter-3 runs).
_OBJECTIVE_RUN_DEFAULTS = {"seeds": [0, 1, 2, 3, 4], "vocab_size": 8000, "gradient_batches": 2, "threads": 1}


def flag(name: str) -> str:
    """The command-line option of a :class:`~qkgeometry.training.config.TrainConfig` field (``batch_size`` ->
    ``--batch-size``); :func:`~qkgeometry.training.config.option_flag` gives any config field's."""
    return "--" + name.replace("_", "-")


def _field_flag(f: dataclasses.Field) -> str:
    from .config import option_flag

    return option_flag(f)


def _add_config_options(p: argparse.ArgumentParser, config_cls: type, groups: dict[str, tuple[str, ...]],
                        grid: tuple[str, ...] = ()) -> None:
    """One option per field of ``config_cls`` (type, default, help and choices from the field), in ``groups``;
    the ``grid`` fields take several values."""
    fields = {f.name: f for f in dataclasses.fields(config_cls)}
    missing = set(fields) - {n for names in groups.values() for n in names}
    assert not missing, f"{config_cls.__name__} fields without a command-line group: {sorted(missing)}"
    for title, names in groups.items():
        g = p.add_argument_group(title)
        for name in names:
            f = fields[name]
            kw = {"type": type(f.default), "help": f.metadata["help"], "choices": f.metadata.get("choices"),
                  "dest": name}
            if name in grid:
                kw.update(nargs="+", default=[f.default], help=f"{kw['help']} (several values: one run each)")
            else:
                kw["default"] = f.default
            g.add_argument(_field_flag(f), **kw)


def _check_threads(threads: int | None) -> None:
    if threads is None:
        return
    cpus = os.cpu_count() or 1
    if threads < 1:
        raise ValueError(f"--threads must be a positive number of CPU threads; got {threads}.")
    if threads > cpus:
        raise ValueError(f"--threads must be at most the number of CPUs of this machine ({cpus}); got {threads}.")


def _check_out(out: str) -> Path:
    if not out.strip():
        raise ValueError("--out must name a folder for the run's files; got an empty path.")
    return Path(out)


# ------------------------------------------------------------------------------------------- qkgeometry train
def configure_train_parser(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add to ``p`` one option per :class:`~qkgeometry.training.config.TrainConfig` field plus the options of
    ``qkgeometry train`` itself (where to write, cache, threads, round-robin chunk, resume, progress); return
    ``p``."""
    from .config import TrainConfig

    _add_config_options(p, TrainConfig, _GROUPS, GRID_FIELDS)
    g = p.add_argument_group("running")
    g.add_argument("--out", required=True, help="run folder (log.csv, provenance.json)")
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
    """One :class:`~qkgeometry.training.config.TrainConfig` per (arch, init, seed) of ``args``, named
    ``<arch>-<init>-s<seed>``. Invalid values raise ValueError naming the command-line option."""
    from .config import TrainConfig

    _check_out(str(args.out))
    if args.chunk < 1:
        raise ValueError(f"--chunk must be a positive number of steps; got {args.chunk}.")
    _check_threads(args.threads)
    shared = {f.name: getattr(args, f.name) for f in dataclasses.fields(TrainConfig)
              if f.name not in GRID_FIELDS}
    configs = {}
    for arch, init, seed in itertools.product(args.arch, args.init, args.seed):
        given = {"arch": arch, "init": init, "seed": seed, **shared}
        try:
            configs[f"{arch}-{init}-s{seed}"] = TrainConfig(**given)
        except ValueError as e:  # "hidden must be ..." -> "--hidden must be ..."
            name = _culprit(TrainConfig, given)
            raise ValueError(str(e).replace(name, flag(name), 1) if name else str(e)) from None
    for config in configs.values():
        check_train_size(config)
    return configs


def _culprit(config_cls: type, given: dict) -> str | None:
    """The field whose given value alone (the others at their defaults) makes ``config_cls`` refuse, or None
    (only a combination is refused): which option to name, found by building configs, not by reading the
    error's text."""
    for name, value in given.items():
        try:
            config_cls(**{name: value})
        except ValueError:
            return name
    return None


#: bytes of memory per trained parameter: float32 weights, gradients and AdamW's two moments
TRAIN_BYTES_PER_PARAMETER = 16


def train_parameters(config) -> int:
    """About how many parameters the BERT of ``config`` has (embeddings, attention, feed-forward, LM head)."""
    d, ffn = config.hidden, config.ffn
    per_layer = 4 * d * d + 2 * d * ffn + 9 * d + ffn  # Q, K, V, O; the two feed-forward maps; biases and norms
    return config.vocab_size * d + (config.seq_len + 2) * d + config.layers * per_layer + d * d + config.vocab_size


def check_train_size(config) -> None:
    """Refuse, before anything is built, a model whose training would not fit in this machine's memory (weights,
    gradients and AdamW's moments: :data:`TRAIN_BYTES_PER_PARAMETER` bytes per parameter)."""
    need = train_parameters(config) * TRAIN_BYTES_PER_PARAMETER
    have = _memory_bytes()
    if have is not None and need > have:
        raise ValueError(f"--hidden {config.hidden}, --layers {config.layers}, --ffn {config.ffn} and --vocab-size "
                         f"{config.vocab_size} make a model of about {train_parameters(config):.3g} parameters, "
                         f"whose training needs about {need / 1e9:,.0f} GB of memory, more than this machine's "
                         f"{have / 1e9:,.0f} GB; choose a smaller --hidden, --layers, --ffn or --vocab-size.")


def _memory_bytes() -> int | None:
    """This machine's physical memory in bytes, or None where the platform does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def check_out_folders(configs: dict, out: str | os.PathLike) -> dict[str, Path]:
    """The run folder of each config of ``qkgeometry train`` (``out`` for one run, ``out/<name>`` for a grid),
    checked before any work: ValueError if ``out`` is empty or a folder already holds another run's log, i.e. a
    ``log.csv`` without a ``provenance.json`` recording this same configuration (the same run, resumed, is
    fine)."""
    from .config import TrainConfig

    root = _check_out(str(out))
    folders = {name: root if len(configs) == 1 else root / name for name in configs}
    for name, folder in folders.items():
        if not (folder / "log.csv").is_file():
            continue
        option = f"--out {str(root)!r}" + ("" if folder == root else f" (run {name})")
        try:
            saved = json.loads((folder / "provenance.json").read_text())["config"]
        except (OSError, ValueError, KeyError, TypeError):
            raise ValueError(f"{option}: {folder} holds a log.csv without a readable provenance.json, the log of "
                             "another run; choose a new folder, or delete that log to start over.") from None
        now = configs[name].to_dict()
        saved = {**TrainConfig().to_dict(), **saved} if isinstance(saved, dict) else {}  # later fields: defaults
        differ = [k for k in now if saved.get(k) != now[k]]
        if differ:
            what = ", ".join(f"{k} {saved.get(k)!r} there, {now[k]!r} here" for k in differ)
            raise ValueError(f"{option}: {folder} holds the log of another run ({what}); choose a new folder, "
                             "or delete that one to start over.")
    return folders


def add_train_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``train`` subcommand to a ``qkgeometry`` sub-parser set; its ``func`` is :func:`run_train`."""
    p = subparsers.add_parser("train", help="train small BERT encoders/decoders with default/symmetric init",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    configure_train_parser(p)
    p.set_defaults(func=run_train)
    return p


def run_train(args: argparse.Namespace) -> int:
    """Run the ``train`` subcommand. Prints the final validation loss and symmetry score of each run."""
    configs = configs_from_args(args)  # validate everything before any work
    check_out_folders(configs, args.out)
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


# -------------------------------------------------------------------------------- qkgeometry train-objectives
def configure_objectives_parser(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add to ``p`` one option per :class:`~qkgeometry.training.config.ObjectiveConfig` field plus the options of
    ``qkgeometry train-objectives`` itself (where to write, seeds, objectives, vocabulary, gradient batches,
    threads, cache); return ``p``."""
    from .config import ALL_OBJECTIVES, MAX_VOCAB_SIZE, OBJECTIVES, ObjectiveConfig

    d = _OBJECTIVE_RUN_DEFAULTS
    g = p.add_argument_group("what to train")
    g.add_argument("--seeds", type=int, nargs="+", default=d["seeds"],
                   help="seeds of the initialisations and batch orders (each trained once per objective)")
    g.add_argument("--objectives", nargs="+", choices=ALL_OBJECTIVES, default=list(OBJECTIVES),
                   help="objectives to train from each initialisation")
    g.add_argument("--vocab-size", type=int, default=d["vocab_size"],
                   help=f"WordPiece vocabulary size of the Wikipedia leads (at most {MAX_VOCAB_SIZE:,})")
    g.add_argument("--gradient-batches", type=int, default=d["gradient_batches"],
                   help="batches averaged for the one-step gradient at the first and last step")
    g.add_argument("--eval-sequences", type=int, default=0,
                   help="log the loss on this many held-out sequences at every logged step (0: none)")
    _add_config_options(p, ObjectiveConfig, _OBJECTIVE_GROUPS)
    g = p.add_argument_group("running")
    g.add_argument("--out", required=True, help="folder for scores.csv, gradients.csv and provenance.json")
    g.add_argument("--cache", type=Path, default=None,
                   help="cache for tokenizer and tokens (default: $QKGEOMETRY_CACHE or .cache/qkgeometry)")
    g.add_argument("--threads", type=int, default=d["threads"], help="torch CPU threads")
    return p


def objective_config_from_args(args: argparse.Namespace):
    """The :class:`~qkgeometry.training.config.ObjectiveConfig` of ``args``; ValueError naming the option."""
    from .config import MAX_VOCAB_SIZE, SPECIAL_TOKENS, ObjectiveConfig

    _check_out(str(args.out))
    _check_threads(args.threads)
    if args.gradient_batches < 1:
        raise ValueError(f"--gradient-batches must be a positive integer; got {args.gradient_batches}.")
    if args.eval_sequences < 0:
        raise ValueError(f"--eval-sequences must be 0 (no validation loss) or a positive integer; got "
                         f"{args.eval_sequences}.")
    if not len(SPECIAL_TOKENS) < args.vocab_size <= MAX_VOCAB_SIZE:
        raise ValueError(f"--vocab-size must be larger than the {len(SPECIAL_TOKENS)} special tokens and at most "
                         f"{MAX_VOCAB_SIZE:,}; got {args.vocab_size:,}.")
    fields = dataclasses.fields(ObjectiveConfig)
    try:
        return ObjectiveConfig(**{f.name: getattr(args, f.name) for f in fields})
    except ValueError as e:  # "`n_layers` must be ..." -> "--layers must be ..."
        message = str(e)
        for f in fields:
            message = message.replace(f"`{f.name}`", _field_flag(f))
        raise ValueError(message) from None


def add_objectives_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``train-objectives`` subcommand to a ``qkgeometry`` sub-parser set; its ``func`` is
    :func:`run_objectives`."""
    p = subparsers.add_parser("train-objectives", help="train causal LM, masked LM and replaced-token detection "
                                                       "from the same initialisations (chapter 3)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    configure_objectives_parser(p)
    p.set_defaults(func=run_objectives)
    return p


def run_objectives(args: argparse.Namespace) -> int:
    """Run the ``train-objectives`` subcommand: :func:`~qkgeometry.training.objective_runs.record_runs`."""
    cfg = objective_config_from_args(args)  # validate everything before any work
    import torch

    from .objective_runs import record_runs

    torch.set_num_threads(args.threads)
    record_runs(args.out, cfg, args.seeds, args.objectives, args.vocab_size, args.gradient_batches,
                cache=args.cache, eval_sequences=args.eval_sequences)
    return 0


# --------------------------------------------------------------------------------- qkgeometry train-induction
_INDUCTION_TEXT = """Train a small GPT-2 (attention only, or with MLPs) on sequences in which a random segment is copied
(or, with --data no-repeat, on the control without copies), and record every head's geometry and behaviour every
--log-every steps into --out: log.csv, steps.csv and provenance.json (chapter 8).

    qkgeometry train-induction --data repeat --seed 0 --out runs/ch8/attn-repeat-s0
"""
_INDUCTION_GROUPS = {
    "what to train": ("data", "seed"),
    "sequences": ("vocab_size", "seq_len", "min_segment", "max_segment", "skip"),
    "model shape": ("d_model", "n_layers", "n_heads", "d_mlp", "init_std"),
    "optimisation": ("batch_size", "steps", "lr", "weight_decay"),
    "logging": ("log_every", "dense_until", "dense_every", "eval_sequences"),
}


def configure_induction_parser(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add to ``p`` one option per :class:`~qkgeometry.training.config.InductionConfig` field plus ``--out``,
    ``--threads`` and ``--progress``; return ``p``."""
    from .config import InductionConfig

    _add_config_options(p, InductionConfig, _INDUCTION_GROUPS)
    g = p.add_argument_group("running")
    g.add_argument("--out", required=True, help="run folder (log.csv, steps.csv, provenance.json)")
    g.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    g.add_argument("--progress", action="store_true", help="print the in-context loss at every logged step")
    return p


def induction_config_from_args(args: argparse.Namespace):
    """The :class:`~qkgeometry.training.config.InductionConfig` of ``args``; ValueError naming the option."""
    from .config import InductionConfig

    out = _check_out(str(args.out))
    _check_threads(args.threads)
    fields = dataclasses.fields(InductionConfig)
    try:
        cfg = InductionConfig(**{f.name: getattr(args, f.name) for f in fields})
    except ValueError as e:  # "`n_layers` must be ..." -> "--layers must be ..."
        message = str(e)
        for f in fields:
            message = message.replace(f"`{f.name}`", _field_flag(f))
        raise ValueError(message) from None
    if (out / "provenance.json").is_file() or (out / "log.csv").is_file():
        raise ValueError(f"--out {str(out)!r} already holds a run; choose a new folder, or delete that one to "
                         "start over.")
    return cfg


def add_induction_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``train-induction`` subcommand (chapter 8); its ``func`` is :func:`run_induction`."""
    p = subparsers.add_parser("train-induction", help="train a small transformer on sequences with copied segments, "
                                                      "scoring its heads as it learns (chapter 8)",
                              description=_INDUCTION_TEXT, formatter_class=argparse.RawDescriptionHelpFormatter)
    configure_induction_parser(p)
    p.set_defaults(func=run_induction)
    return p


def run_induction(args: argparse.Namespace) -> int:
    """Run the ``train-induction`` subcommand: :func:`~qkgeometry.training.induction_runs.train_induction`."""
    cfg = induction_config_from_args(args)  # validate everything before any work
    from .induction_runs import train_induction

    steps = train_induction(cfg, args.out, threads=args.threads, progress=args.progress)
    last = steps[steps["step"] == steps["step"].max()].iloc[0]
    print(f"{cfg.name}: step {int(last['step'])}, in-context loss {last['in_context_loss']:.3f}, "
          f"{last['seconds']:.0f} s")
    return 0
