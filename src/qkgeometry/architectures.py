"""Declarative registry: for each HF ``model_type``, where the Q and K weights live and how they are laid out.

Conventions (the book's Notation page): for query head h, ``W_Q^h`` and ``W_K^{g(h)}`` have shape (d_model, head_dim) and act as
``q = W_Qᵀ x``; torch's ``nn.Linear.weight`` is ``W_Qᵀ`` stacked over heads, shape (n_heads·head_dim, d_model).
Grouped-query attention repeats KV heads along the head axis: ``g(h) = h // (n_heads / n_kv_heads)``.

An :class:`Architecture` lists one :class:`AttentionBlock` per kind of attention (``self``, or ``encoder`` /
``decoder`` / ``cross`` for encoder-decoder models). Each block says where its tensors are (a name template with
``{i}`` for the layer index, matched as a dotted suffix so that ``bert.``/``model.``/``transformer.`` prefixes of
task heads are found automatically) and which :data:`Layout` they use. Adding an architecture is adding an entry to
:data:`REGISTRY` plus a logit-equivalence test in the package's test suite.

Every layout converter returns ``(wq, wk)`` with ``wq`` of shape (n_heads, d_model, head_dim) and ``wk`` of shape
(n_kv_heads, d_model, head_dim), i.e. KV heads *not* yet expanded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ._arrays import as_float64, cast_like, einsum, numel
from .errors import SourceError

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
    #: QK-norm (Qwen3, Gemma-3, OLMo-2): templates of the RMSNorm gains applied to q and k after projection. Their
    #: length is head_dim (one norm per head, shared by all heads) or n_heads·head_dim (OLMo-2: one norm over all
    #: heads). See :func:`fold_qk_norm` for how they enter W_qk.
    q_norm: str | None = None
    k_norm: str | None = None
    #: Gemma's RMSNorm multiplies by ``1 + weight``; the gain is ``norm_offset + stored weight``.
    norm_offset: float = 0.0
    #: Other (q, k) name templates of the same tensors, tried in order when ``q`` is not in the checkpoint (e.g. the
    #: in-memory names of a transformers-5 ViT, ``attention.q_proj``, versus the on-disk ``attention.attention.query``).
    alternatives: tuple[tuple[str, str | None], ...] = ()
    #: Input normalisation (``load_qk(input_norm="folded")``, see :func:`fold_input_norm`): the name template of the
    #: gain γ of the LayerNorm/RMSNorm whose output this block reads. Pre-norm blocks name their own input norm
    #: (``{i}``); post-LN encoders name the previous layer's output norm (``{prev}`` is i − 1) and give layer 0's,
    #: the embeddings norm, in ``input_norm_first``. None: the gain is not known for this architecture.
    input_norm: str | None = None
    input_norm_first: str | None = None
    #: Cross-attention whose keys read another stack's output: the gain on the key side (Whisper: the encoder's
    #: final LayerNorm). None: the keys read the same normalised input as the queries.
    input_norm_k: str | None = None
    #: Gemma's RMSNorm multiplies by ``1 + weight``: the input-norm gain is ``input_norm_offset + stored weight``.
    input_norm_offset: float = 0.0


@dataclass(frozen=True)
class GGUFSpec:
    """Where a GGUF file (llama.cpp naming) keeps the Q/K weights of this architecture."""

    arch: str  # value of general.architecture
    q: str = "blk.{i}.attn_q.weight"
    k: str = "blk.{i}.attn_k.weight"
    # llama.cpp permutes the rows of Q and K inside each head for its rotary layout. The permutation is the same
    # for Q and K, so W_qk is unchanged; the loader undoes it on both so that per-head factors match HF.
    rope_permuted: bool = True
    # QK-norm gains (llama.cpp's converter already adds Gemma's +1 to every norm weight, so no offset here).
    q_norm: str | None = None
    k_norm: str | None = None
    # Gain of the pre-attention RMSNorm/LayerNorm, stored as applied (Gemma's 1 + weight already added).
    input_norm: str | None = "blk.{i}.attn_norm.weight"
    q_bias: str = "blk.{i}.attn_q.bias"


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
def _heads_from_linear(weight: Any, n_heads: int, head_dim: int, d_model: int, name: str) -> Any:
    """``nn.Linear.weight`` (n_heads·head_dim, d_model) -> (n_heads, d_model, head_dim)."""
    expected = (n_heads * head_dim, d_model)
    if tuple(weight.shape) != expected:
        raise ValueError(
            f"tensor {name!r} has shape {tuple(weight.shape)}, expected {expected} (n_heads·head_dim, d_model) "
            "from the config; the checkpoint and its config.json disagree."
        )
    return weight.reshape(n_heads, head_dim, d_model).swapaxes(1, 2)


def pack_heads(w: Any) -> Any:
    """Stack per-head factors side by side: (n_heads, d_model, head_dim) -> (d_model, n_heads·head_dim).

    The result is ``[W^0 | W^1 | ...]``, so ``pack_heads(wq) @ pack_heads(wk).T = Σ_h W_Q^h W_K^hᵀ``: the layer
    matrix as one pair of factors (the factored scores take it as is). Works on torch tensors and NumPy arrays.
    Conventions: the book's Notation page; chapter 4 ("Grouped-query attention") uses it.

    >>> import numpy as np
    >>> w = np.arange(12.).reshape(2, 3, 2)  # 2 heads, d_model 3, head_dim 2
    >>> pack_heads(w)
    array([[ 0.,  1.,  6.,  7.],
           [ 2.,  3.,  8.,  9.],
           [ 4.,  5., 10., 11.]])
    >>> bool(np.allclose(pack_heads(w) @ pack_heads(w).T, sum(h @ h.T for h in w)))
    True
    """
    if w.ndim != 3:
        raise ValueError(f"`w` must have shape (n_heads, d_model, head_dim); got {tuple(w.shape)}.")
    n, d, hd = w.shape
    return w.swapaxes(0, 1).reshape(d, n * hd)


def split_linear(q: Any, k: Any, dims: Dims, names: tuple[str, str]):
    """Separate ``q_proj``/``k_proj`` (or ``query``/``key``) Linear weights."""
    return (_heads_from_linear(q, dims.n_heads, dims.head_dim, dims.d_model, names[0]),
            _heads_from_linear(k, dims.n_kv_heads, dims.head_dim, dims.d_model, names[1]))


def split_conv1d_fused(qkv: Any, dims: Dims, name: str):
    """GPT-2 ``Conv1D`` c_attn weight, shape (d_model, 3·d_model) = [W_Q | W_K | W_V], blocked.

    ``Conv1D`` computes ``x @ W + b``, so ``W[:, :n_heads·head_dim]`` is W_Q itself with heads contiguous.
    """
    width = dims.n_heads * dims.head_dim
    if qkv.shape[0] != dims.d_model or qkv.shape[1] < 2 * width:
        raise ValueError(f"tensor {name!r} has shape {tuple(qkv.shape)}, expected ({dims.d_model}, 3·{width}).")
    wq = qkv[:, :width].reshape(dims.d_model, dims.n_heads, dims.head_dim).swapaxes(0, 1)
    wk = qkv[:, width:2 * width].reshape(dims.d_model, dims.n_heads, dims.head_dim).swapaxes(0, 1)
    return wq, wk


def split_fused_blocked(qkv: Any, dims: Dims, name: str):
    """Fused Linear weight ``[W_Qᵀ; W_Kᵀ; W_Vᵀ]`` stacked along the output axis (ModernBERT Wqkv, Phi-3 qkv_proj)."""
    nq, nk = dims.n_heads * dims.head_dim, dims.n_kv_heads * dims.head_dim
    return (_heads_from_linear(qkv[:nq], dims.n_heads, dims.head_dim, dims.d_model, name),
            _heads_from_linear(qkv[nq:nq + nk], dims.n_kv_heads, dims.head_dim, dims.d_model, name))


def split_fused_interleaved(qkv: Any, dims: Dims, name: str):
    """Fused Linear weight interleaved per head, output axis laid out as (n_heads, 3, head_dim) (NeoX, BLOOM)."""
    h, hd, d = dims.n_heads, dims.head_dim, dims.d_model
    if tuple(qkv.shape) != (3 * h * hd, d):
        raise ValueError(f"tensor {name!r} has shape {tuple(qkv.shape)}, expected ({3 * h * hd}, {d}).")
    per_head = qkv.reshape(h, 3, hd, d)
    return per_head[:, 0].swapaxes(1, 2), per_head[:, 1].swapaxes(1, 2)


def split_block(block: AttentionBlock, dims: Dims, get: Callable[[str], Any], i: int):
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


QKNorm = Literal["folded", "raw"]


def fold_qk_norm(wq: Any, wk: Any, gq: Any, gk: Any):
    """Fold QK-norm gains into the head factors: ``W_Q^h ← W_Q^h diag(g_q^h)``, ``W_K^g ← W_K^g diag(g_k^g)``.

    With QK-norm the logit between tokens i and j of head h is

        (g_q ⊙ q_i / rms(q_i)) · (g_k ⊙ k_j / rms(k_j)) · scale,   q_i = W_Qᵀ x_i,  k_j = W_Kᵀ x_j,

    and ``g_q ⊙ (W_Qᵀ x) = (W_Q diag(g_q))ᵀ x``. So the gains are linear and fold into the factors, while the
    normalisations ``1/rms(q_i)`` and ``1/rms(k_j)`` are one positive scalar per query token and one per key token:
    they rescale whole rows and columns of the logit matrix and are not part of a fixed bilinear form. The folded
    ``W_qk = W_Q diag(g_q g_k) W_Kᵀ`` is therefore the bilinear form the model applies to x, up to those per-token
    scalars; the raw form ignores the gains.

    ``wq``: (n_heads, d, head_dim), ``wk``: (n_kv_heads, d, head_dim); ``gq``/``gk`` of length head_dim (shared by the
    heads) or n_heads·head_dim / n_kv_heads·head_dim (one gain vector per head).
    """
    hd = wq.shape[-1]
    return wq * cast_like(gq, wq).reshape(-1, 1, hd), wk * cast_like(gk, wk).reshape(-1, 1, hd)


def qk_norm_gains(block: AttentionBlock, get: Callable[[str], Any], i: int):
    """The (g_q, g_k) gains of layer ``i`` of a QK-norm block, offset included (Gemma: 1 + weight)."""
    return (block.norm_offset + as_float64(get(block.q_norm.format(i=i))),
            block.norm_offset + as_float64(get(block.k_norm.format(i=i))))


InputNorm = Literal["raw", "folded"]


def input_norm_names(block: AttentionBlock, i: int) -> tuple[str, str]:
    """Names of the (query-side, key-side) input-norm gains of layer ``i`` of ``block`` (equal for self-attention).

    Raises ``ValueError`` when the block does not declare them (see :attr:`AttentionBlock.input_norm`).
    """
    if block.input_norm is None:
        raise ValueError(f"the gain of the normalisation before the {block.component} attention is not known")
    q = block.input_norm_first if i == 0 and block.input_norm_first is not None else \
        block.input_norm.format(i=i, prev=i - 1)
    return q, (q if block.input_norm_k is None else block.input_norm_k.format(i=i))


def norm_shift_name(gain_name: str) -> str | None:
    """The name of a LayerNorm's shift β next to its gain γ (``….weight`` -> ``….bias``, ``…/gamma`` -> ``…/beta``)."""
    for gain, shift in ((".weight", ".bias"), ("/gamma", "/beta"), ("weight", "bias")):
        if gain_name.endswith(gain):
            return gain_name[: -len(gain)] + shift
    return None


