"""The in-memory reader: a ``transformers.PreTrainedModel`` already in memory, or one of the wrappers people put
around it, read through its own parameters (nothing copied). Chapter 3 scores models as they train through it.

Wrappers are unwrapped to the transformers model inside (:func:`unwrap`):

* ``torch.compile(model)`` (an ``OptimizedModule``: the model is its ``_orig_mod``);
* ``DistributedDataParallel`` / ``DataParallel`` (``.module``);
* a PEFT model (``PeftModel``: its base model). Each adapted projection is read as the weights the model computes
  with, ``W + Σ (α/r)·B A`` over its active adapters not yet merged (:func:`effective_weight`); an adapter kind
  whose effect is not such a sum (DoRA, IA³...) is refused in one line that names ``merge_and_unload()``;
* TransformerLens's ``TransformerBridge`` (its ``original_model``) and an nnsight model (the module it wraps).

:func:`live_model` is the route a training callback takes: straight from the model in memory to the module reader
(no file or Hub resolution), each CPU weight seen as a numpy array over the same memory, so that a step scored
while training equals, bit for bit, the checkpoint saved at that step scored afterwards; weights on an accelerator
without float64 (Apple's MPS) are brought to the CPU first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..architectures import InputNorm, QKNorm, get_architecture
from ..errors import SourceError
from ..model import QKModel, SourcePlans
from .hf_config import block_dims, resolve_plans, resolve_prefix, with_present_names

__all__ = ["attention_paths", "effective_weight", "live_model", "open_module", "sniff", "unwrap"]

#: (top-level package, class name) of each wrapper, and how to reach what it wraps, in the order they are tried
_WRAPPERS: tuple[tuple[str, str, Callable[[Any], Any]], ...] = (
    ("nnsight", "Envoy", lambda m: m._module),
    ("transformer_lens", "TransformerBridge", lambda m: m.original_model),
    ("peft", "PeftModel", lambda m: m.get_base_model()),
    ("torch", "OptimizedModule", lambda m: m._orig_mod),
    ("torch", "DistributedDataParallel", lambda m: m.module),
    ("torch", "DataParallel", lambda m: m.module),
)


def _is_pretrained(obj: Any) -> bool:
    """isinstance(obj, transformers.PreTrainedModel), without importing transformers' modeling stack (~20 s)."""
    return any(cls.__name__ == "PreTrainedModel" and cls.__module__.startswith("transformers")
               for cls in type(obj).__mro__)


def _inner(obj: Any) -> Any | None:
    """What the wrapper ``obj`` wraps, or None when it is none of :data:`_WRAPPERS`."""
    kinds = {(cls.__module__.split(".")[0], cls.__name__) for cls in type(obj).__mro__}
    for package, name, inner in _WRAPPERS:
        if (package, name) in kinds:
            return inner(obj)
    return None


def unwrap(obj: Any) -> Any:
    """The transformers model inside ``obj`` (``obj`` itself when it is one, or when it wraps none)."""
    for _ in range(8):  # wrappers nest (a compiled PEFT model under DDP), never this deep
        if _is_pretrained(obj):
            return obj
        inner = _inner(obj)
        if inner is None:
            return obj
        obj = inner
    return obj


def sniff(obj: Any) -> bool:
    """Whether ``obj`` is a transformers model in memory, or a wrapper of one (see the module docstring)."""
    return _is_pretrained(obj) or (_inner(obj) is not None and _is_pretrained(unwrap(obj)))


def effective_weight(tuner: Any, attr: str) -> Any:
    """``attr`` ("weight" or "bias") of a PEFT-adapted layer as the model computes with it: the base layer's, plus
    each active adapter's delta (LoRA: ``(α/r)·B A``, in the base weight's layout) that is not merged into it yet.
    Refuses, in one line, an adapter whose effect is not an added delta (DoRA, IA³...)."""
    base = getattr(tuner.get_base_layer(), attr)
    if base is None or getattr(tuner, "disable_adapters", False):
        return base
    held = getattr(tuner, "adapter_layer_names", ())  # the per-adapter parts: lora_A, lora_B... (PEFT's name)
    pending = [a for a in tuner.active_adapters if a not in getattr(tuner, "merged_adapters", [])
               and any(a in getattr(tuner, part, {}) for part in held)]
    variant = [a for a in pending if a in getattr(tuner, "lora_variant", {})]
    if (pending and not hasattr(tuner, "get_delta_weight")) or variant:
        kind = "a LoRA variant (DoRA...)" if variant else type(tuner).__name__
        raise SourceError(f"`model`: its adapter {(variant or pending)[0]!r} is {kind}, whose weights are not "
                          "W + (α/r)·B A; merge it first (model = model.merge_and_unload()) to score the weights "
                          "it computes with.")
    out = base.detach()
    for adapter in pending:
        if attr == "weight":
            out = out + tuner.get_delta_weight(adapter).detach().to(out.dtype)
        elif getattr(tuner, "lora_bias", {}).get(adapter):
            out = out + (tuner.lora_B[adapter].bias * tuner.scaling[adapter]).detach().to(out.dtype)
    return out


