"""The layer author's toolkit is one module, vmstack.layers, and the package paths users
import it from serve the very same objects."""

from __future__ import annotations

from pathlib import Path

import vmstack
import vmstack.wrappers
from vmstack import layers

TOOLKIT = (
    "Layer",
    "METHODS",
    "PassThroughBlock",
    "PassThroughVM",
    "WrappedBlock",
    "fact_holders",
    "has_batched_methods",
    "refusal",
    "supports_batching",
)


def test_the_toolkit_is_defined_in_one_module() -> None:
    """Every name of the toolkit is defined in vmstack.layers, and the modules it was once
    spread over are gone."""
    assert sorted(layers.__all__) == sorted(TOOLKIT)
    for name in TOOLKIT:
        value = getattr(layers, name)
        assert getattr(value, "__module__", "vmstack.layers") == "vmstack.layers", name
    package = Path(layers.__file__).parent
    assert not (package / "capability.py").exists()
    assert not (package / "wrappers" / "passthrough.py").exists()
    assert not hasattr(vmstack.interfaces, "Layer")


def test_the_package_paths_serve_the_toolkit() -> None:
    """``vmstack.Layer``, ``vmstack.supports_batching`` and ``vmstack.wrappers``'s
    pass-through names are the toolkit's objects."""
    assert vmstack.Layer is layers.Layer
    assert vmstack.supports_batching is layers.supports_batching
    assert vmstack.wrappers.PassThroughVM is layers.PassThroughVM
    assert vmstack.wrappers.PassThroughBlock is layers.PassThroughBlock
    assert vmstack.wrappers.WrappedBlock is layers.WrappedBlock
