"""readers.module: a model in memory is read through the wrappers people put around it (torch.compile, DDP,
PEFT/LoRA with its adapters' deltas, TransformerLens's TransformerBridge, nnsight), and gives the scores of the
model it wraps; on a grouped-query model its per-head W_qk equal TransformerLens's own QK circuit."""

from __future__ import annotations

import copy
import importlib.util
import warnings

import numpy as np
import pytest
import torch

import qkgeometry as qg
from qkgeometry.errors import SourceError
from qkgeometry.readers import module
from tiny_models import tiny_model

GQA = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, intermediate_size=64,
           vocab_size=64)


def _qwen2():
    from transformers import Qwen2ForCausalLM

    return tiny_model("qwen2", Qwen2ForCausalLM, **GQA)


def _scores(source) -> list[float]:
    return qg.score_model(source, per="head")["symmetry"].tolist()


def _heads(qk) -> np.ndarray:
    """Every head's W_qk, (layers, heads, d, d), float64."""
    return np.stack([np.stack([np.asarray(layer.matrix(h)) for h in range(layer.n_heads)]) for layer in qk])


def test_compiled_and_data_parallel_models_are_read_as_the_model_they_wrap():
    model = _qwen2()
    plain = _scores(model)
    for wrapped in (torch.compile(model, backend="eager"), torch.nn.DataParallel(model)):
        assert module.sniff(wrapped) and module.unwrap(wrapped) is model
        assert _scores(wrapped) == plain


def test_a_lora_model_is_read_with_its_adapters_deltas():
    """W + (α/r)·B A of each adapted projection: the merged model's weights exactly, through the PeftModel or
    through the model it injected its layers into; not the frozen base weights."""
    from peft import LoraConfig, get_peft_model

    model = _qwen2()
    base = _scores(copy.deepcopy(model))
    peft = get_peft_model(model, LoraConfig(r=4, lora_alpha=16, target_modules=["q_proj", "k_proj"],
                                            init_lora_weights=False))
    merged = _scores(copy.deepcopy(peft).merge_and_unload())
    assert _scores(peft) == merged and _scores(model) == merged  # the base model holds the LoRA layers too
    assert merged != base
    with peft.disable_adapter():
        assert _scores(peft) == base


def test_an_adapter_that_is_not_an_added_delta_is_refused_naming_merge_and_unload():
    from peft import LoraConfig, get_peft_model

    peft = get_peft_model(_qwen2(), LoraConfig(r=4, target_modules=["q_proj", "k_proj"], use_dora=True))
    with pytest.raises(SourceError, match=r"is a LoRA variant \(DoRA...\).*model\.merge_and_unload\(\)") as e:
        qg.score_model(peft)
    assert "\n" not in str(e.value)


def test_weights_on_an_accelerator_without_float64_are_read_on_the_cpu():
    """Apple's MPS has no float64: such weights come to the CPU (in their stored dtype) before conversion."""

    class OnMPS:  # stands for a tensor on "mps", a device this machine lacks
        device = type("Device", (), {"type": "mps"})()
        dtype = torch.float32

        def to(self, device):
            assert device == "cpu"
            return torch.ones(2, 2)

    read = module._readable(OnMPS(), numpy=True)
    assert isinstance(read, np.ndarray) and read.dtype == np.float32
    cpu = torch.ones(2, 2, dtype=torch.bfloat16)
    assert module._readable(cpu, numpy=True) is cpu  # numpy holds no bf16: left to the kernel as it is


def test_a_model_that_is_no_transformers_model_is_refused_by_name():
    with pytest.raises(TypeError, match=r"`source` must be .*\(or a wrapper of one: torch.compile, DDP, PEFT, "
                                        r"TransformerLens's TransformerBridge, nnsight\); got Linear"):
        qg.load_qk(torch.nn.Linear(2, 2))


def _tokenizer():
    """A stand-in tokenizer (the wrappers want one; reading weights needs none, and the Hub is out of reach)."""
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]")),
                                   unk_token="[UNK]")


def _bridge(model):
    """TransformerLens 4's TransformerBridge around ``model`` (no Hub: the model and a tokenizer given)."""
    from transformer_lens.model_bridge import TransformerBridge

    return TransformerBridge.boot_transformers("Qwen/Qwen2.5-0.5B", hf_model=model, tokenizer=_tokenizer(),
                                               device="cpu")


def _transformer_lens_heads(bridge) -> np.ndarray:
    """TransformerLens's own QK circuit, W_Q W_Kᵀ per (layer, head), with its KV heads expanded, in float64."""
    qk = bridge.QK
    return (qk.A.detach().double() @ qk.B.detach().double()).numpy()


@pytest.mark.skipif(importlib.util.find_spec("transformer_lens") is None, reason="TransformerLens is not installed")
def test_a_transformer_bridge_gives_transformer_lens_own_qk_circuit_on_a_grouped_query_model():
    model = _qwen2()
    expected = _scores(model)
    bridge = _bridge(model)
    with qg.load_qk(bridge) as qk:
        assert (qk.n_heads, qk.n_kv_heads) == (4, 2)
        ours = _heads(qk)
    np.testing.assert_allclose(ours, _transformer_lens_heads(bridge), rtol=0, atol=1e-6)
    assert _scores(bridge) == expected


@pytest.mark.skipif(importlib.util.find_spec("nnsight") is None, reason="nnsight is not installed")
def test_an_nnsight_model_is_read_as_the_model_it_wraps():
    from nnsight import LanguageModel, NNsight

    model = _qwen2()
    expected = _scores(model)
    assert _scores(NNsight(model)) == expected
    with warnings.catch_warnings():  # nnsight 0.8 names LanguageModel's successor; both wrap the model alike
        warnings.simplefilter("ignore")
        language_model = LanguageModel(model, tokenizer=_tokenizer())
    assert _scores(language_model) == expected


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("transformer_lens") is None, reason="TransformerLens is not installed")
def test_the_offline_qwen_coder_matches_transformer_lens_per_head():
    """Qwen2.5-Coder-0.5B (14 query heads, 2 KV heads): every head's W_qk read by the package's own GGUF reader,
    and through the bridge, equals TransformerLens's QK circuit of the model transformers loads from the same
    file, to 1e-6 in float64. Grouped-query attention is where TransformerLens's own QK circuits once broke."""
    from qkgeometry.heads.models import forward_model

    torch.set_num_threads(1)
    model, _ = forward_model("qwen2.5-coder-0.5b")
    bridge = _bridge(model)
    expected = _transformer_lens_heads(bridge)
    assert expected.shape[:2] == (24, 14)
    with qg.load_qk("offline:qwen2.5-coder-0.5b") as qk:
        assert (qk.n_heads, qk.n_kv_heads) == (14, 2)
        for i, layer in enumerate(qk):
            got = np.stack([np.asarray(layer.matrix(h)) for h in range(14)])
            np.testing.assert_allclose(got, expected[i], rtol=0, atol=1e-6, err_msg=f"layer {i}")
    with qg.load_qk(bridge) as qk:
        first = qk.layer(0)
        np.testing.assert_allclose(np.stack([np.asarray(first.matrix(h)) for h in range(14)]), expected[0],
                                   rtol=0, atol=1e-6)
