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
