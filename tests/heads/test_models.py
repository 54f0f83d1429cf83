"""heads.models: one list of attention modules for every step of chapter 7, so that a layer index names the same
module in the geometry, the surgery and the rebuilt-model check."""

from __future__ import annotations

import pytest
import torch

from qkgeometry.heads import geometry, surgery
from qkgeometry.heads.models import attention_modules, qk_projections


class _Attention(torch.nn.Module):
    def __init__(self, q: str, k: str, d: int = 4):
        super().__init__()
        setattr(self, q, torch.nn.Linear(d, d))
        setattr(self, k, torch.nn.Linear(d, d))


class _Model(torch.nn.Module):
    def __init__(self, blocks):
        super().__init__()
        self.layers = torch.nn.ModuleList(blocks)
        self.config = type("Config", (), {"num_attention_heads": 2, "hidden_size": 4})()


def test_every_spelling_of_the_projections_is_one_list_in_layer_order():
    blocks = [_Attention("q_proj", "k_proj"), _Attention("query", "key"), _Attention("q", "k")]
    model = _Model(blocks)
    assert attention_modules(model) == blocks
    assert [qk_projections(m)[0] for m in blocks] == [blocks[0].q_proj, blocks[1].query, blocks[2].q]


def test_geometry_and_surgery_number_layers_by_the_same_modules():
    model = _Model([_Attention("q", "k"), _Attention("query", "key")])  # MPNet-style first
    layers = sorted({layer for layer, *_ in geometry.head_factors(model)})
    assert layers == list(range(len(attention_modules(model))))
    assert surgery.attention_modules is attention_modules  # the module surgery edits by layer index


def test_a_module_with_a_query_but_no_key_projection_is_not_an_attention_module():
    lone = torch.nn.Module()
    lone.query = torch.nn.Linear(4, 4)
    model = _Model([_Attention("q_proj", "k_proj")])
    model.extra = lone
    assert attention_modules(model) == [model.layers[0]]
    with pytest.raises(ValueError, match="has no attention module with separate query and key"):
        attention_modules(torch.nn.Linear(2, 2))


def _tiny_whisper():
    from transformers import WhisperConfig, WhisperModel

    torch.manual_seed(0)
    config = WhisperConfig(d_model=16, encoder_layers=2, decoder_layers=3, encoder_attention_heads=2,
                           decoder_attention_heads=4, encoder_ffn_dim=32, decoder_ffn_dim=32, num_mel_bins=8,
                           vocab_size=50, max_source_positions=8, max_target_positions=8, pad_token_id=0,
                           bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)
    return WhisperModel(config).eval()


def test_an_encoder_decoders_cross_attention_is_never_numbered_as_a_layer():
    """Whisper's decoder layers hold a self-attention and a cross-attention module: found by the registry, each kind
    is numbered on its own (layer i of the cross-attention is decoder layer i's encoder_attn), and a model with
    several kinds must say which one it means."""
    import qkgeometry as qg

    model = _tiny_whisper()
    with pytest.raises(ValueError, match=r"3 kinds of attention \(encoder, decoder, cross\).*component="):
        attention_modules(model)
    assert attention_modules(model, "encoder") == [layer.self_attn for layer in model.encoder.layers]
    assert attention_modules(model, "decoder") == [layer.self_attn for layer in model.decoder.layers]
    assert attention_modules(model, "cross") == [layer.encoder_attn for layer in model.decoder.layers]
    qk = qg.load_qk(model)
    for component in ("encoder", "decoder", "cross"):
        for i, module in enumerate(attention_modules(model, component)):
            q, _ = qk_projections(module)
            layer = qk.layer(i, component)
            torch.testing.assert_close(torch.as_tensor(layer.wq).reshape(-1, 16), q.weight.detach().double()
                                       .reshape(layer.n_heads, -1, 16).transpose(1, 2).reshape(-1, 16))
    with pytest.raises(ValueError, match="component"):
        attention_modules(model, "self")


def test_rebuilding_a_decoder_hides_the_gguf_progress_bar_and_keeps_other_messages(capsys):
    """transformers draws a plain tqdm bar while it dequantises a GGUF file; a chapter's output must not show it."""
    import sys

    from tqdm import tqdm

    from qkgeometry.heads.models import quiet_gguf_progress

    with quiet_gguf_progress():
        for _ in tqdm(range(5), desc="Converting and de-quantizing GGUF tensors..."):
            pass
        print("a tokenizer warning", file=sys.stderr)
    err = capsys.readouterr().err
    assert "a tokenizer warning" in err
    assert "GGUF" not in err and "%|" not in err
