"""Three training objectives on an equal footing: causal LM, masked LM and replaced-token detection. Chapter 3.

Chapter 3, "A fair test", trains the same small Transformer (:class:`ObjectiveTransformer`: several pre-LayerNorm
blocks of multi-head attention and an MLP) from the same initialisation on the same sequences of the offline
Wikipedia leads, once per objective:

* ``"causal"``: causal attention, next-token cross-entropy at every position (a decoder);
* ``"mlm"``: bidirectional attention, BERT's masked LM: 15% of the positions are chosen (80% replaced by [MASK], 10%
  by a random token, 10% kept) and the loss reads **only** the chosen positions (an encoder);
* ``"rtd"``: bidirectional attention, replaced-token detection in the style of ELECTRA: 15% of the positions are
  replaced by tokens drawn from the corpus' unigram distribution (a fixed generator instead of ELECTRA's small
  trained one) and a binary head predicts, **at every position**, whether the token was replaced.

Every objective sees the same (batch × sequence) input tokens at every step: equal token budgets. The batches and
the masks are pure functions of (seed, step) (:func:`qkgeometry.training.data.train_block`), so runs are paired by
seed. The query–key weights are stored per head as ``(n_heads, d, d_h)`` in the book's convention (q = W_Qᵀ x, see
the Notation page), so :meth:`ObjectiveTransformer.w_qk` is exactly ``W_Q^h W_K^hᵀ``.

:func:`attention_gradients` exposes, for every layer, what the attention of that layer saw (its LayerNorm output X)
and the exact logit gradients g = ∂L/∂a (via :func:`qkgeometry.gradients.softmax_backward`), so that chapter 3's
theorem ∂L/∂W_qk = Σ g_ij x_i x_jᵀ / √d_h can be checked against autograd on a multi-layer model and its pairs
counted by the gradient (:func:`qkgeometry.gradients.pair_energy_shares`).

:func:`record_runs` trains every (objective, seed) and writes tidy CSV logs plus ``provenance.json``; the command
``python -m qkgeometry.training.objectives --out results/ch3-objectives`` reproduces the recorded runs.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import math
import os
import platform
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import torch
from torch import nn

from ..gradients import bidirectional_mask, causal_mask, pair_energy_shares, rank1_gradient, softmax_backward
from ..scores import directionality_score, symmetry_score
from .data import SPECIAL_TOKENS, TokenData, keyed_generator, mlm_mask, train_block

if TYPE_CHECKING:
    import pandas

__all__ = [
    "OBJECTIVES",
    "LayerGradient",
    "ObjectiveBatch",
    "ObjectiveConfig",
    "ObjectiveTransformer",
    "attention_gradients",
    "compare_objectives",
    "gradient_medians",
    "gradient_rows",
    "make_objective_batch",
    "median_null_band",
    "objective_loss",
    "read_recorded",
    "record_runs",
    "run_medians",
    "score_rows",
    "train_with_objective",
    "unigram_probs",
]

#: The objectives compared in chapter 3; the first is causal, the other two bidirectional.
OBJECTIVES = ("causal", "mlm", "rtd")

Tensor = torch.Tensor


@dataclass(frozen=True)
class ObjectiveConfig:
    """Sizes and schedule of chapter 3's objective comparison. Chapter 3, "A fair test".

    ``d_mlp = 0`` drops the MLPs (attention-only blocks). The learning rate warms up linearly over ``warmup_steps``
    and stays constant after. ``mask_prob`` is the fraction of positions chosen by MLM and replaced by RTD.
    """

    d_model: int = 128
    n_layers: int = 2
    n_heads: int = 4
    d_mlp: int = 512
    seq_len: int = 64
    batch_size: int = 16
    steps: int = 400
    lr: float = 1e-3
    warmup_steps: int = 20
    weight_decay: float = 0.01
    mask_prob: float = 0.15
    log_every: int = 20
    init_std: float = 0.02  # N(0, 0.02) for every weight matrix and embedding (BERT / GPT-2 style)

    def __post_init__(self) -> None:
        for name in ("d_model", "n_layers", "n_heads", "seq_len", "batch_size", "steps", "log_every"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"`{name}` must be a positive integer; got {v!r}.")
        if self.d_model % self.n_heads:
            raise ValueError(f"`d_model` ({self.d_model}) must be divisible by `n_heads` ({self.n_heads}).")
        if isinstance(self.d_mlp, bool) or not isinstance(self.d_mlp, int) or self.d_mlp < 0:
            raise ValueError(f"`d_mlp` must be an integer >= 0 (0: attention-only blocks); got {self.d_mlp!r}.")
        if not 0.0 < self.mask_prob < 1.0:
            raise ValueError(f"`mask_prob` must lie strictly between 0 and 1; got {self.mask_prob!r}.")
        if not self.lr > 0 or self.warmup_steps < 0 or self.weight_decay < 0:
            raise ValueError("`lr` must be > 0, `warmup_steps` and `weight_decay` >= 0; got "
                             f"{self.lr!r}, {self.warmup_steps!r}, {self.weight_decay!r}.")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# ============================================================================================== the model
class _Block(nn.Module):
    """Pre-LayerNorm block: x + Attn(LN(x)), then x + MLP(LN(x)). Attention written out (not fused) so that its
    inputs and probabilities can be captured."""

    def __init__(self, cfg: ObjectiveConfig):
        super().__init__()
        d, h, dh, std = cfg.d_model, cfg.n_heads, cfg.head_dim, cfg.init_std
        self.head_dim = dh
        self.ln_attn = nn.LayerNorm(d)
        self.wq, self.wk, self.wv = (nn.Parameter(torch.randn(h, d, dh) * std) for _ in range(3))
        self.wo = nn.Parameter(torch.randn(h, dh, d) * std)
        self.mlp = None
        if cfg.d_mlp:
            self.ln_mlp = nn.LayerNorm(d)
            self.mlp = nn.Sequential(nn.Linear(d, cfg.d_mlp), nn.GELU(), nn.Linear(cfg.d_mlp, d))
            for lin in (self.mlp[0], self.mlp[2]):
                nn.init.normal_(lin.weight, std=std)
                nn.init.zeros_(lin.bias)

    def forward(self, x: Tensor, mask: Tensor, capture: list | None) -> Tensor:
        a = self.ln_attn(x)  # (B, T, d): what W_qk of this layer sees
        q = torch.einsum("btd,hdk->bhtk", a, self.wq)
        k = torch.einsum("btd,hdk->bhtk", a, self.wk)
        v = torch.einsum("btd,hdk->bhtk", a, self.wv)
        logits = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)
        probs = logits.masked_fill(~mask, float("-inf")).softmax(dim=-1)  # (B, H, T, T)
        if capture is not None:
            probs.retain_grad()
            capture.append((a, probs))
        x = x + torch.einsum("bhtk,hkd->btd", probs @ v, self.wo)
        if self.mlp is not None:
            x = x + self.mlp(self.ln_mlp(x))
        return x


class ObjectiveTransformer(nn.Module):
    """Token + learned position embeddings, ``n_layers`` pre-LN blocks, a final LayerNorm, a read-out tied to the
    token embeddings (for the causal and masked LM) and a one-logit head (for replaced-token detection).

    The same module runs causal or bidirectional attention, chosen per call. Chapter 3, "A fair test".
    """

    def __init__(self, vocab_size: int, cfg: ObjectiveConfig):
        super().__init__()
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size <= len(SPECIAL_TOKENS):
            raise ValueError(f"`vocab_size` must be an int > {len(SPECIAL_TOKENS)} (the special tokens come first); "
                             f"got {vocab_size!r}.")
        self.cfg = cfg
        self.vocab_size = vocab_size
        std = cfg.init_std
        self.tok = nn.Parameter(torch.randn(vocab_size, cfg.d_model) * std)
        self.pos = nn.Parameter(torch.randn(cfg.seq_len, cfg.d_model) * std)
        self.blocks = nn.ModuleList(_Block(cfg) for _ in range(cfg.n_layers))
        self.ln_final = nn.LayerNorm(cfg.d_model)
        self.rtd_head = nn.Linear(cfg.d_model, 1)
        nn.init.normal_(self.rtd_head.weight, std=std)
        nn.init.zeros_(self.rtd_head.bias)

    def w_qk(self) -> Tensor:
        """Per-head bilinear forms ``W_Q^h W_K^hᵀ``: float64 (n_layers, n_heads, d, d), detached."""
        with torch.no_grad():
            wq = torch.stack([b.wq for b in self.blocks]).double()
            wk = torch.stack([b.wk for b in self.blocks]).double()
            return wq @ wk.transpose(-1, -2)

    def hidden(self, ids: Tensor, causal: bool, capture: list | None = None) -> Tensor:
        """ids (B, T) -> final hidden states (B, T, d). ``capture``: a list that receives, per layer, the pair
        ``(X, P)``: attention input (B, T, d) and probabilities (B, H, T, T), the latter with ``retain_grad``."""
        t = ids.shape[1]
        if t > self.cfg.seq_len:
            raise ValueError(f"`ids` has {t} positions but the model has {self.cfg.seq_len} position embeddings.")
        mask = causal_mask(t, device=ids.device) if causal else bidirectional_mask(t, device=ids.device)
        x = self.tok[ids] + self.pos[:t]
        for block in self.blocks:
            x = block(x, mask, capture)
        return self.ln_final(x)

    def lm_logits(self, h: Tensor) -> Tensor:
        """(…, d) -> (…, vocab) through the tied token embeddings."""
        return h @ self.tok.T


# ================================================================================================= batches
class ObjectiveBatch(NamedTuple):
    """One batch of one objective. ``inputs``/``targets`` int64 (B, T). ``selected`` bool (B, T): the MLM positions
    to predict, or the RTD positions that were corrupted (None for causal). ``labels``: RTD float (B, T), 1 where
    the input token differs from the original (None otherwise)."""

    objective: str
    inputs: Tensor
    targets: Tensor
    selected: Tensor | None
    labels: Tensor | None


def _check_objective(objective: str) -> None:
    if objective not in OBJECTIVES:
        raise ValueError(f"`objective` must be one of {', '.join(OBJECTIVES)}; got {objective!r}.")


def unigram_probs(stream: np.ndarray, vocab_size: int) -> Tensor:
    """Unigram distribution of ``stream`` over the vocabulary, special tokens excluded: RTD's fixed generator."""
    counts = np.bincount(np.asarray(stream, dtype=np.int64), minlength=vocab_size).astype(np.float64)[:vocab_size]
    counts[: len(SPECIAL_TOKENS)] = 0.0
    if counts.sum() == 0:
        raise ValueError("`stream` holds no ordinary tokens (only special ones); cannot build a unigram generator.")
    return torch.from_numpy(counts / counts.sum())


