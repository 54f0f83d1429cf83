"""Shared fixtures of the training tests: a small real-text corpus and a factory of tiny run configurations."""

from __future__ import annotations

import pytest

from qkgeometry.training.config import TrainConfig

TINY = {"hidden": 32, "layers": 2, "heads": 2, "ffn": 64, "seq_len": 16, "batch_size": 8, "eval_batches": 1}


@pytest.fixture(scope="module")
def tiny_data():
    """A small real-text TokenData (300 Wikipedia leads, 600-token vocab) so loop tests take seconds."""
    pytest.importorskip("tokenizers")
    from qkgeometry.training import data as D

    docs = D.load_corpus("wikipedia")[:300]  # a declared offline part: missing or corrupt fails, never skips
    train_texts, val_texts = D.split_documents(docs, val_percent=10)
    tok = D.train_tokenizer(train_texts, vocab_size=600)
    return D.TokenData("wikipedia", tok.get_vocab_size(), D.encode_stream(tok, train_texts),
                       D.encode_stream(tok, val_texts), tok, "test")


@pytest.fixture
def tiny_config():
    """``tiny_config(data, **fields)``: a TrainConfig of a tiny model on ``data`` (10 steps, a log row per step)."""
    def make(data, **kw) -> TrainConfig:
        return TrainConfig(**{**TINY, "vocab_size": data.vocab_size, "steps": 10, "log_every": 1, **kw})
    return make
