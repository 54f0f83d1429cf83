"""The prefixes of source strings, a leaf shared by the readers, the model and the catalogue (no heavy import):
``offline:<alias>`` names a model shipped as a PyPI package, ``hf://`` a Hub repo, ``random:<source>`` the
random-init twin of a source (:meth:`qkgeometry.QKModel.randomized`)."""

from __future__ import annotations

__all__ = ["HF_PREFIX", "OFFLINE_PREFIX", "RANDOM_PREFIX"]

OFFLINE_PREFIX = "offline:"
#: ``hf://org/name[@revision]`` names a Hugging Face Hub repo (:mod:`qkgeometry.readers.hub`)
HF_PREFIX = "hf://"
RANDOM_PREFIX = "random:"