def make_objective_batch(ids: Tensor, objective: str, vocab_size: int, seed: int, step: int,
                         mask_prob: float = 0.15, unigram: Tensor | None = None) -> ObjectiveBatch:
    """The batch of ``objective`` built from the clean sequences ``ids`` (B, T), a pure function of (seed, step).

    MLM masks come from :func:`qkgeometry.training.data.mlm_mask` (BERT's 80/10/10 rule). RTD needs ``unigram``
    (:func:`unigram_probs`): chosen positions get a token drawn from it; a draw equal to the original is not a
    replacement (label 0), as in ELECTRA.
    """
    _check_objective(objective)
    if objective == "causal":
        return ObjectiveBatch(objective, ids, ids, None, None)
    if objective == "mlm":
        inputs, selected = mlm_mask(ids, vocab_size, keyed_generator(seed, step, 2), prob=mask_prob)
        return ObjectiveBatch(objective, inputs, ids, selected, None)
    if unigram is None:
        raise ValueError("objective='rtd' needs `unigram`, the replacement distribution (see unigram_probs).")
    gen = keyed_generator(seed, step, 3)
    eligible = ids >= len(SPECIAL_TOKENS)
    selected = (torch.rand(ids.shape, generator=gen) < mask_prob) & eligible
    draws = torch.multinomial(unigram.float(), ids.numel(), replacement=True, generator=gen).view(ids.shape)
    inputs = torch.where(selected, draws, ids)
    return ObjectiveBatch(objective, inputs, ids, selected, (inputs != ids).float())


