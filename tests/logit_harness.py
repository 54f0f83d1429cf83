"""Logit-equivalence harness: does an adapter's W_qk reproduce the model's own pre-softmax attention logits?

For one architecture we build a tiny random model from a transformers config (no download), zero its q/k biases,
save it with ``save_pretrained`` (safetensors) and load it back through ``qg.load_qk(folder)``. Then we feed random
hidden states X (batch, T, d_model) straight into the attention module of each layer, record the tensor that the
module passes to softmax (its pre-softmax logits, shape (batch, heads, T, T)), and compare it with

    logits[b, h, i, j] = x_iᵀ W_qk^h x_j · scale,   scale = 1/sqrt(head_dim) unless the architecture says otherwise.

Entries the module masked (e.g. −inf or dtype-min under a causal mask) are skipped, but at least the causal
triangle must be compared.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

import qkgeometry as qg


@contextlib.contextmanager
def capture_softmax_inputs():
    """Record every tensor passed to ``torch.nn.functional.softmax`` / ``Tensor.softmax`` / ``torch.softmax``."""
    captured: list[torch.Tensor] = []
    f_orig, t_orig, m_orig = torch.nn.functional.softmax, torch.softmax, torch.Tensor.softmax
    depth = [0]  # F.softmax calls Tensor.softmax internally: record only the outermost call

    def record(original, input, *args, **kwargs):
        if depth[0] == 0:
            captured.append(input.detach().clone())
        depth[0] += 1
        try:
            return original(input, *args, **kwargs)
        finally:
            depth[0] -= 1

    def spy_f(input, *args, **kwargs):
        return record(f_orig, input, *args, **kwargs)

    def spy_m(self, *args, **kwargs):
        return record(m_orig, self, *args, **kwargs)

    torch.nn.functional.softmax, torch.softmax, torch.Tensor.softmax = spy_f, spy_f, spy_m
    try:
        yield captured
    finally:
        torch.nn.functional.softmax, torch.softmax, torch.Tensor.softmax = f_orig, t_orig, m_orig


def rope_identity(x: torch.Tensor, head_dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotary (cos, sin) at relative offset 0 for every token: the identity rotation."""
    b, t, _ = x.shape
    return (torch.ones(b, t, head_dim, dtype=x.dtype), torch.zeros(b, t, head_dim, dtype=x.dtype))


@dataclass
class LogitCase:
    """One architecture configuration to check.

    ``attention(model, layer)`` returns the attention module of a layer; ``call(module, x, model)`` runs it on hidden
    states ``x`` (batch, T, d_model). ``component`` selects the QKModel block.
    """

    id: str
    model_type: str
    config: dict[str, Any]
    attention: Callable[[Any, int], torch.nn.Module]
    call: Callable[[torch.nn.Module, torch.Tensor, Any], Any] = lambda m, x, model: m(x)
    component: str = "self"
    scale: Callable[[Any], float] | None = None  # default 1/sqrt(head_dim)
    model_class: str = "AutoModel"
    bias_names: tuple[str, ...] = ("query.bias", "key.bias", "q_proj.bias", "k_proj.bias", "c_attn.bias",
                                   "q_lin.bias", "k_lin.bias")
    extra: dict[str, Any] = field(default_factory=dict)
    #: parameter-name suffixes filled with random values after init (e.g. QK-norm gains, which init to 1 or 0 and
    #: would make folding them a no-op)
    randomize: tuple[str, ...] = ()
    #: QK-norm models: "head" (RMSNorm over each head's head_dim) or "all" (over all heads at once, OLMo-2). The
    #: check then compares logits · rms(q_i) · rms(k_j) with the *folded* bilinear form, the rms computed from the
    #: raw projections (``load_qk(qk_norm="raw")``) with eps = config.rms_norm_eps.
    qk_norm: str | None = None
    #: logits at or below this value count as masked (GPT-1 masks with -1e4 instead of -inf)
    masked_below: float = -1e30


def build_tiny_model(case: LogitCase, folder) -> Any:
    """Random float64 model from ``case.config``, biases zeroed, saved to ``folder`` as safetensors."""
    import transformers

    torch.manual_seed(0)
    config = transformers.AutoConfig.for_model(case.model_type, **case.config)
    cls = getattr(transformers, case.model_class)
    model = cls.from_config(config, attn_implementation="eager").to(torch.float64).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(case.bias_names):
                p.zero_()
            elif case.randomize and name.endswith(case.randomize):
                p.copy_(torch.empty_like(p).uniform_(0.5, 1.5))
    model.save_pretrained(folder, safe_serialization=True)
    return model


def _qk_rms(raw: qg.QKLayer, x: torch.Tensor, scope: str, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token RMS of the raw q and k of every query head, shapes (batch, n_heads, T)."""
    q = torch.einsum("btd,hde->bhte", x, raw.wq)
    k = torch.einsum("btd,hde->bhte", x, raw.wk_kv)
    if scope == "head":
        rq, rk = (q.pow(2).mean(-1) + eps).sqrt(), (k.pow(2).mean(-1) + eps).sqrt()
    else:  # one norm over the concatenation of all heads
        rq = (q.pow(2).mean(dim=(1, 3)) + eps).sqrt()[:, None].expand(-1, q.shape[1], -1)
        rk = (k.pow(2).mean(dim=(1, 3)) + eps).sqrt()[:, None].expand(-1, k.shape[1], -1)
    return rq, rk.repeat_interleave(raw.group_size, dim=1)


def check_logit_equivalence(case: LogitCase, folder, batch: int = 2, tokens: int = 7, atol: float = 1e-5) -> float:
    """Run the check on every layer and head of ``case``; return the max abs error seen."""
    model = build_tiny_model(case, folder)
    qk = qg.load_qk(folder)
    dims = qk.dims(case.component)
    scale = case.scale(model.config) if case.scale else 1.0 / math.sqrt(dims.head_dim)
    gen = torch.Generator().manual_seed(1)
    worst = 0.0
    for layer in (lyr for lyr in qk if lyr.component == case.component):
        x = torch.randn(batch, tokens, dims.d_model, generator=gen, dtype=torch.float64)
        module = case.attention(model, layer.index)
        with torch.no_grad(), capture_softmax_inputs() as captured:
            case.call(module, x, model)
        assert len(captured) == 1, f"{case.id}: expected one softmax call in the attention module, saw {len(captured)}"
        logits = captured[0].to(torch.float64)
        assert logits.shape == (batch, dims.n_heads, tokens, tokens), (case.id, tuple(logits.shape))
        predicted = torch.einsum("bid,hde,bje->bhij", x, torch.stack([layer.matrix(h) for h in range(dims.n_heads)]),
                                 x) * scale
        if case.qk_norm:
            rq, rk = _qk_rms(qg.load_qk(folder, qk_norm="raw").layer(layer.index, case.component), x, case.qk_norm,
                             model.config.get_text_config().rms_norm_eps)
            predicted = predicted / (rq[..., :, None] * rk[..., None, :])
        keep = logits > case.masked_below  # skip masked entries
        causal = torch.tril(torch.ones(tokens, tokens, dtype=torch.bool))
        assert keep[..., causal].all(), f"{case.id}: the module masked entries on or below the diagonal"
        err = (logits - predicted)[keep].abs().max().item()
        assert err < atol, f"{case.id} layer {layer.index}: max |logit error| = {err:.3g}"
        worst = max(worst, err)
    return worst
