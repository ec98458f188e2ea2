"""The proposer package's rooms: each module imports the others without a circle, and each
public name is defined where the package says."""

from __future__ import annotations

import ast
from pathlib import Path

import vmstack.wrappers.proposer as proposer
from vmstack.wrappers.proposer import block, envelope, vm

PACKAGE = Path(proposer.__file__).parent
PREFIX = "vmstack.wrappers.proposer."


def _imports_of(path: Path) -> set[str]:
    """The modules of the package that ``path`` imports, anywhere in it (under
    ``TYPE_CHECKING`` too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            if node.module == PREFIX.rstrip("."):
                found.update(alias.name for alias in node.names)
            elif node.module.startswith(PREFIX):
                found.add(node.module.removeprefix(PREFIX).split(".")[0])
    return found


def _graph() -> dict[str, set[str]]:
    return {
        path.stem: _imports_of(path) - {path.stem}
        for path in PACKAGE.glob("*.py")
        if path.name != "__init__.py"
    }


def _circle(graph: dict[str, set[str]]) -> list[str] | None:
    """A circle of imports in ``graph`` (the modules on it, in order), or ``None``."""
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> list[str] | None:
        if module in path:
            return path[path.index(module) :]
        if module in done or module not in graph:
            return None
        for target in sorted(graph[module]):
            found = visit(target, [*path, module])
            if found is not None:
                return found
        done.add(module)
        return None

    for module in sorted(graph):
        found = visit(module, [])
        if found is not None:
            return found
    return None


def test_the_proposer_modules_import_each_other_without_a_circle() -> None:
    """No module of the package imports one that imports it back, even for types only."""
    assert _circle(_graph()) is None


def test_the_circle_check_sees_a_circle() -> None:
    """A circle through three modules, or one through types only, is found."""
    assert _circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c"]
    assert _circle({"a": {"b"}, "b": set()}) is None


def test_the_block_and_the_envelope_codec_have_their_own_rooms() -> None:
    """``ProposerBlock`` is defined in ``block.py``, the envelope codec in
    ``envelope.py``, and the package serves both from their modules."""
    assert proposer.ProposerBlock is block.ProposerBlock
    assert block.ProposerBlock.__module__ == "vmstack.wrappers.proposer.block"
    assert proposer.PostForkBlock is envelope.PostForkBlock
    assert proposer.ProposerVM is vm.ProposerVM
    assert "ProposerBlock" not in vm.__all__
