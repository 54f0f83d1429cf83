"""The Hub reader's fetch plan under its former name: this module *is* :mod:`qkgeometry.readers.hub.plan` (one
module object). Import that instead."""

import sys

from .hub import plan

sys.modules[__name__] = plan
