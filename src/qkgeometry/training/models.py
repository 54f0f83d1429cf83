"""Small BERT-style models for the init experiments, their initialisations, and their Q/K scores. Chapter 5.

* ``arch="encoder"``: ``transformers.BertForMaskedLM``, trained with masked-LM (loss on the masked positions only).
* ``arch="decoder"``: ``transformers.BertLMHeadModel`` with ``is_decoder=True`` — the *same* architecture, parameter
  count and init, with a causal attention mask, trained with the causal-LM (next-token) objective. Using one family
  for both keeps the encoder/decoder comparison about the mask and the objective only.

Initialisations (:data:`INITS`), all applied *after* the model's own ``_init_weights`` (N(0, 0.02) weights, zero
biases for BERT), so every variant keeps the model's init distribution:

* ``default``: the model as built.
* ``symmetric``: per layer, ``W_Q := W_K`` (a copy of the model's own initialised key weight), so that every head's
  ``W_qk^h = W_K^h W_K^hᵀ`` starts symmetric positive semi-definite. The query bias is set to the key bias (both are
  zero at BERT's init, so this changes nothing); afterwards Q and K train independently.
* ``skew`` (control): per head ``W_Q^h := W_K^h J`` with ``J`` the block-diagonal 90° rotation (orthogonal, ``Jᵀ = −J``),
  so ``W_qk^h = W_K^h J W_K^hᵀ`` starts exactly skew-symmetric; ``W_K^h J`` has the same distribution as ``W_K^h``.
* ``rotated`` (control): per head ``W_Q^h := W_K^h O^h`` with ``O^h`` a Haar-random orthogonal (d_h, d_h) matrix drawn
  from a generator keyed by the run's seed (the global random stream, hence the data order, is untouched). ``W_K^h O^h`` has
  the same distribution as ``W_K^h`` and the same column norms, so the init keeps the weight distribution and the
  scale of ``W_qk`` of the symmetric init, but ``W_qk^h = W_K^h O^h W_K^hᵀ`` is neither symmetric nor skew: the
  control that separates "symmetric" from "Q tied to K at init".
* ``indefinite`` (control): per head ``W_Q^h := W_K^h D^h`` with ``D^h = diag(±1)``, half the entries +1 and half −1 in
  a random order drawn from a generator keyed by the run's seed. ``W_qk^h = W_K^h D^h W_K^hᵀ`` starts exactly
  symmetric, with the symmetric init's weight distribution, column norms, singular values and ``W_Q^h W_Q^hᵀ`` (the
  Gram matrix over the input dimensions), but it is indefinite (trace ≈ 0): no token is favoured to match itself.
  The control that separates "symmetric" from "positive semi-definite" (a self-match bias). (``W_Q^hᵀ W_Q^h`` is
  ``D^h W_K^hᵀ W_K^h D^h``, not the symmetric init's ``W_K^hᵀ W_K^h``; the same holds for ``rotated`` with ``O^h``.)
* ``norm-matched`` (control): the default init with both ``W_Q^h`` and ``W_K^h`` scaled by ``√c^h``, where
  ``c^h = ‖W_K^h W_K^hᵀ‖_F / ‖W_Q^h W_K^hᵀ‖_F`` is the ratio of the symmetric init's form norm to the default's (same
  seed), so that ``‖W_qk^h‖_F`` equals the symmetric init's (about 12% larger than the default's at this width) while
  the form keeps the default's geometry and the query and key weights keep equal scales. The control that separates
  the symmetric init's structure from its larger initial logit scale.
* ``shared``: the symmetric dot-product attention baseline (Courtois et al., arXiv:2406.06366): the query projection
  *is* the key projection (one ``nn.Parameter``, weight and bias) for the whole run, so ``W_qk`` is symmetric always.

Shapes follow the book's Notation page: torch's ``query.weight`` is ``W_Qᵀ`` of shape (H·d_h, d); per head ``W_Q^h`` is (d, d_h).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ..scores import scores_factored
from .config import ARCH_OBJECTIVE, ARCHES, INITS

__all__ = [
    "ARCHES",
    "ARCH_OBJECTIVE",
    "INITS",
    "LanguageModelLoss",
    "ModelSpec",
    "apply_init",
    "build_model",
    "qk_factors",
    "qk_form_norms",
    "qk_scores",
    "self_attentions",
]



@dataclass(frozen=True)
class ModelSpec:
    """Shape of the model. The defaults are the book's CPU-sized BERT (d=128, 4 layers, 4 heads, d_h=32)."""

    vocab_size: int = 8000
    hidden: int = 128
    layers: int = 4
    heads: int = 4
    ffn: int = 512
    max_len: int = 64
    dropout: float = 0.0
    init_range: float = 0.02  # BERT's N(0, init_range) init

    @classmethod
    def of(cls, config) -> ModelSpec:
        """The shape fields of a :class:`~qkgeometry.training.config.TrainConfig`."""
        return cls(config.vocab_size, config.hidden, config.layers, config.heads, config.ffn, config.seq_len)

    def bert_config(self, arch: str):
        from transformers import BertConfig

        if arch not in ARCHES:
            raise ValueError(f"arch must be one of {ARCHES}; got {arch!r}")
        if self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be divisible by heads ({self.heads})")
        return BertConfig(
            vocab_size=self.vocab_size, hidden_size=self.hidden, num_hidden_layers=self.layers,
            num_attention_heads=self.heads, intermediate_size=self.ffn, max_position_embeddings=self.max_len,
            hidden_dropout_prob=self.dropout, attention_probs_dropout_prob=self.dropout,
            initializer_range=self.init_range, is_decoder=(arch == "decoder"), type_vocab_size=1,
            pad_token_id=0,
        )


