"""The Hub reader's HTTP client under its former name: this module *is* :mod:`qkgeometry.readers.hub.client`
(one module object, so settings changed through either name are one setting). Import that instead."""

import sys

from .hub import client

sys.modules[__name__] = client
