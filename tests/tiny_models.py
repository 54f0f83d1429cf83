"""The one factory of tiny random transformers for the tests: a ``transformers`` model of any architecture built
from its config (``AutoConfig.for_model``), seeded, in eval mode, and optionally saved as a checkpoint folder.

The options keep each caller's random draws exactly as they were: the seed is set first, the model is built, and
only then are biases or norm gains perturbed, in parameter order.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch


def tiny_model(model_type: str, cls: Any = None, *, seed: int = 0, attn_implementation: str | None = None,
               bias_std: float | None = None, norm_jitter: bool = False, **config) -> Any:
    """A random ``model_type`` model (``cls``: a transformers class, default ``AutoModel``) of ``config``'s sizes.

    ``bias_std``: biases drawn from N(0, bias_std²) (so that a bias mistaken for a weight shows);
    ``norm_jitter``: U(0, 1) added to every 1-d norm gain (ones at init: gives folded gains something to do)."""
    import transformers

    torch.manual_seed(seed)
    cfg = transformers.AutoConfig.for_model(model_type, **config)
    cls = transformers.AutoModel if cls is None else cls
    kwargs = {} if attn_implementation is None else {"attn_implementation": attn_implementation}
    model = (cls.from_config(cfg, **kwargs) if hasattr(cls, "from_config") else cls(cfg)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if bias_std is not None and name.endswith("bias"):
                p.normal_(0, bias_std)
            if norm_jitter and "norm" in name.lower() and p.ndim == 1:
                p.add_(torch.rand_like(p))
    return model


def tiny_folder(model_type: str, folder: str | Path, *, save: dict | None = None, **kwargs) -> Path:
    """:func:`tiny_model` saved with ``save_pretrained`` (``save``: its keyword arguments) into ``folder``."""
    tiny_model(model_type, **kwargs).save_pretrained(folder, **(save or {}))
    return Path(folder)


def spy_on_closing(monkeypatch) -> list[int]:
    """How many files each clearing of a safetensors reader's open files closed (one entry per clearing)."""
    from qkgeometry.readers import safetensors as st

    cleared: list[int] = []
    real_clear = st._Handles.clear
    monkeypatch.setattr(st._Handles, "clear", lambda self: (cleared.append(len(self)), real_clear(self)))
    return cleared


def quantised_folder(folder):
    """A tiny llama folder whose config asks for a quantisation the readers refuse (GPTQ)."""
    folder = tiny_folder("llama", folder, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, intermediate_size=32, vocab_size=64, max_position_embeddings=16)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "quantization_config": {"quant_method": "gptq"}}))
    return folder
