"""The in-memory reader: a ``transformers.PreTrainedModel`` already in memory (its ``state_dict``, nothing
copied). Chapter 3 scores models as they train through it."""

from __future__ import annotations

from typing import Any

from ..architectures import QKNorm, get_architecture
from ..errors import SourceError
from ..model import SourcePlans
from .hf_config import block_dims, resolve_plans, resolve_prefix, with_present_names

__all__ = ["attention_paths", "open_module", "sniff"]


def sniff(obj: Any) -> bool:
    """isinstance(obj, transformers.PreTrainedModel), without importing transformers' modeling stack (~20 s)."""
    return any(cls.__name__ == "PreTrainedModel" and cls.__module__.startswith("transformers")
               for cls in type(obj).__mro__)


def open_module(model: Any, name: str | None, qk_norm: QKNorm = "folded") -> SourcePlans:
    """The plans of an in-memory model; its weights are read (detached) when a layer is reached."""
    config = model.config
    arch = get_architecture(config.model_type)
    state = dict(model.state_dict())
    meta = [k for k, v in state.items() if getattr(v, "is_meta", False)]
    if meta:
        raise SourceError(f"`source` model has {len(meta)} tensor(s) on the meta device (first: {meta[0]!r}): it "
                          "was created without weights (init_empty_weights, device_map or from_config on 'meta'). "
                          "Load real weights first, e.g. with from_pretrained(...) on the CPU.")
    plans = resolve_plans(arch, config, state, lambda n: state[n].detach(), qk_norm)
    return SourcePlans(name or getattr(config, "_name_or_path", None) or arch.model_type, arch, plans,
                       f"<in-memory {type(model).__name__}>", None, config=config.to_dict())


def attention_paths(model: Any) -> dict[str, list[tuple[str, str, str]]]:
    """Where the attention of an in-memory model lives, by the architecture registry: for each kind of block
    (``self``, or ``encoder`` / ``decoder`` / ``cross``), one ``(module path, query attribute, key attribute)`` per
    layer, in layer order (``("model.layers.3.self_attn", "q_proj", "k_proj")``). Blocks whose Q and K are not two
    ``Linear`` layers of one module (fused QKV weights) are left out. The model's ``config.model_type`` must be in
    the registry (else :class:`~qkgeometry.errors.SourceError` lists the supported ones)."""
    config = model.config
    arch = get_architecture(config.model_type)
    names = set(model.state_dict())
    found: dict[str, list[tuple[str, str, str]]] = {}
    for block in arch.blocks:
        block = with_present_names(block, names)
        if block.k is None or block.layout != "linear":
            continue
        prefix = resolve_prefix(block, names, arch.model_type)
        rows = []
        for i in range(block_dims(block, config, arch.model_type).n_layers):
            (mq, q), (mk, k) = ((prefix + t.format(i=i)).rsplit(".", 1)[0].rsplit(".", 1) for t in (block.q, block.k))
            if mq != mk:
                break
            rows.append((mq, q, k))
        else:
            found[block.component] = rows
    return found

