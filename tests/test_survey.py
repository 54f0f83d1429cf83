"""score_model: tidy frames, per layer and per head, on real offline weights."""

from __future__ import annotations

import pandas as pd
import pytest

import qkgeometry as qg
from qkgeometry.survey import COLUMNS


@pytest.fixture(scope="module")
def real_layers() -> dict[str, pd.DataFrame]:
    return {alias: qg.score_model(f"offline:{alias}", per="layer") for alias in ("minilm-l6", "smollm2-135m")}


def test_tidy_layer_frame(real_layers):
    enc = real_layers["minilm-l6"]
    assert list(enc.columns) == COLUMNS
    assert len(enc) == 6 and enc["head"].isna().all() and str(enc["head"].dtype) == "Int64"
    assert (enc["family"] == "encoder").all() and (enc["component"] == "self").all()
    assert enc[["d_model", "head_dim", "n_heads", "n_kv_heads"]].iloc[0].tolist() == [384, 32, 12, 12]
    dec = real_layers["smollm2-135m"]
    assert len(dec) == 30 and dec[["n_heads", "n_kv_heads", "head_dim"]].iloc[0].tolist() == [9, 3, 64]
    assert dec["symmetry"].between(-1, 1).all() and dec["directionality"].between(-1, 1).all()


def test_encoder_more_symmetric_than_decoder_on_real_weights(real_layers):
    """The paper's headline on our two offline models (a property of the weights, measured, not tuned)."""
    enc = real_layers["minilm-l6"]["symmetry"].median()
    dec = real_layers["smollm2-135m"]["symmetry"].median()
    print(f"median layer symmetry: MiniLM-L6 {enc:.3f}, SmolLM2-135M {dec:.3f}, difference {enc - dec:.3f}")
    assert enc - dec > 0.2


def test_per_head_rows_match_dense_scores():
    qk = qg.load_qk("offline:minilm-l6")
    heads = qg.score_model(qk, per="head")
    assert len(heads) == 6 * 12 and heads["head"].notna().all()
    layer = qk.layer(2)
    row = heads[(heads.layer == 2) & (heads["head"] == 5)].iloc[0]
    assert row.symmetry == pytest.approx(qg.symmetry_score(layer.matrix(5)), abs=1e-10)
    assert row.directionality == pytest.approx(qg.directionality_score(layer.matrix(5)), abs=1e-10)
    lay = qg.score_model(qk, per="layer")
    assert lay.loc[lay.layer == 2, "symmetry"].item() == pytest.approx(qg.symmetry_score(layer.matrix()), abs=1e-10)


def test_summarize_and_bad_per():
    frame = qg.score_model("offline:minilm-l6")
    summary = qg.summarize(frame)
    assert summary.loc[0, "n"] == 6
    assert summary.loc[0, "symmetry_median"] == pytest.approx(frame.symmetry.median())
    with pytest.raises(ValueError, match=r"`per` must be 'layer' or 'head'; got 'neuron'"):
        qg.score_model("offline:minilm-l6", per="neuron")


def test_input_norm_folded_scores_and_survey_cache_key(tmp_path):
    raw = qg.score_model("offline:minilm-l6")
    folded = qg.score_model("offline:minilm-l6", input_norm="folded")
    qk = qg.load_qk("offline:minilm-l6", input_norm="folded")
    assert folded.loc[2, "symmetry"] == pytest.approx(qg.symmetry_score(qk.layer(2).matrix()), abs=1e-10)
    assert (folded["symmetry"] - raw["symmetry"]).abs().max() > 0.01  # the gains move the scores
    with pytest.raises(ValueError, match="`input_norm` must be 'raw' or 'folded'"):
        qg.score_model("offline:minilm-l6", input_norm="yes")
    with pytest.raises(ValueError, match=r"loaded with input_norm='raw'"):
        qg.score_model(qg.load_qk("offline:minilm-l6"), input_norm="folded")
    cache = tmp_path / "s.csv"
    a = qg.survey(["offline:minilm-l6"], cache=cache, progress=False)
    b = qg.survey(["offline:minilm-l6"], cache=cache, progress=False, input_norm="folded")
    assert b.attrs["computed"] == ["offline:minilm-l6"]  # a different key: computed, not reused
    assert (a["input_norm"] == "raw").all() and (b["input_norm"] == "folded").all()
    pd.testing.assert_series_equal(b["symmetry"], folded["symmetry"], check_names=False)
    again = qg.survey(["offline:minilm-l6"], cache=cache, progress=False, input_norm="folded")
    from qkgeometry.survey import read_cache

    assert again.attrs["computed"] == [] and len(read_cache(cache)) == 12


def test_cache_written_before_input_norm_reads_as_raw(tmp_path):
    cache = tmp_path / "old.csv"
    frame = qg.survey(["offline:minilm-l6"], cache=cache, progress=False)
    frame.drop(columns="input_norm").to_csv(cache, index=False)
    again = qg.survey(["offline:minilm-l6"], cache=cache, progress=False)
    assert again.attrs["computed"] == [] and (again["input_norm"] == "raw").all()
