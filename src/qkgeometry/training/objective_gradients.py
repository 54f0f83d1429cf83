"""The exact logit gradients of chapter 3's model and their pairs. Chapter 3, "A fair test".

:func:`attention_gradients` exposes, for every layer, what the attention of that layer saw (its LayerNorm output X)
and the exact logit gradients g = ∂L/∂a (via :func:`qkgeometry.analyses.gradients.softmax_backward`), so that chapter 3's
theorem ∂L/∂W_qk = Σ g_ij x_i x_jᵀ / √d_h can be checked against autograd on a multi-layer model, and
:func:`gradient_rows` counts its pairs (:func:`qkgeometry.analyses.gradients.pair_energy_shares`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from ..analyses.gradients import (
    bidirectional_mask,
    causal_mask,
    pair_energy_shares,
    rank1_gradient,
    softmax_backward,
)
from ..scores import directionality_score, symmetry_score
from .config import CAUSAL_OBJECTIVES
from .objective_batches import ObjectiveBatch, objective_loss
from .objective_model import ObjectiveTransformer

__all__ = ["LayerGradient", "attention_gradients", "gradient_rows"]

Tensor = torch.Tensor


class LayerGradient(NamedTuple):
    """What one attention layer contributes to ∂L/∂W_qk on one batch.

    ``x`` (B, T, d): the layer's attention input; ``g`` (B, H, T, T): ∂L/∂a_ij (0 where masked); ``mask`` (T, T);
    ``grad_w`` (H, d, d): Σ_b X_bᵀ G_bh X_b / √d_h, the per-head gradient w.r.t. W_qk^h (chapter 3's theorem).
    """

    x: Tensor
    g: Tensor
    mask: Tensor
    grad_w: Tensor


def attention_gradients(model: ObjectiveTransformer, batch: ObjectiveBatch) -> tuple[Tensor, list[LayerGradient]]:
    """Run ``batch`` forward and backward once; return ``(loss, per-layer LayerGradient)``.

    ``g`` comes from the attention probabilities and autograd's ∂L/∂P through
    :func:`qkgeometry.analyses.gradients.softmax_backward`, and ``grad_w`` from :func:`qkgeometry.analyses.gradients.rank1_gradient`:
    compare ``factor_gradients(grad_w, wq, wk)`` with the parameters' ``.grad`` to check the theorem. Parameter
    gradients are left in ``.grad`` (call ``model.zero_grad()`` first if they should not accumulate).
    """
    capture: list = []
    loss = objective_loss(model, batch, capture)
    loss.backward()
    t = batch.inputs.shape[1]
    mask = causal_mask(t) if batch.objective in CAUSAL_OBJECTIVES else bidirectional_mask(t)
    out = []
    for block, (x, probs) in zip(model.blocks, capture):
        x = x.detach()
        g = softmax_backward(probs.detach(), probs.grad)
        grad_w = rank1_gradient(x[:, None], g, block.head_dim).sum(dim=0)
        out.append(LayerGradient(x, g, mask, grad_w))
    return loss.detach(), out


def gradient_rows(model: ObjectiveTransformer, batch: ObjectiveBatch, rtol: float = 1e-9) -> list[dict]:
    """Scores and pair shares of the one-step gradient of every (layer, head) on ``batch``. Chapter 3.

    Per row: ``layer, head, symmetry, directionality`` of ∂L/∂W_qk^h, ``mask_paired`` and ``effective_paired``
    (shares of Σ g_ij² on couples allowed by the mask / with both g_ij and g_ji non-zero, relative tolerance
    ``rtol``, see :func:`qkgeometry.analyses.gradients.pair_energy_shares`) and ``active_rows`` (share of queries with a
    non-zero gradient row). The model's parameter gradients are zeroed before and after.
    """
    model.zero_grad(set_to_none=True)
    _, layers = attention_gradients(model, batch)
    model.zero_grad(set_to_none=True)
    rows = []
    for li, lg in enumerate(layers):
        g = lg.g.double()
        shares = pair_energy_shares(g.transpose(0, 1), lg.mask, rtol=rtol, pool_dims=1)  # pooled over the batch
        sym = np.atleast_1d(symmetry_score(lg.grad_w.double()))
        direc = np.atleast_1d(directionality_score(lg.grad_w.double()))
        scale = g.abs().amax(dim=(-1, -2), keepdim=True)
        active = (g.abs() > rtol * scale).any(dim=-1).double().mean(dim=(0, 2))  # (H,)
        for h in range(g.shape[1]):
            rows.append({"layer": li, "head": h, "symmetry": float(sym[h]), "directionality": float(direc[h]),
                         "mask_paired": float(shares.mask_paired[h]),
                         "effective_paired": float(shares.effective_paired[h]), "active_rows": float(active[h])})
    return rows
