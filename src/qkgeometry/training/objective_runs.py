"""Chapter 3's runs: train every (seed, objective) from one initialisation per seed, summarise, record and read
back. Chapter 3, "A fair test".

* :func:`train_with_objective` trains one model on one objective and logs the scores of every head's W_qk;
* :func:`compare_objectives` pairs the objectives by seed (same initialisation, same batches);
* :func:`run_medians`, :func:`gradient_medians`, :func:`median_null_band` summarise the logs per seed and give the
  null band of a median (or of a mean over seeds of such medians);
* :func:`seed_summaries` gives the chapter's estimand, one row per (objective, seed): the change of each score from
  the shared initialisation, per layer or per head, next to its level;
* :func:`record_runs` writes tidy CSV logs plus ``provenance.json`` (``qkgeometry train-objectives --out FOLDER``
  runs it), and :func:`read_recorded` reads such a folder back.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import platform
import time
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from .._files import write_bytes_atomic
from ..recorded_runs import read_record_csv, read_record_json
from ..scores import directionality_score, symmetry_score
from .config import OBJECTIVES, ObjectiveConfig, option_flag
from .data import TokenData, train_block
from .objective_batches import (
    ObjectiveBatch,
    check_objective,
    make_objective_batch,
    objective_loss,
    unigram_probs,
)
from .objective_gradients import gradient_rows
from .objective_model import ObjectiveTransformer

if TYPE_CHECKING:
    import pandas

__all__ = ["UNITS", "compare_objectives", "gradient_medians", "median_null_band", "objectives_command",
           "read_recorded", "record_runs", "run_medians", "score_rows", "seed_summaries", "train_with_objective",
           "validation_loss", "validation_set"]

#: The units a score is read at: the layer's form ``Σ_h W_Q^h W_K^hᵀ`` (``head = -1`` in the logs), or each head.
UNITS = ("layer", "head")

def score_rows(model: ObjectiveTransformer) -> list[dict]:
    """Scores of every head's ``W_Q^h W_K^hᵀ`` and of each layer's ``Σ_h W_Q^h W_K^hᵀ``.

    One dict per (layer, head) with ``head = -1`` for the layer-level form: ``layer, head, symmetry,
    directionality``.
    """
    w = model.w_qk()  # (L, H, d, d)
    per_head = symmetry_score(w), directionality_score(w)
    layer = w.sum(dim=1)
    per_layer = np.atleast_1d(symmetry_score(layer)), np.atleast_1d(directionality_score(layer))
    rows = []
    for li in range(w.shape[0]):
        rows.append({"layer": li, "head": -1, "symmetry": float(per_layer[0][li]),
                     "directionality": float(per_layer[1][li])})
        for h in range(w.shape[1]):
            rows.append({"layer": li, "head": h, "symmetry": float(np.asarray(per_head[0])[li, h]),
                         "directionality": float(np.asarray(per_head[1])[li, h])})
    return rows


#: Sequences scored together when a validation loss is computed (the result does not depend on it).
_VALIDATION_CHUNK = 32


def validation_set(data: TokenData, objective: str, cfg: ObjectiveConfig, n_sequences: int) -> list[ObjectiveBatch]:
    """The fixed validation set of ``objective``: the first ``n_sequences`` blocks of ``cfg.seq_len`` tokens of the
    validation stream (documents no training batch reads), with masks drawn from a fixed key, so that every run,
    seed and batch size is validated on the same targets. Chapter 3, "Mask, density or supervision?"."""
    from .data import VALIDATION_SEED

    check_objective(objective)
    n_blocks = len(data.val) // cfg.seq_len
    if not 1 <= n_sequences <= n_blocks:
        raise ValueError(f"`eval_sequences` must lie between 1 and the {n_blocks:,} validation sequences of "
                         f"{cfg.seq_len} tokens; got {n_sequences}.")
    ids = torch.from_numpy(data.val[:n_sequences * cfg.seq_len].reshape(n_sequences, cfg.seq_len).astype(np.int64))
    unigram = unigram_probs(data.train, data.vocab_size) if objective == "rtd" else None
    return [make_objective_batch(chunk, objective, data.vocab_size, VALIDATION_SEED, k, cfg.mask_prob, unigram)
            for k, chunk in enumerate(torch.split(ids, _VALIDATION_CHUNK))]


def _targets(batch: ObjectiveBatch) -> int:
    """How many targets ``objective_loss`` averages over in ``batch``."""
    if batch.objective == "causal":
        return batch.targets[:, 1:].numel()
    if batch.objective in ("causal-masked", "causal-sparse"):
        return int(batch.selected[:, 1:].sum())
    if batch.objective == "mlm":
        return int(batch.selected.sum())
    return batch.labels.numel()


@torch.no_grad()
def validation_loss(model: ObjectiveTransformer, batches: Sequence[ObjectiveBatch]) -> float:
    """The mean loss per target over ``batches`` (:func:`validation_set`), the model in eval mode and restored."""
    was_training = model.training
    model.eval()
    try:
        total, count = 0.0, 0
        for batch in batches:
            n = _targets(batch)
            total += float(objective_loss(model, batch)) * n
            count += n
    finally:
        model.train(was_training)
    return total / count


def train_with_objective(model: ObjectiveTransformer, data: TokenData, objective: str, cfg: ObjectiveConfig,
                         seed: int = 0, gradient_batches: int = 1, eval_sequences: int = 0
                         ) -> tuple[pandas.DataFrame, pandas.DataFrame]:
    """Train ``model`` in place with AdamW on ``objective``; return ``(scores, gradients)`` logs. Chapter 3.

    ``scores``: one row per (logged step, layer, head) from :func:`score_rows`, plus ``loss`` (the mean training
    loss since the previous log row; NaN at step 0) and, when ``eval_sequences`` > 0, ``val_loss`` (the loss on the
    fixed :func:`validation_set` of that many sequences, at the logged step). ``gradients``: :func:`gradient_rows`
    at step 0 and at the last step, averaged over ``gradient_batches`` batches (the batch order of seed
    ``10_000 + seed``: other windows of the training stream), with a ``step`` column. Batch ``k`` of seed ``s`` is
    the same for every objective.
    """
    import pandas as pd

    check_objective(objective)
    unigram = unigram_probs(data.train, data.vocab_size) if objective == "rtd" else None

    def batch_at(step: int, batch_seed: int) -> ObjectiveBatch:
        ids = train_block(data.train, cfg.seq_len, cfg.batch_size, batch_seed, step)
        return make_objective_batch(ids, objective, data.vocab_size, batch_seed, step, cfg.mask_prob, unigram)

    def grads(step: int) -> pd.DataFrame:
        frames = [pd.DataFrame(gradient_rows(model, batch_at(k, 10_000 + seed))) for k in range(gradient_batches)]
        return pd.concat(frames).groupby(["layer", "head"], as_index=False).mean().assign(step=step)

    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / max(cfg.warmup_steps, 1)))
    rows, running = [], []
    held_out = validation_set(data, objective, cfg, eval_sequences) if eval_sequences else None

    def log(step: int) -> None:
        loss = float(np.mean(running)) if running else float("nan")
        extra = {"val_loss": validation_loss(model, held_out)} if held_out is not None else {}
        rows.extend({"step": step, "loss": loss, **extra, **r} for r in score_rows(model))
        running.clear()

    grad_logs = [grads(0)]
    log(0)
    model.train()
    for step in range(1, cfg.steps + 1):
        loss = objective_loss(model, batch_at(step - 1, seed))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        running.append(float(loss.detach()))
        if step % cfg.log_every == 0 or step == cfg.steps:
            log(step)
    grad_logs.append(grads(cfg.steps))
    return pd.DataFrame(rows), pd.concat(grad_logs, ignore_index=True)


def compare_objectives(data: TokenData, cfg: ObjectiveConfig, seeds: Iterable[int],
                       objectives: Sequence[str] = OBJECTIVES, gradient_batches: int = 1,
                       progress: bool = False) -> tuple[pandas.DataFrame, pandas.DataFrame]:
    """For each seed one initialisation and one batch sequence, trained once per objective. Chapter 3.

    Returns the concatenated ``(scores, gradients)`` logs of :func:`train_with_objective` with ``seed`` and
    ``objective`` columns.
    """
    import pandas as pd

    scores, grads = [], []
    for s, g, seconds in _paired_runs(data, cfg, seeds, objectives, gradient_batches):
        scores.append(s)
        grads.append(g)
        if progress:
            print(f"seed {s['seed'].iloc[0]} {s['objective'].iloc[0]:>6}: {seconds:.0f} s, "
                  f"final loss {s['loss'].iloc[-1]:.3f}", flush=True)
    return pd.concat(scores, ignore_index=True), pd.concat(grads, ignore_index=True)


def _paired_runs(data: TokenData, cfg: ObjectiveConfig, seeds: Iterable[int], objectives: Sequence[str],
                 gradient_batches: int, eval_sequences: int = 0
                 ) -> Iterator[tuple[pandas.DataFrame, pandas.DataFrame, float]]:
    """Train every (seed, objective), one initialisation per seed shared by all objectives; yield each run's
    ``(scores, gradients, seconds)`` as it finishes, the logs carrying ``seed`` and ``objective`` columns."""
    for objective in objectives:
        check_objective(objective)
    for seed in seeds:
        torch.manual_seed(seed)
        init = ObjectiveTransformer(data.vocab_size, cfg)
        for objective in objectives:
            t0 = time.time()
            s, g = train_with_objective(copy.deepcopy(init), data, objective, cfg, seed, gradient_batches,
                                        eval_sequences)
            yield s.assign(seed=seed, objective=objective), g.assign(seed=seed, objective=objective), time.time() - t0


# ============================================================================================== summaries
def _layer_filter(frame: pandas.DataFrame, layers: str | int) -> pandas.DataFrame:
    if layers == "all":
        return frame
    if layers in ("first", "last"):
        return frame[frame["layer"] == (frame["layer"].min() if layers == "first" else frame["layer"].max())]
    if isinstance(layers, int) and not isinstance(layers, bool):
        return frame[frame["layer"] == layers]
    raise ValueError(f"`layers` must be 'all', 'first', 'last' or a layer index; got {layers!r}.")


def run_medians(scores: pandas.DataFrame, layers: str | int = "all") -> pandas.DataFrame:
    """One row per (objective, seed, step): the median over heads (and over ``layers``) of the per-head scores of
    W_qk, and the training loss. ``scores``: the first frame of :func:`compare_objectives` /
    :func:`read_recorded`. The unit of every later interval is one training seed. Chapter 3."""
    heads = _layer_filter(scores[scores["head"] >= 0], layers)
    return (heads.groupby(["objective", "seed", "step"], sort=False)
            .agg(symmetry=("symmetry", "median"), directionality=("directionality", "median"), loss=("loss", "first"))
            .reset_index())


def seed_summaries(scores: pandas.DataFrame, unit: str = "layer", step: int | str | None = None) -> pandas.DataFrame:
    """The chapter's estimand: one row per (objective, seed), for ``unit`` ``"layer"`` (each layer's form
    ``Σ_h W_Q^h W_K^hᵀ``, the unit the paper scores) or ``"head"`` (each head's ``W_Q^h W_K^hᵀ``). Chapter 3.

    Columns ``objective, seed, step, loss`` and, for each score, ``{score}`` = the median over the units of the
    score at ``step`` (default: the last logged step of each run) and ``{score}_change`` = the median over the
    units of (score at ``step`` − score at step 0): the change from the initialisation, which all objectives of a
    seed share. ``step="all"``: one row per (objective, seed, logged step) instead, for trajectories.
    ``scores``: the first frame of :func:`compare_objectives` / :func:`read_recorded`.
    """
    if unit not in UNITS:
        raise ValueError(f"`unit` must be one of {UNITS}; got {unit!r}.")
    rows = scores[scores["head"] == -1] if unit == "layer" else scores[scores["head"] >= 0]
    keys = ["objective", "seed", "layer", "head"]
    start = rows[rows["step"] == 0].set_index(keys)[["symmetry", "directionality"]]
    if start.empty:
        raise ValueError("`scores` has no step-0 rows: the change from the initialisation needs the scores at step "
                         "0 of every run (train_with_objective logs them).")
    by = ["objective", "seed"]
    if step is None:
        last = rows.groupby(["objective", "seed"])["step"].transform("max")
        end = rows[rows["step"] == last]
    elif step == "all":
        end, by = rows, ["objective", "seed", "step"]
        keys = [*keys, "step"]
        start = start.reset_index().merge(rows[["objective", "seed", "layer", "head", "step"]],
                                          on=["objective", "seed", "layer", "head"]).set_index(keys)
    else:
        end = rows[rows["step"] == step]
        if end.empty:
            raise ValueError(f"`step`: no run was logged at step {step}; logged steps: "
                             f"{sorted(rows['step'].unique().tolist())}.")
    end = end.set_index(keys)
    change = end[["symmetry", "directionality"]] - start.reindex(end.index)
    cols = ["loss", "symmetry", "directionality"] if step == "all" else ["step", "loss", "symmetry", "directionality"]
    merged = end[cols].join(change.add_suffix("_change")).reset_index()
    extra = {} if step == "all" else {"step": ("step", "first")}
    out = (merged.groupby(by, sort=False)
           .agg(**extra, loss=("loss", "first"), symmetry=("symmetry", "median"),
                directionality=("directionality", "median"), symmetry_change=("symmetry_change", "median"),
                directionality_change=("directionality_change", "median"))
           .reset_index())
    return out


def gradient_medians(grads: pandas.DataFrame, layers: str | int = "all") -> pandas.DataFrame:
    """One row per (objective, seed, step): medians over heads (and ``layers``) of the one-step gradient's scores
    and pair shares (second frame of :func:`compare_objectives`). Chapter 3."""
    cols = ["symmetry", "directionality", "mask_paired", "effective_paired", "active_rows"]
    return (_layer_filter(grads, layers).groupby(["objective", "seed", "step"], sort=False)[cols].median()
            .reset_index())


def median_null_band(d: int, r: int, n_matrices: int, n_draws: int = 400, level: float = 0.95,
                     seed: int = 0, n_seeds: int = 1) -> dict[str, tuple[float, float]]:
    """Central ``level`` range of the median of ``n_matrices`` independent Gaussian ``A Bᵀ`` (A, B of shape (d, r)),
    for both scores: the null band of a median over layers and heads at the same d. With ``n_seeds`` > 1, the band
    of the mean over ``n_seeds`` independent such medians (what a mean over seeds is compared with: about
    √n_seeds narrower). Chapter 3.

    Simulated with :func:`qkgeometry.analyses.baselines.random_factor_scores` (``n_draws`` means). Returns
    ``{"symmetry": (low, high), "directionality": (low, high)}``.
    """
    from ..analyses.baselines import random_factor_scores

    if not 0 < level < 1:
        raise ValueError(f"`level` must lie strictly between 0 and 1; got {level!r}.")
    if int(n_seeds) != n_seeds or n_seeds < 1:
        raise ValueError(f"`n_seeds` must be a positive integer; got {n_seeds!r}.")
    n_seeds = int(n_seeds)
    sims = random_factor_scores(d, r, n_matrices * n_draws * n_seeds, seed=seed)
    out = {}
    for score in ("symmetry", "directionality"):
        medians = np.median(sims[score].to_numpy().reshape(n_draws, n_seeds, n_matrices), axis=2).mean(axis=1)
        lo, hi = np.quantile(medians, [(1 - level) / 2, (1 + level) / 2])
        out[score] = (float(lo), float(hi))
    return out


# ========================================================================================= recorded runs
def _provenance(cfg: ObjectiveConfig, data: TokenData, seeds: list[int], objectives: Sequence[str],
                vocab_size: int, gradient_batches: int, eval_sequences: int = 0) -> dict:
    from .._version import __version__
    from .loop import git_output

    dirty = git_output("status", "--porcelain", "--", "src")
    return {
        "experiment": "chapter 3, a fair test: causal LM vs masked LM vs replaced-token detection",
        "config": cfg.to_dict(), "seeds": seeds, "objectives": list(objectives), "vocab_size": vocab_size,
        "gradient_batches": gradient_batches, **({"eval_sequences": eval_sequences} if eval_sequences else {}),
        "data": {"corpus": data.corpus, "fingerprint": data.fingerprint, "train_tokens": len(data.train),
                 "tokenizer_sha256": data.tokenizer_sha256, **data.stream_sha256()},
        "commit": git_output("rev-parse", "HEAD"), "src_dirty": bool(dirty) if dirty is not None else None,
        "versions": {"python": platform.python_version(), "qkgeometry": __version__, "torch": torch.__version__,
                     "numpy": np.__version__},
        "hardware": {"platform": platform.platform(), "machine": platform.machine(), "cpu_count": os.cpu_count(),
                     "torch_threads": torch.get_num_threads(), "niceness": os.nice(0)},
        "command": objectives_command(cfg, seeds, objectives, vocab_size, gradient_batches,
                                      torch.get_num_threads(), eval_sequences),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }

def objectives_command(cfg: ObjectiveConfig, seeds: Sequence[int], objectives: Sequence[str], vocab_size: int,
                       gradient_batches: int, threads: int, eval_sequences: int = 0) -> str:
    """The ``qkgeometry train-objectives`` command that reproduces a recording (every option spelled out)."""
    parts = ["qkgeometry train-objectives", "--seeds", *map(str, seeds), "--objectives", *objectives]
    parts += [f"--vocab-size {vocab_size}", f"--gradient-batches {gradient_batches}"]
    if eval_sequences:
        parts.append(f"--eval-sequences {eval_sequences}")
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        parts.append(f"{option_flag(f)} {value:g}" if isinstance(value, float) else f"{option_flag(f)} {value}")
    return " ".join([*parts, f"--threads {threads}", "--out <folder>"])


def record_runs(out: str | os.PathLike, cfg: ObjectiveConfig, seeds: Sequence[int],
                objectives: Sequence[str] = OBJECTIVES, vocab_size: int = 8000, gradient_batches: int = 2,
                cache: str | os.PathLike | None = None, progress: bool = True, eval_sequences: int = 0) -> Path:
    """Train every (seed, objective) and write ``scores.csv``, ``gradients.csv`` and ``provenance.json`` into
    ``out``. Chapter 3 reads these files when it shows recorded runs. ``eval_sequences`` > 0 adds a ``val_loss``
    column (:func:`train_with_objective`).

    Each run's rows are appended as soon as it finishes, and ``provenance.json`` records ``runs_done`` and the wall
    time, so a partial folder is readable (and labelled as partial) while the rest is still training.
    """

    from .data import prepare_data

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    data = prepare_data("wikipedia", vocab_size=vocab_size, cache=cache)
    seeds = [int(s) for s in seeds]
    if eval_sequences:
        validation_set(data, objectives[0], cfg, eval_sequences)  # refuse a bad size before any training
    prov = _provenance(cfg, data, seeds, objectives, vocab_size, gradient_batches, eval_sequences)
    prov.update(runs_total=len(seeds) * len(objectives), runs_done=0, wall_seconds=0.0, run_seconds={})
    for name in ("scores.csv", "gradients.csv"):
        (out / name).unlink(missing_ok=True)
    t_start = time.time()

    def write_prov() -> None:
        write_bytes_atomic(out / "provenance.json", (json.dumps(prov, indent=2) + "\n").encode())

    write_prov()
    for s, g, seconds in _paired_runs(data, cfg, seeds, objectives, gradient_batches, eval_sequences):
        seed, objective = int(s["seed"].iloc[0]), s["objective"].iloc[0]
        for frame, name in ((s, "scores.csv"), (g, "gradients.csv")):
            path = out / name
            frame.to_csv(path, mode="a", header=not path.exists(), index=False, float_format="%.6g")
        prov["runs_done"] += 1
        prov["run_seconds"][f"{objective}-s{seed}"] = round(seconds, 1)
        prov["wall_seconds"] = round(time.time() - t_start, 1)
        write_prov()
        if progress:
            print(f"[{prov['runs_done']}/{prov['runs_total']}] seed {seed} {objective}: {seconds:.0f} s", flush=True)
    return out


def read_recorded(folder: str | os.PathLike) -> tuple[pandas.DataFrame, pandas.DataFrame, dict]:
    """``(scores, gradients, provenance)`` of a folder written by :func:`record_runs`, or of a folder of such
    folders (one per seed, recorded one seed at a time with the same configuration), read as one recording. Chapter 3.

    For a folder of folders the provenance is merged: the shared configuration, objectives and data, ``seeds``
    (sorted), ``runs_done``, ``runs_total`` and ``wall_seconds`` summed, and ``parts`` listing each folder in seed
    order (``s2`` before ``s10``) with its commit, hardware and creation time; the frames are read in that order.
    A configuration, objective list or data fingerprint that differs between the folders is refused: they would not
    be one experiment.
    """
    import pandas as pd

    folder = Path(folder)
    prov_path = folder / "provenance.json"
    if prov_path.is_file():
        prov = read_record_json(prov_path)
        return read_record_csv(folder / "scores.csv"), read_record_csv(folder / "gradients.csv"), prov
    parts = sorted(p.parent for p in folder.glob("*/provenance.json"))
    if not parts:
        raise FileNotFoundError(f"{folder}: no provenance.json, in it or in a sub-folder; record the runs with "
                                f"`qkgeometry train-objectives --out {folder}`.")
    provs = [read_record_json(p / "provenance.json", needs=("seeds", "data", "runs_done", "runs_total",
                                                            "wall_seconds", "command")) for p in parts]
    by_seed = sorted(zip(parts, provs), key=lambda pp: (min(pp[1].get("seeds") or [float("inf")]), pp[0].name))
    parts, provs = [p for p, _ in by_seed], [pr for _, pr in by_seed]
    for key in ("config", "objectives", "vocab_size", "gradient_batches"):
        values = {json.dumps(pr.get(key), sort_keys=True) for pr in provs}
        if len(values) > 1:
            raise ValueError(f"{folder}: its sub-folders disagree on `{key}` ({len(values)} different values), so "
                             "they are not one recording; keep each configuration in a folder of its own.")
    fingerprints = {pr["data"]["fingerprint"] for pr in provs}
    if len(fingerprints) > 1:
        raise ValueError(f"{folder}: its sub-folders read different data ({sorted(fingerprints)}); keep each in a "
                         "folder of its own.")
    seeds = [s for pr in provs for s in pr["seeds"]]
    if len(seeds) != len(set(seeds)):
        raise ValueError(f"{folder}: a seed is recorded in more than one sub-folder ({sorted(seeds)}); remove the "
                         "duplicate folder.")
    merged = {k: v for k, v in provs[0].items() if k not in ("seeds", "commit", "src_dirty", "hardware", "created",
                                                            "command", "run_seconds")}
    merged.update(seeds=sorted(seeds), runs_done=sum(pr["runs_done"] for pr in provs),
                  runs_total=sum(pr["runs_total"] for pr in provs),
                  wall_seconds=round(sum(pr["wall_seconds"] for pr in provs), 1),
                  command=provs[0]["command"],
                  parts=[{"folder": p.name, "seeds": pr["seeds"], "commit": pr.get("commit"),
                          "hardware": pr.get("hardware"), "created": pr.get("created"),
                          "run_seconds": pr.get("run_seconds")} for p, pr in zip(parts, provs)])
    merged["hardware"] = provs[0].get("hardware")
    scores = pd.concat([read_record_csv(p / "scores.csv") for p in parts], ignore_index=True)
    grads = pd.concat([read_record_csv(p / "gradients.csv") for p in parts], ignore_index=True)
    return scores, grads, merged
