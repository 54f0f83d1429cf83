"""From a Hugging Face config and a set of tensor names to :class:`~qkgeometry.model.BlockPlan` s.

The registry (:mod:`qkgeometry.architectures`) says, per ``model_type``, where Q and K live and how they are laid
out; this module reads ``config.json`` (without importing transformers unless a value needs its defaults), checks
every size field, resolves the registry's name templates against the names a checkpoint actually holds, and builds
one plan per attention block kind. The safetensors, in-memory and Hub readers share it; the GGUF reader shares its
size checks.
"""

from __future__ import annotations

import dataclasses
import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from .._arrays import as_float64
from .._files import read_bytes
from ..architectures import (
    Architecture,
    AttentionBlock,
    Dims,
    QKNorm,
    fold_qk_norm,
    get_architecture,
    qk_norm_gains,
    split_block,
    split_query_bias,
)
from ..errors import ConfigError, SourceError, first_line
from ..model import BlockPlan, TensorGetter

__all__ = ["ConfigView", "block_dims", "check_dims", "read_config", "resolve_plans", "resolve_prefix", "warn_extra_layers",
           "with_present_names"]


INT_FIELDS = frozenset({
    "hidden_size", "n_embd", "d_model", "dim", "num_attention_heads", "n_head", "n_heads", "num_heads",
    "num_key_value_heads", "num_hidden_layers", "n_layer", "n_layers", "num_layers", "num_decoder_layers",
    "head_dim", "d_kv", "attention_head_size", "num_hidden_groups", "encoder_layers", "decoder_layers",
    "encoder_attention_heads", "decoder_attention_heads", "inner_group_num",
})


def check_config_fields(data: dict[str, Any], config_path: Path, where: str = "") -> None:
    """Every size field must be a positive int: ``"4"``, ``true``, ``4.5``, ``NaN``, ``1e400``, 0 and negatives
    are refused by name (``int()`` would silently turn several of them into wrong sizes)."""
    for key, value in data.items():
        if key in INT_FIELDS and value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise SourceError(f"{str(config_path)!r}: field `{where}{key}` must be a positive integer; got "
                                  f"{json.dumps(value)} ({type(value).__name__}). Fix that value in config.json.")
        elif key.endswith("_config") and isinstance(value, dict):
            check_config_fields(value, config_path, f"{where}{key}.")