def objective_loss(model: ObjectiveTransformer, batch: ObjectiveBatch, capture: list | None = None) -> Tensor:
    """The scalar loss of ``batch`` (mean over the positions the objective reads). Chapter 3, "A fair test".

    causal: cross-entropy of position t predicting token t + 1, every t < T − 1; mlm: cross-entropy on the selected
    positions only; rtd: binary cross-entropy of "replaced?" at every position.
    """
    _check_objective(batch.objective)
    h = model.hidden(batch.inputs, causal=batch.objective == "causal", capture=capture)
    if batch.objective == "causal":
        logits = model.lm_logits(h[:, :-1])
        return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch.targets[:, 1:].reshape(-1))
    if batch.objective == "mlm":
        return nn.functional.cross_entropy(model.lm_logits(h[batch.selected]), batch.targets[batch.selected])
    return nn.functional.binary_cross_entropy_with_logits(model.rtd_head(h).squeeze(-1), batch.labels)


# ============================================================================================== gradients
class LayerGradient(NamedTuple):
    """What one attention layer contributes to ∂L/∂W_qk on one batch.

    ``x`` (B, T, d): the layer's attention input; ``g`` (B, H, T, T): ∂L/∂a_ij (0 where masked); ``mask`` (T, T);
    ``grad_w`` (H, d, d): Σ_b X_bᵀ G_bh X_b / √d_h, the per-head gradient w.r.t. W_qk^h (chapter 3's theorem).
    """

    x: Tensor
    g: Tensor
    mask: Tensor
    grad_w: Tensor


