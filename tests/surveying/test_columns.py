"""qkgeometry.surveying.columns: what a survey store holds, and the check of the rows it is given."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from qkgeometry.surveying.columns import SURVEY_COLUMNS, check_rows


def _rows(n: int = 2, **changes) -> pd.DataFrame:
    base = {"model": "m", "family": "encoder", "component": "self", "layer": np.arange(n), "head": pd.NA,
            "symmetry": 0.5, "directionality": -0.1, "d_model": 8, "head_dim": 4, "n_heads": 2, "n_kv_heads": 2,
            "init": "pretrained", "modality": "language", "source": "/m", "revision": "abc",
            "qkgeometry_version": "1", "per": "layer", "num_std": 2.0, "qk_norm": "", "input_norm": "raw"}
    frame = pd.DataFrame({**base, **changes}, index=range(n))
    return frame[[c for c in SURVEY_COLUMNS if c in frame]]


def test_a_frame_the_store_can_hold_passes():
    check_rows(_rows())
    check_rows(_rows().assign(run="r", checkpoint="c", step=3))  # trajectory columns, one value per model


@pytest.mark.parametrize("frame, needle", [
    (_rows().drop(columns="per"), r"lacks the column\(s\) \['per'\]"),
    (_rows(symmetry=[0.5, np.nan]), "symmetry = nan in row 1 .* not a finite number"),
    (_rows(directionality=[np.inf, 0.0]), "directionality = inf in row 0"),
    (_rows(revision=[None, "abc"]), "revision is missing in row 0"),
    (_rows(layer=[0, 1.5]), "layer = 1.5 in row 1 .* whole number"),
    (_rows(n_heads=[2, -2]), "n_heads = -2 in row 1"),
    (_rows().assign(step=[1, 2]), "hold step = 1, 2; a model sits at one place of its run"),
    (_rows().assign(step=[1, None]), "hold step = 1.0 and missing"),
])
def test_what_the_store_cannot_hold_is_refused_naming_the_row_and_column(frame, needle):
    with pytest.raises(ValueError, match=needle):
        check_rows(frame)
