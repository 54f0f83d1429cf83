"""The training loop: seeded, logged to CSV with provenance, resumable, DDP-ready. Chapter 5.

A plain PyTorch loop rather than HF ``Trainer``: the experiments need exact pairing (the same batches and masks for
every init at a seed), masked-position-only MLM loss, and Q/K scores at every log step. It runs unchanged under
``torchrun --nproc_per_node=N -m qkgeometry train ...`` (each rank takes every N-th row of the global batch; rank 0
evaluates, logs and checkpoints; checked on CPU with ``gloo`` and 2 processes). Under DDP each rank's loss is the mean
over its own rows, so the update is the average of per-rank means, not the mean over all masked tokens of the global
batch; logged train losses are rank 0's.

Files of one run (``out/``):

* ``log.csv``: one row per log step: ``step, train_loss`` (mean over the steps since the previous row; empty at
  step 0), ``val_loss`` (fixed validation set), ``lr, seconds`` (cumulative training wall time, evaluation excluded),
  ``symmetry_mean, directionality_mean, qk_change`` (mean over layers of ‖W_Q − W_Q(0)‖/‖W_Q(0)‖, likewise K,
  averaged), and ``symmetry_L{i}, directionality_L{i}`` per layer, plus the run's ``arch, init, seed, lr_max, corpus``.
* ``provenance.json``: config, seed, commit, package versions, hardware, data fingerprint, steps done.

Checkpoints (``model.safetensors``, ``optimizer.safetensors``, ``state.json``; never pickle) live in the cache, not in
``out/``: ``<cache>/checkpoints/<hash of out's absolute path>/``.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
import platform
import subprocess
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import torch

from .._files import replacing, write_bytes_atomic
from ..devices import default_device
from ..recorded_runs import read_record_csv, read_record_json
from .config import INIT_NOTES, SCHEDULES, TrainConfig
from .data import TokenData, cache_dir, prepare_data, train_batch, validation_batches
from .models import (
    LanguageModelLoss,
    ModelSpec,
    build_model,
    qk_scores,
    self_attentions,
)

__all__ = ["SCHEDULES", "Run", "TrainConfig", "provenance", "read_log", "train", "train_round_robin"]


# ------------------------------------------------------------------------------------------------ provenance
def git_output(*args: str) -> str | None:
    """``git ARGS`` run in the source checkout, stripped stdout; None outside a checkout or on any error."""
    try:
        root = Path(__file__).resolve().parents[3]
        out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10, check=False)
        return out.stdout.strip() if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def provenance(config: TrainConfig, data: TokenData | None = None) -> dict:
    """Config, code version, package versions and hardware of a run (JSON-serialisable)."""
    import transformers

    from .._version import __version__

    versions = {"python": platform.python_version(), "qkgeometry": __version__, "torch": torch.__version__,
                "transformers": transformers.__version__, "numpy": np.__version__}
    try:
        import tokenizers
        versions["tokenizers"] = tokenizers.__version__
    except ImportError:
        pass
    dirty = git_output("status", "--porcelain", "--", "src")
    return {
        "config": config.to_dict(),
        "objective": config.objective,
        "model_class": "BertForMaskedLM" if config.arch == "encoder" else "BertLMHeadModel(is_decoder=True)",
        "init_note": INIT_NOTES[config.init],
        "commit": git_output("rev-parse", "HEAD"),
        "src_dirty": bool(dirty) if dirty is not None else None,
        "versions": versions,
        "hardware": {
            "platform": platform.platform(), "machine": platform.machine(), "processor": platform.processor(),
            "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "mkl_cbwr": os.environ.get("MKL_CBWR"),
            "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            "world_size": int(os.environ.get("WORLD_SIZE", "1")),
        },
        "data": None if data is None else {"corpus": data.corpus, "fingerprint": data.fingerprint,
                                           "train_tokens": len(data.train), "val_tokens": len(data.val),
                                           "unigram_loss": data.unigram_loss(),
                                           "tokenizer_sha256": data.tokenizer_sha256, **data.stream_sha256()},
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


# ----------------------------------------------------------------------------------------- checkpoint helpers
def _atomic_json(path: Path, obj: dict) -> None:
    write_bytes_atomic(path, json.dumps(obj, indent=2, sort_keys=True).encode())


def _optimizer_tensors(opt: torch.optim.Optimizer) -> dict[str, torch.Tensor]:
    flat = {}
    for idx, state in opt.state_dict()["state"].items():
        for key, value in state.items():
            flat[f"{idx}.{key}"] = torch.as_tensor(value).detach().cpu().contiguous()
    return flat


def _load_optimizer(opt: torch.optim.Optimizer, flat: dict[str, torch.Tensor]) -> None:
    sd = opt.state_dict()
    state: dict[int, dict] = {}
    for name, value in flat.items():
        idx, key = name.split(".", 1)
        state.setdefault(int(idx), {})[key] = value
    sd["state"] = state
    opt.load_state_dict(sd)


def read_log(out: str | os.PathLike):
    """The run's ``log.csv`` as a pandas DataFrame (a missing, empty or damaged log raises
    :class:`~qkgeometry.errors.RecordError` naming it)."""
    return read_record_csv(Path(out) / "log.csv", rows=False)


# ----------------------------------------------------------------------------------------------------- runs
@dataclass
class Run:
    """One training run that can be advanced step by step (so that several runs can share a CPU round-robin).

    ``Run(config, out)`` builds (or resumes from the cache) the model; :meth:`advance` trains; the log is
    ``out/log.csv``. Pass ``data`` to share one tokenised corpus between runs.
    """

    config: TrainConfig
    out: Path
    cache: Path | None = None
    data: TokenData | None = None
    resume: bool = True
    device: str | None = None
    checkpoints: bool = True  # False: no model/optimizer files (the book's short runs; nothing to resume)
    step: int = field(init=False, default=0)

    def __post_init__(self):
        c = self.config
        self.out = Path(self.out)
        self.cache = cache_dir(self.cache)
        self.rank = int(os.environ.get("RANK", "0"))
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        if self.world > 1 and not torch.distributed.is_initialized():
            torch.distributed.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
        if self.device is None:
            self.device = default_device(int(os.environ.get("LOCAL_RANK", "0")))  # the GPU when there is one
        if c.batch_size % self.world:
            raise ValueError(f"batch_size {c.batch_size} must be divisible by the world size {self.world}")
        if self.data is None:
            self.data = prepare_data(c.corpus, c.vocab_size, self.cache)
        if self.data.vocab_size != c.vocab_size or self.data.corpus != c.corpus:
            raise ValueError("the data passed in does not match the config's corpus / vocab_size")
        self.model = build_model(ModelSpec.of(c), c.arch, c.init, c.seed).to(self.device)
        self.loss_module = LanguageModelLoss(self.model, c.objective)
        self.train_module = self.loss_module
        if self.world > 1:
            self.train_module = torch.nn.parallel.DistributedDataParallel(self.loss_module)
        decay = [p for n, p in self.model.named_parameters() if p.ndim >= 2]
        no_decay = [p for n, p in self.model.named_parameters() if p.ndim < 2]
        self.optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": c.weight_decay},
                                            {"params": no_decay, "weight_decay": 0.0}], lr=c.lr)
        self._qk0 = [(a.query.weight.detach().clone(), a.key.weight.detach().clone())
                     for a in self_attentions(self.model)]
        self.val = validation_batches(self.data, c.objective, c.seq_len, c.batch_size, c.eval_batches)
        self.seconds = 0.0
        self._loss_sum, self._loss_n = 0.0, 0
        self.ckpt = self.cache / "checkpoints" / hashlib.sha256(str(self.out.resolve()).encode()).hexdigest()[:16]
        self.out.mkdir(parents=True, exist_ok=True)
        if self.resume and (self.ckpt / "state.json").is_file():
            self._load()
        else:
            if (self.out / "log.csv").exists() and self.rank == 0:
                (self.out / "log.csv").unlink()
            self._write_provenance()
            if self.rank == 0:
                self._log_row()

    # -- public ---------------------------------------------------------------------------------------------
    @property
    def finished(self) -> bool:
        return self.step >= self.config.steps

    def advance(self, n_steps: int | None = None, progress: bool = False) -> Run:
        """Train ``n_steps`` more steps (default: to the end), logging every ``log_every`` steps and at the end,
        and checkpointing at every log row."""
        c = self.config
        target = c.steps if n_steps is None else min(c.steps, self.step + n_steps)
        bar = None
        if progress and self.rank == 0:
            from tqdm.auto import tqdm
            bar = tqdm(total=target - self.step, desc=f"{c.arch}/{c.init}/s{c.seed}", leave=False)
        self.train_module.train()
        while self.step < target:
            t0 = time.perf_counter()
            batch = train_batch(self.data, c.objective, c.seq_len, c.batch_size, c.seed, self.step)
            rows = slice(self.rank, None, self.world)
            inputs, targets = batch.inputs[rows].to(self.device), batch.targets[rows].to(self.device)
            selected = None if batch.selected is None else batch.selected[rows].to(self.device)
            for group in self.optimizer.param_groups:
                group["lr"] = c.lr_at(self.step)
            loss_sum, n = self.train_module(inputs, targets, selected)
            loss = loss_sum / n
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.optimizer.step()
            if not math.isfinite(loss.item()):
                raise FloatingPointError(f"non-finite training loss at step {self.step} ({c.arch}/{c.init})")
            self._loss_sum += loss.item()
            self._loss_n += 1
            self.step += 1
            self.seconds += time.perf_counter() - t0
            if bar is not None:
                bar.update(1)
            if self.step % c.log_every == 0 or self.step == c.steps:
                if self.rank == 0:
                    self._log_row()
                    self._save()
                if self.world > 1:
                    torch.distributed.barrier()
        if bar is not None:
            bar.close()
        return self

    @torch.no_grad()
    def validation_loss(self) -> float:
        """Mean cross-entropy (nats/token) on the fixed validation set."""
        self.loss_module.eval()
        total, count = 0.0, 0
        for b in self.val:
            sel = None if b.selected is None else b.selected.to(self.device)
            s, n = self.loss_module(b.inputs.to(self.device), b.targets.to(self.device), sel)
            total, count = total + s.item(), count + n
        self.loss_module.train()
        return total / count

    def log(self):
        return read_log(self.out)

    # -- internals -------------------------------------------------------------------------------------------
    def _qk_change(self) -> float:
        changes = []
        for (q0, k0), a in zip(self._qk0, self_attentions(self.model)):
            changes.append(float((a.query.weight.detach() - q0).norm() / q0.norm()))
            changes.append(float((a.key.weight.detach() - k0).norm() / k0.norm()))
        return float(np.mean(changes))

    def _log_row(self) -> None:
        c = self.config
        sym, dirn = qk_scores(self.model)
        row = {"step": self.step,
               "train_loss": self._loss_sum / self._loss_n if self._loss_n else "",
               "val_loss": self.validation_loss(),
               "lr": c.lr_at(self.step - 1) if self.step else 0.0,
               "seconds": round(self.seconds, 3),
               "symmetry_mean": float(sym.mean()), "directionality_mean": float(dirn.mean()),
               "qk_change": self._qk_change()}
        row.update({f"symmetry_L{i}": float(v) for i, v in enumerate(sym)})
        row.update({f"directionality_L{i}": float(v) for i, v in enumerate(dirn)})
        row.update({"arch": c.arch, "init": c.init, "seed": c.seed, "lr_max": c.lr, "corpus": c.corpus})
        self._loss_sum, self._loss_n = 0.0, 0
        path = self.out / "log.csv"
        new = not path.exists()
        with path.open("a", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(row))
            if new:
                writer.writeheader()
            writer.writerow(row)

    def _write_provenance(self) -> None:
        if self.rank:
            return
        prov = provenance(self.config, self.data)
        prov["steps_done"] = self.step
        prov["train_seconds"] = round(self.seconds, 1)
        prov["updated"] = prov["created"]
        path = self.out / "provenance.json"
        if path.is_file():  # keep the original creation time and append the sessions that advanced the run
            old = read_record_json(path)
            prov["created"] = old.get("created", prov["created"])
            prov["sessions"] = [*old.get("sessions", []), {"commit": prov["commit"], "hardware": prov["hardware"],
                                                            "resumed_at_step": self.step, "at": prov["updated"]}]
        _atomic_json(path, prov)

    def _save(self) -> None:
        from safetensors.torch import save_file, save_model

        if not self.checkpoints:
            self._update_provenance()
            return
        self.ckpt.mkdir(parents=True, exist_ok=True)
        with replacing(self.ckpt / "model.safetensors") as tmp:
            save_model(self.model, str(tmp))
        tensors = _optimizer_tensors(self.optimizer)
        for i, (q0, k0) in enumerate(self._qk0):
            tensors[f"qk0.{i}.q"], tensors[f"qk0.{i}.k"] = q0.cpu().contiguous(), k0.cpu().contiguous()
        with replacing(self.ckpt / "optimizer.safetensors") as tmp:
            save_file(tensors, str(tmp))
        _atomic_json(self.ckpt / "state.json", {"step": self.step, "seconds": self.seconds,
                                                "config": self.config.to_dict(), "out": str(self.out.resolve())})
        self._update_provenance()

    def _update_provenance(self) -> None:
        prov_path = self.out / "provenance.json"
        if prov_path.is_file():
            prov = read_record_json(prov_path)
            prov.update(steps_done=self.step, train_seconds=round(self.seconds, 1),
                        updated=datetime.now(timezone.utc).isoformat(timespec="seconds"))
            _atomic_json(prov_path, prov)

    def _load(self) -> None:
        from safetensors.torch import load_file, load_model

        state = read_record_json(self.ckpt / "state.json", needs=("step", "seconds", "config"))
        saved = {**TrainConfig().to_dict(), **state["config"]}  # fields added later take their defaults
        saved = {k: saved[k] for k in self.config.to_dict()}
        if saved != self.config.to_dict():
            raise ValueError(f"the checkpoint in {self.ckpt} was made with another config; use a new --out folder "
                             f"or resume=False / --no-resume.\n saved: {state['config']}\n now:   "
                             f"{self.config.to_dict()}")
        load_model(self.model, str(self.ckpt / "model.safetensors"), device=str(self.device))
        flat = load_file(str(self.ckpt / "optimizer.safetensors"), device=str(self.device))
        qk0 = {k: v for k, v in flat.items() if k.startswith("qk0.")}
        self._qk0 = [(qk0[f"qk0.{i}.q"], qk0[f"qk0.{i}.k"]) for i in range(len(self._qk0))]
        _load_optimizer(self.optimizer, {k: v for k, v in flat.items() if not k.startswith("qk0.")})
        self.step, self.seconds = int(state["step"]), float(state["seconds"])
        if self.rank == 0:  # drop log rows written after the checkpoint
            path = self.out / "log.csv"
            if path.is_file():
                with path.open(newline="") as f:
                    rows = list(csv.reader(f))
                keep = [rows[0]] + [r for r in rows[1:] if int(r[0]) <= self.step]
                with path.open("w", newline="") as f:
                    csv.writer(f).writerows(keep)
            self._write_provenance()


def train(config: TrainConfig, out: str | os.PathLike, *, cache: str | os.PathLike | None = None,
          data: TokenData | None = None, resume: bool = True, progress: bool = True):
    """Train one run to ``config.steps`` (resuming if a checkpoint exists) and return its log DataFrame."""
    run = Run(config, Path(out), cache=cache, data=data, resume=resume)
    run.advance(progress=progress)
    return run.log()


def train_round_robin(configs: dict[str, TrainConfig], root: str | os.PathLike, *, chunk: int = 100,
                      cache: str | os.PathLike | None = None, resume: bool = True, progress: bool = True,
                      data: TokenData | None = None, checkpoints: bool = True):
    """Train several runs in lockstep, ``chunk`` steps each in turn, so that machine-load changes hit every variant
    alike and a stopped job leaves all runs at (nearly) the same step. ``configs`` maps a run name to its config;
    run ``name`` logs to ``root/name/``. ``checkpoints=False`` writes no model/optimizer files. Returns the concatenated logs (a ``run`` column holds the name)."""
    import pandas as pd

    datasets: dict[tuple, TokenData] = {}
    runs = {}
    for name, cfg in configs.items():
        key = (cfg.corpus, cfg.vocab_size)
        if data is not None and (data.corpus, data.vocab_size) == key:
            datasets[key] = data
        if key not in datasets:
            datasets[key] = prepare_data(cfg.corpus, cfg.vocab_size, cache)
        runs[name] = Run(cfg, Path(root) / name, cache=cache, data=datasets[key], resume=resume,
                         checkpoints=checkpoints)
    total = sum(r.config.steps - r.step for r in runs.values())
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=total, desc="steps (all runs)")
    while not all(r.finished for r in runs.values()):
        for run in runs.values():
            before = run.step
            run.advance(chunk)
            if bar is not None:
                bar.update(run.step - before)
    if bar is not None:
        bar.close()
    return pd.concat([r.log().assign(run=name) for name, r in runs.items()], ignore_index=True)