def fold_input_norm(wq: Any, wk: Any, bq: Any | None, gq: Any, gk: Any, beta_q: Any | None = None):
    """Fold the gains of the normalisation before attention into the factors: ``W_Q ← diag(γ_q) W_Q``,
    ``W_K ← diag(γ_k) W_K``, so that ``W_qk ← diag(γ_q) W_qk diag(γ_k)`` (a congruence when γ_q = γ_k: it keeps
    exact symmetry, but it moves both scores).

    The normalisation maps the residual stream x to ``h = γ ⊙ x̂ + β`` with ``x̂ = (x − mean(x)) / std(x)``
    (LayerNorm) or ``x̂ = x / rms(x)`` (RMSNorm, β = 0). With ``q = W_Qᵀ h + b_q`` the logit is then

        (W_Q'ᵀ x̂_i + b_q')ᵀ (W_K'ᵀ x̂_j + b_k') · scale,   W_Q' = diag(γ_q) W_Q,   b_q' = b_q + W_Qᵀ β_q,

    and likewise on the key side. The folded form is the bilinear form the model applies to the standardised
    vectors x̂; the raw form is the one it applies to h. The shift β is not part of any bilinear form: on the query
    side it moves into the query bias (returned as ``bq``, so the key-only logit term stays exact); on the key side
    it moves into the key bias, whose terms depend on the query token only and cancel in the softmax, so it is not
    kept. ``1/std(x)`` (or ``1/rms(x)``) is one positive scalar per token, outside any fixed bilinear form.

    ``wq``: (n_heads, d, head_dim), ``wk``: (n_kv_heads, d, head_dim), ``bq``: (n_heads, head_dim) or None,
    ``gq``/``gk``/``beta_q``: (d,). Returns ``(wq, wk, bq)`` in float64. Chapter 4 ("Which bilinear form").
    """
    wq, wk = as_float64(wq), as_float64(wk)
    gq, gk = cast_like(gq, wq).reshape(1, -1, 1), cast_like(gk, wk).reshape(1, -1, 1)
    if beta_q is not None:
        shift = einsum("hde,d->he", wq, cast_like(beta_q, wq))
        bq = shift if bq is None else cast_like(bq, wq) + shift
    return wq * gq, wk * gk, bq


