"""Chapter 8's sequences: the copy, the control and the skip-bigram language."""
import numpy as np
import pytest

from qkgeometry.training.induction_data import SegmentSpec, eval_batch, stream_fingerprint, training_batch

SPEC = SegmentSpec(vocab_size=64, seq_len=32, min_segment=4, max_segment=12, skip=0.5)


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
