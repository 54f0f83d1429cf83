"""Chapter 8's recorded runs: a small transformer trained on sequences with a copied segment, its heads scored as it
trains and their behaviour measured at the same steps.

Every ``log_every`` steps (every ``dense_every`` steps before ``dense_until``, where the previous-token head forms,
and at the last step) a run records, for every head:

* **geometry**, scored live from the weights the model holds by :class:`qkgeometry.integrations.LiveScorer`
  (symmetry and directionality of each head's form, and of each layer's summed form), plus the energies of the
  form's two parts and the scores of its position, token and composition tables
  (:func:`qkgeometry.heads.form_views.view_scores`);
* **behaviour**, with chapter 7's scores: the previous-token score on random tokens (its chance level: uniform
  attention over the visible keys), the duplicate and induction scores on repeated random tokens ``r r`` and their
  null on the control ``r r'`` (second half fresh), all from :mod:`qkgeometry.heads.behaviour`;
* the **in-context loss**: the next-token loss on the predictable tokens of held-out sequences with a copy (for the
  control run too: it never sees a copy in training), next to the loss on the other tokens.

A run writes ``log.csv`` (one row per logged step and head), ``steps.csv`` (one row per logged step and layer:
the scores of the layer's summed form and the losses) and ``provenance.json`` (configuration, commit, versions, hardware and the
SHA-256 of its training batches) into its folder. ``qkgeometry train-induction`` runs it.
"""

from __future__ import annotations

import json
import os
import platform
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from .config import InductionConfig
from .induction_data import SegmentSpec, eval_batch, stream_fingerprint, training_batch

__all__ = ["Probes", "induction_command", "induction_provenance", "make_probes", "measure", "train_induction"]

#: Significant digits kept in the recorded CSV files.
_DIGITS = 6


class Probes:
    """The fixed inputs a run measures behaviour on (the same at every step): ``text`` random tokens (previous-token
    score), ``repeat`` and ``control`` (``r r`` and ``r r'``, induction and its null), ``held_out`` sequences with a
    copy (in-context loss)."""

    def __init__(self, text: torch.Tensor, repeat: torch.Tensor, control: torch.Tensor, held_out_ids: torch.Tensor,
                 held_out_mask: torch.Tensor, half: int):
        self.text, self.repeat, self.control, self.half = text, repeat, control, half
        self.held_out_ids, self.held_out_mask = held_out_ids, held_out_mask


def training_step(model: Any, opt: torch.optim.Optimizer, spec: SegmentSpec, cfg: InductionConfig, step: int) -> float:
    """One AdamW step of the run of ``cfg`` on its batch of ``step`` (next-token loss on every position); returns
    the loss before the step. Every retraining of a recorded run goes through it, so all see the same updates.
    Chapter 8."""
    batch = training_batch(spec, cfg.batch_size, cfg.seed, step, cfg.data == "repeat")
    ids = torch.as_tensor(batch.ids)
    loss = model(ids, labels=ids).loss
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss.item()


def make_probes(cfg: InductionConfig) -> Probes:
    """The probes of a run: drawn from a stream that depends on the data's shape only (not on the training seed), so every
    run is measured on the same sequences. Chapter 8."""
    from ..heads.behaviour import repeated_random_tokens

    spec = SegmentSpec(cfg.vocab_size, cfg.seq_len, cfg.min_segment, cfg.max_segment, cfg.skip)
    n, half = cfg.eval_sequences, cfg.seq_len // 2
    rng = np.random.default_rng([8, cfg.vocab_size, cfg.seq_len])
    text = torch.as_tensor(rng.integers(0, cfg.vocab_size, size=(n, cfg.seq_len)), dtype=torch.int64)
    repeat = repeated_random_tokens(cfg.vocab_size, n, half, seed=8, low=0)
    control = repeated_random_tokens(cfg.vocab_size, n, half, seed=8, low=0, repeat=False)
    held = eval_batch(spec, n, seed=8, repeat=True)
    return Probes(text, repeat, control, torch.as_tensor(held.ids), torch.as_tensor(held.predictable), half)


def _losses(model: Any, probes: Probes) -> dict[str, float]:
    with torch.no_grad():
        logits = model(probes.held_out_ids).logits[:, :-1]
        nll = -torch.log_softmax(logits.double(), -1).gather(-1, probes.held_out_ids[:, 1:, None])[..., 0]
    mask = probes.held_out_mask[:, 1:]
    return {"in_context_loss": float(nll[mask].mean()), "other_loss": float(nll[~mask].mean())}