def split_query_bias(block: AttentionBlock, dims: Dims, get: Callable[[str], Any],
                     has: Callable[[str], bool], i: int) -> Any | None:
    """The query bias ``b_q`` of layer ``i`` as (n_heads, head_dim), or None when the checkpoint has none.

    Read next to the query weight (``….weight`` -> ``….bias``) in the block's layout: a Linear's own bias, the
    first n_heads·head_dim entries of a blocked fused bias ([b_Q; b_K; b_V]), or slot 0 of an interleaved one
    (viewed as (n_heads, 3, head_dim)).
    """
    name = norm_shift_name(block.q.format(i=i))
    if name is None or not has(name):
        return None
    b = get(name).reshape(-1)
    nq = dims.n_heads * dims.head_dim
    if block.layout == "fused_interleaved":
        if numel(b) != 3 * nq:
            raise ValueError(f"tensor {name!r} has {numel(b)} entries, expected {3 * nq} (n_heads·3·head_dim).")
        return b.reshape(dims.n_heads, 3, dims.head_dim)[:, 0]
    if numel(b) < nq or (block.layout == "linear" and numel(b) != nq):
        raise ValueError(f"tensor {name!r} has {numel(b)} entries, expected {nq} (n_heads·head_dim) for the query "
                         "bias; the checkpoint and its config disagree.")
    return b[:nq].reshape(dims.n_heads, dims.head_dim)


