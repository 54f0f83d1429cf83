"""Chapter 8's sequences: the copy, the control and the skip-bigram language."""
import numpy as np
import pytest

from qkgeometry.training.induction_data import SegmentSpec, eval_batch, stream_fingerprint, training_batch

SPEC = SegmentSpec(vocab_size=64, seq_len=32, min_segment=4, max_segment=12, skip=0.5)
#: SHA-256 of the first three batches of training seed 0 at chapter 8's default shape, hashed before the copy
#: positions were exposed
FINGERPRINT_S0_3 = "634c9868cbc2e1fc17e5b5985f60815522197fa883ad0d9513c355713206c593"


def _copies(ids, predictable):
    """For each sequence, whether the predictable run equals an earlier segment shifted back."""
    ok = []
    for row, mask in zip(ids, predictable, strict=True):
        where = np.flatnonzero(mask)
        v, length = where[0] - 1, len(where) + 1
        ok.append(any(np.array_equal(row[v:v + length], row[u:u + length]) for u in range(v - length + 1)))
    return np.array(ok)


def test_the_copy_is_there_and_the_control_has_none():
    b = training_batch(SPEC, 64, seed=3, step=5)
    assert _copies(b.ids, b.predictable).all()
    c = training_batch(SPEC, 64, seed=3, step=5, repeat=False)
    assert np.array_equal(b.predictable, c.predictable)          # same lengths and positions
    assert _copies(c.ids, c.predictable).mean() < 0.1


def test_segment_lengths_stay_in_range():
    b = training_batch(SPEC, 256, seed=0, step=0)
    lengths = b.predictable.sum(1) + 1
    assert lengths.min() >= 4 and lengths.max() <= 12


def test_skip_bigram_rate_outside_the_copy():
    b = training_batch(SPEC, 512, seed=1, step=0, repeat=False)
    f = SPEC.language()
    hits = (b.ids[:, 2:] == f[b.ids[:, :-2]]).mean()
    assert 0.45 < hits < 0.58                                      # 0.5 + chance 1/64
    plain = training_batch(SegmentSpec(skip=0.0), 512, seed=1, step=0, repeat=False)
    assert (plain.ids[:, 2:] == f[plain.ids[:, :-2]]).mean() < 0.05


def test_batches_depend_on_seed_and_step_only():
    a, b = training_batch(SPEC, 8, 2, 7), training_batch(SPEC, 8, 2, 7)
    assert np.array_equal(a.ids, b.ids)
    assert not np.array_equal(a.ids, training_batch(SPEC, 8, 2, 8).ids)
    assert not np.array_equal(eval_batch(SPEC, 8, 2).ids, a.ids)
    assert stream_fingerprint(SPEC, 8, 2, 3) == stream_fingerprint(SPEC, 8, 2, 3)
    assert stream_fingerprint(SPEC, 8, 2, 3) != stream_fingerprint(SPEC, 8, 2, 3, repeat=False)


@pytest.mark.parametrize("kw, match", [({"skip": 1.0}, "skip"), ({"max_segment": 17}, "fit"),
                                       ({"min_segment": 9, "max_segment": 8}, "exceed")])
def test_bad_shapes_are_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        SegmentSpec(**kw)


@pytest.mark.parametrize("repeat", [True, False])
def test_copies_name_the_segment_and_where_it_is_copied(repeat):
    b = training_batch(SPEC, 64, seed=3, step=5, repeat=repeat)
    assert b.copies.shape == (64, 3) and b.copies.dtype == np.int64
    for row, mask, (length, u, v) in zip(b.ids, b.predictable, b.copies, strict=True):
        assert SPEC.min_segment <= length <= SPEC.max_segment and u >= 0 and u + length <= v <= SPEC.seq_len - length
        assert np.flatnonzero(mask).tolist() == list(range(v + 1, v + length))
        if repeat:
            assert np.array_equal(row[v:v + length], row[u:u + length])
    # the copy positions are the same with and without the copy (the control keeps lengths and positions)
    assert np.array_equal(b.copies, training_batch(SPEC, 64, seed=3, step=5, repeat=not repeat).copies)


def test_the_drawn_numbers_are_the_ones_recorded_before_copies_were_exposed():
    """Exposing the copy positions changed no drawn number: the SHA-256 of the first batches of the default
    shape, training seed 0, as hashed before."""
    assert stream_fingerprint(SegmentSpec(min_segment=8, max_segment=16), 32, 0, 3) == FINGERPRINT_S0_3
