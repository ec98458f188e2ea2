"""The entry points that build a served stack (vmstack/serving.py) and the executables that
name them; ``vmstack serve`` and ``vmstack plugin`` themselves run in tests/wrappers/rpc/."""

from __future__ import annotations

import importlib
import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from vmstack.errors import ConfigMismatch
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
        (b'{"chain_id": true}', "chain_id must be a positive int, got True"),
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


def _genesis(balance: int, nonce: int) -> bytes:
    account = {"balance": hex(balance), "nonce": hex(nonce)}
    return json.dumps(
        {"config": {"chainId": 43_112}, "alloc": {"11" * 20: account}, "gasLimit": hex(15_000_000)}
    ).encode()


@pytest.mark.parametrize(
    ("balance", "nonce", "says"),
    [
        (1 << 256, 0, "balance is an int from 0 to 0x" + "f" * 64),
        (1, 1 << 64, "nonce is an int from 0 to 0x" + "f" * 16),
    ],
)
def test_a_genesis_beyond_its_bounds_is_refused(
    tmp_path: Path, balance: int, nonce: int, says: str
) -> None:
    """A genesis balance beyond uint256 or a nonce beyond 2^64 - 1 (EIP-2681) is refused
    before a store is opened; the largest of each is taken."""
    request = vm_pb2.InitializeRequest(
        chain_data_dir=str(tmp_path / "refused"), genesis_bytes=_genesis(balance, nonce)
    )
    closing: list[Any] = []
    with pytest.raises(ValueError, match=says):
        build_from_initialize(request, closing)
    assert closing == []
    largest = vm_pb2.InitializeRequest(
        chain_data_dir=str(tmp_path / "largest"),
        genesis_bytes=_genesis((1 << 256) - 1, (1 << 64) - 1),
    )
    vm, _ = build_from_initialize(largest, closing)
    assert vm.last_accepted()
    for resource in closing:
        resource.close()


def test_a_refused_initialize_releases_the_store(tmp_path: Path) -> None:
    """An Initialize refused after its store is open (the store was written for another
    chain ID) closes that store, so the corrected retry opens it."""

    def initialize(chain_id: int) -> list[Any]:
        closing: list[Any] = []
        config = json.dumps({"chain_id": chain_id}).encode()
        request = vm_pb2.InitializeRequest(chain_data_dir=str(tmp_path), config_bytes=config)
        build_from_initialize(request, closing)
        return closing

    for resource in initialize(43_112):
        resource.close()
    with pytest.raises(ConfigMismatch, match="chain_id"):
        initialize(1)
    opened = initialize(43_112)
    assert len(opened) == 1
    for resource in opened:
        resource.close()


def test_serve_freezes_what_start_up_made_before_it_serves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``vmstack serve`` builds the stack, then freezes every object made so far out of
    garbage collection, then serves: the order recorded here."""
    import gc

    from vmstack import serving
    from vmstack.wrappers.rpc import process

    happened: list[str] = []
    built = serving.build_served_stack

    def build(*args: Any, **kwargs: Any) -> Any:
        happened.append("built")
        return built(*args, **kwargs)

    monkeypatch.setattr(serving, "build_served_stack", build)
    monkeypatch.setattr(gc, "freeze", lambda: happened.append("frozen"))
    monkeypatch.setattr(process, "serve_vm", lambda vm, **options: happened.append("served"))
    assert serving.serve(tmp_path / "store", stack_options={}) == 0
    assert happened == ["built", "frozen", "served"]
