"""Score whole models into tidy pandas DataFrames.

One row per (model, component, layer, head) with the columns of :data:`COLUMNS`; ``head`` is ``<NA>`` on
layer-level rows (the layer matrix ``M_layer = Σ_h W_Q^h W_K^{g(h)ᵀ}``, DESIGN.md §1). Weights are streamed one
layer at a time and scored with the factored formulas, so no d × d matrix is ever formed.
"""

from __future__ import annotations

from typing import Any, Iterable, Literal

import pandas as pd

from .loading import QKLayer, QKModel, load_qk
from .scores import scores_factored

__all__ = ["COLUMNS", "score_model", "score_layer", "summarize"]

COLUMNS = ["model", "family", "component", "layer", "head", "symmetry", "directionality", "d_model", "head_dim",
           "n_heads", "n_kv_heads"]

Per = Literal["layer", "head"]


def score_layer(layer: QKLayer, per: Per = "layer", num_std: float = 2.0) -> list[dict[str, Any]]:
    """Scores of one layer: one dict for ``per="layer"``, one per query head for ``per="head"``."""
    if per == "layer":
        s = scores_factored(*layer.factors(None), num_std=num_std)
        return [{"layer": layer.index, "head": pd.NA, "symmetry": s.symmetry, "directionality": s.directionality}]
    s = scores_factored(layer.wq, layer.wk, num_std=num_std)  # batched over heads: (n_heads, d, head_dim)
    return [{"layer": layer.index, "head": h, "symmetry": float(s.symmetry[h]),
             "directionality": float(s.directionality[h])} for h in range(layer.n_heads)]


def score_model(source: Any, per: Per = "layer", num_std: float = 2.0, progress: bool = False) -> pd.DataFrame:
    """Score every attention block of ``source`` (anything :func:`qkgeometry.load_qk` accepts, or a QKModel).

    Returns the tidy frame described in the module docstring. Chapter 2 ("Per head or per layer?") and
    chapter 4 use it.
    """
    if per not in ("layer", "head"):
        raise ValueError(f"`per` must be 'layer' or 'head'; got {per!r}.")
    model = source if isinstance(source, QKModel) else load_qk(source)
    rows = []
    layers: Iterable[QKLayer] = model
    if progress:
        from tqdm.auto import tqdm

        layers = tqdm(model, total=len(model), desc=model.name, unit="layer")
    for layer in layers:
        dims = model.dims(layer.component)
        for row in score_layer(layer, per, num_std):
            rows.append({"model": model.name, "family": model.family, "component": layer.component, **row,
                         "d_model": dims.d_model, "head_dim": dims.head_dim, "n_heads": dims.n_heads,
                         "n_kv_heads": dims.n_kv_heads})
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame["head"] = frame["head"].astype("Int64")
    return frame


def summarize(frame: pd.DataFrame) -> pd.DataFrame:
    """Median and interquartile range of both scores per (model, family, component)."""
    def q(p: float):
        return lambda s: s.quantile(p)

    grouped = frame.groupby(["model", "family", "component"], sort=False)
    out = grouped.agg(n=("symmetry", "size"),
                      symmetry_median=("symmetry", "median"), symmetry_q25=("symmetry", q(0.25)),
                      symmetry_q75=("symmetry", q(0.75)),
                      directionality_median=("directionality", "median"),
                      directionality_q25=("directionality", q(0.25)), directionality_q75=("directionality", q(0.75)))
    return out.reset_index()
