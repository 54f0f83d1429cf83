"""Every adapter in the registry reproduces its model's own pre-softmax logits (see tests/logit_harness.py)."""

from __future__ import annotations

import math

import pytest
import torch

from logit_harness import LogitCase, check_logit_equivalence, rope_identity
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
    b, t, _ = x.shape
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