def build_model(spec: ModelSpec, arch: str = "encoder", init: str = "default", seed: int = 0) -> nn.Module:
    """Build the model with the transformers init under ``torch.manual_seed(seed)``, then apply ``init``.

    Same ``seed`` → the same default weights for every ``init`` (the pairing of the experiments).
    """
    from transformers import BertForMaskedLM, BertLMHeadModel

    config = spec.bert_config(arch)
    torch.manual_seed(seed)
    model = BertForMaskedLM(config) if arch == "encoder" else BertLMHeadModel(config)
    apply_init(model, init, seed=seed)
    return model


def self_attentions(model: nn.Module) -> list[nn.Module]:
    """The self-attention modules (with ``query``/``key`` ``nn.Linear``), in layer order."""
    base = getattr(model, "module", model)  # DDP
    base = getattr(base, "model", base)  # LanguageModelLoss
    layers = base.bert.encoder.layer
    return [layer.attention.self for layer in layers]


def _rotation(d_head: int) -> torch.Tensor:
    """Block-diagonal 90° rotation J (d_head, d_head): orthogonal and skew (Jᵀ = −J)."""
    if d_head % 2:
        raise ValueError(f"skew init needs an even head dimension; got {d_head}")
    J = torch.zeros(d_head, d_head)
    idx = torch.arange(0, d_head, 2)
    J[idx, idx + 1] = 1.0
    J[idx + 1, idx] = -1.0
    return J


def haar_orthogonal(n: int, generator: torch.Generator) -> torch.Tensor:
    """A Haar-distributed random orthogonal (n, n) matrix: QR of a Gaussian matrix with the signs of R's diagonal
    moved into Q (Mezzadri 2007), so the law is exactly Haar, not biased by the QR's sign convention."""
    g = torch.randn(n, n, generator=generator, dtype=torch.float64)
    q, r = torch.linalg.qr(g)
    return (q * torch.sign(torch.diagonal(r))).float()


