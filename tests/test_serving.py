"""The entry points that build a served stack (vmstack/serving.py) and the executables that
name them; ``vmstack serve`` and ``vmstack plugin`` themselves run in tests/wrappers/rpc/."""

from __future__ import annotations

import importlib
import tomllib
from pathlib import Path

import pytest

from vmstack.serving import build_from_initialize, plugin_main
from vmstack.wrappers.rpc import vm_pb2

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


@pytest.mark.parametrize("script", ["vmstack", "vmstack-plugin"])
def test_every_executable_names_a_function_that_exists(script: str) -> None:
    """Each ``[project.scripts]`` entry names a callable of the package."""
    target = tomllib.loads(PYPROJECT.read_text())["project"]["scripts"][script]
    module, _, name = target.partition(":")
    assert callable(getattr(importlib.import_module(module), name))


def test_the_plugin_executable_refuses_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    """``vmstack-plugin`` takes no arguments: status 2 and a line naming the variable a node
    sets, without starting to serve."""
    assert plugin_main(["--help"]) == 2
    assert "AVALANCHE_VM_RUNTIME_ENGINE_ADDR" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("config", "says"),
    [
        (b"[1]", "JSON object"),
        (b'{"colour": 1}', "unknown option 'colour'"),
        (b'{"chain_id": true}', "chain_id must be a number"),
    ],
)
def test_an_initialize_it_cannot_follow_says_why(tmp_path: Path, config: bytes, says: str) -> None:
    """A config the stack has no option for is ``ValueError`` naming it, before any store
    is opened."""
    closing: list[object] = []
    request = vm_pb2.InitializeRequest(chain_data_dir=str(tmp_path), config_bytes=config)
    with pytest.raises(ValueError, match=says):
        build_from_initialize(request, closing)
    assert closing == []
    assert list(tmp_path.iterdir()) == []
