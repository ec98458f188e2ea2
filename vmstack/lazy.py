"""Names a package loads from their modules when first asked for (its module-level
``__getattr__``), so importing the package imports none of them."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from typing import Any

__all__ = ["load_lazily"]


def load_lazily(package: str, module_of: Mapping[str, str], name: str) -> Any:
    """``name`` of the module ``module_of[name]``, imported now and kept on the module
    ``package`` (so the next look-up finds it there); :class:`AttributeError`, as for any
    missing attribute, for a name ``module_of`` does not hold."""
    module = module_of.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    setattr(sys.modules[package], name, value)
    return value
