"""A head's form seen from the parts of the residual stream it reads: positions, tokens, and the output of the
layer before. Chapter 8.

A head's logit between a query vector ``a`` and a key vector ``b`` is ``aᵀ W_qk b / sqrt(d_h)``. Stacking the
vectors of one kind as rows gives a **table** ``G = A W_qk Bᵀ`` of the logits the head would give between them:

* the **position table** ``P̃ W_qk P̃ᵀ`` (T × T): ``P̃`` the position embeddings as the block's LayerNorm passes
  them on (each row centred, times the norm's gain: the linear part of the norm; its per-row scaling is left out);
  a previous-token head needs ``G[i, i−1]`` above every other visible entry of row i;
* the **token table** ``Ẽ W_qk Ẽᵀ`` (V × V) with the token embeddings; a head that attends to earlier copies of the
  current token needs a large diagonal;
* the **composition table** of a second-layer head, ``Ẽ W_qk (Ẽ W_OV)ᵀ``, with ``W_OV`` the summed
  value-output map of the first layer: the key side is what the first layer writes when it attends to a token
  (K-composition). An induction head needs this table's diagonal large: the query's token matches the token that
  the first layer moved into the key's position.

Each table is summarised by the symmetry score (:func:`qkgeometry.symmetry_score`) and by its **diagonal
contrast** (mean diagonal minus mean off-diagonal entry, over the standard deviation of the entries) or, for the
position table, its **shift contrast** (the same with the sub-diagonal ``G[i, i−1]`` against the other visible
entries of each row). :func:`view_scores` computes them all for every head of a GPT-2-style model; energies
``‖M_s‖²`` and ``‖M_n‖²`` of each head's whole form stand beside them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..decomposition import decompose
from ..scores import symmetry_score

__all__ = ["diagonal_contrast", "layer_norm_linear", "shift_contrast", "table_scores", "view_scores"]


def layer_norm_linear(vectors: np.ndarray, gain: np.ndarray | None = None) -> np.ndarray:
    """The linear part of a LayerNorm applied to each row: centred, times ``gain`` (no per-row scaling).
    Chapter 8."""
    v = np.asarray(vectors, dtype=np.float64)
    v = v - v.mean(axis=-1, keepdims=True)
    return v if gain is None else v * np.asarray(gain, dtype=np.float64)


def diagonal_contrast(table: np.ndarray) -> float:
    """(mean of the diagonal − mean off the diagonal) / standard deviation of all entries, of a square table;
    0 for a constant table. Chapter 8."""
    g = np.asarray(table, dtype=np.float64)
    n = g.shape[0]
    if g.ndim != 2 or g.shape[1] != n or n < 2:
        raise ValueError(f"table: expected a square table of at least 2 × 2; got shape {g.shape}.")
    sd = g.std()
    if sd == 0:
        return 0.0
    diag = np.trace(g) / n
    off = (g.sum() - np.trace(g)) / (n * n - n)
    return float((diag - off) / sd)


def shift_contrast(table: np.ndarray, skip: int = 1) -> float:
    """How much a position table favours the previous position among the visible ones: for each row i ≥ ``skip``,
    ``G[i, i−1]`` minus the mean of ``G[i, j]`` over the other visible keys ``j ≤ i``, averaged over rows and
    divided by the standard deviation of the visible entries. Chapter 8."""
    g = np.asarray(table, dtype=np.float64)
    t = g.shape[0]
    if g.ndim != 2 or g.shape[1] != t or t < 3:
        raise ValueError(f"table: expected a square position table of at least 3 × 3; got shape {g.shape}.")
    visible = np.tril(np.ones((t, t), dtype=bool))
    sd = g[visible].std()
    if sd == 0:
        return 0.0
    gaps = []
    for i in range(max(1, skip), t):
        row = g[i, : i + 1]
        others = np.delete(row, i - 1)
        gaps.append(row[i - 1] - others.mean())
    return float(np.mean(gaps) / sd)


def table_scores(table: np.ndarray, name: str, kind: str) -> dict[str, float]:
    """``{name}_symmetry``, ``{name}_skew_share`` (‖G_n‖² / ‖G‖²) and ``{name}_contrast`` (``kind``: "shift" or
    "diagonal") of one table. Chapter 8."""
    g = np.asarray(table, dtype=np.float64)
    _gs, gn = decompose(g)
    total = float((g * g).sum())
    contrast = shift_contrast(g) if kind == "shift" else diagonal_contrast(g)
    return {f"{name}_symmetry": float(symmetry_score(g)),
            f"{name}_skew_share": float((gn * gn).sum() / total) if total > 0 else float("nan"),
            f"{name}_contrast": contrast}


def _gpt2_parts(model: Any) -> dict[str, Any]:
    """Embeddings, LayerNorm gains and the first layer's summed value-output map of a GPT-2 model, float64."""
    tr = model.transformer
    d = tr.wte.weight.shape[1]
    h0 = tr.h[0].attn
    w_v = h0.c_attn.weight.detach().to("cpu", dtype=float).numpy()[:, 2 * d:]    # (d, d): x -> x W_V, heads blocked
    w_o = h0.c_proj.weight.detach().to("cpu", dtype=float).numpy()                # (d, d): heads -> residual
    return {"tok": tr.wte.weight.detach().to("cpu", dtype=float).numpy(),
            "pos": tr.wpe.weight.detach().to("cpu", dtype=float).numpy(),
            "gains": [b.ln_1.weight.detach().to("cpu", dtype=float).numpy() for b in tr.h],
            "ln0": (tr.h[0].ln_1.weight.detach().to("cpu", dtype=float).numpy(),
                    tr.h[0].ln_1.bias.detach().to("cpu", dtype=float).numpy()),
            "ov0": w_v @ w_o}


def view_scores(model: Any) -> pd.DataFrame:
    """One row per head (``layer``, ``head``) of a GPT-2-style ``transformers`` model: the energies of its form
    (``energy_sym`` = ‖M_s‖², ``energy_skew`` = ‖M_n‖²), and the scores of its position, token and (layers ≥ 1)
    composition tables (:func:`table_scores`); then one row per layer with ``head`` <NA> for the layer's summed
    form. The form is the one :func:`qkgeometry.load_qk` reads. Chapter 8."""
    from ..readers import load_qk

    parts = _gpt2_parts(model)
    rows = []
    with load_qk(model) as qk:
        for layer in qk:
            gain = parts["gains"][layer.index]
            pos = layer_norm_linear(parts["pos"], gain)
            tok = layer_norm_linear(parts["tok"], gain)
            if layer.index >= 1:
                g0, b0 = parts["ln0"]
                # what the first layer writes when it attends fully to a bare token: LN_0(e) W_OV
                moved = (layer_norm_linear(parts["tok"], g0) + b0) @ parts["ov0"]
                moved = layer_norm_linear(moved, gain)
            for head in [*range(qk.n_heads), None]:
                m = np.asarray(layer.matrix(head=head), dtype=np.float64)
                ms, mn = decompose(m)
                row = {"layer": layer.index, "head": head, "energy_sym": float((ms * ms).sum()),
                       "energy_skew": float((mn * mn).sum())}
                row |= table_scores(pos @ m @ pos.T, "position", "shift")
                row |= table_scores(tok @ m @ tok.T, "token", "diagonal")
                if layer.index >= 1:
                    row |= table_scores(tok @ m @ moved.T, "composition", "diagonal")
                rows.append(row)
    frame = pd.DataFrame(rows)
    frame["head"] = frame["head"].astype("Int64")
    return frame
