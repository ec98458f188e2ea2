"""Every module's ``__all__`` keeps the order the project's config promises (plain
``sorted()``), and names only what the module really has."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import vmstack


def _modules() -> list[str]:
    return sorted(
        info.name
        for info in pkgutil.walk_packages(vmstack.__path__, "vmstack.")
        if not info.name.endswith(("_pb2", "__main__"))
    )


@pytest.mark.parametrize("name", _modules())
def test_all_is_sorted_and_real(name: str) -> None:
    module = importlib.import_module(name)
    public = getattr(module, "__all__", None)
    if public is None:
        return
    assert list(public) == sorted(public), f"{name}.__all__ is not in sorted() order"
    assert len(set(public)) == len(public), f"{name}.__all__ names something twice"
    missing = [entry for entry in public if not hasattr(module, entry)]
    assert not missing, f"{name}.__all__ names what it does not have: {missing}"
