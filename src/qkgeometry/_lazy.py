"""A module imported on first attribute access, for heavy dependencies used inside functions only."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class LazyModule(ModuleType):
    """Stands for the module ``name`` and imports it the first time one of its attributes is read: ``pd =
    LazyModule("pandas")`` at the top of a module costs nothing until ``pd.DataFrame`` runs."""

    def __init__(self, name: str):
        super().__init__(name)
        self.__dict__["_lazy_target"] = name

    def __getattr__(self, attr: str) -> Any:
        module = importlib.import_module(self.__dict__["_lazy_target"])
        return getattr(module, attr)
