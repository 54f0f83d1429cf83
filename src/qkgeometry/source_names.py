"""The prefixes of source strings, a leaf shared by the readers, the model and the catalogue (no heavy import):
``offline:<alias>`` names a model shipped as a PyPI package, ``random:<source>`` the random-init twin of a
source (:meth:`qkgeometry.QKModel.randomized`)."""

from __future__ import annotations

__all__ = ["OFFLINE_PREFIX", "RANDOM_PREFIX"]

OFFLINE_PREFIX = "offline:"
RANDOM_PREFIX = "random:"
