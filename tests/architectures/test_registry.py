"""Every adapter in the registry reproduces its model's own pre-softmax logits (see tests/logit_harness.py)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import pytest
import torch

from logit_harness import LogitCase, _qk_rms, check_logit_equivalence, rope_identity
from qkgeometry.architectures import REGISTRY, get_architecture

TINY_BERT = dict(hidden_size=48, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                 vocab_size=99, max_position_embeddings=32)
TINY_LLAMA = dict(hidden_size=48, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                  intermediate_size=64, vocab_size=99, max_position_embeddings=32)


TINY_SEQ2SEQ = dict(d_model=48, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                    decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, vocab_size=99,
                    pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2)
TINY_VISION = dict(hidden_size=48, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, image_size=16,
                   patch_size=8)
QK_BIASES = ("query.bias", "key.bias", "q_proj.bias", "k_proj.bias", "c_attn.bias", "q_lin.bias", "k_lin.bias",
             "query_proj.bias", "key_proj.bias", "query_key_value.bias", "Wqkv.bias", "qkv_proj.bias")


def _bert_self(model, i):
    return model.encoder.layer[i].attention.self


def _llama_self(model, i):
    return model.layers[i].self_attn


def _call_rope(module, x, model):
    return module(x, position_embeddings=rope_identity(x, module.head_dim), attention_mask=None)


def _call_rope_partial(attr: str):
    """Rotary on only the first ``module.<attr>`` dims of each head (Phi, GPT-NeoX), identity at offset 0."""
    return lambda module, x, model: module(x, position_embeddings=rope_identity(x, getattr(module, attr)),
                                           attention_mask=None)


def _call_gptj(module, x, model):
    import inspect

    b, t, _ = x.shape
    if "position_embeddings" not in inspect.signature(module.forward).parameters:
        # older transformers (5.20, and Colab's 5.15): the module reads its own sin/cos table at the
        # positions given; position 0 everywhere is the identity rotation
        return module(x, position_ids=torch.zeros(b, t, dtype=torch.long), attention_mask=None)
    half = module.rotary_dim // 2
    sin, cos = torch.zeros(b, t, half, dtype=x.dtype), torch.ones(b, t, half, dtype=x.dtype)
    return module(x, position_embeddings=(sin, cos), attention_mask=None)


def _call_bloom(module, x, model):
    b, t, _ = x.shape
    alibi = torch.zeros(b * module.num_heads, 1, t, dtype=x.dtype)  # ALiBi is a distance bias, zero at offset 0
    return module(x, torch.zeros_like(x), alibi, None)


def _call_deberta(module, x, model):
    b, t, _ = x.shape
    # content-to-content only: the disentangled position terms are switched off (they are outside W_qk)
    module.disentangled_attention_bias = lambda *args, **kwargs: None
    return module(x, torch.ones(b, 1, t, t, dtype=torch.bool), rel_embeddings=torch.zeros(1, dtype=x.dtype))


def _deberta_scale(config):
    n_terms = 1 + sum(term in (config.pos_att_type or []) for term in ("c2p", "p2c"))
    return 1.0 / math.sqrt(n_terms * config.hidden_size // config.num_attention_heads)


def _call_t5(cross: bool):
    def call(module, x, model):
        _, t, _ = x.shape
        bias = torch.zeros(1, module.n_heads, t, t, dtype=x.dtype)  # the learned relative bias is outside W_qk
        return module(x, key_value_states=x if cross else None, position_bias=bias)
    return call


def _call_cross(module, x, model):  # query and key from the same states: W_qk's two sides are still distinct
    return module(x, key_value_states=x)


def _gemma_scale(config):
    return config.get_text_config().query_pre_attn_scalar ** -0.5


TINY_T5 = dict(d_model=48, d_kv=16, d_ff=64, num_layers=2, num_decoder_layers=3, num_heads=4, vocab_size=99,
               decoder_start_token_id=0)
TINY_GEMMA3 = {**TINY_LLAMA, "num_key_value_heads": 2, "head_dim": 16, "query_pre_attn_scalar": 24,
               "sliding_window": 4, "layer_types": ["sliding_attention", "full_attention"]}
NORM_GAINS = ("q_norm.weight", "k_norm.weight")

CASES = [
    # ---- encoders
    LogitCase("bert", "bert", TINY_BERT, _bert_self),
    LogitCase("roberta", "roberta", TINY_BERT, _bert_self),
    LogitCase("xlm-roberta", "xlm-roberta", TINY_BERT, _bert_self),
    LogitCase("electra", "electra", {**TINY_BERT, "embedding_size": 32}, _bert_self),
    LogitCase("albert", "albert", {**TINY_BERT, "embedding_size": 32, "num_hidden_groups": 2},
              lambda m, i: m.encoder.albert_layer_groups[i].albert_layers[0].attention),
    LogitCase("distilbert", "distilbert", dict(dim=48, n_layers=2, n_heads=4, hidden_dim=64, vocab_size=99,
                                               max_position_embeddings=32),
              lambda m, i: m.transformer.layer[i].attention),
    LogitCase("deberta-v2-c2c", "deberta-v2", {**TINY_BERT, "relative_attention": True, "pos_att_type": ["p2c", "c2p"],
                                               "position_buckets": 8},
              _bert_self, _call_deberta, scale=_deberta_scale, bias_names=QK_BIASES),
    LogitCase("modernbert-fused-wqkv", "modernbert", {**TINY_BERT, "pad_token_id": 0, "global_attn_every_n_layers": 2,
                                                       "local_attention": 4},
              lambda m, i: m.layers[i].attn, _call_rope_partial("head_dim"), bias_names=QK_BIASES),
    LogitCase("vit", "vit", TINY_VISION, lambda m, i: m.layers[i].attention),
    LogitCase("dinov2", "dinov2", TINY_VISION, lambda m, i: m.encoder.layer[i].attention),
    # MPNet without its relative position bias (outside W_qk; tests/test_mpnet.py checks it with the bias)
    LogitCase("mpnet-no-position-bias", "mpnet", TINY_BERT, lambda m, i: m.encoder.layer[i].attention.attn,
              bias_names=("attn.q.bias", "attn.k.bias")),
    # ---- decoders
    LogitCase("gpt2", "gpt2", dict(n_embd=48, n_layer=2, n_head=4, vocab_size=99, n_positions=32),
              lambda m, i: m.h[i].attn),
    LogitCase("openai-gpt", "openai-gpt", dict(n_embd=48, n_layer=2, n_head=4, vocab_size=99, n_positions=32),
              lambda m, i: m.h[i].attn, masked_below=-9e3),
    LogitCase("gpt_neo-no-scaling", "gpt_neo", dict(hidden_size=48, num_layers=2, num_heads=4, vocab_size=99,
                                                    max_position_embeddings=32, window_size=16,
                                                    attention_types=[[["global", "local"], 1]]),
              lambda m, i: m.h[i].attn.attention, scale=lambda c: 1.0),
    LogitCase("gpt_neox-interleaved", "gpt_neox", {**TINY_LLAMA, "rotary_pct": 0.5},
              lambda m, i: m.layers[i].attention, _call_rope_partial("rotary_ndims"), bias_names=QK_BIASES),
    LogitCase("gptj", "gptj", dict(n_embd=48, n_layer=2, n_head=4, rotary_dim=6, vocab_size=99, n_positions=32),
              lambda m, i: m.h[i].attn, _call_gptj),
    LogitCase("opt-scaled-q", "opt", dict(hidden_size=48, num_hidden_layers=2, num_attention_heads=4, ffn_dim=64,
                                          vocab_size=99, max_position_embeddings=32, word_embed_proj_dim=32),
              lambda m, i: m.decoder.layers[i].self_attn),
    LogitCase("bloom-interleaved", "bloom", dict(hidden_size=48, n_layer=2, n_head=4, vocab_size=99),
              lambda m, i: m.h[i].self_attention, _call_bloom, bias_names=QK_BIASES),
    LogitCase("llama", "llama", TINY_LLAMA, _llama_self, _call_rope),
    LogitCase("llama-gqa-8x2", "llama", {**TINY_LLAMA, "hidden_size": 64, "num_attention_heads": 8,
                                         "num_key_value_heads": 2}, _llama_self, _call_rope),
    LogitCase("llama-nonsquare-heads", "llama", {**TINY_LLAMA, "num_key_value_heads": 2, "head_dim": 20},
              _llama_self, _call_rope),
    LogitCase("mistral-gqa", "mistral", {**TINY_LLAMA, "hidden_size": 64, "num_attention_heads": 8,
                                         "num_key_value_heads": 2}, _llama_self, _call_rope),
    LogitCase("mixtral-gqa", "mixtral", {**TINY_LLAMA, "num_key_value_heads": 2, "num_local_experts": 2,
                                         "num_experts_per_tok": 1}, _llama_self, _call_rope),
    LogitCase("qwen2-gqa-bias", "qwen2", {**TINY_LLAMA, "num_key_value_heads": 2}, _llama_self, _call_rope),
    LogitCase("qwen3-qknorm-folded", "qwen3", {**TINY_LLAMA, "num_key_value_heads": 2, "head_dim": 16},
              _llama_self, _call_rope, randomize=NORM_GAINS, qk_norm="head"),
    LogitCase("gemma", "gemma", {**TINY_LLAMA, "num_key_value_heads": 1, "head_dim": 16}, _llama_self, _call_rope),
    LogitCase("gemma2-scalar-nocap", "gemma2", {**TINY_GEMMA3, "attn_logit_softcapping": None},
              _llama_self, _call_rope, scale=_gemma_scale),
    LogitCase("gemma3-qknorm-folded", "gemma3_text", TINY_GEMMA3, _llama_self, _call_rope, scale=_gemma_scale,
              randomize=NORM_GAINS, qk_norm="head"),
    LogitCase("gemma3-multimodal-language-model", "gemma3",
              dict(text_config={**TINY_GEMMA3, "model_type": "gemma3_text"}, mm_tokens_per_image=4,
                   vision_config=dict(hidden_size=32, intermediate_size=37, num_hidden_layers=1,
                                      num_attention_heads=4, image_size=16, patch_size=8)),
              lambda m, i: m.language_model.layers[i].self_attn, _call_rope, scale=_gemma_scale,
              randomize=NORM_GAINS, qk_norm="head"),
    LogitCase("phi-partial-rotary", "phi", {**TINY_LLAMA, "partial_rotary_factor": 0.5}, _llama_self,
              _call_rope_partial("rotary_ndims")),
    LogitCase("phi3-fused-gqa", "phi3", {**TINY_LLAMA, "num_key_value_heads": 2, "pad_token_id": 0}, _llama_self,
              _call_rope),
    LogitCase("olmo", "olmo", {**TINY_LLAMA, "pad_token_id": 0}, _llama_self, _call_rope),
    LogitCase("olmo2-qknorm-all-heads", "olmo2", {**TINY_LLAMA, "num_key_value_heads": 2, "pad_token_id": 0},
              _llama_self, _call_rope, randomize=NORM_GAINS, qk_norm="all"),
    # ---- encoder-decoders (T5 has no 1/sqrt(d_kv) scaling)
    *[LogitCase(f"t5-{comp}", "t5", TINY_T5, attention, _call_t5(comp == "cross"), component=comp,
                scale=lambda c: 1.0)
      for comp, attention in (("encoder", lambda m, i: m.encoder.block[i].layer[0].SelfAttention),
                              ("decoder", lambda m, i: m.decoder.block[i].layer[0].SelfAttention),
                              ("cross", lambda m, i: m.decoder.block[i].layer[1].EncDecAttention))],
    *[LogitCase(f"{mt}-{comp}", mt, {**TINY_SEQ2SEQ, **extra}, attention,
                _call_cross if comp == "cross" else (lambda m, x, model: m(x)), component=comp)
      for mt, extra in (("bart", {}),
                             ("whisper", dict(num_mel_bins=8, max_source_positions=16,
                                                              max_target_positions=16, pad_token_id=1)))
      for comp, attention in (("encoder", lambda m, i: m.encoder.layers[i].self_attn),
                              ("decoder", lambda m, i: m.decoder.layers[i].self_attn),
                              ("cross", lambda m, i: m.decoder.layers[i].encoder_attn))],
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_logit_equivalence(case: LogitCase, tmp_path):
    worst = check_logit_equivalence(case, tmp_path)
    assert worst < 1e-5


def test_every_input_norm_in_the_registry_is_checked_against_its_model():
    tested = {c.model_type for c in NORM_CASES}
    declared = {a.model_type for a in REGISTRY.values() if any(b.input_norm for b in a.blocks)}
    assert declared <= tested, sorted(declared - tested)


def test_unknown_input_norm_is_a_clear_error(tmp_path):
    import qkgeometry as qg
    from logit_harness import build_tiny_model

    build_tiny_model(next(c for c in CASES if c.id == "olmo2-qknorm-all-heads"), tmp_path)
    with pytest.raises(qg.SourceError, match=r"`input_norm='folded'` is not available for model type 'olmo2'"):
        qg.load_qk(tmp_path, input_norm="folded")
    with pytest.raises(ValueError, match=r"`input_norm` must be 'raw' or 'folded'; got 'gamma'"):
        qg.load_qk(tmp_path, input_norm="gamma")
    assert qg.load_qk(tmp_path).input_norm == "raw"


def test_every_registered_architecture_has_a_logit_test():
    tested = {c.model_type for c in CASES}
    untested = sorted({a.model_type for a in REGISTRY.values()} - tested)
    assert not untested, f"adapters without a logit-equivalence test: {untested}"


def test_unknown_model_type_lists_supported():
    with pytest.raises(ValueError, match=r"not supported\. Supported: .*bert.*llama"):
        get_architecture("not-a-model")


def test_in_memory_names_match_checkpoint_names(tmp_path):
    """transformers-5 ViT modules name q/k `attention.q_proj` in memory but save `attention.attention.query`."""
    import qkgeometry as qg
    from logit_harness import build_tiny_model

    case = next(c for c in CASES if c.id == "vit")
    model = build_tiny_model(case, tmp_path)
    on_disk, in_memory = qg.load_qk(tmp_path).layer(1), qg.load_qk(model).layer(1)
    assert torch.equal(on_disk.wq, in_memory.wq) and torch.equal(on_disk.wk, in_memory.wk)


def test_qk_norm_raw_and_folded_differ_only_by_gains(tmp_path):
    import qkgeometry as qg
    from logit_harness import build_tiny_model

    case = next(c for c in CASES if c.id == "gemma3-qknorm-folded")
    model = build_tiny_model(case, tmp_path)
    folded, raw = qg.load_qk(tmp_path), qg.load_qk(tmp_path, qk_norm="raw")
    assert folded.qk_norm == "folded" and raw.qk_norm == "raw" and folded.has_qk_norm
    attn = model.layers[0].self_attn
    gq, gk = 1 + attn.q_norm.weight.detach(), 1 + attn.k_norm.weight.detach()  # Gemma: gain = 1 + weight
    torch.testing.assert_close(folded.layer(0).wq, raw.layer(0).wq * gq)
    torch.testing.assert_close(folded.layer(0).wk_kv, raw.layer(0).wk_kv * gk)
    with pytest.raises(ValueError, match="qk_norm"):
        qg.load_qk(tmp_path, qk_norm="gains")
    assert qg.load_qk("offline:minilm-l6").qk_norm is None  # not a QK-norm model


# ------------------------------------------------------------------------------------------ input-norm folding
# Each model runs whole (float64, eager attention) on random input. For every attention layer we record the output h
# of the normalisation that the test names as the one the attention reads (a forward hook) and the logits the
# attention passes to softmax. With x̂ = (h − β)/γ (γ, β: that module's own gain and shift; Gemma: γ = 1 + weight)
# the logits must equal, to 1e-10,
#     scale · [ x̂_iᵀ F x̂_j + b_qᵀ W'_Kᵀ x̂_j + q_i · (W_Kᵀ β_k) ],   q_i = W'_Qᵀ x̂_i + b_q,
# where F, W'_Q, W'_K, b_q come from load_qk(input_norm="folded") and W_K from the raw load (key biases are zeroed,
# so the last, query-only term is all that is left of the key side's shift). x̂ is also checked to be the
# standardised input of the norm ((x − mean)/std for LayerNorm, x/rms for RMSNorm), to float32 round-off.


def _identity_rotary(model) -> None:
    """Rotary embeddings at offset 0 for every position (cos 1, sin 0): W_qk is the form at relative offset 0."""
    for module in model.modules():
        if type(module).__name__.endswith("RotaryEmbedding"):
            original = module.forward

            def forward(*args, _original=original, **kwargs):
                cos, sin = _original(*args, **kwargs)
                return torch.ones_like(cos), torch.zeros_like(sin)

            module.forward = forward


@dataclasses.dataclass
class NormCase:
    id: str
    model_type: str
    config: dict
    #: (component, layer) -> (query-side norm module, key-side norm module)
    norms: Callable[[Any, str, int], tuple[Any, Any]]
    #: the components in the order the model runs its softmaxes, per layer: [(component, layer), ...]
    order: Callable[[Any], list[tuple[str, int]]]
    run: Callable[[Any, torch.Generator], Any]
    scale: Callable[[Any], float] | None = None
    gain_offset: float = 0.0
    rms: bool = False
    #: QK-norm scope ("head"), as in the logit harness: logits are then divided by rms(q_i)·rms(k_j)
    qk_norm: str | None = None


def _embeds(model, gen, tokens=7, batch=2):
    d = model.config.get_text_config().hidden_size
    return torch.randn(batch, tokens, d, generator=gen, dtype=torch.float64)


def _self_order(n_layers_attr="num_hidden_layers"):
    return lambda model: [("self", i) for i in range(getattr(model.config.get_text_config(), n_layers_attr))]


def _post_ln(layers: str, out: str):
    def norms(model, component, i):
        m = model.embeddings.LayerNorm if i == 0 else model.get_submodule(f"{layers}.{i - 1}.{out}")
        return m, m
    return norms


def _pre_ln(layers: str, norm: str):
    def norms(model, component, i):
        m = model.get_submodule(f"{layers}.{i}.{norm}")
        return m, m
    return norms


def _whisper_norms(model, component, i):
    if component == "encoder":
        m = model.encoder.layers[i].self_attn_layer_norm
        return m, m
    if component == "decoder":
        m = model.decoder.layers[i].self_attn_layer_norm
        return m, m
    return model.decoder.layers[i].encoder_attn_layer_norm, model.encoder.layer_norm


def _whisper_order(model):
    c = model.config
    return ([("encoder", i) for i in range(c.encoder_layers)]
            + [(comp, i) for i in range(c.decoder_layers) for comp in ("decoder", "cross")])


def _run_whisper(model, gen):
    c = model.config
    features = torch.randn(2, c.num_mel_bins, 2 * c.max_source_positions, generator=gen, dtype=torch.float64)
    ids = torch.randint(3, c.vocab_size, (2, 7), generator=gen)
    return model(input_features=features, decoder_input_ids=ids)


def _run_mpnet(model, gen):
    # the relative position bias depends on positions only (outside W_qk; tests/test_mpnet.py checks it): off here
    model.encoder.compute_position_bias = lambda x, *a, **k: torch.zeros(
        x.shape[0], model.config.num_attention_heads, x.shape[1], x.shape[1], dtype=x.dtype)
    return model(inputs_embeds=_embeds(model, gen))


def _run_embeds(model, gen):
    return model(inputs_embeds=_embeds(model, gen))


_LLAMA_NORMS = _pre_ln("layers", "input_layernorm")
_GQA = {**TINY_LLAMA, "num_key_value_heads": 2}

NORM_CASES = [
    NormCase("bert-post-ln", "bert", TINY_BERT, _post_ln("encoder.layer", "output.LayerNorm"), _self_order(),
             _run_embeds),
    NormCase("roberta-post-ln", "roberta", TINY_BERT, _post_ln("encoder.layer", "output.LayerNorm"), _self_order(),
             _run_embeds),
    NormCase("xlm-roberta-post-ln", "xlm-roberta", TINY_BERT, _post_ln("encoder.layer", "output.LayerNorm"),
             _self_order(), _run_embeds),
    NormCase("mpnet-post-ln", "mpnet", TINY_BERT, _post_ln("encoder.layer", "output.LayerNorm"), _self_order(),
             _run_mpnet),
    NormCase("distilbert-post-ln", "distilbert", dict(dim=48, n_layers=2, n_heads=4, hidden_dim=64, vocab_size=99,
                                                      max_position_embeddings=32),
             _post_ln("transformer.layer", "output_layer_norm"), lambda m: [("self", 0), ("self", 1)], _run_embeds),
    NormCase("gpt2-pre-ln", "gpt2", dict(n_embd=48, n_layer=2, n_head=4, vocab_size=99, n_positions=32),
             _pre_ln("h", "ln_1"), lambda m: [("self", 0), ("self", 1)], _run_embeds),
    NormCase("llama-gqa-rmsnorm", "llama", _GQA, _LLAMA_NORMS, _self_order(), _run_embeds, rms=True),
    NormCase("mistral-rmsnorm", "mistral", _GQA, _LLAMA_NORMS, _self_order(), _run_embeds, rms=True),
    NormCase("mixtral-rmsnorm", "mixtral", {**_GQA, "num_local_experts": 2, "num_experts_per_tok": 1},
             _LLAMA_NORMS, _self_order(), _run_embeds, rms=True),
    NormCase("qwen2-rmsnorm-bias", "qwen2", _GQA, _LLAMA_NORMS, _self_order(), _run_embeds, rms=True),
    NormCase("phi3-rmsnorm", "phi3", {**_GQA, "pad_token_id": 0}, _LLAMA_NORMS, _self_order(), _run_embeds, rms=True),
    NormCase("gemma-one-plus-w", "gemma", {**TINY_LLAMA, "num_key_value_heads": 1, "head_dim": 16}, _LLAMA_NORMS,
             _self_order(), _run_embeds, gain_offset=1.0, rms=True),
    NormCase("gemma2-one-plus-w", "gemma2", {**TINY_GEMMA3, "attn_logit_softcapping": None}, _LLAMA_NORMS,
             _self_order(), _run_embeds, scale=_gemma_scale, gain_offset=1.0, rms=True),
    NormCase("qwen3-rmsnorm-qknorm", "qwen3", {**_GQA, "head_dim": 16}, _LLAMA_NORMS, _self_order(), _run_embeds,
             rms=True, qk_norm="head"),
    NormCase("gemma3-one-plus-w-qknorm", "gemma3_text", TINY_GEMMA3, _LLAMA_NORMS, _self_order(), _run_embeds,
             scale=_gemma_scale, gain_offset=1.0, rms=True, qk_norm="head"),
    NormCase("gemma3-multimodal-language-model", "gemma3",
             dict(text_config={**TINY_GEMMA3, "model_type": "gemma3_text"}, mm_tokens_per_image=4,
                  vision_config=dict(hidden_size=32, intermediate_size=37, num_hidden_layers=1, num_attention_heads=4,
                                     image_size=16, patch_size=8)),
             _pre_ln("language_model.layers", "input_layernorm"), _self_order(),
             lambda model, gen: model.language_model(inputs_embeds=_embeds(model, gen)),
             scale=_gemma_scale, gain_offset=1.0, rms=True, qk_norm="head"),
    NormCase("whisper-pre-ln-cross", "whisper", {**TINY_SEQ2SEQ, "decoder_layers": 3, "decoder_attention_heads": 6,
                                                 "num_mel_bins": 8, "max_source_positions": 16,
                                                 "max_target_positions": 16, "pad_token_id": 1},
             _whisper_norms, _whisper_order, _run_whisper),
]


def _build_norm_model(case: NormCase, folder):
    import transformers

    torch.manual_seed(0)
    config = transformers.AutoConfig.for_model(case.model_type, **case.config)
    extra = {"experts_implementation": "eager"} if case.model_type == "mixtral" else {}  # grouped_mm: no float64
    model = transformers.AutoModel.from_config(config, attn_implementation="eager", **extra).to(torch.float64).eval()
    with torch.no_grad():
        for module in model.modules():
            kind = type(module).__name__
            if "Norm" in kind and getattr(module, "weight", None) is not None:
                module.weight.uniform_(0.5, 1.5)  # non-trivial gains (Gemma: 1 + w in [1.5, 2.5]), QK-norm too
                if getattr(module, "bias", None) is not None:
                    module.bias.normal_(0, 0.5)
        for name, p in model.named_parameters():
            leaf = name.rsplit(".", 2)
            if leaf[-1] != "bias" or "Norm" in name or "norm" in name:
                continue
            if leaf[-2] in ("key", "k_proj", "k", "k_lin"):
                p.zero_()  # key biases: zero (their terms are query-only; zero keeps the check exact)
            elif leaf[-2] == "c_attn":  # GPT-2: [b_Q | b_K | b_V]
                d = model.config.n_embd
                p.normal_(0, 0.5)
                p[d:2 * d] = 0
            else:
                p.normal_(0, 0.5)  # query biases (and the rest) random: the key-bias term is checked
    model.save_pretrained(folder, safe_serialization=True)
    return model


def _standardise(x: torch.Tensor, module, rms: bool) -> torch.Tensor:
    eps = next(getattr(module, a) for a in ("eps", "variance_epsilon", "epsilon") if getattr(module, a, None))
    if rms:
        return x / (x.pow(2).mean(-1, keepdim=True) + eps).sqrt()
    mu = x.mean(-1, keepdim=True)
    return (x - mu) / ((x - mu).pow(2).mean(-1, keepdim=True) + eps).sqrt()


@pytest.mark.parametrize("case", NORM_CASES, ids=lambda c: c.id)
def test_folded_input_norm_reproduces_the_model_logits(case: NormCase, tmp_path):
    import qkgeometry as qg
    from logit_harness import capture_softmax_inputs

    model = _build_norm_model(case, tmp_path)
    _identity_rotary(model)
    folded, raw = qg.load_qk(tmp_path, input_norm="folded"), qg.load_qk(tmp_path)
    assert folded.input_norm == "folded" and raw.input_norm == "raw"
    order = case.order(model)
    records: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
    modules = {id(m): m for comp, i in order for m in case.norms(model, comp, i)}
    hooks = [m.register_forward_hook(lambda mod, inp, out: records.__setitem__(id(mod), (inp[0], out)))
             for m in modules.values()]
    with torch.no_grad(), capture_softmax_inputs() as captured:
        case.run(model, torch.Generator().manual_seed(1))
    for h in hooks:
        h.remove()
    captured = [c for c in captured if c.ndim == 4]  # attention only (a mixture-of-experts router has its own)
    assert len(captured) == len(order), (case.id, len(captured), len(order))
    checked_bias = False
    for (comp, i), logits in zip(order, captured):
        mq, mk = case.norms(model, comp, i)
        xhat = []
        for m in (mq, mk):
            x, h = records[id(m)]
            gamma = case.gain_offset + m.weight.detach()
            beta = m.bias.detach() if getattr(m, "bias", None) is not None else torch.zeros_like(gamma)
            xh = (h - beta) / gamma
            torch.testing.assert_close(xh, _standardise(x, m, case.rms), atol=2e-5, rtol=0)  # the norm, as named
            xhat.append((xh, beta))
        (xq, _), (xk, beta_k) = xhat
        lf, lr = folded.layer(i, comp), raw.layer(i, comp)
        dims = folded.dims(comp)
        scale = case.scale(model.config) if case.scale else 1.0 / math.sqrt(dims.head_dim)
        wq, wk = lf.wq, lf.wk  # (H, d, r), folded
        bq = lf.bq if lf.bq is not None else torch.zeros(dims.n_heads, dims.head_dim, dtype=torch.float64)
        checked_bias |= lf.bq is not None and bool(lf.bq.abs().max() > 0)
        q = torch.einsum("bid,hde->bhie", xq, wq) + bq[None, :, None]
        k = torch.einsum("bjd,hde->bhje", xk, wk) + torch.einsum("d,hde->he", beta_k, lr.wk)[None, :, None]
        predicted = torch.einsum("bhie,bhje->bhij", q, k) * scale
        if case.qk_norm:  # per-token rms of the raw projections of the norm's output h (logit harness)
            h = records[id(mq)][1]
            rq, rk = _qk_rms(qg.load_qk(tmp_path, qk_norm="raw").layer(i, comp), h, case.qk_norm,
                             model.config.get_text_config().rms_norm_eps)
            predicted = predicted / (rq[..., :, None] * rk[..., None, :])
        keep = logits > -1e30
        err = (logits - predicted)[keep].abs().max().item()
        # QK-norm runs its RMSNorm on q and k in float32 (transformers upcasts to float32, not float64)
        assert err < (1e-5 if case.qk_norm else 1e-10), f"{case.id} {comp} layer {i}: max |logit error| = {err:.3g}"
        assert not torch.allclose(lf.matrix(0), lr.matrix(0))  # the folded form differs (non-trivial gains)
        if case.qk_norm:
            continue
        # the same in the bilinear-form terms: x̂ᵀ F x̂ + key-bias term + (query-only term)
        bilinear = torch.einsum("bid,hde,bje->bhij", xq, torch.stack([lf.matrix(h) for h in range(dims.n_heads)]), xk)
        key_term = torch.einsum("hde,he,bjd->bhj", wk, bq, xk)[:, :, None, :]
        rest = logits / scale - bilinear - key_term
        diagonal = rest.diagonal(dim1=-2, dim2=-1)[..., None]  # j = i is never masked
        spread = (rest - diagonal)[keep].abs().max().item()
        assert spread < 1e-9, f"{case.id} {comp} layer {i}: what is left depends on the key token ({spread:.3g})"
    has_q_bias = case.model_type in ("qwen2", "whisper") or not case.rms  # LayerNorm: β moves into b_q
    assert checked_bias == has_q_bias, case.id
