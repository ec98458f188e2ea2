"""Shared fixtures: the block vectors in ``../shared/vectors`` (or ``$VMSTACK_VECTORS``) and
the two Sepolia era1 files in its ``era1`` folder."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_DEFAULT_VECTORS = Path(__file__).resolve().parents[2] / "shared" / "vectors"

#: The shared era1 files: Sepolia's epochs 0 and 21.
ERA1_FIRST, ERA1_SECOND = "sepolia-00000-643a00f7.era1", "sepolia-00021-b8814b14.era1"


def vectors_dir() -> Path:
    """The vectors folder: ``$VMSTACK_VECTORS`` if set, else ``../shared/vectors``."""
    return Path(os.environ.get("VMSTACK_VECTORS", _DEFAULT_VECTORS))


def load_vectors(name: str) -> Any:
    """Parsed JSON of vector file ``name``; skips the test with a reason if it is absent."""
    path = vectors_dir() / name
    if not path.is_file():
        pytest.skip(f"block vectors not found at {path} (set VMSTACK_VECTORS to the folder)")
    return json.loads(path.read_text())


@pytest.fixture(scope="session")
def vectors_path() -> Path:
    """The vectors folder, or a skip with the reason where it is absent."""
    path = vectors_dir()
    if not path.is_dir():
        pytest.skip(f"block vectors not found at {path} (set VMSTACK_VECTORS to the folder)")
    return path


@pytest.fixture(scope="module")
def era_dir() -> Path:
    """The shared era1 folder, or a skip with the reason."""
    path = vectors_dir() / "era1"
    if not (path / ERA1_FIRST).is_file() or not (path / ERA1_SECOND).is_file():
        pytest.skip(f"era1 vectors not found at {path} (set VMSTACK_VECTORS to the folder)")
    return path


@pytest.fixture
def short_tmp_path() -> Iterator[Path]:
    """A new, empty folder directly in the system's temporary directory, removed after the
    test: short enough to be a child's ``TMPDIR`` when the child puts a Unix socket in it
    (a socket's path holds at most 107 bytes, and pytest's ``tmp_path`` under
    ``pytest -n`` is already some 75 long)."""
    folder = Path(tempfile.mkdtemp(prefix="vmstack-test-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that asks for the ``ray_session`` fixture (``tests/sim/conftest.py``) runs on
    a local Ray: it carries the ``ray`` marker, so the quick loop's ``-m "not ray"`` leaves
    it out with no marker written beside the fixture."""
    for item in items:
        if "ray_session" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.ray)