def measure(model: Any, probes: Probes, step: int, scorers: tuple[Any, Any]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Everything a run records at ``step``: ``(heads, layers)`` frames (see the module's notes). ``scorers``: two
    :class:`~qkgeometry.integrations.LiveScorer` of the run, ``per="head"`` and ``per="layer"``. Chapter 8."""
    from ..heads.behaviour import attention_patterns, pattern_scores, repeat_scores, uniform_scores
    from ..heads.form_views import view_scores

    per_head, per_layer = scorers
    per_head.score(model, step)
    per_layer.score(model, step)
    geometry = per_head.latest[["layer", "head", "symmetry", "directionality"]].astype({"head": int})
    layers = per_layer.latest[["layer", "symmetry", "directionality"]].reset_index(drop=True)
    model.eval()
    text = attention_patterns(model, probes.text, batch_size=len(probes.text))
    rep = attention_patterns(model, probes.repeat, batch_size=len(probes.repeat))
    ctl = attention_patterns(model, probes.control, batch_size=len(probes.control))
    t = probes.text.shape[1]
    chance = uniform_scores(t, causal=True)["previous"]
    frames = []
    for layer in sorted(text):
        f = pattern_scores(text[layer], causal=True)[["head", "previous", "current", "first"]]
        r, c = repeat_scores(rep[layer], probes.half), repeat_scores(ctl[layer], probes.half)
        f = f.assign(layer=layer, previous_chance=chance, duplicate=r["duplicate"].to_numpy(),
                     duplicate_null=c["duplicate"].to_numpy(), induction=r["induction"].to_numpy(),
                     induction_null=c["induction"].to_numpy())
        frames.append(f)
    behaviour = pd.concat(frames, ignore_index=True)
    views = view_scores(model)
    layer_views = views[views["head"].isna()].drop(columns="head")
    views = views.dropna(subset=["head"]).astype({"head": int})
    heads = geometry.merge(views, on=["layer", "head"]).merge(behaviour, on=["layer", "head"])
    layers = layers.merge(layer_views, on="layer")
    losses = _losses(model, probes)
    model.train()
    heads.insert(0, "step", int(step))
    layers = layers.assign(**losses)
    layers.insert(0, "step", int(step))
    return heads, layers


def induction_command(cfg: InductionConfig, threads: int) -> str:
    """The ``qkgeometry train-induction`` command that reproduces a run (its folder as ``<folder>``)."""
    import dataclasses

    from .config import option_flag

    parts = ["qkgeometry train-induction"]
    for f in dataclasses.fields(cfg):
        parts.append(f"{option_flag(f)} {getattr(cfg, f.name)}")
    return " ".join([*parts, f"--threads {threads}", "--out <folder>"])


def induction_provenance(cfg: InductionConfig, threads: int) -> dict:
    """Configuration, code version, package versions, hardware and data fingerprint of a run. Chapter 8."""
    import transformers

    from .._version import __version__
    from .loop import git_output

    spec = SegmentSpec(cfg.vocab_size, cfg.seq_len, cfg.min_segment, cfg.max_segment, cfg.skip)
    dirty = git_output("status", "--porcelain", "--", "src")
    return {
        "experiment": "chapter 8, heads watched as they learn their jobs",
        "config": cfg.to_dict(), "run": cfg.name,
        "model": "transformers GPT2LMHeadModel, eager attention, no dropout, untied unembedding, query/key biases "
                 "held at zero" + ("" if cfg.d_mlp else ", MLPs replaced by zero (attention only)"),
        "data": {"kind": cfg.data, "training_batches_sha256": stream_fingerprint(spec, cfg.batch_size, cfg.seed,
                                                                                 cfg.steps, cfg.data == "repeat"),
                 "probes": "seed 8, the same for every run"},
        "commit": git_output("rev-parse", "HEAD"), "src_dirty": bool(dirty) if dirty is not None else None,
        "versions": {"python": platform.python_version(), "qkgeometry": __version__, "torch": torch.__version__,
                     "transformers": transformers.__version__, "numpy": np.__version__, "pandas": pd.__version__},
        "hardware": {"platform": platform.platform(), "machine": platform.machine(), "cpu_count": os.cpu_count(),
                     "torch_threads": threads, "niceness": os.nice(0)},
        "command": induction_command(cfg, threads),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def _write(frame: pd.DataFrame, path: Path) -> None:
    from .._files import replacing

    with replacing(path) as tmp:
        frame.to_csv(tmp, index=False, float_format=f"%.{_DIGITS}g")


def train_induction(cfg: InductionConfig, out: str | os.PathLike, threads: int = 1, progress: bool = False
                    ) -> pd.DataFrame:
    """Train one run of chapter 8 and record it in the folder ``out`` (``log.csv``, ``steps.csv``,
    ``provenance.json``; the CSV files are rewritten at every logged step, so a stopped run keeps what it
    measured). Returns the ``steps`` frame. Chapter 8."""
    from ..integrations import LiveScorer
    from .induction_model import build_model

    torch.set_num_threads(threads)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    prov = induction_provenance(cfg, threads)
    spec = SegmentSpec(cfg.vocab_size, cfg.seq_len, cfg.min_segment, cfg.max_segment, cfg.skip)
    model = build_model(cfg.vocab_size, cfg.seq_len, cfg.d_model, cfg.n_layers, cfg.n_heads, bool(cfg.d_mlp),
                        cfg.seed, cfg.init_std)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    probes = make_probes(cfg)
    scorers = (LiveScorer(None, cfg.log_every, per="head", run=cfg.name),
               LiveScorer(None, cfg.log_every, per="layer", run=cfg.name))
    for scorer in scorers:
        scorer.start(seed=cfg.seed)
    heads, steps, losses = [], [], []
    start = time.perf_counter()
    for step in range(cfg.steps + 1):
        if cfg.logged(step):
            h, s = measure(model, probes, step, scorers)
            s["train_loss"] = float(np.mean(losses)) if losses else float("nan")
            s["seconds"] = time.perf_counter() - start
            heads.append(h)
            steps.append(s)
            losses = []
            _write(pd.concat(heads, ignore_index=True), out / "log.csv")
            _write(pd.concat(steps, ignore_index=True), out / "steps.csv")
            if progress:
                print(f"{cfg.name} step {step}: in-context loss {s['in_context_loss'].iloc[0]:.3f}", flush=True)
        if step == cfg.steps:
            break
        losses.append(training_step(model, opt, spec, cfg, step))
    prov["wall_seconds"] = round(time.perf_counter() - start, 1)
    prov["steps_done"] = cfg.steps
    (out / "provenance.json").write_text(json.dumps(prov, indent=2) + "\n", encoding="utf-8")
    return pd.concat(steps, ignore_index=True)


def snapshots(cfg: InductionConfig, steps: list[int], layer: int, head: int, probe: str = "text",
              index: int = 0, threads: int = 1) -> dict[str, np.ndarray]:
    """Train the run of ``cfg`` again (the same initialisation and batches) and keep, at each of ``steps``, one
    head's attention pattern on one probe sequence (``probe``: "text" or "repeat"; ``index``: which one) and the
    symmetric and skew parts of its logits there, ``X M_s Xᵀ/√d_h`` and ``X M_n Xᵀ/√d_h`` (X: the block's
    LayerNorm output). Returns arrays ``steps``, ``ids``, ``pattern``, ``sym``, ``skew`` (one slice per step) and
    ``symmetry`` (the head's symmetry score at each step, to compare with the recorded log). Chapter 8, the
    intuition figure."""
    from ..decomposition import decompose
    from ..heads.behaviour import attention_patterns
    from ..readers import load_qk
    from ..scores import symmetry_score
    from .induction_model import attention_inputs, build_model

    if probe not in ("text", "repeat"):
        raise ValueError(f"probe: 'text' or 'repeat'; got {probe!r}.")
    wanted = sorted({int(s) for s in steps})
    if not wanted or wanted[0] < 0 or wanted[-1] > cfg.steps:
        raise ValueError(f"steps: whole numbers between 0 and {cfg.steps}; got {steps!r}.")
    torch.set_num_threads(threads)
    spec = SegmentSpec(cfg.vocab_size, cfg.seq_len, cfg.min_segment, cfg.max_segment, cfg.skip)
    model = build_model(cfg.vocab_size, cfg.seq_len, cfg.d_model, cfg.n_layers, cfg.n_heads, bool(cfg.d_mlp),
                        cfg.seed, cfg.init_std)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    probes = make_probes(cfg)
    ids = (probes.text if probe == "text" else probes.repeat)[index: index + 1]
    out: dict[str, list] = {"pattern": [], "sym": [], "skew": [], "symmetry": []}
    for step in range(wanted[-1] + 1):
        if step in wanted:
            model.eval()
            pattern = attention_patterns(model, ids, layers=[layer])[layer][0, head]
            x = attention_inputs(model, ids)[layer][0].to(torch.float64).numpy()
            with load_qk(model) as qk:
                m = np.asarray(qk.layer(layer).matrix(head=head), dtype=np.float64)
                scale = qk.head_dim ** -0.5
            ms, mn = decompose(m)
            out["pattern"].append(pattern)
            out["sym"].append(scale * x @ ms @ x.T)
            out["skew"].append(scale * x @ mn @ x.T)
            out["symmetry"].append(float(symmetry_score(m)))
            model.train()
        if step == wanted[-1]:
            break
        training_step(model, opt, spec, cfg, step)
    return {"steps": np.asarray(wanted), "ids": ids[0].numpy(), **{k: np.asarray(v) for k, v in out.items()}}