def unpermute_gguf_rope(weight: Any, n_heads: int) -> Any:
    """Undo llama.cpp's per-head row permutation (HF rotate-half -> interleaved pairs) of a Q or K weight.

    llama.cpp's converter maps HF rows ``(head, half, j)`` to ``(head, j, half)``; this maps them back.
    """
    rows, cols = weight.shape
    head_dim = rows // n_heads
    return weight.reshape(n_heads, head_dim // 2, 2, cols).swapaxes(1, 2).reshape(rows, cols)


# ---------------------------------------------------------------------------------------------- registry
# Every layout below was read off the model's own forward code in transformers (models/*/modeling_*.py) and is
# checked against the module's pre-softmax logits by the test suite.
#: Post-LN BERT-style encoders: layer i reads the output LayerNorm of layer i − 1; layer 0 the embeddings LayerNorm.
_POST_LN = dict(input_norm="encoder.layer.{prev}.output.LayerNorm.weight", input_norm_first="embeddings.LayerNorm.weight")


def _bert_like(model_type: str, prefix: str = "encoder.layer.{i}.attention.self.", post_ln: bool = True,
               **kw) -> Architecture:
    return Architecture(model_type, "encoder", (AttentionBlock("self", prefix + "query.weight", prefix + "key.weight",
                                                               **(_POST_LN if post_ln else {})),), **kw)


def _llama_like(model_type: str, prefix: str = "layers.{i}.self_attn.",
                input_norm: str | None = "layers.{i}.input_layernorm.weight", **kw) -> Architecture:
    block_kw = {k: kw.pop(k) for k in ("q_norm", "k_norm", "norm_offset", "dims", "input_norm_offset") if k in kw}
    block_kw["input_norm"] = input_norm
    if "q_norm" in block_kw:
        block_kw["q_norm"], block_kw["k_norm"] = prefix + block_kw["q_norm"], prefix + block_kw["k_norm"]
    return Architecture(model_type, "decoder",
                        (AttentionBlock("self", prefix + "q_proj.weight", prefix + "k_proj.weight", **block_kw),), **kw)


def _distilbert_dims(config: Any) -> Dims:
    d, h = int(config.dim), int(config.n_heads)
    return Dims(int(config.n_layers), d, h, h, d // h)


def _albert_dims(config: Any) -> Dims:
    if int(getattr(config, "inner_group_num", 1)) != 1:
        raise ValueError(f"ALBERT with inner_group_num={config.inner_group_num} is not supported (every released "
                         "checkpoint has 1); register its layer naming in qkgeometry/architectures.py first.")
    base = standard_dims(config)
    return Dims(int(config.num_hidden_groups), base.d_model, base.n_heads, base.n_heads, base.head_dim)


def _deberta_dims(config: Any) -> Dims:
    d, h = int(config.hidden_size), int(config.num_attention_heads)
    hd = int(getattr(config, "attention_head_size", None) or d // h)
    return Dims(int(config.num_hidden_layers), d, h, h, hd)


def _phi_dims(config: Any) -> Dims:
    if getattr(config, "qk_layernorm", False):
        raise ValueError("Phi with qk_layernorm=True (a LayerNorm with bias on q and k) is not supported: its bias "
                         "and mean-centering do not fold into W_qk.")
    return standard_dims(config)


def _text_dims(config: Any) -> Dims:
    """Dims of the language model of a multimodal config (Gemma-3), or of a text config itself."""
    return standard_dims(config.get_text_config() if hasattr(config, "get_text_config") else config)


def _t5_dims(decoder: bool) -> Callable[[Any], Dims]:
    def dims(config: Any) -> Dims:
        n = int(config.num_decoder_layers if decoder and config.num_decoder_layers is not None else config.num_layers)
        h = int(config.num_heads)
        return Dims(n, int(config.d_model), h, h, int(config.d_kv))
    return dims


def _seq2seq_dims(side: str) -> Callable[[Any], Dims]:
    """BART / Whisper: ``{side}_layers`` and ``{side}_attention_heads``; cross-attention lives in the decoder."""
    def dims(config: Any) -> Dims:
        d, h = int(config.d_model), int(getattr(config, f"{side}_attention_heads"))
        return Dims(int(getattr(config, f"{side}_layers")), d, h, h, d // h)
    return dims


def _seq2seq(model_type: str, self_attn: str = "self_attn", cross_attn: str = "encoder_attn", pre_ln: bool = False,
             **kw) -> Architecture:
    def block(component: Component, side: str, attn: str) -> AttentionBlock:
        prefix = f"{side}.layers.{{i}}.{attn}."
        norms = {}
        if pre_ln:  # Whisper: each block normalises its own input; cross-attention keys read the encoder's output
            norms = dict(input_norm=f"{side}.layers.{{i}}.{attn}_layer_norm.weight",
                         input_norm_k="encoder.layer_norm.weight" if component == "cross" else None)
        return AttentionBlock(component, prefix + "q_proj.weight", prefix + "k_proj.weight", dims=_seq2seq_dims(side),
                              **norms)
    return Architecture(model_type, "encoder-decoder",
                        (block("encoder", "encoder", self_attn), block("decoder", "decoder", self_attn),
                         block("cross", "decoder", cross_attn)), **kw)


_VIT_NOTES = ("Checkpoints on disk name the tensors attention.attention.query/key; transformers 5 modules call them "
              "attention.q_proj/k_proj in memory. Both are found.")


def _vit_like(model_type: str, in_memory: str) -> Architecture:
    p = "encoder.layer.{i}.attention."
    return Architecture(model_type, "encoder", (AttentionBlock(
        "self", p + "attention.query.weight", p + "attention.key.weight",
        alternatives=((in_memory + "q_proj.weight", in_memory + "k_proj.weight"),)),), notes=_VIT_NOTES)


QK_NORM_NOTES = ("QK-norm: RMSNorm on q and k {scope}. Its gains fold into W_Q and W_K (load_qk(qk_norm='folded'), "
                 "the default); the per-token normalisations 1/rms(q_i), 1/rms(k_j) stay outside W_qk. "
                 "qk_norm='raw' ignores the gains.")

REGISTRY: dict[str, Architecture] = {}


def register(arch: Architecture) -> Architecture:
    """Add ``arch`` to :data:`REGISTRY` under its model_type and aliases."""
    for key in (arch.model_type, *arch.aliases):
        REGISTRY[key] = arch
    return arch


for _arch in (
    # ---- encoders
    _bert_like("bert", notes="BERT and its checkpoints (MiniLM, BERT-tiny...)."),
    _bert_like("roberta"),
    _bert_like("xlm-roberta"),
    _bert_like("electra", post_ln=False),
    Architecture("albert", "encoder", (AttentionBlock(
        "self", "encoder.albert_layer_groups.{i}.albert_layers.0.attention.query.weight",
        "encoder.albert_layer_groups.{i}.albert_layers.0.attention.key.weight", dims=_albert_dims),),
        notes="ALBERT shares one attention block across all layers: one 'layer' per distinct parameter group "
              "(num_hidden_groups, 1 in every released checkpoint)."),
    Architecture("distilbert", "encoder", (AttentionBlock(
        "self", "transformer.layer.{i}.attention.q_lin.weight", "transformer.layer.{i}.attention.k_lin.weight",
        dims=_distilbert_dims, input_norm="transformer.layer.{prev}.output_layer_norm.weight",
        input_norm_first="embeddings.LayerNorm.weight"),)),
    Architecture("deberta-v2", "encoder", (AttentionBlock(
        "self", "encoder.layer.{i}.attention.self.query_proj.weight", "encoder.layer.{i}.attention.self.key_proj.weight",
        dims=_deberta_dims),),
               notes="Content-to-content term only: W_qk = W_Q W_Kᵀ of query_proj/key_proj. The disentangled "
                     "content-to-position and position-to-content terms are outside it. DeBERTa scales logits by "
                     "1/sqrt(head_dim · (1 + number of relative terms)), i.e. 1/sqrt(3·head_dim) for DeBERTa-v3."),
    Architecture("modernbert", "encoder", (AttentionBlock("self", "layers.{i}.attn.Wqkv.weight", None,
                                                          "fused_blocked"),),
                 notes="Fused Wqkv viewed as (3, n_heads, head_dim): blocked [Q; K; V]. Rotary outside W_qk."),
    _vit_like("vit", in_memory="layers.{i}.attention."),
    _vit_like("dinov2", in_memory="encoder.layer.{i}.attention."),
    # ---- decoders
    Architecture("gpt2", "decoder", (AttentionBlock("self", "h.{i}.attn.c_attn.weight", None, "conv1d_fused",
                                                    input_norm="h.{i}.ln_1.weight"),),
                 notes="Fused Conv1D c_attn of shape (d, 3d), blocked [Q|K|V]."),
    Architecture("openai-gpt", "decoder", (AttentionBlock("self", "h.{i}.attn.c_attn.weight", None, "conv1d_fused"),),
                 notes="GPT-1: fused Conv1D c_attn (d, 3d), blocked [Q|K|V], as GPT-2; causal mask value -1e4."),
    Architecture("gpt_neo", "decoder", (AttentionBlock("self", "h.{i}.attn.attention.q_proj.weight",
                                                       "h.{i}.attn.attention.k_proj.weight"),),
                 notes="GPT-Neo has NO 1/sqrt(head_dim) scaling: its logit is x_iᵀ W_qk x_j. Alternating global and "
                       "local (windowed) layers share the same form."),
    Architecture("gpt_neox", "decoder", (AttentionBlock("self", "layers.{i}.attention.query_key_value.weight", None,
                                                        "fused_interleaved"),),
                 notes="Fused query_key_value viewed as (n_heads, 3·head_dim): interleaved per head. Partial rotary "
                       "(rotary_pct) outside W_qk."),
    Architecture("gptj", "decoder", (AttentionBlock("self", "h.{i}.attn.q_proj.weight", "h.{i}.attn.k_proj.weight"),),
                 notes="Partial rotary on the first rotary_dim dims (interleaved pairs), outside W_qk."),
    Architecture("opt", "decoder", (AttentionBlock("self", "layers.{i}.self_attn.q_proj.weight",
                                                   "layers.{i}.self_attn.k_proj.weight"),),
                 notes="OPT multiplies q by 1/sqrt(head_dim) before the product; same logit."),
    Architecture("bloom", "decoder", (AttentionBlock("self", "h.{i}.self_attention.query_key_value.weight", None,
                                                     "fused_interleaved"),),
                 notes="Fused query_key_value viewed as (n_heads, 3, head_dim): interleaved per head. ALiBi adds a "
                       "per-head linear distance bias outside W_qk (zero at offset 0)."),
    _llama_like("llama", gguf=GGUFSpec("llama"), notes="Grouped-query attention; rotary embeddings are outside W_qk."),
    _llama_like("mistral"),
    _llama_like("mixtral", notes="Mixture-of-experts MLP; attention as Llama."),
    _llama_like("qwen2", gguf=GGUFSpec("qwen2", rope_permuted=False),
                notes="llama.cpp rotates Qwen2 with its NEOX rope (pairs j, j + head_dim/2, as HF): its converter "
                      "does not permute Q/K rows. Q/K biases are outside W_qk."),
    _llama_like("qwen3", q_norm="q_norm.weight", k_norm="k_norm.weight",
                notes=QK_NORM_NOTES.format(scope="per head (gain of length head_dim)")),
    _llama_like("gemma", input_norm_offset=1.0, notes="Gemma scales logits by 1/sqrt(head_dim)."),
    _llama_like("gemma2", input_norm_offset=1.0, notes="Scale query_pre_attn_scalar**-0.5 and logit soft-capping tanh(z/c)·c: both act on "
                                "the logit after W_qk (soft-capping is monotone, not bilinear)."),
    _llama_like("gemma3_text", q_norm="q_norm.weight", k_norm="k_norm.weight", norm_offset=1.0, input_norm_offset=1.0,
                gguf=GGUFSpec("gemma3", rope_permuted=False, q_norm="blk.{i}.attn_q_norm.weight",
                              k_norm="blk.{i}.attn_k_norm.weight"),
                notes=QK_NORM_NOTES.format(scope="per head, gain 1 + weight") + " Scale query_pre_attn_scalar**-0.5."),
    Architecture("gemma3", "decoder", (AttentionBlock(
        "self", "language_model.layers.{i}.self_attn.q_proj.weight", "language_model.layers.{i}.self_attn.k_proj.weight",
        dims=_text_dims, q_norm="language_model.layers.{i}.self_attn.q_norm.weight",
        k_norm="language_model.layers.{i}.self_attn.k_norm.weight", norm_offset=1.0,
        input_norm="language_model.layers.{i}.input_layernorm.weight", input_norm_offset=1.0,
        alternatives=(("language_model.model.layers.{i}.self_attn.q_proj.weight",
                       "language_model.model.layers.{i}.self_attn.k_proj.weight"),)),),
        notes="Gemma-3 multimodal checkpoints: the language model only (the SigLIP vision tower is not surveyed). "
              + QK_NORM_NOTES.format(scope="per head, gain 1 + weight")),
    _llama_like("phi", dims=_phi_dims, input_norm=None, notes="Partial rotary (partial_rotary_factor) outside W_qk."),
    Architecture("phi3", "decoder", (AttentionBlock("self", "layers.{i}.self_attn.qkv_proj.weight", None,
                                                    "fused_blocked", input_norm="layers.{i}.input_layernorm.weight"),),
                 notes="Fused qkv_proj sliced as [Q (n_heads·head_dim); K (n_kv·head_dim); V]: blocked."),
    _llama_like("olmo", input_norm=None,
                notes="clip_qkv (OLMo-7B-0424: 8) clamps q and k elementwise: a nonlinearity outside W_qk."),
    _llama_like("olmo2", input_norm=None, q_norm="q_norm.weight", k_norm="k_norm.weight",
                notes=QK_NORM_NOTES.format(scope="over all heads at once (gain of length n_heads·head_dim)")),
    # ---- encoder-decoders
    Architecture("t5", "encoder-decoder", (
        AttentionBlock("encoder", "encoder.block.{i}.layer.0.SelfAttention.q.weight",
                       "encoder.block.{i}.layer.0.SelfAttention.k.weight", dims=_t5_dims(False)),
        AttentionBlock("decoder", "decoder.block.{i}.layer.0.SelfAttention.q.weight",
                       "decoder.block.{i}.layer.0.SelfAttention.k.weight", dims=_t5_dims(True)),
        AttentionBlock("cross", "decoder.block.{i}.layer.1.EncDecAttention.q.weight",
                       "decoder.block.{i}.layer.1.EncDecAttention.k.weight", dims=_t5_dims(True))),
        notes="T5 has NO 1/sqrt(d_kv) scaling; the learned relative position bias is outside W_qk."),
    _seq2seq("bart"),
    _seq2seq("whisper", pre_ln=True, notes="Encoder self-attention over audio frames, decoder self-attention over text, and "
                              "cross-attention (query: text, key: audio)."),
):
    register(_arch)


def get_architecture(model_type: str) -> Architecture:
    """Registry lookup with an error that lists what is supported."""
    try:
        return REGISTRY[model_type]
    except KeyError:
        raise SourceError(
            f"model_type {model_type!r} is not supported. Supported: {', '.join(sorted(REGISTRY))}. "
            "To add one, register an Architecture in qkgeometry/architectures.py with its logit-equivalence test."
        ) from None


def architecture_for_gguf(gguf_arch: str) -> Architecture:
    """Find the registry entry whose GGUF ``general.architecture`` is ``gguf_arch``."""
    for arch in REGISTRY.values():
        if arch.gguf is not None and arch.gguf.arch == gguf_arch:
            return arch
    supported = sorted({a.gguf.arch for a in REGISTRY.values() if a.gguf is not None})
    raise SourceError(f"GGUF architecture {gguf_arch!r} is not supported. Supported GGUF architectures: "
                      f"{', '.join(supported)}.")


# ---------------------------------------------------------------------------------------------- appended
#: MPNet (all-mpnet-base-v2): BERT-shaped encoder whose attention adds a learned relative position bias.
MPNET = register(Architecture(
    "mpnet", "encoder",
    (AttentionBlock("self", "encoder.layer.{i}.attention.attn.q.weight", "encoder.layer.{i}.attention.attn.k.weight",
                    **_POST_LN),),
    notes="MPNet's logit is x_iᵀ W_qk x_j / sqrt(head_dim) plus b_qᵀ k_j-type bias terms plus a relative position "
          "bias: a learned per-head scalar for the bucketed offset j − i (shared by all layers, computed once in "
          "the encoder). That bias depends only on positions, never on the token content x, so it is outside W_qk."))
