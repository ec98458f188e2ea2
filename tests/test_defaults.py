"""Tests for vmstack.defaults: every part that takes a shared default takes it from there."""

from __future__ import annotations

import inspect

import pytest

from vmstack.cchain import CChainVM
from vmstack.cchain.cache import DEFAULT_CAPACITY, CanonicalHashCache
from vmstack.cli import main
from vmstack.defaults import DEFAULT_CACHE_SIZE, DEFAULT_CHAIN_ID
from vmstack.sim.network.records import NetworkSimulationConfig
from vmstack.sim.run import SimulationConfig
from vmstack.stack import build_stack


def default_of(function: object, parameter: str) -> object:
    return inspect.signature(function).parameters[parameter].default  # type: ignore[arg-type]


def test_the_chain_id_default_is_one_value_everywhere() -> None:
    """build_stack, the C-chain VM and both simulations default to DEFAULT_CHAIN_ID."""
    assert DEFAULT_CHAIN_ID == 43114
    assert default_of(build_stack, "chain_id") == DEFAULT_CHAIN_ID
    assert default_of(CChainVM, "chain_id") == DEFAULT_CHAIN_ID
    assert default_of(SimulationConfig, "chain_id") == DEFAULT_CHAIN_ID
    assert default_of(NetworkSimulationConfig, "chain_id") == DEFAULT_CHAIN_ID


def test_the_cache_size_default_is_one_value_everywhere() -> None:
    """build_stack, the C-chain VM and the cache itself default to DEFAULT_CACHE_SIZE."""
    assert DEFAULT_CAPACITY == DEFAULT_CACHE_SIZE == 10_000
    assert CanonicalHashCache().capacity == DEFAULT_CACHE_SIZE
    assert default_of(build_stack, "cache_size") == DEFAULT_CACHE_SIZE
    assert default_of(CChainVM, "cache_size") == DEFAULT_CACHE_SIZE


def test_the_command_line_states_the_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    """`vmstack serve --help` names the default chain ID and cache size."""
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"(default: {DEFAULT_CHAIN_ID})" in text
    assert f"(default: {DEFAULT_CACHE_SIZE})" in text
