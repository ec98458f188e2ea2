"""The records package (:mod:`vmstack.cchain.types`): its public names are the documented ones,
each defined where the package docstring says."""

from __future__ import annotations

import ast
import importlib
import inspect
import re

import vmstack.cchain
import vmstack.cchain.types as package

MODULE_LINE = re.compile(r"^- :mod:`~(vmstack\.cchain\.types\.\w+)`", re.MULTILINE)


def _documented() -> dict[str, str]:
    """Each public name the package docstring lists, and the module it lists it under."""
    doc = package.__doc__ or ""
    starts = list(MODULE_LINE.finditer(doc))
    assert starts, "the package docstring lists no modules"
    placed: dict[str, str] = {}
    for start, end in zip(starts, [*starts[1:], None], strict=True):
        entry = doc[start.end() : end.start() if end else None]
        entry = entry.split("\n\n")[0]
        for name in re.findall(r"``(\w+)``", entry):
            assert name not in placed, f"{name} is listed under two modules"
            placed[name] = start.group(1)
    return placed


def _top_level_names(module_name: str) -> set[str]:
    """The names a module's own source defines at top level (not the ones it imports)."""
    tree = ast.parse(inspect.getsource(importlib.import_module(module_name)))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def test_the_public_names_are_exactly_the_documented_ones() -> None:
    """``__all__`` is sorted and names what the docstring lists, no more and no less."""
    assert package.__all__ == sorted(package.__all__)
    assert set(package.__all__) == set(_documented())


def test_each_public_name_is_defined_in_its_documented_module() -> None:
    """Every listed name is defined in the module the docstring names, and the package's
    object is that module's object."""
    for name, module_name in _documented().items():
        assert name in _top_level_names(module_name), f"{name} is not defined in {module_name}"
        module = importlib.import_module(module_name)
        assert getattr(package, name) is getattr(module, name), name


def test_the_cchain_package_exports_the_same_objects() -> None:
    """``vmstack.cchain`` re-exports every record name, as the same object."""
    for name in package.__all__:
        assert getattr(vmstack.cchain, name) is getattr(package, name), name
