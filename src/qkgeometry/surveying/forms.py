"""The raw and the γ-folded bilinear forms of the same models side by side (chapter 4, "Which bilinear form"): two
surveys of one list of sources, joined layer by layer."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd

__all__ = ["input_norm_comparison"]


def input_norm_comparison(sources: Iterable[Any], cache: Any = None, progress: bool = False) -> pd.DataFrame:
    """Layer scores of the raw and the γ-folded bilinear forms side by side, one row per (model, component, layer).

    Runs :func:`qkgeometry.survey` twice (``input_norm="raw"`` and ``"folded"``, same ``sources`` and ``cache``)
    and joins the layer rows. Columns: ``model, family, component, layer, symmetry_raw, symmetry_folded,
    directionality_raw, directionality_folded``. A model whose normalisation gain is not known fails in the folded
    survey and is left out (``frame.attrs["failures"]`` lists it). Chapter 4 ("Which bilinear form").
    """
    from .scoring import survey

    keys = ["model", "family", "component", "layer"]
    entries = list(sources)
    raw = survey(entries, per="layer", cache=cache, progress=progress, input_norm="raw")
    folded = survey(entries, per="layer", cache=cache, progress=progress, input_norm="folded")
    failures = pd.concat([raw.attrs["failures"], folded.attrs["failures"]], ignore_index=True)
    raw.attrs, folded.attrs = {}, {}
    out = raw[[*keys, "symmetry", "directionality"]].merge(
        folded[[*keys, "symmetry", "directionality"]], on=keys, suffixes=("_raw", "_folded"), sort=False)
    out = out[[*keys, "symmetry_raw", "symmetry_folded", "directionality_raw", "directionality_folded"]]
    out.attrs["failures"] = failures
    return out
