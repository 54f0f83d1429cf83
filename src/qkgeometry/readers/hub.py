"""The Hugging Face Hub reader: a repo id such as ``"gpt2"`` or ``"HuggingFaceTB/SmolLM2-135M-Instruct"``
(needs network, or a warm huggingface_hub cache with ``HF_HUB_OFFLINE=1``)."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from ..architectures import QKNorm
from ..errors import SourceError, first_line
from ..model import SourcePlans
from .safetensors import open_folder

__all__ = ["looks_like_path", "open_hub"]


def looks_like_path(source: str) -> bool:
    """True for strings that name a file or folder (so a missing one is reported as such, not sent to the Hub)."""
    return (source.startswith((".", "/", "~"))
            or source.endswith((".gguf", ".onnx", ".safetensors", ".json", ".bin", "/"))
            or source.count("/") > 1 or "\\" in source)


def open_hub(repo_id: str, revision: str | None, name: str | None, qk_norm: QKNorm = "folded") -> SourcePlans:
    """Download config + safetensors of a Hub repo (cached by huggingface_hub), then read the folder; the
    revision recorded is the snapshot's commit."""
    from huggingface_hub import snapshot_download

    try:
        folder = snapshot_download(repo_id, revision=revision,
                                   allow_patterns=["config.json", "*.safetensors", "*.safetensors.index.json"])
    except Exception as e:
        offline = os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0")
        raise SourceError(
            f"could not fetch {repo_id!r} from the Hugging Face Hub ({type(e).__name__}: {first_line(e)})."
            f"{' HF_HUB_OFFLINE is set.' if offline else ''} Without network, pass a local model folder or .gguf "
            "file, or an offline alias such as 'offline:minilm-l6' or 'offline:smollm2-135m' "
            "(`qkgeometry.catalogue.OFFLINE_MODELS` lists them). Gated models also need `hf auth login`."
        ) from e
    opened = open_folder(Path(folder), name or repo_id, qk_norm)
    return replace(opened, revision=Path(folder).name)  # the snapshot folder is the commit hash
