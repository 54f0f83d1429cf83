"""One model's scores without pandas: the rows of each layer (or head), their median and interquartile range per
attention stack, and the table ``qkgeometry score`` prints.

:func:`qkgeometry.score_model` builds its tidy frame from :func:`layer_rows` (the one scoring path); the command
line, which only prints six numbers per stack, reads a local model, scores it and prints the table through
:func:`summary_rows` and :func:`summary_table` without importing pandas or the survey machinery, so that it starts
about as fast as numpy imports (``benchmarks/bench_score_start.py`` measures it).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from .errors import NonFiniteWeights, ZeroWeights
from .scores import layer_scores

__all__ = ["layer_rows", "model_rows", "summary_rows", "summary_table"]

SCORES = ("symmetry", "directionality")


def layer_rows(layer: Any, per: str = "layer", num_std: float = 2.0) -> list[dict[str, Any]]:
    """Scores of one :class:`~qkgeometry.QKLayer`: one dict for ``per="layer"`` (``head`` None), one per query head
    for ``per="head"``. All heads in a few batched float64 products (:func:`qkgeometry.scores.layer_scores`), on the
    layer's device; the KV heads are never expanded per query head."""
    try:
        s = layer_scores(layer.wq, layer.wk_kv, num_std, heads=per == "head", layer=per == "layer")
    except ValueError as e:  # name the model's layer (the kernel counts within the stack it was given); keep
        kind = type(e) if isinstance(e, (NonFiniteWeights, ZeroWeights)) else ValueError  # what kind of error
        raise kind(f"{layer.component} layer {layer.index}: {e}") from e
    if per == "layer":
        return [{"layer": layer.index, "head": None, "symmetry": s.layer.symmetry,
                 "directionality": s.layer.directionality}]
    sym, dirn = np.atleast_1d(s.heads.symmetry), np.atleast_1d(s.heads.directionality)
    return [{"layer": layer.index, "head": h, "symmetry": float(sym[h]), "directionality": float(dirn[h])}
            for h in range(layer.n_heads)]


def model_rows(model: Any, per: str = "layer", num_std: float = 2.0, progress: bool = False) -> list[dict[str, Any]]:
    """:func:`layer_rows` of every layer of an opened :class:`~qkgeometry.QKModel`, each with its ``component``,
    read one layer at a time (the next one read while this one is scored); ``progress`` shows a bar over layers."""
    from ._threads import read_ahead

    layers = read_ahead(model.iter_layers(convert=False))
    if progress:
        from tqdm.auto import tqdm

        layers = tqdm(layers, total=len(model), desc=model.name, unit="layer", leave=True)
    return [{"component": layer.component, **row} for layer in layers for row in layer_rows(layer, per, num_std)]


def summary_rows(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Median and quartiles (linear interpolation, as :func:`qkgeometry.summarize`) of both scores per component of
    ``rows`` (dicts with ``component``, ``symmetry``, ``directionality``), in the order components first appear:
    ``component, n, symmetry_median, symmetry_q25, symmetry_q75, directionality_median, ...``.

    >>> summary_rows([{"component": "self", "symmetry": s, "directionality": 0.0} for s in (0.1, 0.2, 0.6)])[0]["symmetry_q25"]
    0.15000000000000002
    """
    grouped: dict[str, dict[str, list[float]]] = {}
    for row in rows:
        values = grouped.setdefault(str(row["component"]), {score: [] for score in SCORES})
        for score in SCORES:
            values[score].append(float(row[score]))
    out = []
    for component, values in grouped.items():
        summary: dict[str, Any] = {"component": component, "n": len(values["symmetry"])}
        for score in SCORES:
            median, q25, q75 = _quantiles(values[score], (0.5, 0.25, 0.75))
            summary.update({f"{score}_median": float(median), f"{score}_q25": float(q25),
                            f"{score}_q75": float(q75)})
        out.append(summary)
    return out


def _quantiles(values: Sequence[float], qs: Sequence[float]) -> list[float]:
    """``np.quantile(values, qs)`` with its default (linear) interpolation, without the import of ``numpy.ma`` that
    numpy's quantile makes."""
    x = np.sort(np.asarray(values, dtype=np.float64))
    out = []
    for q in qs:
        h = (len(x) - 1) * q
        lo = int(np.floor(h))
        hi = min(lo + 1, len(x) - 1)
        out.append(float(x[lo] + (h - lo) * (x[hi] - x[lo])))
    return out


def summary_table(summaries: Sequence[dict[str, Any]]) -> str:
    """One line per component with ``median [q25, q75]`` of both scores, in aligned columns, for a terminal (plain
    ASCII signs: ``+0.123``, ``-0.050``, which any console encoding can print).

    >>> print(summary_table([{"component": "self", "n": 6, "symmetry_median": 0.25, "symmetry_q25": 0.1,
    ...                       "symmetry_q75": 0.5, "directionality_median": -0.05, "directionality_q25": -0.1,
    ...                       "directionality_q75": 0.0}]))
    component n                symmetry          directionality
         self 6 +0.250 [+0.100, +0.500] -0.050 [-0.100, +0.000]
    """
    def cell(row: dict[str, Any], score: str) -> str:
        median, q25, q75 = (row[f"{score}_{key}"] for key in ("median", "q25", "q75"))
        return f"{median:+.3f} [{q25:+.3f}, {q75:+.3f}]"

    header = ("component", "n", "symmetry", "directionality")
    lines = [(str(r["component"]), str(r["n"]), cell(r, "symmetry"), cell(r, "directionality")) for r in summaries]
    widths = [max(len(row[k]) for row in [header, *lines]) for k in range(len(header))]
    return "\n".join(" ".join(text.rjust(w) for text, w in zip(row, widths)) for row in [header, *lines])
