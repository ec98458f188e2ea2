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
REEXPORTS_ALLOWED: dict[str, dict[str, str]] = {}


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
                    bound.update(name.id for name in ast.walk(target) if isinstance(name, ast.Name))
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
        "import them from the module that defines them"
    )
    assert sorted(set(allowed) - set(undefined)) == [], (
        f"{module} no longer re-exports these: remove them from REEXPORTS_ALLOWED"
    )


def test_the_rule_sees_a_reexport() -> None:
    """The check finds a name imported and listed, and accepts one defined under ``if``."""
    source = "from os import sep\nif True:\n    LOCAL = 1\n__all__ = ['LOCAL', 'sep']\n"
    bound, listed = _bound_and_listed(ast.parse(source))
    assert listed == ["LOCAL", "sep"]
    assert [name for name in listed if name not in bound] == ["sep"]


def test_the_allow_list_names_real_modules() -> None:
    """Every allow-listed module exists."""
    modules = {_module_name(path) for path in PACKAGE_ROOT.rglob("*.py")}
    assert set(REEXPORTS_ALLOWED) <= modules


#: The floors of the package, bottom first (ARCHITECTURE.md, section 1): a module imports
#: only from its own floor or the floors below it. A module's floor is that of the longest
#: entry naming it or a package holding it; ``vmstack`` itself is the package's ``__init__``.
FLOORS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "the ground: contracts, errors and what every floor reads",
        (
            "vmstack.errors",
            "vmstack.interfaces",
            "vmstack.clock",
            "vmstack.checksum",
            "vmstack.defaults",
            "vmstack.batching",
            "vmstack.layers",
            "vmstack.closing",
            "vmstack.describe",
            "vmstack.submission",
            "vmstack.parsepool",
            "vmstack.verifycache",
            "vmstack.lazy",
            "vmstack.rlpreader",
            "vmstack.keccak",
        ),
    ),
    ("the store", ("vmstack.store",)),
    ("the C-chain VM", ("vmstack.cchain",)),
    ("a stack's options, one record", ("vmstack.options",)),
    ("mempool gossip, over the C-chain's transactions", ("vmstack.gossip",)),
    ("the transition layer", ("vmstack.transition",)),
    ("the wrapper layers", ("vmstack.wrappers",)),
    ("the consensus library, driving any stack", ("vmstack.consensus",)),
    ("the process boundary", ("vmstack.wrappers.rpc",)),
    ("the layer order", ("vmstack.stack",)),
    (
        "what builds stacks, runs them and checks them",
        (
            "vmstack",
            "vmstack.__main__",
            "vmstack.cli",
            "vmstack.serving",
            "vmstack.bench",
            "vmstack.benchmarks",
            "vmstack.sim",
            "vmstack.conformance",
        ),
    ),
)

#: Imports that still run up a floor, each with why. An entry no longer needed fails the
#: test, so the list only shrinks.
IMPORTS_UP_ALLOWED: dict[tuple[str, str], str] = {}


def _floor(module: str) -> int | None:
    """The index in :data:`FLOORS` of ``module``'s floor (``None``: on none)."""
    best: tuple[int, int] | None = None
    for index, (_, names) in enumerate(FLOORS):
        for name in names:
            covers = module == name or (name != "vmstack" and module.startswith(name + "."))
            if covers and (best is None or len(name) > best[1]):
                best = (index, len(name))
    return None if best is None else best[0]


def _imported(tree: ast.Module, modules: set[str]) -> set[str]:
    """The vmstack modules ``tree`` imports anywhere (also inside functions and under
    ``TYPE_CHECKING``): ``from P import N`` names the module ``P.N`` when there is one,
    else ``P``."""
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(
                alias.name for alias in node.names if alias.name.split(".")[0] == "vmstack"
            )
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module is not None
            and node.module.split(".")[0] == "vmstack"
        ):
            assert node.level == 0, "vmstack imports itself by absolute names"
            for alias in node.names:
                name = f"{node.module}.{alias.name}"
                imported.add(name if name in modules else node.module)
    return imported


def _module_names() -> dict[str, Path]:
    names = {}
    for path in PACKAGE_ROOT.rglob("*.py"):
        module = _module_name(path)
        names[module.removesuffix(".__init__")] = path
    return names


def _imports_up(sources: dict[str, ast.Module], modules: set[str]) -> set[tuple[str, str]]:
    up = set()
    for module, tree in sources.items():
        floor = _floor(module)
        assert floor is not None, f"{module} is on no floor: add it to FLOORS"
        for target in _imported(tree, modules):
            target_floor = _floor(target)
            assert target_floor is not None, f"{target} is on no floor: add it to FLOORS"
            if target_floor > floor:
                up.add((module, target))
    return up


def test_no_import_runs_up_a_floor() -> None:
    """Every module imports only from its floor or below (:data:`FLOORS`): the layers and
    the C-chain VM never import the wrappers above them, nothing below the top floor
    imports the layer order (:mod:`vmstack.stack`), and every module is on a floor."""
    names = _module_names()
    sources = {
        module: ast.parse(path.read_text(), filename=str(path)) for module, path in names.items()
    }
    up = _imports_up(sources, set(names))
    assert sorted(up - set(IMPORTS_UP_ALLOWED)) == [], "imports that run up a floor"
    assert sorted(set(IMPORTS_UP_ALLOWED) - up) == [], (
        "these no longer run up a floor: remove them from IMPORTS_UP_ALLOWED"
    )


def test_the_floor_map_sees_an_import_up() -> None:
    """A C-chain or transition module importing a wrapper (inside a function too) is seen,
    and the longest entry of the map decides a module's floor."""
    modules = {
        "vmstack.wrappers",
        "vmstack.wrappers.traced",
        "vmstack.wrappers.rpc",
        "vmstack.store",
        "vmstack.store.history",
        "vmstack.cchain",
        "vmstack.cchain.codec",
    }
    sources = {
        "vmstack.cchain.vm": ast.parse("def f():\n    from vmstack.wrappers import traced\n"),
        "vmstack.transition.vm": ast.parse("import vmstack.wrappers\n"),
        "vmstack.store.history": ast.parse("from vmstack.cchain import codec\n"),
        "vmstack.store.base": ast.parse("from vmstack.store.history import EraArchive\n"),
        "vmstack.wrappers.metered": ast.parse("from vmstack.wrappers import rpc\n"),
    }
    assert _imports_up(sources, modules) == {
        ("vmstack.cchain.vm", "vmstack.wrappers.traced"),
        ("vmstack.transition.vm", "vmstack.wrappers"),
        ("vmstack.store.history", "vmstack.cchain.codec"),
        ("vmstack.wrappers.metered", "vmstack.wrappers.rpc"),
    }
    assert _floor("vmstack") != _floor("vmstack.errors")


#: The most lines a module of the package may have (generated code aside).
MAX_MODULE_LINES = 600


def test_no_module_is_over_six_hundred_lines() -> None:
    """Every hand-written module of the package fits in :data:`MAX_MODULE_LINES` lines;
    the protobuf modules ``grpc_tools`` writes (``*_pb2*.py``) are generated."""
    long = {
        _module_name(path): lines
        for path in PACKAGE_ROOT.rglob("*.py")
        if "_pb2" not in path.name
        and (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}, "modules over the limit: split them into rooms"
