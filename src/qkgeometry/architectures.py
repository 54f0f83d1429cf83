"""Declarative registry: for each HF ``model_type``, where the Q and K weights live and how they are laid out.

Conventions (DESIGN.md §1): for query head h, ``W_Q^h`` and ``W_K^{g(h)}`` have shape (d_model, head_dim) and act as
``q = W_Qᵀ x``; torch's ``nn.Linear.weight`` is ``W_Qᵀ`` stacked over heads, shape (n_heads·head_dim, d_model).
Grouped-query attention repeats KV heads along the head axis: ``g(h) = h // (n_heads / n_kv_heads)``.

An :class:`Architecture` lists one :class:`AttentionBlock` per kind of attention (``self``, or ``encoder`` /
``decoder`` / ``cross`` for encoder-decoder models). Each block says where its tensors are (a name template with
``{i}`` for the layer index, matched as a dotted suffix so that ``bert.``/``model.``/``transformer.`` prefixes of
task heads are found automatically) and which :data:`Layout` they use. Adding an architecture is adding an entry to
:data:`REGISTRY` plus a logit-equivalence test in ``tests/test_architectures.py``.

Every layout converter returns ``(wq, wk)`` with ``wq`` of shape (n_heads, d_model, head_dim) and ``wk`` of shape
(n_kv_heads, d_model, head_dim), i.e. KV heads *not* yet expanded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal

import torch

Family = Literal["encoder", "decoder", "encoder-decoder"]
Component = Literal["self", "encoder", "decoder", "cross"]
Layout = Literal["linear", "conv1d_fused", "fused_blocked", "fused_interleaved"]


@dataclass(frozen=True)
class Dims:
    """Sizes of one attention block. ``head_dim · n_heads`` need not equal ``d_model``."""

    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    head_dim: int

    @property
    def group_size(self) -> int:
        """Query heads per KV head (1 without grouped-query attention)."""
        return self.n_heads // self.n_kv_heads


def standard_dims(config: Any) -> Dims:
    """Read ``Dims`` from a transformers config through its standard attribute names."""
    n_heads = int(config.num_attention_heads)
    n_kv = getattr(config, "num_key_value_heads", None) or n_heads
    d_model = int(config.hidden_size)
    head_dim = getattr(config, "head_dim", None) or d_model // n_heads
    return Dims(int(config.num_hidden_layers), d_model, n_heads, int(n_kv), int(head_dim))


@dataclass(frozen=True)
class AttentionBlock:
    """Where one kind of attention block keeps its Q/K weights.

    ``q`` and ``k`` are tensor-name templates with ``{i}`` for the layer index. Fused layouts keep Q, K and V in
    one tensor: then ``k`` is None and ``q`` names the fused tensor.
    """

    component: Component
    q: str
    k: str | None
    layout: Layout = "linear"
    dims: Callable[[Any], Dims] = standard_dims


@dataclass(frozen=True)
class GGUFSpec:
    """Where a GGUF file (llama.cpp naming) keeps the Q/K weights of this architecture."""

    arch: str  # value of general.architecture
    q: str = "blk.{i}.attn_q.weight"
    k: str = "blk.{i}.attn_k.weight"
    # llama.cpp permutes the rows of Q and K inside each head for its rotary layout. The permutation is the same
    # for Q and K, so W_qk is unchanged; the loader undoes it on both so that per-head factors match HF.
    rope_permuted: bool = True


@dataclass(frozen=True)
class Architecture:
    """One registry entry."""

    model_type: str
    family: Family
    blocks: tuple[AttentionBlock, ...]
    gguf: GGUFSpec | None = None
    notes: str = ""
    aliases: tuple[str, ...] = field(default=())


# ----------------------------------------------------------------------------------------------- layouts
def _heads_from_linear(weight: torch.Tensor, n_heads: int, head_dim: int, d_model: int, name: str) -> torch.Tensor:
    """``nn.Linear.weight`` (n_heads·head_dim, d_model) -> (n_heads, d_model, head_dim)."""
    expected = (n_heads * head_dim, d_model)
    if tuple(weight.shape) != expected:
        raise ValueError(
            f"tensor {name!r} has shape {tuple(weight.shape)}, expected {expected} (n_heads·head_dim, d_model) "
            "from the config; the checkpoint and its config.json disagree."
        )
    return weight.reshape(n_heads, head_dim, d_model).transpose(1, 2)


def split_linear(q: torch.Tensor, k: torch.Tensor, dims: Dims, names: tuple[str, str]):
    """Separate ``q_proj``/``k_proj`` (or ``query``/``key``) Linear weights."""
    return (_heads_from_linear(q, dims.n_heads, dims.head_dim, dims.d_model, names[0]),
            _heads_from_linear(k, dims.n_kv_heads, dims.head_dim, dims.d_model, names[1]))


def split_conv1d_fused(qkv: torch.Tensor, dims: Dims, name: str):
    """GPT-2 ``Conv1D`` c_attn weight, shape (d_model, 3·d_model) = [W_Q | W_K | W_V], blocked.

    ``Conv1D`` computes ``x @ W + b``, so ``W[:, :n_heads·head_dim]`` is W_Q itself with heads contiguous.
    """
    width = dims.n_heads * dims.head_dim
    if qkv.shape[0] != dims.d_model or qkv.shape[1] < 2 * width:
        raise ValueError(f"tensor {name!r} has shape {tuple(qkv.shape)}, expected ({dims.d_model}, 3·{width}).")
    wq = qkv[:, :width].reshape(dims.d_model, dims.n_heads, dims.head_dim).permute(1, 0, 2)
    wk = qkv[:, width:2 * width].reshape(dims.d_model, dims.n_heads, dims.head_dim).permute(1, 0, 2)
    return wq, wk


def split_fused_blocked(qkv: torch.Tensor, dims: Dims, name: str):
    """Fused Linear weight ``[W_Qᵀ; W_Kᵀ; W_Vᵀ]`` stacked along the output axis (ModernBERT Wqkv, Phi-3 qkv_proj)."""
    nq, nk = dims.n_heads * dims.head_dim, dims.n_kv_heads * dims.head_dim
    return (_heads_from_linear(qkv[:nq], dims.n_heads, dims.head_dim, dims.d_model, name),
            _heads_from_linear(qkv[nq:nq + nk], dims.n_kv_heads, dims.head_dim, dims.d_model, name))


def split_fused_interleaved(qkv: torch.Tensor, dims: Dims, name: str):
    """Fused Linear weight interleaved per head, output axis laid out as (n_heads, 3, head_dim) (NeoX, BLOOM)."""
    h, hd, d = dims.n_heads, dims.head_dim, dims.d_model
    if tuple(qkv.shape) != (3 * h * hd, d):
        raise ValueError(f"tensor {name!r} has shape {tuple(qkv.shape)}, expected ({3 * h * hd}, {d}).")
    per_head = qkv.reshape(h, 3, hd, d)
    return per_head[:, 0].transpose(1, 2), per_head[:, 1].transpose(1, 2)


def split_block(block: AttentionBlock, dims: Dims, get: Callable[[str], torch.Tensor], i: int):
    """Read and split the Q/K weights of layer ``i`` of ``block`` through the tensor getter ``get(name)``."""
    q_name = block.q.format(i=i)
    if block.layout == "linear":
        k_name = block.k.format(i=i)
        return split_linear(get(q_name), get(k_name), dims, (q_name, k_name))
    fused = get(q_name)
    if block.layout == "conv1d_fused":
        return split_conv1d_fused(fused, dims, q_name)
    if block.layout == "fused_blocked":
        return split_fused_blocked(fused, dims, q_name)
    if block.layout == "fused_interleaved":
        return split_fused_interleaved(fused, dims, q_name)
    raise ValueError(f"unknown layout {block.layout!r} in the registry entry for {q_name!r}")


def unpermute_gguf_rope(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Undo llama.cpp's per-head row permutation (HF rotate-half -> interleaved pairs) of a Q or K weight.

    llama.cpp's converter maps HF rows ``(head, half, j)`` to ``(head, j, half)``; this maps them back.
    """
    rows, cols = weight.shape
    head_dim = rows // n_heads
    return weight.reshape(n_heads, head_dim // 2, 2, cols).transpose(1, 2).reshape(rows, cols)


# ---------------------------------------------------------------------------------------------- registry
def _bert_like(model_type: str, prefix: str = "encoder.layer.{i}.attention.self.", **kw) -> Architecture:
    return Architecture(model_type, "encoder",
                        (AttentionBlock("self", prefix + "query.weight", prefix + "key.weight"),), **kw)


def _llama_like(model_type: str, **kw) -> Architecture:
    return Architecture(model_type, "decoder",
                        (AttentionBlock("self", "layers.{i}.self_attn.q_proj.weight",
                                        "layers.{i}.self_attn.k_proj.weight"),), **kw)


def _distilbert_dims(config: Any) -> Dims:
    d, h = int(config.dim), int(config.n_heads)
    return Dims(int(config.n_layers), d, h, h, d // h)


REGISTRY: dict[str, Architecture] = {}


def register(arch: Architecture) -> Architecture:
    """Add ``arch`` to :data:`REGISTRY` under its model_type and aliases."""
    for key in (arch.model_type, *arch.aliases):
        REGISTRY[key] = arch
    return arch


for _arch in (
    _bert_like("bert", notes="BERT and its checkpoints (MiniLM, BERT-tiny...)."),
    _bert_like("roberta"),
    _bert_like("electra"),
    Architecture("distilbert", "encoder", (AttentionBlock(
        "self", "transformer.layer.{i}.attention.q_lin.weight", "transformer.layer.{i}.attention.k_lin.weight",
        dims=_distilbert_dims),)),
    Architecture("gpt2", "decoder", (AttentionBlock("self", "h.{i}.attn.c_attn.weight", None, "conv1d_fused"),),
                 notes="Fused Conv1D c_attn of shape (d, 3d), blocked [Q|K|V]."),
    _llama_like("llama", gguf=GGUFSpec("llama"), notes="Grouped-query attention; rotary embeddings are outside W_qk."),
    _llama_like("mistral"),
    _llama_like("qwen2", gguf=GGUFSpec("qwen2")),
):
    register(_arch)


def get_architecture(model_type: str) -> Architecture:
    """Registry lookup with an error that lists what is supported."""
    try:
        return REGISTRY[model_type]
    except KeyError:
        raise ValueError(
            f"model_type {model_type!r} is not supported. Supported: {', '.join(sorted(REGISTRY))}. "
            "To add one, register an Architecture in qkgeometry/architectures.py with its logit-equivalence test."
        ) from None


def architecture_for_gguf(gguf_arch: str) -> Architecture:
    """Find the registry entry whose GGUF ``general.architecture`` is ``gguf_arch``."""
    for arch in REGISTRY.values():
        if arch.gguf is not None and arch.gguf.arch == gguf_arch:
            return arch
    supported = sorted({a.gguf.arch for a in REGISTRY.values() if a.gguf is not None})
    raise ValueError(f"GGUF architecture {gguf_arch!r} is not supported. Supported GGUF architectures: "
                     f"{', '.join(supported)}.")
