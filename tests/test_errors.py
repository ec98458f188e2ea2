"""Tests that the error tree of vmstack/errors.py is whole and that ARCHITECTURE.md, section 4,
draws it as it is."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import vmstack
from vmstack import errors
from vmstack.cli import Terminated
from vmstack.conformance.stacks import KitFault

ARCHITECTURE = Path(__file__).resolve().parents[1] / "ARCHITECTURE.md"

#: Exceptions outside the tree on purpose: the kit injects KitFault to check that a layer
#: passes a foreign error through as the very object.
FOREIGN = {KitFault}
#: Signals, not errors: SIGTERM raised in the command line's main thread as Ctrl-C raises
#: KeyboardInterrupt (a BaseException, so no `except Exception` of the stack catches it).
SIGNALS = {Terminated}


def defined_exceptions() -> dict[str, type[BaseException]]:
    """Every exception class defined in a vmstack module, by qualified name."""
    found: dict[str, type[BaseException]] = {}
    for module_info in pkgutil.walk_packages(vmstack.__path__, "vmstack."):
        if module_info.name.endswith("__main__"):
            continue
        module = importlib.import_module(module_info.name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, BaseException) and value.__module__ == module.__name__:
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return found


def test_every_exception_of_the_package_is_in_the_tree() -> None:
    """Every exception class any vmstack module defines is a VMStackError, but KitFault and
    the command line's SIGTERM signal."""
    found = defined_exceptions()
    assert set(errors.__all__) <= {name.rsplit(".", 1)[1] for name in found}
    outside = sorted(
        name
        for name, kind in found.items()
        if not issubclass(kind, errors.VMStackError) and kind not in FOREIGN | SIGNALS
    )
    assert outside == []
    assert all(not issubclass(kind, errors.VMStackError) for kind in FOREIGN)
    assert all(not issubclass(kind, Exception) for kind in SIGNALS)


def _drawn_tree() -> dict[str, tuple[str | None, str]]:
    """ARCHITECTURE.md section 4's drawing: each class's parent and the words of its line
    (with its continuation lines)."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text[text.index("## 4. Errors") : text.index("## 5.")]
    drawing = section[section.index("```\n") + 4 :]
    drawing = drawing[: drawing.index("```")]
    tree: dict[str, tuple[str | None, str]] = {}
    parents: list[str] = []
    last = ""
    for line in drawing.splitlines():
        match = re.match(r"^([│ ]*)(?:[├└]── )?(\S+)(.*)$", line)
        assert match, f"a line of the drawing that is not a class: {line!r}"
        indent, name, words = match.groups()
        if "── " not in line and parents:  # the continuation of the line above
            parent, before = tree[last]
            tree[last] = (parent, f"{before} {name}{words}")
            continue
        depth = len(indent) // 4 + (1 if "── " in line else 0)
        del parents[depth:]
        tree[name] = (parents[-1] if parents else None, words)
        parents.append(name)
        last = name
    return tree


def test_architecture_draws_the_error_tree_as_the_classes_are() -> None:
    """ARCHITECTURE.md's tree names every class of errors.py once, under its parent, with
    the built-in error it also is, and nothing else."""
    tree = _drawn_tree()
    classes = {name: getattr(errors, name) for name in errors.__all__}
    assert sorted(tree) == sorted(classes)
    for name, (parent, words) in tree.items():
        kind = classes[name]
        in_tree = [base for base in kind.__bases__ if issubclass(base, errors.VMStackError)]
        built_in = {base.__name__ for base in kind.__bases__ if base not in in_tree}
        if parent is None:
            assert kind is errors.VMStackError
            continue
        assert in_tree == [classes[parent]], f"{name} is drawn under {parent}"
        assert set(re.findall(r"\ba (\w+Error)\b", words)) == built_in, (
            f"{name}'s line must name exactly its built-in bases {sorted(built_in)}: {words}"
        )
