"""What each attention head does on real text, and whether its geometry predicts it. Book chapter 7.

**Behaviour scores** follow TransformerLens's ``head_detector``: the mean attention a head puts on the positions
that define a pattern, averaged over query rows (each row of a pattern sums to 1, so this is the share of the
row's attention that lands there). With ``A[i, j]`` the attention of query i on key j:

* ``previous``: ``A[i, i−1]``; ``next`` (encoders): ``A[i, i+1]``; ``current``: ``A[i, i]``;
* ``first`` (the attention sink; [CLS] in a BERT): ``A[i, 0]``; ``sep`` (encoders): attention on [SEP];
* ``local``: the mass on ``0 < |i − j| ≤ window``;
* ``duplicate`` and ``induction``, on repeated random sequences ``t_1 … t_n t_1 … t_n``: for a query in the second
  half at position i, ``A[i, i−n]`` (the earlier copy of the same token) and ``A[i, i−n+1]`` (the token after it);
* ``broad``: the row's entropy divided by the log of its number of keys (1 is uniform attention).

Rows before ``skip`` (default 4) are left out: a decoder's first rows have one to four keys and attend there by
necessity.

**Nulls and labels.** Each positional score has a chance level, the score of uniform attention over the same keys
(:func:`uniform_scores`); duplicate and induction scores have the score of the same head on a control where the
second half is fresh random tokens (nothing repeats). A head gets label L when its score reaches the threshold
``THRESHOLDS[L]`` *and* at least ``null_factor`` (default 3) times its null; ``broad`` needs its threshold only.
A head can carry several labels, or none.

**Geometry.** :func:`head_geometry` computes for every head the symmetry and directionality of ``W_qk`` (with the
rotation-null z of the symmetry, chapter 6), the positive-energy share and trace z of ``M_s``, for rotary models
the same trace at offset Δ = −1 (``M(−1) = W_Q R(−1) W_Kᵀ``), and where there is a query bias the size of the
key-only logit term ``b_qᵀ W_Kᵀ x_j``. :func:`separation` turns "labelled heads vs the rest" into an AUC with a
bootstrap interval over heads and a permutation test.

**Identities and empirical hypotheses.** At offset 0, ``xᵀ M x = xᵀ M_s x`` (``xᵀ M_n x ≡ 0``): a head's
current-token logit is set by ``M_s`` alone, and a duplicate token's (the same token met again) nearly so. The
hypotheses about those heads (kind ``"identity"``) check that the algebra shows in the numbers; the others (kind
``"empirical"``) test readings of the split. :func:`hypothesis_family` applies Holm's correction within each kind.

**Beyond the weights.** :func:`input_geometry` scores each head's form on the inputs it really meets, the
symmetry ``η`` of ``X W_qk Xᵀ`` (rows of X: the layer's attention inputs, tokens), and the effective rank of its
skew part; :func:`split_half_agreement` compares labels made from two halves of the inputs, and
:func:`threshold_sensitivity` re-labels with every threshold scaled. Conventions: the book's Notation page.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from .analyses.nulls import rotation_null_moments_factored
from .analyses.rotary import RopeSpec, offset_factors
from .analyses.spectrum import spectral_summary
from .scores import directionality_score_factored, symmetry_score_factored
from .stats import Interval, format_p, verdict

__all__ = [
    "DECODER_LABELS",
    "ENCODER_LABELS",
    "HYPOTHESES",
    "THRESHOLDS",
    "Hypothesis",
    "Separation",
    "attention_patterns",
    "behaviour_scores",
    "head_factors",
    "head_geometry",
    "hypothesis_family",
    "input_geometry",
    "label_heads",
    "pattern_scores",
    "rank_correlation",
    "relabel",
    "repeat_scores",
    "repeated_random_tokens",
    "run_hypotheses",
    "separation",
    "separation_verdict",
    "skew_effective_rank",
    "split_half_agreement",
    "threshold_sensitivity",
    "uniform_scores",
]

#: Label -> the score a head must reach (a share of attention; for ``broad``, the normalised entropy).
THRESHOLDS: dict[str, float] = {"previous": 0.4, "next": 0.4, "current": 0.3, "first": 0.5, "sep": 0.5,
                                "local": 0.6, "duplicate": 0.3, "induction": 0.3, "broad": 0.75}
ENCODER_LABELS = ("previous", "next", "current", "first", "sep", "local", "duplicate", "broad")
DECODER_LABELS = ("previous", "current", "first", "local", "duplicate", "induction", "broad")
_POSITIONAL = ("previous", "next", "current", "first", "sep", "local")


def _patterns(patterns) -> np.ndarray:
    a = np.asarray(patterns, dtype=np.float64)
    if a.ndim == 3:
        a = a[None]
    if a.ndim != 4 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"patterns: expected (sequences, heads, T, T) or (heads, T, T) attention patterns; got "
                         f"shape {a.shape}.")
    if not np.all(np.isfinite(a)):
        raise ValueError("patterns: contain NaN or infinite values.")
    return a


def pattern_scores(patterns, causal: bool, skip: int = 4, window: int = 3, sep_positions=None) -> pd.DataFrame:
    """Positional behaviour scores of each head from attention ``patterns`` (sequences, heads, T, T) on text.

    ``causal``: a decoder (no ``next`` score, entropies over the i + 1 visible keys); ``skip``: query rows left
    out at the start (and, for encoders, the [SEP] row at the end); ``sep_positions``: per sequence, the key
    position of [SEP] (encoders; default the last). Returns one row per head with the columns of
    :data:`ENCODER_LABELS` (or the positional ones of :data:`DECODER_LABELS`), averaged over sequences. Chapter 7.
    """
    a = _patterns(patterns)
    n, h, t, _ = a.shape
    if not 0 <= skip < t - 2:
        raise ValueError(f"skip: must be between 0 and T - 3 = {t - 3}; got {skip}.")
    rows = np.arange(skip, t if causal else t - 1)
    i = rows
    out = {"previous": a[:, :, i, i - 1].mean(-1) if skip >= 1 else a[:, :, i[1:], i[1:] - 1].mean(-1),
           "current": a[:, :, i, i].mean(-1),
           "first": a[:, :, i, 0].mean(-1)}
    offsets = np.arange(t)[None, :] - i[:, None]
    near = (np.abs(offsets) > 0) & (np.abs(offsets) <= window)
    out["local"] = (a[:, :, i, :] * near).sum(-1).mean(-1)
    if causal:
        keys = i + 1.0
    else:
        out["next"] = a[:, :, i, i + 1].mean(-1)
        sep = np.full(n, t - 1) if sep_positions is None else np.asarray(sep_positions, dtype=int)
        out["sep"] = np.stack([a[s][:, i, sep[s]].mean(-1) for s in range(n)])
        keys = np.full(len(i), float(t))
    p = a[:, :, i, :]
    ent = -(np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)).sum(-1)
    out["broad"] = (ent / np.log(keys)).mean(-1)
    order = [c for c in (ENCODER_LABELS if not causal else DECODER_LABELS) if c in out]
    frame = pd.DataFrame({c: out[c].mean(0) for c in order})
    frame.insert(0, "head", np.arange(h))
    return frame


def uniform_scores(T: int, causal: bool, skip: int = 4, window: int = 3) -> dict[str, float]:
    """Chance level of each positional score: the score of uniform attention over the visible keys. Chapter 7."""
    if causal:
        u = np.tril(np.ones((T, T)))
    else:
        u = np.ones((T, T))
    u /= u.sum(-1, keepdims=True)
    row = pattern_scores(u[None, None], causal, skip, window).iloc[0]
    return {k: float(v) for k, v in row.items() if k != "head"}


def repeated_random_tokens(vocab_size: int, n_sequences: int, half: int, seed: int = 0, low: int = 1000,
                           prefix: Sequence[int] = (), repeat: bool = True) -> torch.Tensor:
    """Sequences ``prefix + r + r`` with ``r`` ``half`` random token ids in ``[low, vocab_size)`` (the standard
    induction input); ``repeat=False`` draws the second half afresh (the control). Chapter 7."""
    if vocab_size <= low + half:
        raise ValueError(f"vocab_size: must exceed low + half = {low + half}; got {vocab_size}.")
    rng = np.random.default_rng(seed)
    first = np.stack([rng.choice(np.arange(low, vocab_size), size=half, replace=False) for _ in range(n_sequences)])
    rng2 = np.random.default_rng(seed + 1)
    second = first if repeat else np.stack([rng2.choice(np.arange(low, vocab_size), size=half, replace=False)
                                            for _ in range(n_sequences)])
    pre = np.broadcast_to(np.asarray(prefix, dtype=np.int64), (n_sequences, len(prefix)))
    return torch.as_tensor(np.concatenate([pre, first, second], axis=1))


def repeat_scores(patterns, half: int, offset: int = 0) -> pd.DataFrame:
    """Duplicate and induction scores of each head from patterns on ``prefix(offset) + r + r`` sequences:
    queries i in the second half, ``A[i, i − half]`` and ``A[i, i − half + 1]`` (the last query of the first copy
    has no successor to look at and is left out of both). Chapter 7."""
    a = _patterns(patterns)
    t = a.shape[-1]
    if t != offset + 2 * half:
        raise ValueError(f"patterns: T = {t} does not match offset + 2·half = {offset + 2 * half}.")
    i = np.arange(offset + half + 1, t)
    frame = pd.DataFrame({"duplicate": a[:, :, i, i - half].mean(-1).mean(0),
                          "induction": a[:, :, i, i - half + 1].mean(-1).mean(0)})
    frame.insert(0, "head", np.arange(a.shape[1]))
    return frame


def attention_patterns(model, input_ids: torch.Tensor, layers: Iterable[int] | None = None,
                       batch_size: int = 8) -> dict[int, np.ndarray]:
    """``{layer: (sequences, heads, T, T)}`` attention patterns of a ``transformers`` model (eager attention) on
    ``input_ids``, float64. Chapter 7."""
    keep = None if layers is None else set(layers)
    out: dict[int, list[np.ndarray]] = {}
    with torch.no_grad():
        for start in range(0, len(input_ids), batch_size):
            ids = input_ids[start:start + batch_size]
            kwargs = {"use_cache": False} if "CausalLM" in type(model).__name__ else {}
            res = model(ids, output_attentions=True, **kwargs)
            for layer, att in enumerate(res.attentions):
                if keep is None or layer in keep:
                    out.setdefault(layer, []).append(att.detach().to(torch.float64).numpy())
    return {k: np.concatenate(v) for k, v in out.items()}


def behaviour_scores(model, text_ids: torch.Tensor, repeat_ids: torch.Tensor, control_ids: torch.Tensor,
                     half: int, offset: int, causal: bool, sep_positions=None, skip: int = 4,
                     batch_size: int = 8) -> pd.DataFrame:
    """Every behaviour score of every head of ``model``: positional scores on ``text_ids``, duplicate and
    induction on ``repeat_ids`` and their nulls on ``control_ids`` (columns ``duplicate_null``,
    ``induction_null``). One row per (layer, head). Chapter 7."""
    frames = []
    text = attention_patterns(model, text_ids, batch_size=batch_size)
    rep = attention_patterns(model, repeat_ids, batch_size=batch_size)
    ctl = attention_patterns(model, control_ids, batch_size=batch_size)
    for layer in sorted(text):
        f = pattern_scores(text[layer], causal, skip, sep_positions=sep_positions)
        r = repeat_scores(rep[layer], half, offset)
        c = repeat_scores(ctl[layer], half, offset)
        f["duplicate"], f["induction"] = r["duplicate"].to_numpy(), r["induction"].to_numpy()
        f["duplicate_null"], f["induction_null"] = c["duplicate"].to_numpy(), c["induction"].to_numpy()
        f.insert(0, "layer", layer)
        frames.append(f)
    return pd.concat(frames, ignore_index=True)


def label_heads(scores: pd.DataFrame, nulls: dict[str, float], causal: bool, null_factor: float = 3.0,
                thresholds: dict[str, float] | None = None) -> pd.DataFrame:
    """Boolean label columns ``is_<label>`` and a ``labels`` string ("previous+local", "none") for each head.

    ``scores``: from :func:`behaviour_scores`; ``nulls``: positional chance levels (:func:`uniform_scores`); the
    duplicate and induction nulls are the per-head ``*_null`` columns. A head gets a label when its score is at
    least the threshold and at least ``null_factor`` times its null (``broad``: the threshold alone). Chapter 7.
    """
    thr = {**THRESHOLDS, **(thresholds or {})}
    out = scores.copy()
    names = DECODER_LABELS if causal else ENCODER_LABELS
    for name in names:
        if name not in out:
            raise ValueError(f"scores: missing the column {name!r}; compute it with behaviour_scores.")
        value = out[name].to_numpy()
        ok = value >= thr[name]
        if name in ("duplicate", "induction"):
            ok &= value >= null_factor * out[f"{name}_null"].to_numpy()
        elif name != "broad":
            ok &= value >= null_factor * nulls[name]
        out[f"is_{name}"] = ok
    flags = out[[f"is_{n}" for n in names]].to_numpy()
    out["labels"] = ["+".join(n for n, f in zip(names, row, strict=True) if f) or "none" for row in flags]
    return out


# ------------------------------------------------------------------------------------------------ geometry
def head_factors(model) -> Iterable[tuple[int, int, np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]]:
    """``(layer, head, W_Q, W_K, b_q, b_k)`` of every head of a BERT-, MPNet-, Llama- or Qwen2-style
    ``transformers`` model, in float64, with ``W_Q``, ``W_K`` of shape (d, d_h) (KV heads repeated, h // group).
    Chapter 7."""
    mods = [m for m in model.modules() if (hasattr(m, "q_proj") and hasattr(m, "k_proj"))
            or (hasattr(m, "query") and isinstance(m.query, torch.nn.Linear))
            or (hasattr(m, "q") and isinstance(m.q, torch.nn.Linear) and hasattr(m, "k"))]
    cfg = model.config
    n_heads = cfg.num_attention_heads
    n_kv = getattr(cfg, "num_key_value_heads", None) or n_heads
    hd = getattr(cfg, "head_dim", None) or cfg.hidden_size // n_heads
    for layer, m in enumerate(mods):
        q, k = ((m.q_proj, m.k_proj) if hasattr(m, "q_proj") else (m.query, m.key) if hasattr(m, "query")
                else (m.q, m.k))
        qw, kw = (t.weight.detach().to(torch.float64).numpy() for t in (q, k))
        qb = None if q.bias is None else q.bias.detach().to(torch.float64).numpy()
        kb = None if k.bias is None else k.bias.detach().to(torch.float64).numpy()
        for h in range(n_heads):
            g = h // (n_heads // n_kv)
            sq, sk = slice(h * hd, (h + 1) * hd), slice(g * hd, (g + 1) * hd)
            yield (layer, h, qw[sq].T, kw[sk].T, None if qb is None else qb[sq], None if kb is None else kb[sk])


def _trace_z(a: np.ndarray, b: np.ndarray) -> float:
    m_norm = math.sqrt(float(np.trace((a.T @ a) @ (b.T @ b))))
    return math.sqrt(a.shape[0]) * float(np.sum(a * b)) / m_norm


def head_geometry(model, spec_of_layer=None) -> pd.DataFrame:
    """Geometric scores of every head of a ``transformers`` model: ``symmetry``, ``symmetry_z`` (against the
    rotation null, chapter 6), ``directionality``, ``positive_share`` and ``trace_z`` of ``M_s`` (``√d tr(M)/‖M‖``:
    large and positive when ``x_iᵀ M x_i`` is), ``trace_z_m1`` and ``trace_gain_m1`` (``trace_z`` of ``M(−1)``
    and its excess over Δ = 0; rotary models only, else NaN) and ``key_bias`` (``‖W_K b_q‖ √d / ‖M‖``: the key-only
    logit term against a typical bilinear one; NaN without a query bias). ``spec_of_layer``: layer ->
    :class:`~qkgeometry.analyses.rotary.RopeSpec` or None (default: read from the model's config). Chapter 7.
    """
    from .head_surgery import model_rope_spec

    if spec_of_layer is None:
        def spec_of_layer(layer, _cache={}):  # noqa: B006 - a per-call cache
            if layer not in _cache:
                _cache[layer] = model_rope_spec(model, layer)
            return _cache[layer]
    rows = []
    for layer, head, wq, wk, bq, _ in head_factors(model):
        d = wq.shape[0]
        null = rotation_null_moments_factored(wq, wk)
        s = float(symmetry_score_factored(wq, wk))
        summary = spectral_summary(wq, wk)
        spec: RopeSpec | None = spec_of_layer(layer)
        tz = float(summary.trace_z)
        if spec is not None:
            a1, b1 = offset_factors(wq, wk, spec, -1)
            tz1 = _trace_z(a1, b1)
        else:
            tz1 = float("nan")
        m_norm = math.sqrt(float(np.trace((wq.T @ wq) @ (wk.T @ wk))))
        kb = float("nan") if bq is None else float(np.linalg.norm(wk @ bq)) * math.sqrt(d) / m_norm
        rows.append({"layer": layer, "head": head, "symmetry": s,
                     "symmetry_z": (s - float(null.mean)) / math.sqrt(float(null.variance)),
                     "directionality": float(directionality_score_factored(wq, wk)),
                     "positive_share": float(summary.positive_share), "trace_z": tz, "trace_z_m1": tz1,
                     "trace_gain_m1": tz1 - tz, "key_bias": kb})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------------------ separation
@dataclass(frozen=True)
class Separation:
    """How well one score separates heads with a label from the rest: ``auc`` = P(score of a labelled head >
    score of another head) (ties count ½), a percentile bootstrap interval resampling each group, and a
    two-sided permutation p-value of "AUC = ½"."""

    auc: float
    low: float
    high: float
    p_value: float
    n_label: int
    n_rest: int
    level: float = 0.95

    def format(self, digits: int = 2) -> str:
        return f"{self.auc:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"

    @property
    def interval(self) -> Interval:
        """``AUC − ½`` as an :class:`~qkgeometry.stats.Interval` over heads (for :func:`qkgeometry.stats.verdict`)."""
        return Interval(self.auc - 0.5, self.low - 0.5, self.high - 0.5, self.n_label + self.n_rest, self.level,
                        "bootstrap-percentile", "head")


def _auc(pos: np.ndarray, neg: np.ndarray) -> np.ndarray:
    """AUC of each row of (k, n_pos) against (k, n_neg)."""
    both = np.concatenate([pos, neg], axis=-1)
    from scipy.stats import rankdata

    ranks = rankdata(both, axis=-1)
    n1, n0 = pos.shape[-1], neg.shape[-1]
    return (ranks[..., :n1].sum(-1) - n1 * (n1 + 1) / 2) / (n1 * n0)


def separation(values, is_label, n_resamples: int = 2000, level: float = 0.95, seed: int = 0,
               strata=None) -> Separation | None:
    """AUC of ``values`` for heads with ``is_label`` against the rest, with a bootstrap interval over heads and
    a permutation test. ``strata`` (e.g. the model of each head): values are first turned into within-stratum
    percentiles and permutations stay inside strata (a pooled test over models of different widths). Returns
    None when either group has fewer than 2 heads or no value is finite. Chapter 7."""
    x = np.asarray(values, dtype=np.float64)
    y = np.asarray(is_label, dtype=bool)
    if x.shape != y.shape:
        raise ValueError(f"values and is_label: must have the same length; got {x.shape} and {y.shape}.")
    ok = np.isfinite(x)
    x, y = x[ok], y[ok]
    st = None if strata is None else np.asarray(strata)[ok]
    if st is not None:
        from scipy.stats import rankdata

        x = x.copy()
        for s in np.unique(st):
            sel = st == s
            x[sel] = rankdata(x[sel]) / sel.sum()
    if y.sum() < 2 or (~y).sum() < 2:
        return None
    pos, neg = x[y], x[~y]
    auc = float(_auc(pos[None], neg[None])[0])
    rng = np.random.default_rng(seed)
    boot = _auc(pos[rng.integers(0, len(pos), (n_resamples, len(pos)))],
                neg[rng.integers(0, len(neg), (n_resamples, len(neg)))])
    alpha = (1 - level) / 2
    low, high = (float(v) for v in np.quantile(boot, [alpha, 1 - alpha]))
    perms = np.empty(n_resamples)
    for r in range(n_resamples):
        if st is None:
            yy = rng.permutation(y)
        else:
            yy = y.copy()
            for s in np.unique(st):
                sel = np.flatnonzero(st == s)
                yy[sel] = rng.permutation(y[sel])
        perms[r] = _auc(x[yy][None], x[~yy][None])[0]
    p = float((1 + np.sum(np.abs(perms - 0.5) >= abs(auc - 0.5) - 1e-12)) / (1 + n_resamples))
    return Separation(auc, low, high, p, int(y.sum()), int((~y).sum()), level)


def separation_verdict(sep: Separation | None, larger: str, smaller: str) -> str:
    """One sentence from a :class:`Separation`, by :func:`qkgeometry.stats.verdict` on ``AUC − ½``. Chapter 7."""
    if sep is None:
        return "not testable: fewer than 2 heads in a group"
    return (verdict(sep.interval, larger, smaller, subject="AUC − ½", digits=2)
            + f"; AUC {sep.format()}, permutation {format_p(sep.p_value)}, {sep.n_label} labelled vs "
              f"{sep.n_rest} other heads")


@dataclass(frozen=True)
class Hypothesis:
    """One hypothesis, written before looking: heads with ``label`` have a ``direction`` ("higher" / "lower")
    ``score`` than the other heads, in ``models`` ("rotary", "bias", "all"). ``kind``: ``"identity"`` when the
    behaviour is set by ``M_s`` alone at offset 0 (the test checks the algebra), else ``"empirical"``."""

    key: str
    label: str
    score: str
    direction: str
    models: str
    statement: str
    kind: str = "empirical"


#: The chapter's hypotheses, in the order they are written on the page.
HYPOTHESES: tuple[Hypothesis, ...] = (
    Hypothesis("H1", "duplicate", "positive_share", "higher", "all",
               "Duplicate-token heads need xᵢᵀ M xⱼ large when xⱼ ≈ xᵢ, which only Mₛ "
               "sets: Mₛ should carry mostly positive eigen-energy.", "identity"),
    Hypothesis("H2", "duplicate", "trace_z", "higher", "all",
               "Duplicate-token heads have a large positive trace of M (xᵀ M x = xᵀ Mₛ x large "
               "on average).", "identity"),
    Hypothesis("H3", "current", "trace_z", "higher", "all",
               "Current-token heads have a large positive trace of M (a token's logit on itself is "
               "xᵀ Mₛ x).", "identity"),
    Hypothesis("H4", "current", "symmetry", "higher", "all",
               "Current-token heads compare a token with itself, which only Mₛ can do: their W_qk is more "
               "symmetric.", "identity"),
    Hypothesis("H5", "previous", "trace_gain_m1", "higher", "rotary",
               "Previous-token heads in rotary models show it at Δ = −1: tr M(−1) "
               "exceeds tr M(0)."),
    Hypothesis("H6", "previous", "symmetry", "lower", "all",
               "Previous-token heads are order-sensitive: their W_qk is less symmetric (the intuition that "
               "skew means 'attend by order')."),
    Hypothesis("H7", "first", "directionality", "lower", "all",
               "Sink heads are column-dominated: directionality below that of other heads."),
    Hypothesis("H8", "first", "key_bias", "higher", "bias",
               "In models with a query bias, sink heads carry a larger key-only bias term."),
    Hypothesis("H9", "routing", "symmetry", "lower", "all",
               "Routing heads (previous, next, induction) are more skew than the rest, as the routing/filtering "
               "reading of the split claims."),
)


def run_hypotheses(table: pd.DataFrame, hypotheses: Sequence[Hypothesis] = HYPOTHESES,
                    n_resamples: int = 2000, seed: int = 0, pooled_only: bool = False) -> pd.DataFrame:
    """Every hypothesis on every model and pooled over models: AUC, interval, permutation p, group sizes and the
    verdict sentence. ``table``: one row per head with a ``model`` column, ``is_<label>`` columns (``is_routing``
    is derived: previous, next or induction), geometric scores, and ``rotary`` / ``has_bias`` flags.
    ``pooled_only``: skip the per-model rows (a hypothesis met in one model only keeps that model's row).
    Chapter 7."""
    t = table.copy()
    routing = [c for c in ("is_previous", "is_next", "is_induction") if c in t]
    t["is_routing"] = t[routing].fillna(False).astype(bool).any(axis=1)
    rows = []
    for hyp in hypotheses:
        sel = t
        if hyp.models == "rotary":
            sel = t[t["rotary"]]
        elif hyp.models == "bias":
            sel = t[t["has_bias"]]
        col = f"is_{hyp.label}"
        groups = [(m, g) for m, g in sel.groupby("model", sort=False)] + [("pooled", sel)]
        if pooled_only and sel["model"].nunique() >= 2:
            groups = [("pooled", sel)]
        for name, g in groups:
            if col not in g or g[col].isna().all():
                continue
            lab = g[col].fillna(False).astype(bool).to_numpy()
            strata = g["model"].to_numpy() if name == "pooled" else None
            if name == "pooled" and g["model"].nunique() < 2:
                continue
            sep = separation(g[hyp.score].to_numpy(), lab, n_resamples, seed=seed, strata=strata)
            if hyp.direction == "higher":
                verdict_text = separation_verdict(sep, "confirmed (higher)", "reversed (lower)")
            else:
                verdict_text = separation_verdict(sep, "reversed (higher)", "confirmed (lower)")
            rows.append({"hypothesis": hyp.key, "kind": hyp.kind, "label": hyp.label, "score": hyp.score,
                         "expected": hyp.direction,
                         "model": name, "n_label": int(lab.sum()), "n_rest": int((~lab).sum()),
                         "auc": np.nan if sep is None else sep.auc, "low": np.nan if sep is None else sep.low,
                         "high": np.nan if sep is None else sep.high,
                         "p_value": np.nan if sep is None else sep.p_value, "verdict": verdict_text})
    return pd.DataFrame(rows)


def hypothesis_family(results: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """One row per hypothesis (pooled over models where it was tested in two or more, else its one model) with
    the permutation p-value adjusted by Holm's method within its kind (``"identity"`` and ``"empirical"`` are two
    families), and ``holds``: the AUC lies on the stated side of ½ and the Holm-adjusted p is below ``alpha``.
    ``results``: from :func:`run_hypotheses`. Chapter 7."""
    from .stats import holm_adjusted

    rows = []
    for _, g in results.groupby("hypothesis", sort=False):
        pooled = g[g["model"] == "pooled"]
        rows.append((pooled if len(pooled) else g).iloc[0])
    fam = pd.DataFrame(rows).reset_index(drop=True)
    fam["p_holm"] = np.nan
    for kind in fam["kind"].unique():
        sel = (fam["kind"] == kind) & fam["p_value"].notna()
        if sel.any():
            fam.loc[sel, "p_holm"] = holm_adjusted(fam.loc[sel, "p_value"].to_numpy())
    side = np.where(fam["expected"] == "higher", fam["auc"] > 0.5, fam["auc"] < 0.5)
    fam["holds"] = side & (fam["p_holm"] < alpha)
    return fam


def relabel(table: pd.DataFrame, factor: float = 1.0, null_factor: float = 3.0) -> pd.DataFrame:
    """The labels of a recorded ``heads.csv`` table (one or more models) made again with every threshold of
    :data:`THRESHOLDS` multiplied by ``factor`` (the chance levels are the table's ``<label>_chance`` columns).
    Chapter 7."""
    thresholds = {k: v * factor for k, v in THRESHOLDS.items()}
    out = []
    for _, t in table.groupby("model", sort=False):
        causal = "next" not in t or t["next"].isna().all()
        names = DECODER_LABELS if causal else ENCODER_LABELS
        nulls = {n: float(t[f"{n}_chance"].iloc[0]) for n in names if f"{n}_chance" in t}
        cols = [c for c in t.columns if not (c.startswith("is_") or c == "labels")]
        out.append(label_heads(t[cols], nulls, causal, null_factor, thresholds))
    return pd.concat(out, ignore_index=True)


def threshold_sensitivity(table: pd.DataFrame, factors: Sequence[float] = (0.5, 0.75, 1.0, 1.25, 1.5),
                          hypotheses: Sequence[Hypothesis] = HYPOTHESES, n_resamples: int = 500,
                          seed: int = 0) -> pd.DataFrame:
    """Every hypothesis, pooled, with the labels made at each threshold ``factor``: one row per (factor,
    hypothesis) with the columns of :func:`hypothesis_family` and the factor. ``table``: recorded heads of
    several models with the ``rotary`` / ``has_bias`` flags. Chapter 7."""
    rows = []
    for f in factors:
        res = run_hypotheses(relabel(table, f), hypotheses, n_resamples, seed, pooled_only=True)
        fam = hypothesis_family(res)
        fam.insert(0, "factor", f)
        rows.append(fam)
    return pd.concat(rows, ignore_index=True)


def split_half_agreement(first: pd.DataFrame, second: pd.DataFrame, labels: Sequence[str]) -> pd.DataFrame:
    """How well two labellings of the same heads, each from one half of the inputs, agree: per label, the heads
    labelled in each half, in both, Cohen's κ of the two label columns and the Spearman correlation of the two
    halves' scores over heads. ``first``, ``second``: :func:`label_heads` frames of the same heads in the same
    order. Chapter 7."""
    from scipy.stats import spearmanr

    if len(first) != len(second):
        raise ValueError(f"first and second: must label the same heads; got {len(first)} and {len(second)} rows.")
    rows = []
    for name in labels:
        a, b = first[f"is_{name}"].to_numpy(bool), second[f"is_{name}"].to_numpy(bool)
        po = float(np.mean(a == b))
        pe = float(a.mean() * b.mean() + (1 - a.mean()) * (1 - b.mean()))
        kappa = float("nan") if pe >= 1 else (po - pe) / (1 - pe)
        rho = spearmanr(first[name], second[name]).statistic
        rows.append({"label": name, "n_first": int(a.sum()), "n_second": int(b.sum()), "n_both": int((a & b).sum()),
                     "agreement": po, "kappa": kappa, "score_rho": float(rho)})
    return pd.DataFrame(rows)


def skew_effective_rank(wq: np.ndarray, wk: np.ndarray) -> float:
    """Effective rank of the skew part ``M_n = (M − Mᵀ)/2`` of ``M = W_Q W_Kᵀ``: ``exp(H(p))`` with ``p`` its
    singular values divided by their sum (Roy & Vetterli). Computed from the factors
    ``M_n = ½ [W_Q, W_K] [W_K, −W_Q]ᵀ`` (two thin QRs and a (2 d_h)² SVD). ``wq``, ``wk``: (d, d_h). Chapter 7."""
    a = np.concatenate([wq, wk], axis=1) / 2
    b = np.concatenate([wk, -wq], axis=1)
    _, ra = np.linalg.qr(a)
    _, rb = np.linalg.qr(b)
    sv = np.linalg.svd(ra @ rb.T, compute_uv=False)
    m_norm = math.sqrt(max(float(np.trace((wq.T @ wq) @ (wk.T @ wk))), 0.0))  # ‖M‖: rounding sets the floor
    sv = sv[sv > 1e-10 * m_norm]
    if sv.size == 0:
        return 0.0
    p = sv / sv.sum()
    return float(np.exp(-np.sum(p * np.log(p))))


def _attention_inputs(model, input_ids: torch.Tensor) -> list[torch.Tensor]:
    """The hidden states each attention module receives (what its Q and K projections read), in layer order."""
    mods = [m for m in model.modules() if (hasattr(m, "q_proj") and hasattr(m, "k_proj"))
            or (hasattr(m, "query") and isinstance(m.query, torch.nn.Linear))
            or (hasattr(m, "q") and isinstance(m.q, torch.nn.Linear) and hasattr(m, "k"))]
    seen: dict[int, torch.Tensor] = {}

    def hook(i):
        def grab(_m, args, kwargs):
            x = kwargs.get("hidden_states", args[0] if args else None)
            seen[i] = x.detach().to(torch.float64)
        return grab

    hooks = [m.register_forward_pre_hook(hook(i), with_kwargs=True) for i, m in enumerate(mods)]
    try:
        with torch.no_grad():
            kwargs = {"use_cache": False} if "CausalLM" in type(model).__name__ else {}
            model(input_ids, **kwargs)
    finally:
        for h in hooks:
            h.remove()
    return [seen[i] for i in range(len(mods))]


def input_geometry(model, input_ids: torch.Tensor) -> pd.DataFrame:
    """Per head, the form on the inputs it meets and the shape of its skew part. ``input_symmetry``:
    ``η = Σ_s (‖S_s‖² − ‖S_n‖²) / Σ_s ‖S‖²`` for ``S = X W_qk Xᵀ`` (T × T; X the layer's attention inputs of one
    sequence, rows = tokens; offset 0, no rotary, no bias), summed over the sequences of ``input_ids``
    (sequences, T); ``skew_effective_rank`` (:func:`skew_effective_rank`) and ``skew_rank_share`` (that over the
    largest possible rank, ``min(d, 2 d_h)``). One row per (layer, head). Chapter 7."""
    inputs = _attention_inputs(model, input_ids)
    rows = []
    for layer, head, wq, wk, _, _ in head_factors(model):
        x = inputs[layer].numpy()
        q, k = x @ wq, x @ wk  # (sequences, T, d_h)
        sm = q @ np.swapaxes(k, 1, 2)  # (sequences, T, T)
        total = float(np.sum(sm * sm))
        cross = float(np.sum(sm * np.swapaxes(sm, 1, 2)))
        er = skew_effective_rank(wq, wk)
        rows.append({"layer": layer, "head": head, "input_symmetry": cross / total if total > 0 else float("nan"),
                     "skew_effective_rank": er,
                     "skew_rank_share": er / min(wq.shape[0], 2 * wq.shape[1])})
    return pd.DataFrame(rows)


def rank_correlation(x, y, n_resamples: int = 2000, level: float = 0.95, seed: int = 0,
                     unit: str = "head") -> Interval:
    """Spearman's ρ of ``x`` and ``y`` (pairs with a non-finite value dropped) with a percentile bootstrap
    interval over pairs. Chapter 7."""
    from scipy.stats import spearmanr

    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    ok = np.isfinite(a) & np.isfinite(b)
    a, b = a[ok], b[ok]
    if len(a) < 4:
        raise ValueError(f"x and y: need at least 4 finite pairs; got {len(a)}.")
    rho = float(spearmanr(a, b).statistic)
    rng = np.random.default_rng(seed)
    boot = np.empty(n_resamples)
    for r in range(n_resamples):
        i = rng.integers(0, len(a), len(a))
        boot[r] = spearmanr(a[i], b[i]).statistic
    boot = boot[np.isfinite(boot)]
    alpha = (1 - level) / 2
    low, high = (float(v) for v in np.quantile(boot, [alpha, 1 - alpha]))
    return Interval(rho, low, high, len(a), level, "bootstrap-percentile", unit)
