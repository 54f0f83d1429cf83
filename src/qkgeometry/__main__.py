"""``python -m qkgeometry ...``: the ``qkgeometry`` command line (see :mod:`qkgeometry.cli`).

It is what ``torchrun --nproc_per_node=N -m qkgeometry train ...`` runs on every rank.
"""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