def attention_gradients(model: ObjectiveTransformer, batch: ObjectiveBatch) -> tuple[Tensor, list[LayerGradient]]:
    """Run ``batch`` forward and backward once; return ``(loss, per-layer LayerGradient)``.

    ``g`` comes from the attention probabilities and autograd's ∂L/∂P through
    :func:`qkgeometry.gradients.softmax_backward`, and ``grad_w`` from :func:`qkgeometry.gradients.rank1_gradient`:
    compare ``factor_gradients(grad_w, wq, wk)`` with the parameters' ``.grad`` to check the theorem. Parameter
    gradients are left in ``.grad`` (call ``model.zero_grad()`` first if they should not accumulate).
    """
    capture: list = []
    loss = objective_loss(model, batch, capture)
    loss.backward()
    t = batch.inputs.shape[1]
    mask = causal_mask(t) if batch.objective == "causal" else bidirectional_mask(t)
    out = []
    for block, (x, probs) in zip(model.blocks, capture):
        x = x.detach()
        g = softmax_backward(probs.detach(), probs.grad)
        grad_w = rank1_gradient(x[:, None], g, block.head_dim).sum(dim=0)
        out.append(LayerGradient(x, g, mask, grad_w))
    return loss.detach(), out


def gradient_rows(model: ObjectiveTransformer, batch: ObjectiveBatch, rtol: float = 1e-9) -> list[dict]:
    """Scores and pair shares of the one-step gradient of every (layer, head) on ``batch``. Chapter 3.

    Per row: ``layer, head, symmetry, directionality`` of ∂L/∂W_qk^h, ``mask_paired`` and ``effective_paired``
    (shares of Σ g_ij² on couples allowed by the mask / with both g_ij and g_ji non-zero, relative tolerance
    ``rtol``, see :func:`qkgeometry.gradients.pair_energy_shares`) and ``active_rows`` (share of queries with a
    non-zero gradient row). The model's parameter gradients are zeroed before and after.
    """
    model.zero_grad(set_to_none=True)
    _, layers = attention_gradients(model, batch)
    model.zero_grad(set_to_none=True)
    rows = []
    for li, lg in enumerate(layers):
        g = lg.g.double()
        shares = pair_energy_shares(g.transpose(0, 1), lg.mask, rtol=rtol, pool_dims=1)  # pooled over the batch
        sym = np.atleast_1d(symmetry_score(lg.grad_w.double()))
        direc = np.atleast_1d(directionality_score(lg.grad_w.double()))
        scale = g.abs().amax(dim=(-1, -2), keepdim=True)
        active = (g.abs() > rtol * scale).any(dim=-1).double().mean(dim=(0, 2))  # (H,)
        for h in range(g.shape[1]):
            rows.append({"layer": li, "head": h, "symmetry": float(sym[h]), "directionality": float(direc[h]),
                         "mask_paired": float(shares.mask_paired[h]),
                         "effective_paired": float(shares.effective_paired[h]), "active_rows": float(active[h])})
    return rows


# =============================================================================================== training
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