@torch.no_grad()
def apply_init(model: nn.Module, init: str, seed: int = 0) -> nn.Module:
    """Apply ``init`` (one of :data:`INITS`) in place to every self-attention layer and return ``model``.

    ``seed`` keys the random rotations of ``init="rotated"`` and the signs of ``init="indefinite"`` (the other
    inits ignore it). ``norm-matched`` rescales the weights as built; biases (zero at BERT's init) are left."""
    if init not in INITS:
        raise ValueError(f"init must be one of {INITS}; got {init!r}")
    for layer, attn in enumerate(self_attentions(model)):
        q, k = attn.query, attn.key
        if init == "symmetric":
            q.weight.copy_(k.weight)
            if q.bias is not None:
                q.bias.copy_(k.bias)
        elif init == "skew":
            n_heads = model.config.num_attention_heads
            d_head = q.weight.shape[0] // n_heads
            J = _rotation(d_head).to(k.weight)
            # torch stores W_Qᵀ; per head W_Q^h = W_K^h J  <=>  (W_Q^h)ᵀ = Jᵀ (W_K^h)ᵀ
            kw = k.weight.view(n_heads, d_head, -1)
            q.weight.copy_((J.T @ kw).reshape_as(q.weight))
            if q.bias is not None:
                q.bias.zero_()
                k.bias.zero_()
        elif init == "rotated":
            from .data import keyed_generator

            n_heads = model.config.num_attention_heads
            d_head = q.weight.shape[0] // n_heads
            gen = keyed_generator(seed, layer, 7919)  # 7919: this init's own stream
            rot = torch.stack([haar_orthogonal(d_head, gen) for _ in range(n_heads)]).to(k.weight)
            kw = k.weight.view(n_heads, d_head, -1)  # (W_K^h)ᵀ per head
            # (W_Q^h)ᵀ = (O^h)ᵀ (W_K^h)ᵀ
            q.weight.copy_((rot.transpose(1, 2) @ kw).reshape_as(q.weight))
            if q.bias is not None:
                q.bias.zero_()
        elif init == "indefinite":
            from .data import keyed_generator

            n_heads = model.config.num_attention_heads
            d_head = q.weight.shape[0] // n_heads
            gen = keyed_generator(seed, layer, 7907)  # 7907: this init's own stream
            signs = torch.tensor([1.0, -1.0]).repeat_interleave(d_head - d_head // 2)[:d_head]
            diag = torch.stack([signs[torch.randperm(d_head, generator=gen)] for _ in range(n_heads)]).to(k.weight)
            kw = k.weight.view(n_heads, d_head, -1)  # (W_K^h)ᵀ per head
            # (W_Q^h)ᵀ = D^h (W_K^h)ᵀ: row i of head h's block is multiplied by its sign
            q.weight.copy_((diag.unsqueeze(-1) * kw).reshape_as(q.weight))
            if q.bias is not None:
                q.bias.zero_()
        elif init == "norm-matched":
            n_heads = model.config.num_attention_heads
            d_head = q.weight.shape[0] // n_heads
            qw = q.weight.view(n_heads, d_head, -1).double()  # (W_Q^h)ᵀ per head
            kw = k.weight.view(n_heads, d_head, -1).double()
            default_norm = torch.linalg.matrix_norm(qw.transpose(1, 2) @ kw)  # ‖W_Q^h W_K^hᵀ‖_F
            symmetric_norm = torch.linalg.matrix_norm(kw.transpose(1, 2) @ kw)  # ‖W_K^h W_K^hᵀ‖_F
            scale = (symmetric_norm / default_norm).sqrt().to(q.weight).view(n_heads, 1, 1)
            q.weight.copy_((q.weight.view(n_heads, d_head, -1) * scale).reshape_as(q.weight))
            k.weight.copy_((k.weight.view(n_heads, d_head, -1) * scale).reshape_as(k.weight))
        elif init == "shared":
            q.weight = k.weight
            q.bias = k.bias
    return model


def qk_factors(model: nn.Module) -> tuple[np.ndarray, np.ndarray]:
    """Layer-level factors ``(A, B)``, each float64 (n_layers, d, H·d_h), with ``M_layer = A Bᵀ = Σ_h W_Q^h W_K^hᵀ``."""
    attns = self_attentions(model)
    A = np.stack([a.query.weight.detach().double().cpu().numpy().T for a in attns])
    B = np.stack([a.key.weight.detach().double().cpu().numpy().T for a in attns])
    return A, B


def qk_form_norms(model: nn.Module) -> np.ndarray:
    """Each head's ``‖W_Q^h W_K^hᵀ‖_F`` (float64, shape (n_layers, n_heads)): the scale of its logits at step 0,
    which the symmetric init raises and the ``norm-matched`` control matches. Chapter 5, "The controls"."""
    n_heads = model.config.num_attention_heads
    out = []
    for attn in self_attentions(model):
        q = attn.query.weight.detach().double().view(n_heads, -1, attn.query.weight.shape[1])
        k = attn.key.weight.detach().double().view(n_heads, -1, attn.key.weight.shape[1])
        out.append(torch.linalg.matrix_norm(q.transpose(1, 2) @ k).numpy())
    return np.stack(out)


def qk_scores(model: nn.Module) -> tuple[np.ndarray, np.ndarray]:
    """Symmetry and directionality scores of each layer's ``W_qk`` (factored form), each float64 (n_layers,)."""
    s = scores_factored(*qk_factors(model))
    return np.atleast_1d(s.symmetry), np.atleast_1d(s.directionality)


class LanguageModelLoss(nn.Module):
    """Wraps a BERT LM so that ``forward`` returns the mean token cross-entropy (a DDP-friendly single module).

    * ``"mlm"``: run the encoder, apply the LM head only at the masked positions (2.5× cheaper than all positions).
    * ``"clm"``: predict ``targets[:, 1:]`` from positions ``:-1`` (causal mask inside the model).

    ``forward(inputs (B, T), targets (B, T), selected (B, T) bool | None) -> (loss_sum, n_tokens)``.
    """

    def __init__(self, model: nn.Module, objective: str):
        super().__init__()
        if objective not in ("mlm", "clm"):
            raise ValueError(f"objective must be 'mlm' or 'clm'; got {objective!r}")
        self.model, self.objective = model, objective

    def forward(self, inputs: torch.Tensor, targets: torch.Tensor, selected: torch.Tensor | None = None):
        hidden = self.model.bert(input_ids=inputs).last_hidden_state  # (B, T, d)
        if self.objective == "mlm":
            logits = self.model.cls(hidden[selected])  # (n_masked, V)
            labels = targets[selected]
        else:
            logits = self.model.cls(hidden[:, :-1]).flatten(0, 1)  # (B·(T−1), V)
            labels = targets[:, 1:].flatten()
        loss_sum = nn.functional.cross_entropy(logits.float(), labels, reduction="sum")
        return loss_sum, labels.numel()
