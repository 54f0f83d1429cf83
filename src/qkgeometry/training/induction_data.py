"""The sequences that teach a small transformer to copy from its context, and the control without copies. Chapter 8.

Every training sequence is ``seq_len`` tokens of a small **skip-bigram language**: each token is drawn uniformly
from the vocabulary, except that with probability ``skip`` it is instead ``F(token two places back)`` for a fixed
permutation ``F`` of the vocabulary (the same for every run). A model predicts those tokens best with a head that
moves the previous token forward (a previous-token head), as heads do on text. Into each sequence one segment of
random length ``L`` (``min_segment`` ≤ L ≤ ``max_segment``) starting at a random position ``u`` is written again at
a later random position ``v`` (``v ≥ u + L``). The tokens of the second copy after its first one are predictable from the
context, and only by looking back: find the earlier occurrence of the current token and read the token after it
(induction). Their mean next-token loss is the **in-context loss**. Because ``L`` and the gap ``v − u`` vary from
sequence to sequence, no fixed offset finds the copy.

The **control** (``repeat=False``) is the same language with the same lengths and positions but no copy: the
previous-token head is as useful as before, but there is no induction to learn.

Batches are a function of ``(seed, step)`` alone (:func:`training_batch`), so a run can be reproduced from its
configuration, and :func:`stream_fingerprint` hashes the batches a run reads (its provenance records it).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

__all__ = ["RepeatBatch", "SegmentSpec", "eval_batch", "stream_fingerprint", "training_batch"]


#: The random seed of the fixed map of the skip-bigram language (the same for every run: it is the "language").
LANGUAGE_SEED = 1234


@dataclass(frozen=True)
class SegmentSpec:
    """The shape of the sequences: ``vocab_size`` token types, ``seq_len`` tokens, a copied segment of
    ``min_segment`` to ``max_segment`` tokens, and the skip-bigram rate ``skip``. Chapter 8."""

    vocab_size: int = 64
    seq_len: int = 32
    min_segment: int = 4
    max_segment: int = 12
    skip: float = 0.5

    def __post_init__(self):
        if not 0.0 <= self.skip < 1.0:
            raise ValueError(f"skip: must lie in [0, 1); got {self.skip!r}.")
        for name in ("vocab_size", "seq_len", "min_segment", "max_segment"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 2:
                raise ValueError(f"{name}: must be a whole number >= 2; got {value!r}.")
        if self.min_segment > self.max_segment:
            raise ValueError(f"min_segment ({self.min_segment}) must not exceed max_segment ({self.max_segment}).")
        if 2 * self.max_segment > self.seq_len:
            raise ValueError(f"max_segment: two copies of {self.max_segment} tokens do not fit in seq_len = "
                             f"{self.seq_len}; choose max_segment <= {self.seq_len // 2}.")

    def language(self) -> np.ndarray:
        """The skip-bigram map F (a permutation of the vocabulary, the same for every run)."""
        return np.random.default_rng(LANGUAGE_SEED).permutation(self.vocab_size)


@dataclass(frozen=True)
class RepeatBatch:
    """Token ids (n, seq_len), int64, and ``predictable`` (n, seq_len), bool: True at the positions of the second
    copy after its first token (the targets that the context determines). ``copies`` (n, 3), int64: each
    sequence's segment length ``L``, the start ``u`` of the earlier occurrence and the start ``v`` of the copy (in
    the control, where the copy would have been); the key of a copy query ``i`` is ``i − (v − u)``."""

    ids: np.ndarray
    predictable: np.ndarray
    copies: np.ndarray | None = None


def _draw(spec: SegmentSpec, n: int, rng: np.random.Generator, repeat: bool) -> RepeatBatch:
    t = spec.seq_len
    ids = rng.integers(0, spec.vocab_size, size=(n, t))
    if spec.skip > 0:
        f = spec.language()
        for i in range(2, t):
            follow = rng.random(n) < spec.skip
            ids[:, i] = np.where(follow, f[ids[:, i - 2]], ids[:, i])
    predictable = np.zeros((n, t), dtype=bool)
    copies = np.zeros((n, 3), dtype=np.int64)
    for k in range(n):
        length = int(rng.integers(spec.min_segment, spec.max_segment + 1))
        u = int(rng.integers(0, t - 2 * length + 1))
        v = int(rng.integers(u + length, t - length + 1))
        if repeat:
            ids[k, v:v + length] = ids[k, u:u + length]
        predictable[k, v + 1:v + length] = True
        copies[k] = (length, u, v)
    return RepeatBatch(ids.astype(np.int64), predictable, copies)


def training_batch(spec: SegmentSpec, batch_size: int, seed: int, step: int, repeat: bool = True) -> RepeatBatch:
    """The batch of ``step`` of the run with ``seed``: the same numbers on every machine (numpy's PCG64 keyed by
    ``(seed, step)``). ``repeat=False``: the control, with the same lengths and positions and no copy. Chapter 8."""
    rng = np.random.default_rng([int(seed), int(step), 0])
    return _draw(spec, batch_size, rng, repeat)


def eval_batch(spec: SegmentSpec, n: int, seed: int, repeat: bool = True) -> RepeatBatch:
    """``n`` held-out sequences (a stream keyed apart from every training batch) for the in-context loss.
    Chapter 8."""
    rng = np.random.default_rng([int(seed), 0, 1])
    return _draw(spec, n, rng, repeat)


def stream_fingerprint(spec: SegmentSpec, batch_size: int, seed: int, steps: int, repeat: bool = True) -> str:
    """SHA-256 of every training batch of a run (ids and predictable masks, in step order). Chapter 8."""
    h = hashlib.sha256()
    for step in range(steps):
        b = training_batch(spec, batch_size, seed, step, repeat)
        h.update(np.ascontiguousarray(b.ids, dtype="<i8").tobytes())
        h.update(np.packbits(b.predictable).tobytes())
    return h.hexdigest()