def read_config(config_path: Path) -> ConfigView:
    try:
        raw = json.loads(read_bytes(config_path, "config file"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SourceError(f"{str(config_path)!r} is not valid JSON ({e}); the file may be truncated.") from e
    except RecursionError as e:
        raise SourceError(f"{str(config_path)!r} is nested too deeply to be a model config; replace it with the "
                          "model's real config.json.") from e
    if not isinstance(raw, dict):
        raise SourceError(f"{str(config_path)!r} holds a JSON {type(raw).__name__}, not an object "
                          "({\"model_type\": ...}); replace it with the model's real config.json.")
    if "model_type" not in raw:
        raise SourceError(f"{str(config_path)!r} has no 'model_type'; cannot tell the architecture.")
    if not isinstance(raw["model_type"], str):
        raise SourceError(f"{str(config_path)!r}: field `model_type` must be a string such as \"llama\"; got "
                          f"{json.dumps(raw['model_type'])}. Fix that value in config.json.")
    check_config_fields(raw, config_path)
    get_architecture(raw["model_type"])  # the 'supported: ...' message if unknown, before any heavy import
    return ConfigView(raw, lambda: transformers_config(config_path))


def transformers_config(config_path: Path) -> Any:
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(str(config_path.parent), local_files_only=True)
    except Exception as e:  # transformers validates fields strictly (StrictDataclassFieldValidationError, ...)
        raise SourceError(f"{str(config_path)!r}: transformers could not read this config ({type(e).__name__}: "
                          f"{first_line(e)}); fix the named field in config.json.") from e

class ConfigView:
    """Attribute access to a config.json, falling back to the transformers config class only when needed.

    ``import transformers`` costs seconds (its lazy import table alone); scoring a checkpoint needs a handful of
    sizes. A key present in the JSON with a non-null value is returned as is (nested dicts as views); a missing or
    null key, or a method such as ``get_text_config``, is answered by ``AutoConfig`` so that its defaults and
    computed values (e.g. ``num_key_value_heads = num_attention_heads``) stay authoritative.
    """

    # Common attribute_map aliases, so that frequent lookups stay on the fast path.
    _ALIASES: ClassVar[dict[str, tuple[str, ...]]] = {"hidden_size": ("n_embd", "d_model", "dim"), "num_attention_heads": ("n_head", "num_heads"),
                "num_hidden_layers": ("n_layer", "num_layers")}

    def __init__(self, data: dict[str, Any], load: Callable[[], Any]):
        self._data, self._load, self._real = data, load, None

    @property
    def data(self) -> dict[str, Any]:
        """The config.json as read (a plain dict, no defaults filled in)."""
        return self._data

    # Model types whose transformers config (or attention module) takes head_dim = hidden_size // num_attention_heads
    # when config.json has no head_dim (Llama-2 checkpoints, for one): answered here, without importing transformers.
    # Not Gemma or Qwen3, whose config classes default to a fixed head_dim.
    HEAD_DIM_IS_WIDTH_OVER_HEADS = frozenset({"llama", "mistral", "mixtral", "qwen2", "phi3", "olmo", "olmo2"})

    # Model types whose transformers config class has neither num_key_value_heads nor head_dim (nor an alias for
    # them): a config.json without them is answered "absent" here, as AutoConfig would, without importing it.
    NO_KV_HEADS_OR_HEAD_DIM = frozenset({
        "albert", "bart", "bert", "bloom", "deberta-v2", "dinov2", "distilbert", "electra", "gpt2", "gpt_neo",
        "gpt_neox", "gptj", "modernbert", "mpnet", "openai-gpt", "opt", "roberta", "vit", "xlm-roberta"})

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        for key in (name, *self._ALIASES.get(name, ())):
            value = self._data.get(key)
            if value is not None and key in self._data:
                return ConfigView(value, lambda: getattr(self._config(), name)) if isinstance(value, dict) else value
        if name == "head_dim" and self._data.get("model_type") in self.HEAD_DIM_IS_WIDTH_OVER_HEADS:
            return int(self.hidden_size) // int(self.num_attention_heads)
        if name in ("head_dim", "num_key_value_heads") and self._data.get(name) is None \
                and self._data.get("model_type") in self.NO_KV_HEADS_OR_HEAD_DIM:
            raise AttributeError(f"the {self._data['model_type']} config has no {name}")
        return getattr(self._config(), name)

    def _config(self) -> Any:
        if self._real is None:
            self._real = self._load()
        return self._real


def resolve_plans(arch: Architecture, config: Any, names: dict[str, Any] | set[str], get: TensorGetter,
                   qk_norm: QKNorm = "folded") -> list[BlockPlan]:
    """One :class:`~qkgeometry.model.BlockPlan` per attention block kind of ``arch``, resolved against the tensor ``names``."""
    plans = []
    for block in arch.blocks:
        dims = block_dims(block, config, arch.model_type)
        block = with_present_names(block, names)
        prefix = resolve_prefix(block, names, arch.model_type)
        warn_extra_layers(dims.n_layers, prefix + block.q.format(i=dims.n_layers), names,
                           f"this {arch.model_type} checkpoint")
        getter = _prefixed_getter(prefix, names, get)

        def has(name: str, prefix: str = prefix) -> bool:
            return prefix + name in names

        plans.append(BlockPlan(block, dims, _splitter(block, dims, getter, has, qk_norm), getter, has))
    return plans


def block_dims(block: AttentionBlock, config: Any, model_type: str) -> Dims:
    """``block.dims(config)``, with unusable sizes reported as one :class:`SourceError` naming the config."""
    try:
        dims = block.dims(config)
    except SourceError:
        raise
    except (TypeError, ValueError, AttributeError, OverflowError, ZeroDivisionError) as e:
        raise ConfigError(f"the {model_type} config does not give usable sizes for the {block.component} attention "
                          f"({type(e).__name__}: {e}); fix config.json.") from e
    check_dims(dims, f"the {model_type} config", ConfigError)
    return dims


def with_present_names(block: AttentionBlock, names) -> AttentionBlock:
    """The first of ``block``'s (q, k) name templates whose layer-0 query tensor is in ``names`` (else ``block``)."""
    def present(template: str) -> bool:
        target = template.format(i=0)
        return any(n == target or n.endswith("." + target) for n in names)

    if not block.alternatives or present(block.q):
        return block
    for q, k in block.alternatives:
        if present(q):
            renamed = {}
            base_old, base_new = block.q.rsplit(".", 2)[0], q.rsplit(".", 2)[0]
            if block.q_norm is not None:  # norms live next to the projections: same renaming
                renamed = {"q_norm": block.q_norm.replace(base_old, base_new, 1),
                           "k_norm": block.k_norm.replace(base_old, base_new, 1)}
            if block.input_norm is not None:  # the layer's own input norm: the same layer prefix
                layer_old, layer_new = base_old.rsplit(".", 1)[0], base_new.rsplit(".", 1)[0]
                renamed["input_norm"] = block.input_norm.replace(layer_old, layer_new, 1)
            return dataclasses.replace(block, q=q, k=k, **renamed)
    return block


def _splitter(block: AttentionBlock, dims: Dims, getter: TensorGetter, has: Callable[[str], bool],
              qk_norm: QKNorm = "folded"):
    """Layer i -> (wq, wk_kv, bq): the split weights (QK-norm gains folded when asked) and the query bias."""
    def bias(i: int) -> Any | None:
        try:
            return split_query_bias(block, dims, getter, has, i)
        except ValueError as e:
            raise SourceError(str(e)) from e

    if block.q_norm is None or qk_norm == "raw":
        return lambda i: (*split_block(block, dims, getter, i), bias(i))

    def split(i: int):
        wq, wk = split_block(block, dims, getter, i)
        # the product in float64; the bias stays raw (QK-norm acts after it, so it is not a logit term of its own)
        return (*fold_qk_norm(as_float64(wq), as_float64(wk), *qk_norm_gains(block, getter, i)), bias(i))

    return split


def resolve_prefix(block: AttentionBlock, names, model_type: str) -> str:
    """Find the prefix (e.g. ``'bert.'``) under which this checkpoint stores the block's layer-0 tensor."""
    target = block.q.format(i=0)
    candidates = sorted((n[: len(n) - len(target)] for n in names if n == target or n.endswith("." + target)),
                        key=len)
    if not candidates:
        sample = ", ".join(sorted(names)[:6])
        raise SourceError(f"no tensor named like {target!r} in this {model_type} checkpoint (first names: {sample}). "
                          "The file may be truncated or be a different architecture than its config says.")
    return candidates[0]


def _prefixed_getter(prefix: str, names, get: TensorGetter) -> TensorGetter:
    def getter(name: str) -> Any:
        full = prefix + name
        if full not in names:
            raise SourceError(f"tensor {full!r} is missing from the checkpoint; it may be truncated or incomplete "
                              "(a missing shard?).")
        return get(full)

    return getter



def check_dims(dims: Dims, where: str, error: type[SourceError] = SourceError) -> None:
    """Sizes must be positive ints and the KV heads must divide the query heads (``where`` names the source;
    ``error`` is raised otherwise)."""
    for field in ("n_layers", "d_model", "n_heads", "n_kv_heads", "head_dim"):
        value = getattr(dims, field)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise error(f"{where}: {field} must be a positive integer; got {value!r}. Fix the model's "
                              "config (or metadata).")
    if dims.n_heads % dims.n_kv_heads:
        raise error(f"{where}: {dims.n_heads} attention heads cannot be grouped over {dims.n_kv_heads} "
                          "key/value heads (the KV heads must divide the heads); fix num_key_value_heads.")


def warn_extra_layers(n_layers: int, next_layer_name: str, names, where: str) -> None:
    """Warn when the checkpoint holds a layer past the configured ``n_layers`` (those layers would be skipped)."""
    if any(n == next_layer_name or n.endswith("." + next_layer_name) for n in names):
        warnings.warn(f"{where}: the config says {n_layers} layers but the checkpoint has more (it holds "
                      f"{next_layer_name!r}); only the first {n_layers} are scored. Fix num_hidden_layers if that "
                      "is not what you want.", stacklevel=5)
