"""The package's layout rule: a module exports only what it defines; re-exports belong to
packages (ARCHITECTURE.md, section 1)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import vmstack

PACKAGE_ROOT = Path(vmstack.__file__).parent

#: Names a leaf module still lists without defining them, each with who reads it there.
#: An entry that is no longer needed fails the test, so the list only shrinks.
REEXPORTS_ALLOWED: dict[str, dict[str, str]] = {
    "vmstack.cchain.rawdb": dict.fromkeys(
        ("Integrity", "checksum", "decode_integrity", "encode_integrity",
         "integrity_block_checksum"),
        "defined in vmstack.cchain.integrity; cchain/chain.py, benchmarks/history.py and "
        "tests read the integrity entries as rawdb.* beside the keys they sit under"),
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts
    return ".".join(parts)


def _leaf_modules() -> list[Path]:
    return sorted(path for path in PACKAGE_ROOT.rglob("*.py") if path.name != "__init__.py")


def _bound_and_listed(tree: ast.Module) -> tuple[set[str], list[str] | None]:
    """The names the module's top level binds other than by import (definitions and
    assignments, also under ``if`` and ``try``), and its ``__all__`` (``None`` if it has
    none)."""
    bound: set[str] = set()
    listed: list[str] | None = None

    def visit(body: list[ast.stmt]) -> None:
        nonlocal listed
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                bound.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    bound.update(name.id for name in ast.walk(target)
                                 if isinstance(name, ast.Name))
                    if isinstance(target, ast.Name) and target.id == "__all__":
                        assert node.value is not None
                        listed = list(ast.literal_eval(node.value))
            elif isinstance(node, ast.If):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for handler in node.handlers:
                    visit(handler.body)
                visit(node.orelse)
                visit(node.finalbody)

    visit(tree.body)
    return bound, listed


def _undefined_exports(path: Path) -> list[str]:
    bound, listed = _bound_and_listed(ast.parse(path.read_text(), filename=str(path)))
    return [name for name in listed or () if name not in bound]


@pytest.mark.parametrize("path", _leaf_modules(), ids=_module_name)
def test_a_leaf_module_exports_only_what_it_defines(path: Path) -> None:
    """Every name in a non-package module's ``__all__`` is defined in that module."""
    module = _module_name(path)
    allowed = REEXPORTS_ALLOWED.get(module, {})
    undefined = _undefined_exports(path)
    assert [name for name in undefined if name not in allowed] == [], (
        f"{module} lists names it imports; export them from a package's __init__ or "
        "import them from the module that defines them")
    assert sorted(set(allowed) - set(undefined)) == [], (
        f"{module} no longer re-exports these: remove them from REEXPORTS_ALLOWED")


def test_the_rule_sees_a_reexport() -> None:
    """The check finds a name imported and listed, and accepts one defined under ``if``."""
    source = ("from os import sep\nif True:\n    LOCAL = 1\n"
              "__all__ = ['LOCAL', 'sep']\n")
    bound, listed = _bound_and_listed(ast.parse(source))
    assert listed == ["LOCAL", "sep"]
    assert [name for name in listed if name not in bound] == ["sep"]


def test_the_allow_list_names_real_modules() -> None:
    """Every allow-listed module exists."""
    modules = {_module_name(path) for path in PACKAGE_ROOT.rglob("*.py")}
    assert set(REEXPORTS_ALLOWED) <= modules


#: Packages above the stack's builder: they may build stacks (vmstack.stack).
BUILDS_STACKS = ("vmstack.benchmarks", "vmstack.sim")

#: Modules below the builder that still import it, each with why.
IMPORTS_OF_THE_BUILDER_ALLOWED = {
    "vmstack.wrappers.rpc.process": "serve() builds the stack the child process serves",
    "vmstack.wrappers.rpc.plugin": "build_from_initialize() builds the stack the plugin serves",
}


def _imports_the_builder(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module == "vmstack.stack":
            return True
        if isinstance(node, ast.ImportFrom) and node.module == "vmstack" and any(
                alias.name == "stack" for alias in node.names):
            return True
        if isinstance(node, ast.Import) and any(
                alias.name == "vmstack.stack" for alias in node.names):
            return True
    return False


def test_only_the_top_floor_imports_the_stack_builder() -> None:
    """Below the top-level modules, nothing imports :mod:`vmstack.stack` (the layer order
    sits above every layer): the layers, the store, the kit and the process boundary's
    client read a stack through vmstack.describe, vmstack.closing and vmstack.submission."""
    importers = {_module_name(path) for path in PACKAGE_ROOT.rglob("*.py")
                 if _imports_the_builder(path)}
    top_level = {module for module in importers if module.count(".") == 1}
    below = importers - top_level - {module for module in importers
                                     if module.startswith(BUILDS_STACKS)}
    assert below == set(IMPORTS_OF_THE_BUILDER_ALLOWED)
