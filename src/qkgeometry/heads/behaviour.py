"""What each attention head does on real text: behaviour scores, their chance levels, and labels. Chapter 7.

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

**Where a copying head looks** (chapter 8). The induction score asks for one offset: the key right after the
earlier occurrence of the query's token. :func:`copy_offset_profile` and :func:`repeat_offset_profile` give the
mean attention at each of several offsets ``r`` from that earlier occurrence (``r = 0``: the duplicate target;
``r = 1``: the induction target), on sequences with a copied segment and on ``r r``.

:func:`relabel` makes the labels again with every threshold scaled, and :func:`split_half_agreement` compares
labels made from two halves of the inputs. Conventions: the book's Notation page.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd
import torch

__all__ = [
    "COPY_OFFSETS",
    "DECODER_LABELS",
    "ENCODER_LABELS",
    "THRESHOLDS",
    "attention_patterns",
    "behaviour_scores",
    "copy_offset_profile",
    "label_heads",
    "pattern_scores",
    "relabel",
    "repeat_offset_profile",
    "repeat_scores",
    "repeated_random_tokens",
    "split_half_agreement",
    "uniform_scores",
]

#: Label -> the score a head must reach (a share of attention; for ``broad``, the normalised entropy).
THRESHOLDS: dict[str, float] = {"previous": 0.4, "next": 0.4, "current": 0.3, "first": 0.5, "sep": 0.5,
                                "local": 0.6, "duplicate": 0.3, "induction": 0.3, "broad": 0.75}
ENCODER_LABELS = ("previous", "next", "current", "first", "sep", "local", "duplicate", "broad")
DECODER_LABELS = ("previous", "current", "first", "local", "duplicate", "induction", "broad")
_POSITIONAL = ("previous", "next", "current", "first", "sep", "local")
#: The offsets r of a copy-offset profile: keys at ``src + r``, with ``src`` the earlier occurrence of the query's
#: token (r = 0: the duplicate target; r = 1: the induction target, the token after it).
COPY_OFFSETS = (-1, 0, 1, 2, 3)


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
    for name, value, low, high in (("skip", skip, 0, t - 3), ("window", window, 1, t - 1)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not low <= value <= high:
            raise ValueError(f"{name}: must be a whole number between {low} and {high} (T = {t}); got {value!r}.")
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
    induction input); ``repeat=False`` draws the second half afresh (the control). Chapter 7. Counts that are not
    whole numbers >= 1 (``half``, ``n_sequences``), a negative ``low`` or a prefix id outside the vocabulary raise
    ``ValueError`` naming the argument."""
    for name, value, least in (("n_sequences", n_sequences, 1), ("half", half, 1), ("vocab_size", vocab_size, 1),
                               ("low", low, 0), ("seed", seed, 0)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
            raise ValueError(f"{name}: must be a whole number >= {least}; got {value!r}.")
    bad = [t for t in prefix if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or not 0 <= t < vocab_size]
    if bad:
        raise ValueError(f"prefix: token ids must be whole numbers in [0, {vocab_size}); got {bad[0]!r}.")
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


def _offsets(offsets) -> np.ndarray:
    r = list(offsets) if not isinstance(offsets, (str, bytes)) else [offsets]
    if not r or any(isinstance(x, bool) or not isinstance(x, (int, np.integer)) for x in r) or len(set(r)) != len(r):
        raise ValueError(f"offsets: must be distinct whole numbers (at least one); got {offsets!r}.")
    return np.asarray(r, dtype=int)


def _profile(a: np.ndarray, seq: np.ndarray, query: np.ndarray, src: np.ndarray, r: np.ndarray) -> pd.DataFrame:
    keys = src[:, None] + r[None, :]
    bad = (keys < 0) | (keys > query[:, None])
    if bad.any():
        worst = r[np.flatnonzero(bad.any(0))[0]]
        raise ValueError(f"offsets: the key src + {worst} lies outside the keys a query can see (0 to the query "
                         f"itself) for some copy query; choose offsets that stay inside.")
    # (queries, heads, offsets): the attention of each copy query on each of its offset keys
    att = a[seq[:, None], :, query[:, None], keys].transpose(0, 2, 1)
    mean = att.mean(0)
    h = a.shape[1]
    chance = float(np.mean(1.0 / (query + 1.0)))  # uniform attention over the query's visible keys 0 … i
    return pd.DataFrame({"head": np.repeat(np.arange(h), len(r)), "offset": np.tile(r, h),
                         "attention": mean.reshape(-1), "chance": chance, "queries": len(query)})


def copy_offset_profile(patterns, copies, offsets: Sequence[int] = COPY_OFFSETS) -> pd.DataFrame:
    """Where a head looks when the query is inside a copied segment: per head and offset ``r``, the mean attention
    of the copy queries on the key ``src + r``.

    ``patterns``: (sequences, heads, T, T) attention patterns of one layer on sequences with a copy; ``copies``:
    (sequences, 3), each sequence's segment length ``L``, the start ``u`` of its earlier occurrence and the start
    ``v`` of the copy (``qkgeometry.training.induction_data.RepeatBatch.copies``). The queries are the positions
    ``i = v + 1 … v + L − 2`` of the copy (the copy's first token is left out, and so is its last, whose
    earlier occurrence has no successor inside the segment); ``src = i − (v − u)`` is the earlier occurrence of the
    query's token, so ``r = 0`` is chapter 7's duplicate target and ``r = 1`` its induction target. Returns one
    row per (head, offset): columns ``head``, ``offset``, ``attention`` (a share of the row's attention),
    ``chance`` (the same mean for uniform attention over each query's visible keys, the same at every offset) and
    ``queries`` (how many were averaged). Chapter 8."""
    a = _patterns(patterns)
    n, _, t, _ = a.shape
    c = np.asarray(copies)
    if c.ndim != 2 or c.shape != (n, 3) or c.dtype.kind not in "iu":
        raise ValueError(f"copies: expected whole numbers of shape ({n}, 3) (length, u, v per sequence); got "
                         f"{c.dtype} of shape {c.shape}.")
    length, u, v = (c[:, 0].astype(int), c[:, 1].astype(int), c[:, 2].astype(int))
    if np.any(length < 3) or np.any(u < 0) or np.any(u + length > v) or np.any(v + length > t):
        raise ValueError(f"copies: need L >= 3, 0 <= u, u + L <= v and v + L <= T = {t} in every row.")
    r = _offsets(offsets)
    seq = np.concatenate([np.full(int(L) - 2, k) for k, L in enumerate(length)])
    query = np.concatenate([np.arange(vk + 1, vk + L - 1) for L, vk in zip(length, v, strict=True)])
    src = query - (v - u)[seq]
    return _profile(a, seq, query, src, r)


def repeat_offset_profile(patterns, half: int, offsets: Sequence[int] = COPY_OFFSETS, offset: int = 0
                          ) -> pd.DataFrame:
    """The same profile on ``prefix(offset) + r + r`` sequences: per head and offset ``r``, the mean of
    ``A[i, i − half + r]`` over the second-half queries of :func:`repeat_scores` (``r = 0`` is its duplicate score
    and ``r = 1`` its induction score). Columns as :func:`copy_offset_profile`. Chapter 8."""
    a = _patterns(patterns)
    n, _, t, _ = a.shape
    for name, value in (("half", half), ("offset", offset)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < (name == "half"):
            raise ValueError(f"{name}: must be a whole number >= {int(name == 'half')}; got {value!r}.")
    if t != offset + 2 * half:
        raise ValueError(f"patterns: T = {t} does not match offset + 2·half = {offset + 2 * half}.")
    r = _offsets(offsets)
    i = np.arange(offset + half + 1, t)
    seq = np.repeat(np.arange(n), len(i))
    query = np.tile(i, n)
    return _profile(a, seq, query, query - half, r)


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


