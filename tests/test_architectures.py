"""Every adapter in the registry reproduces its model's own pre-softmax logits (see tests/logit_harness.py)."""

from __future__ import annotations

import pytest

from qkgeometry.architectures import REGISTRY, get_architecture
from logit_harness import LogitCase, check_logit_equivalence, rope_identity

TINY_BERT = dict(hidden_size=48, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                 vocab_size=99, max_position_embeddings=32)
TINY_LLAMA = dict(hidden_size=48, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                  intermediate_size=64, vocab_size=99, max_position_embeddings=32)


def _bert_self(model, i):
    return model.encoder.layer[i].attention.self


def _llama_self(model, i):
    return model.layers[i].self_attn


def _call_rope(module, x, model):
    return module(x, position_embeddings=rope_identity(x, module.head_dim), attention_mask=None)


CASES = [
    LogitCase("bert", "bert", TINY_BERT, _bert_self),
    LogitCase("roberta", "roberta", TINY_BERT, _bert_self),
    LogitCase("electra", "electra", {**TINY_BERT, "embedding_size": 32}, _bert_self),
    LogitCase("distilbert", "distilbert", dict(dim=48, n_layers=2, n_heads=4, hidden_dim=64, vocab_size=99,
                                               max_position_embeddings=32),
              lambda m, i: m.transformer.layer[i].attention),
    LogitCase("gpt2", "gpt2", dict(n_embd=48, n_layer=2, n_head=4, vocab_size=99, n_positions=32),
              lambda m, i: m.h[i].attn),
    LogitCase("llama", "llama", TINY_LLAMA, _llama_self, _call_rope),
    LogitCase("llama-gqa-8x2", "llama", {**TINY_LLAMA, "hidden_size": 64, "num_attention_heads": 8,
                                         "num_key_value_heads": 2}, _llama_self, _call_rope),
    LogitCase("llama-nonsquare-heads", "llama", {**TINY_LLAMA, "num_key_value_heads": 2, "head_dim": 20},
              _llama_self, _call_rope),
    LogitCase("mistral-gqa", "mistral", {**TINY_LLAMA, "hidden_size": 64, "num_attention_heads": 8,
                                         "num_key_value_heads": 2}, _llama_self, _call_rope),
    LogitCase("qwen2-gqa-bias", "qwen2", {**TINY_LLAMA, "num_key_value_heads": 2}, _llama_self, _call_rope),
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