def train_with_objective(model: ObjectiveTransformer, data: TokenData, objective: str, cfg: ObjectiveConfig,
                         seed: int = 0, gradient_batches: int = 1) -> tuple[pandas.DataFrame, pandas.DataFrame]:
    """Train ``model`` in place with AdamW on ``objective``; return ``(scores, gradients)`` logs. Chapter 3.

    ``scores``: one row per (logged step, layer, head) from :func:`score_rows`, plus ``loss`` (the mean training
    loss since the previous log row; NaN at step 0). ``gradients``: :func:`gradient_rows` at step 0 and at the last
    step, averaged over ``gradient_batches`` batches (the batch order of seed ``10_000 + seed``: other windows of
    the training stream), with a ``step`` column. Batch ``k`` of seed ``s`` is the same for every objective.
    """
    import pandas as pd

    _check_objective(objective)
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

    def log(step: int) -> None:
        loss = float(np.mean(running)) if running else float("nan")
        rows.extend({"step": step, "loss": loss, **r} for r in score_rows(model))
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
                 gradient_batches: int) -> Iterator[tuple[pandas.DataFrame, pandas.DataFrame, float]]:
    """Train every (seed, objective), one initialisation per seed shared by all objectives; yield each run's
    ``(scores, gradients, seconds)`` as it finishes, the logs carrying ``seed`` and ``objective`` columns."""
    for objective in objectives:
        _check_objective(objective)
    for seed in seeds:
        torch.manual_seed(seed)
        init = ObjectiveTransformer(data.vocab_size, cfg)
        for objective in objectives:
            t0 = time.time()
            s, g = train_with_objective(copy.deepcopy(init), data, objective, cfg, seed, gradient_batches)
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


def gradient_medians(grads: pandas.DataFrame, layers: str | int = "all") -> pandas.DataFrame:
    """One row per (objective, seed, step): medians over heads (and ``layers``) of the one-step gradient's scores
    and pair shares (second frame of :func:`compare_objectives`). Chapter 3."""
    cols = ["symmetry", "directionality", "mask_paired", "effective_paired", "active_rows"]
    return (_layer_filter(grads, layers).groupby(["objective", "seed", "step"], sort=False)[cols].median()
            .reset_index())


def median_null_band(d: int, r: int, n_matrices: int, n_draws: int = 400, level: float = 0.95,
                     seed: int = 0) -> dict[str, tuple[float, float]]:
    """Central ``level`` range of the median of ``n_matrices`` independent Gaussian ``A Bᵀ`` (A, B of shape (d, r)),
    for both scores: the null band of a median over layers and heads at the same d. Chapter 3.

    Simulated with :func:`qkgeometry.baselines.random_factor_scores` (``n_draws`` medians). Returns
    ``{"symmetry": (low, high), "directionality": (low, high)}``.
    """
    from ..baselines import random_factor_scores

    if not 0 < level < 1:
        raise ValueError(f"`level` must lie strictly between 0 and 1; got {level!r}.")
    sims = random_factor_scores(d, r, n_matrices * n_draws, seed=seed)
    out = {}
    for score in ("symmetry", "directionality"):
        medians = np.median(sims[score].to_numpy().reshape(n_draws, n_matrices), axis=1)
        lo, hi = np.quantile(medians, [(1 - level) / 2, (1 + level) / 2])
        out[score] = (float(lo), float(hi))
    return out


