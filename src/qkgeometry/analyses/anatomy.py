"""What a layer score is made of: the share of the heads' own terms in the layer matrix, and the query bias.

Chapter 4 ("What a layer score measures", "Biases") uses these. Conventions are on the book's Notation page:
head h reads the KV head g(h) = h // (n_heads / n_kv_heads), ``M_h = W_Q^h W_K^{g(h)ᵀ}`` (d × d) and
``M_layer = Σ_h M_h``.

* **Within- and cross-head terms.** The symmetry score of a layer is ``tr(M_layer M_layer) / ‖M_layer‖²`` and

      tr(M_layer M_layer) = Σ_h tr(M_h M_h) + Σ_{h ≠ h'} tr(M_h M_h'),

  but every softmax computes one head's ``M_h``; the cross terms ``tr(M_h M_h')`` pair query directions of one
  head with key directions of another and belong to no attention pattern. :func:`head_share` splits both the
  numerator and ``‖M_layer‖²`` into the two parts.
* **Key bias.** With a query bias b_q the logit of head h gains ``b_q^{hᵀ} W_K^{g(h)ᵀ} x_j``, a term that depends on
  the key token only: a key-side preference outside W_qk. :func:`key_bias_ratio` measures its size.

Everything is computed from the factors (r × r products, r = head_dim): no d × d matrix is formed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd
import torch

from .._arrays import host_float64
from ..model import QKLayer, QKModel
from .iterate import iter_layers

__all__ = ["ANATOMY_COLUMNS", "head_pair_traces", "head_share", "key_bias_ratio", "key_bias_ratio_per_head",
           "layer_anatomy"]

#: Columns of :func:`layer_anatomy`.
ANATOMY_COLUMNS = ["model", "source", "family", "modality", "init", "component", "layer", "within_head_share",
                   "key_bias_ratio", "within_head_share_frobenius", "input_norm"]


def _head_factors(layer: QKLayer) -> tuple[torch.Tensor, torch.Tensor]:
    """``(A, B)`` of shapes (n_heads, d, r): ``A[h] = W_Q^h`` and ``B[h] = W_K^{g(h)}`` (KV heads repeated), float64."""
    a = torch.as_tensor(layer.wq).detach().to(torch.float64)
    kv = torch.arange(layer.n_heads, device=a.device) // layer.group_size  # g(h): repeat, not tile
    return a, torch.as_tensor(layer.wk_kv).detach().to(torch.float64)[kv]


def head_pair_traces(layer: QKLayer) -> tuple[np.ndarray, np.ndarray]:
    """The (n_heads, n_heads) matrices ``T[h, h'] = tr(M_h M_h')`` and ``F[h, h'] = ⟨M_h, M_h'⟩_F = tr(M_hᵀ M_h')``.

    Their sums are ``tr(M_layer M_layer)`` and ``‖M_layer‖²``; their diagonals are the heads' own terms. Factored:
    ``tr(M_h M_h') = tr((B_hᵀ A_h')(B_h'ᵀ A_h))`` and ``⟨M_h, M_h'⟩ = tr((A_hᵀ A_h')(B_h'ᵀ B_h))`` with
    ``A_h = W_Q^h``, ``B_h = W_K^{g(h)}`` of shape (d, r): n_heads² products of r × r matrices.
    """
    a, b = _head_factors(layer)
    ba = torch.einsum("hdr,gds->hgrs", b, a)  # ba[h, g] = B_hᵀ A_g
    trace = torch.einsum("hgrs,ghsr->hg", ba, ba)  # tr(A_h B_hᵀ A_g B_gᵀ) = Σ (B_hᵀ A_g)_rs (B_gᵀ A_h)_sr
    gram_a = torch.einsum("hdr,gds->hgrs", a, a)  # A_hᵀ A_g
    gram_b = torch.einsum("hdr,gds->hgrs", b, b)  # B_hᵀ B_g
    frob = torch.einsum("hgrs,ghsr->hg", gram_a, gram_b)  # tr((A_hᵀ A_g)(B_gᵀ B_h))
    return host_float64(trace), host_float64(frob)


def head_share(layer: QKLayer) -> dict[str, Any]:
    """How much of a layer's symmetry numerator, and of its norm, comes from each head with itself.

    Returns a dict:

    * ``within_head``: ``Σ_h tr(M_h M_h) / tr(M_layer M_layer)``; ``cross_head`` = 1 − within_head, the share of the
      cross terms ``Σ_{h≠h'} tr(M_h M_h')``. The cross terms can be negative, so either share can lie outside
      [0, 1] (and both are large when ``tr(M_layer M_layer)`` is near 0);
    * ``within_head_frobenius`` / ``cross_head_frobenius``: the same split of ``‖M_layer‖²``;
    * ``trace`` and ``frobenius``: the (n_heads, n_heads) matrices of :func:`head_pair_traces`.

    A layer whose within-head share is small has a layer score that is mostly made of cross-head terms, which no
    softmax computes: report the per-head scores next to it. Chapter 4 ("What a layer score measures").
    """
    trace, frob = head_pair_traces(layer)
    tr_total, fro_total = float(trace.sum()), float(frob.sum())
    if fro_total == 0.0:
        raise ValueError(f"{layer.component} layer {layer.index}: W_qk is zero; its head shares are undefined.")
    within = float(np.trace(trace)) / tr_total if tr_total != 0.0 else float("nan")
    within_f = float(np.trace(frob)) / fro_total
    return {"within_head": within, "cross_head": 1.0 - within, "within_head_frobenius": within_f,
            "cross_head_frobenius": 1.0 - within_f, "trace": trace, "frobenius": frob}


def _key_bias_vectors(layer: QKLayer) -> torch.Tensor | None:
    """``v_h = W_K^{g(h)} b_q^h`` for every query head, shape (n_heads, d); None without a query bias."""
    if layer.bq is None:
        return None
    _, b = _head_factors(layer)
    bq = torch.as_tensor(layer.bq).detach().to(torch.float64).reshape(layer.n_heads, -1)
    return torch.einsum("hdr,hr->hd", b, bq)


def key_bias_ratio(layer: QKLayer) -> float:
    """Size of the key-only logit term relative to the bilinear term, for the whole layer.

    With a query bias the logit of head h is ``(W_Q^{hᵀ} x_i + b_q^h)ᵀ W_K^{g(h)ᵀ} x_j + …``: besides the bilinear
    term ``x_iᵀ M_h x_j`` it has the key-only term ``v_hᵀ x_j`` with ``v_h = W_K^{g(h)} b_q^h``, which rewards some
    key tokens whatever the query (the terms that depend on the query only cancel in the softmax). For the layer,

        key_bias_ratio = ‖Σ_h v_h‖ / ‖M_layer‖_F.

    Assumption: x_i and x_j independent, zero mean, isotropic with unit variance (E[x xᵀ] = I). Then
    ``E[(x_iᵀ M x_j)²] = ‖M‖_F²`` and ``E[(vᵀ x_j)²] = ‖v‖²``, so the ratio compares the root-mean-square sizes of the
    two terms (the 1/sqrt(head_dim) scale multiplies both). Real hidden states are not isotropic, so read it as an
    order of magnitude. Returns NaN when the layer has no query bias (``layer.bq is None``). With
    ``load_qk(input_norm="folded")`` the bias includes the LayerNorm shift and x is the standardised input.
    Chapter 4 ("Biases").
    """
    v = _key_bias_vectors(layer)
    if v is None:
        return float("nan")
    _, frob = head_pair_traces(layer)
    return float(torch.linalg.vector_norm(v.sum(dim=0))) / float(np.sqrt(frob.sum()))


def key_bias_ratio_per_head(layer: QKLayer) -> np.ndarray:
    """``‖W_K^{g(h)} b_q^h‖ / ‖M_h‖_F`` for every query head h, shape (n_heads,) (NaN without a query bias); the
    per-head version of :func:`key_bias_ratio`, under the same assumption."""
    v = _key_bias_vectors(layer)
    if v is None:
        return np.full(layer.n_heads, np.nan)
    _, frob = head_pair_traces(layer)
    return host_float64(torch.linalg.vector_norm(v, dim=1)) / np.sqrt(np.diag(frob))


def layer_anatomy(sources: Iterable[Any], progress: bool = False, *, input_norm: str = "raw") -> pd.DataFrame:
    """One row per (model, component, layer) with the layer's within-head share and key-bias ratio.

    ``sources``: what :func:`qkgeometry.readers.open_model` opens (sources, QKModels, ``"random:<source>"`` twins), or
    :class:`qkgeometry.catalogue.PresetEntry` items from ``qkgeometry.catalogue.preset(...)``, whose name, family, modality and
    init label the rows). ``input_norm``: ``"raw"`` (default) or ``"folded"`` (see :func:`qkgeometry.load_qk`).
    Columns: :data:`ANATOMY_COLUMNS` (``within_head_share`` is ``head_share(layer)["within_head"]``,
    ``key_bias_ratio`` is NaN for layers without a query bias). Layers are read one at a time. Chapter 4.
    """
    from tqdm.auto import tqdm

    from ..catalogue import PresetEntry
    from ..readers import open_model
    from ..source_names import RANDOM_PREFIX

    if input_norm not in ("raw", "folded"):
        raise ValueError(f"`input_norm` must be 'raw' or 'folded'; got {input_norm!r}.")
    if isinstance(sources, (str, QKModel)) or not isinstance(sources, Iterable):
        raise TypeError("`sources` must be a list of sources (e.g. ['offline:minilm-l6']) or "
                        "qkgeometry.catalogue.preset(...); got a single " + type(sources).__name__ + ".")
    rows = []
    for entry in tqdm(list(sources), desc="models", unit="model", disable=not progress):
        meta = entry if isinstance(entry, PresetEntry) else None
        source = meta.source if meta else entry
        with open_model(source, input_norm=input_norm) as model:
            name = meta.name if meta else model.name
            init = meta.init if meta else ("random" if str(source).startswith(RANDOM_PREFIX) else "pretrained")
            for layer in tqdm(iter_layers(model), total=len(model), desc=name, unit="layer", leave=False, disable=not progress):
                share = head_share(layer)
                rows.append({"model": name, "source": str(source if not isinstance(source, QKModel)
                                                              else source.source),
                             "family": meta.family if meta else model.family,
                             "modality": meta.modality if meta else "language", "init": init,
                             "component": layer.component, "layer": layer.index,
                             "within_head_share": share["within_head"], "key_bias_ratio": key_bias_ratio(layer),
                             "within_head_share_frobenius": share["within_head_frobenius"],
                             "input_norm": model.input_norm})
    return pd.DataFrame(rows, columns=ANATOMY_COLUMNS)

