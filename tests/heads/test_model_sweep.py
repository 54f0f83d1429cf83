"""heads.model_sweep: re-running only the layers after an edited head gives the logits of the full edited forward pass;
the rebuilt GGUF decoders against the package's own GGUF reader and a scrambled control (slow)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from bounded import no_hang
from qkgeometry.heads import surgery as hs
from qkgeometry.heads.model_sweep import layer_inputs, logit_spread, tail_logits
from tiny_models import tiny_model


def _tiny(model_type):
    return tiny_model(model_type, AutoModelForCausalLM, attn_implementation="eager", hidden_size=32,
                      num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, intermediate_size=64,
                      vocab_size=60, max_position_embeddings=64).to(torch.float64)


@pytest.mark.parametrize("model_type", ["llama", "qwen2"])
@pytest.mark.parametrize("part", ["symmetric", "skew", "skew_matched", "mean"])
def test_tail_from_the_edited_layer_equals_the_full_forward(model_type, part):
    model = _tiny(model_type)
    ids = torch.randint(0, 60, (2, 10), generator=torch.Generator().manual_seed(1))
    with no_hang(60), torch.no_grad():
        with hs.edited_heads(model):
            inputs = layer_inputs(model, ids)
            assert len(inputs) == 3
            torch.testing.assert_close(tail_logits(model, inputs[0], 0), model(ids, use_cache=False).logits,
                                       atol=1e-12, rtol=0)
        with hs.edited_heads(model, {(1, 3): part}, record={1: (3,)}) as states:
            full = model(ids, use_cache=False).logits
            pattern = states[1].patterns[3]
            tail = tail_logits(model, inputs[1], 1)
            assert tail_logits(model, inputs[1], 1, 2) is None
    torch.testing.assert_close(tail, full, atol=1e-12, rtol=0)
    assert (states[1].patterns[3] - pattern).max() < 1e-12


@pytest.mark.slow
@pytest.mark.parametrize("alias", ["smollm2-135m", "qwen2.5-coder-0.5b"])
def test_rebuilt_decoder_matches_the_gguf_reader_and_predicts_text(alias):
    from qkgeometry.heads.models import rebuilt_check

    torch.set_num_threads(1)
    with no_hang(2400):  # minutes on a loaded 2-core machine (GGUF read, two forward passes)
        check = rebuilt_check(alias, n_texts=2, length=32)
    assert check["max_relative_wqk_difference"] < 1e-5  # the same W_qk as the package's own GGUF reader
    assert check["loss"] < 4.0  # a working language model on held-out Wikipedia leads
    assert check["scrambled_loss"] > check["loss"] + 1.0  # a wrongly permuted rebuild is far worse


def test_bad_models_are_refused_with_one_line():
    from qkgeometry.heads.model_sweep import intervene, settings_for, sweep
    from qkgeometry.heads.models import forward_model

    with pytest.raises(ValueError, match="--model: 'gpt-5'"):
        sweep("gpt-5")
    with pytest.raises(ValueError, match="alias: interventions need a decoder"):
        intervene("minilm-l6", None, None, settings_for("minilm-l6"))
    with pytest.raises(ValueError, match="alias: no forward pass for 'whisper-base'"):
        forward_model("whisper-base")


def test_logit_spread_ignores_the_mask_and_row_shifts():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 8, 8))
    masked = np.where(np.tril(np.ones((8, 8), bool)), a, -np.inf)
    shifted = masked + rng.standard_normal((2, 8, 1))
    expected = np.mean([a[:, i, :i + 1].std(-1) for i in range(4, 8)])
    assert logit_spread(masked) == pytest.approx(expected, rel=1e-12)
    assert logit_spread(shifted) == pytest.approx(expected, rel=1e-12)
    assert logit_spread(3 * masked) == pytest.approx(3 * expected, rel=1e-12)
