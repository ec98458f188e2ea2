"""Tests that the error tree of vmstack/errors.py is whole (ARCHITECTURE.md, section 4)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import vmstack
from vmstack import errors
from vmstack.cli import Terminated
from vmstack.conformance.stacks import KitFault

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
    outside = sorted(name for name, kind in found.items()
                     if not issubclass(kind, errors.VMStackError)
                     and kind not in FOREIGN | SIGNALS)
    assert outside == []
    assert all(not issubclass(kind, errors.VMStackError) for kind in FOREIGN)
    assert all(not issubclass(kind, Exception) for kind in SIGNALS)


def test_the_docstring_tree_names_every_error() -> None:
    """The tree drawn in errors.py's docstring names each class in errors.__all__."""
    doc = errors.__doc__ or ""
    missing = [name for name in errors.__all__
               if not any(line.split("── ")[-1].split(" ")[0] == name or line.strip() == name
                          for line in doc.splitlines())]
    assert missing == []