# ========================================================================================= recorded runs
def _provenance(cfg: ObjectiveConfig, data: TokenData, seeds: list[int], objectives: Sequence[str],
                vocab_size: int, gradient_batches: int) -> dict:
    from .. import __version__
    from .loop import git_output

    dirty = git_output("status", "--porcelain", "--", "src")
    return {
        "experiment": "chapter 3, a fair test: causal LM vs masked LM vs replaced-token detection",
        "config": cfg.to_dict(), "seeds": seeds, "objectives": list(objectives), "vocab_size": vocab_size,
        "gradient_batches": gradient_batches,
        "data": {"corpus": data.corpus, "fingerprint": data.fingerprint, "train_tokens": len(data.train)},
        "commit": git_output("rev-parse", "HEAD"), "src_dirty": bool(dirty) if dirty is not None else None,
        "versions": {"python": platform.python_version(), "qkgeometry": __version__, "torch": torch.__version__,
                     "numpy": np.__version__},
        "hardware": {"platform": platform.platform(), "machine": platform.machine(), "cpu_count": os.cpu_count(),
                     "torch_threads": torch.get_num_threads(), "niceness": os.nice(0)},
        "command": "python -m qkgeometry.training.objectives " + " ".join(
            [f"--seeds {' '.join(map(str, seeds))}", f"--objectives {' '.join(objectives)}",
             f"--steps {cfg.steps}", f"--layers {cfg.n_layers}", f"--d-model {cfg.d_model}",
             f"--heads {cfg.n_heads}", f"--seq-len {cfg.seq_len}", f"--batch-size {cfg.batch_size}",
             f"--lr {cfg.lr:g}", f"--log-every {cfg.log_every}", f"--vocab-size {vocab_size}",
             f"--gradient-batches {gradient_batches}", "--out <folder>"]),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def record_runs(out: str | os.PathLike, cfg: ObjectiveConfig, seeds: Sequence[int],
                objectives: Sequence[str] = OBJECTIVES, vocab_size: int = 8000, gradient_batches: int = 2,
                cache: str | os.PathLike | None = None, progress: bool = True) -> Path:
    """Train every (seed, objective) and write ``scores.csv``, ``gradients.csv`` and ``provenance.json`` into
    ``out``. Chapter 3 reads these files when it shows recorded runs.

    Each run's rows are appended as soon as it finishes, and ``provenance.json`` records ``runs_done`` and the wall
    time, so a partial folder is readable (and labelled as partial) while the rest is still training.
    """

    from .data import prepare_data

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    data = prepare_data("wikipedia", vocab_size=vocab_size, cache=cache)
    seeds = [int(s) for s in seeds]
    prov = _provenance(cfg, data, seeds, objectives, vocab_size, gradient_batches)
    prov.update(runs_total=len(seeds) * len(objectives), runs_done=0, wall_seconds=0.0, run_seconds={})
    for name in ("scores.csv", "gradients.csv"):
        (out / name).unlink(missing_ok=True)
    t_start = time.time()

    def write_prov() -> None:
        tmp = out / "provenance.json.tmp"
        tmp.write_text(json.dumps(prov, indent=2) + "\n")
        tmp.replace(out / "provenance.json")

    write_prov()
    for s, g, seconds in _paired_runs(data, cfg, seeds, objectives, gradient_batches):
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
    """``(scores, gradients, provenance)`` of a folder written by :func:`record_runs`. Chapter 3."""
    import pandas as pd

    folder = Path(folder)
    prov_path = folder / "provenance.json"
    if not prov_path.is_file():
        raise FileNotFoundError(f"{folder}: no provenance.json; record the runs with "
                                "`python -m qkgeometry.training.objectives --out {folder}`.")
    prov = json.loads(prov_path.read_text())
    return pd.read_csv(folder / "scores.csv"), pd.read_csv(folder / "gradients.csv"), prov


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m qkgeometry.training.objectives --out FOLDER [...]``: record chapter 3's objective runs."""
    defaults = ObjectiveConfig()
    p = argparse.ArgumentParser(prog="python -m qkgeometry.training.objectives",
                                description="Train causal LM, masked LM and replaced-token detection from the same "
                                            "initialisations on the offline Wikipedia leads; write CSV logs.")
    p.add_argument("--out", required=True, help="folder for scores.csv, gradients.csv and provenance.json")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    p.add_argument("--objectives", nargs="+", choices=OBJECTIVES, default=list(OBJECTIVES))
    p.add_argument("--steps", type=int, default=defaults.steps)
    p.add_argument("--layers", type=int, default=defaults.n_layers)
    p.add_argument("--d-model", type=int, default=defaults.d_model)
    p.add_argument("--heads", type=int, default=defaults.n_heads)
    p.add_argument("--seq-len", type=int, default=defaults.seq_len)
    p.add_argument("--batch-size", type=int, default=defaults.batch_size)
    p.add_argument("--lr", type=float, default=defaults.lr)
    p.add_argument("--log-every", type=int, default=defaults.log_every)
    p.add_argument("--vocab-size", type=int, default=8000)
    p.add_argument("--gradient-batches", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    try:
        cfg = ObjectiveConfig(d_model=args.d_model, n_layers=args.layers, n_heads=args.heads, seq_len=args.seq_len,
                              batch_size=args.batch_size, steps=args.steps, lr=args.lr, log_every=args.log_every)
        if args.threads < 1 or args.gradient_batches < 1:
            raise ValueError("`--threads` and `--gradient-batches` must be >= 1.")
    except ValueError as err:
        p.error(str(err))
    torch.set_num_threads(args.threads)
    record_runs(args.out, cfg, args.seeds, args.objectives, args.vocab_size, args.gradient_batches)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
