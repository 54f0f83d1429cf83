"""The registry of architectures: for each HF ``model_type``, where the Q and K weights live and how they are laid out.

Conventions (the book's Notation page): for query head h, ``W_Q^h`` and ``W_K^{g(h)}`` have shape (d_model, head_dim) and act as
``q = W_Qᵀ x``; torch's ``nn.Linear.weight`` is ``W_Qᵀ`` stacked over heads, shape (n_heads·head_dim, d_model).
Grouped-query attention repeats KV heads along the head axis: ``g(h) = h // (n_heads / n_kv_heads)``.

An :class:`Architecture` lists one :class:`AttentionBlock` per kind of attention (``self``, or ``encoder`` /
``decoder`` / ``cross`` for encoder-decoder models). Each block says where its tensors are (a name template with
``{i}`` for the layer index, matched as a dotted suffix so that ``bert.``/``model.``/``transformer.`` prefixes of
task heads are found automatically) and which :data:`Layout` they use. Adding an architecture is adding an entry to
:data:`REGISTRY` plus a logit-equivalence test in the package's test suite.

The layout converters live in :mod:`qkgeometry.architectures.layouts`, the norm folding in
:mod:`qkgeometry.architectures.norms`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import SourceError

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
                         "checkpoint has 1); register its layer naming in qkgeometry/architectures/registry.py first.")
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


def projection_names() -> tuple[tuple[str, str], ...]:
    """The (query, key) attribute names of every attention module with separate Q and K ``Linear`` layers that the
    registry knows (``("q_proj", "k_proj")``, ``("query", "key")``, ``("q", "k")``...), most common first: how a
    module of a model outside the registry is recognised as attention."""
    found: dict[tuple[str, str], int] = {}
    for arch in REGISTRY.values():
        for block in arch.blocks:
            for q, k in ((block.q, block.k), *block.alternatives):
                if k is not None and block.layout == "linear" and q.count(".") >= 2 and k.count(".") >= 2:
                    pair = (q.rsplit(".", 2)[1], k.rsplit(".", 2)[1])
                    found[pair] = found.get(pair, 0) + 1
    return tuple(sorted(found, key=lambda pair: -found[pair]))


def get_architecture(model_type: str) -> Architecture:
    """Registry lookup with an error that lists what is supported."""
    try:
        return REGISTRY[model_type]
    except KeyError:
        raise SourceError(
            f"model_type {model_type!r} is not supported. Supported: {', '.join(sorted(REGISTRY))}. "
            "To add one, register an Architecture in qkgeometry/architectures/registry.py with its logit-equivalence test."
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
