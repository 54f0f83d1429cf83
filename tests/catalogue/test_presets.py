"""catalogue.presets: the survey presets (every offline model with its random twin; the paper's models)."""

from __future__ import annotations

import pytest

from qkgeometry.architectures import REGISTRY
from qkgeometry.catalogue import presets
from qkgeometry.catalogue.offline import NOT_SURVEYED, OFFLINE_MODELS
from qkgeometry.catalogue.paper import paper_model_type


def test_presets_are_well_formed():
    assert set(presets.PRESETS) == {"offline", "offline-all", "paper-language", "paper-vision", "paper-audio"}
    for name, entries in presets.PRESETS.items():
        assert entries, name
        assert len({e.source for e in entries}) == len(entries), f"duplicate source in {name}"
        for e in entries:
            assert e.family in ("encoder", "decoder", "encoder-decoder") and e.init in ("pretrained", "random")
    offline = presets.preset("offline")
    surveyed = [a for a in OFFLINE_MODELS if a not in NOT_SURVEYED]
    assert set(NOT_SURVEYED) <= set(OFFLINE_MODELS)
    assert [e.init for e in offline] == ["pretrained", "random"] * len(surveyed)
    assert all(e.source.startswith(("offline:", "random:offline:")) for e in offline)
    # every offline model, each followed by its random twin (same family and modality, the name says so)
    assert [e.source for e in offline[::2]] == [f"offline:{a}" for a in surveyed]
    assert {e.modality for e in offline} == {"language", "vision", "audio"}
    for real, twin in zip(offline[::2], offline[1::2]):
        assert twin.source == presets.RANDOM_PREFIX + real.source and twin.name == f"{real.name} (random init)"
        assert (twin.family, twin.modality) == (real.family, real.modality)
    assert {e.modality for e in offline if "whisper" in e.source} == {"audio"}
    assert presets.PRESETS["offline-all"] == presets.PRESETS["offline"]  # kept as an alias
    assert {e.modality for e in presets.PRESETS["paper-audio"]} == {"audio"}
    small = presets.preset("paper-language", max_params_b=1.0, include_gated=False)
    assert small and all(e.params_b <= 1.0 and not e.gated for e in small)
    with pytest.raises(ValueError, match="unknown preset 'nope'; available: offline"):
        presets.preset("nope")


def test_every_paper_preset_model_has_a_registered_adapter():
    """Every Hub model of the paper presets maps to a model_type that the architecture registry can read."""
    hub_entries = [e for name, entries in presets.PRESETS.items() if not name.startswith("offline") for e in entries]
    assert len(hub_entries) > 50
    for entry in hub_entries:
        model_type = paper_model_type(entry.source)
        assert model_type, f"preset model {entry.source} has no known model_type"
        assert model_type in REGISTRY, f"preset model {entry.source} ({model_type}) has no registered adapter"
        assert REGISTRY[model_type].family == entry.family or entry.family == "encoder-decoder", entry.source