#: TransformerLens's bridge puts its own components in place of the model's modules, each holding the module it
#: replaced under this name: the checkpoint name of a tensor is its name without it (as the bridge's state_dict has)
_BRIDGED = "._original_component"


def _tensors(model: Any) -> dict[str, Callable[[], Any]]:
    """Every parameter and buffer of ``model`` by its checkpoint name, each read when asked (so that a model that
    keeps training is read as it is at that moment); a PEFT-adapted layer's ``…base_layer.weight`` is also named as
    the plain layer's ``…weight``, read as :func:`effective_weight`; a TransformerBridge's are named as in the
    model it bridges."""
    out: dict[str, Callable[[], Any]] = {}
    for name, t in (*model.named_parameters(remove_duplicate=False), *model.named_buffers(remove_duplicate=False)):
        out[name.replace(_BRIDGED, "")] = lambda t=t: t.detach()
    for path, module in model.named_modules(remove_duplicate=False):
        path = path.replace(_BRIDGED, "")
        if hasattr(module, "get_base_layer") and hasattr(module, "active_adapters"):
            for attr in ("weight", "bias"):
                if f"{path}.base_layer.{attr}" in out:
                    out[f"{path}.{attr}"] = lambda m=module, a=attr: effective_weight(m, a)
    return out


def _readable(t: Any, numpy: bool) -> Any:
    """A weight as the scoring kernel reads it: a CUDA tensor where it is; any other accelerator's (MPS has no
    float64) on the CPU; with ``numpy``, a CPU tensor of a dtype numpy holds as a numpy array over its memory."""
    import torch

    if t.device.type not in ("cpu", "cuda"):
        t = t.to("cpu")
    if numpy and t.device.type == "cpu" and t.dtype in (torch.float32, torch.float64, torch.float16):
        return t.numpy()
    return t


def open_module(model: Any, name: str | None, qk_norm: QKNorm = "folded", *, numpy: bool = False) -> SourcePlans:
    """The plans of an in-memory model (or a wrapper of one); its weights are read (detached) when a layer is
    reached. ``numpy``: CPU weights as numpy arrays (:func:`live_model`)."""
    inner = unwrap(model)
    if not _is_pretrained(inner):
        raise TypeError(f"`model` must be a transformers PreTrainedModel or a wrapper of one (torch.compile, "
                        f"DDP, PEFT, TransformerLens's TransformerBridge, nnsight); got {type(model).__name__}.")
    config = inner.config
    arch = get_architecture(config.model_type)
    tensors = _tensors(inner)
    meta = [n for n, p in inner.named_parameters() if p.is_meta]
    if meta:
        raise SourceError(f"`source` model has {len(meta)} tensor(s) on the meta device (first: {meta[0]!r}): it "
                          "was created without weights (init_empty_weights, device_map or from_config on 'meta'). "
                          "Load real weights first, e.g. with from_pretrained(...) on the CPU.")
    plans = resolve_plans(arch, config, set(tensors), lambda n: _readable(tensors[n](), numpy), qk_norm)
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


def live_model(model: Any, *, qk_norm: QKNorm = "folded", input_norm: InputNorm = "raw") -> QKModel:
    """A model that is training, as a :class:`~qkgeometry.QKModel`, by the direct route (no file or Hub resolution):
    scored on the CUDA device its weights are on, else on the CPU, where its weights are read as numpy arrays over
    their own memory, the path a saved checkpoint's weights take. Chapter 3."""
    device = None
    try:
        first = next(unwrap(model).parameters()).device
        device = first if first.type == "cuda" else None
    except (AttributeError, StopIteration, TypeError):
        pass
    return QKModel.from_plans(open_module(model, None, qk_norm, numpy=True), qk_norm=qk_norm,
                              input_norm=input_norm, device=device)
