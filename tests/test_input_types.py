"""Odd argument types get the same answer at every layer of a stack as at its bottom, and a
block ID given as a view of wider items is a clear ``ValueError``, never another block."""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.trace import NoOpTracer
from prometheus_client import CollectorRegistry

from vmstack import SimClock, build_stack, get_ancestors
from vmstack.batching import check_block_id
from vmstack.cchain import generate_chain
from vmstack.errors import InvalidBlock
from vmstack.interfaces import ChainVM
from vmstack.store import MemoryStore
from vmstack.wrappers.proposer import StakingKey

START = 1_000.0

ODD_VALUES: list[Any] = [None, 5, -1, 1.5, "abc", [1, 2], {b"a": 1}, object(), True]


def _value_id(value: Any) -> str:
    """A test ID that is the same in every process (a bare object's repr holds its address,
    and parallel runs must collect the same IDs)."""
    return "object()" if type(value) is object else repr(value)


def _layers(vm: object) -> Iterator[ChainVM]:
    layer: object | None = vm
    while layer is not None:
        yield layer  # type: ignore[misc]
        layer = getattr(layer, "inner", None)


@pytest.fixture(scope="module")
def stack() -> ChainVM:
    """Every layer: traced and metered proposer and C-chain layers, the proposer, the
    transition; past the fork and the transition."""
    clock = SimClock(START)
    vm = build_stack(
        MemoryStore(),
        clock=clock,
        fork_time=START + 10,
        transition_time=START + 5,
        tracer=NoOpTracer(),
        registry=CollectorRegistry(),
        staking_key=StakingKey.generate(seed=b"t"),
    )
    generate_chain(vm, blocks=8, txs_per_block=1, seed=3, clock=clock)
    return vm


def _outcome(call: Any, *args: Any) -> type[BaseException] | None:
    try:
        call(*args)
    except Exception as error:
        return type(error)
    return None


def test_the_stack_has_every_layer(stack: ChainVM) -> None:
    """The stack under test holds each kind of layer this file speaks of."""
    names = {type(layer).__name__ for layer in _layers(stack)}
    assert {"TracedVM", "MeteredVM", "ProposerVM", "TransitionVM", "CChainVM"} <= names


@pytest.mark.parametrize("value", ODD_VALUES, ids=_value_id)
def test_parse_block_of_a_non_bytes_value_is_invalid_block_at_every_layer(
    stack: ChainVM, value: Any
) -> None:
    """parse_block(None), (5), ("abc"), ... is InvalidBlock at the bottom and at every
    layer above it, never TypeError (and 5 is not read as five zero bytes)."""
    for layer in _layers(stack):
        with pytest.raises(InvalidBlock):
            layer.parse_block(value)


@pytest.mark.parametrize("method", ["get_block", "set_preference", "get_block_id_at_height"])
@pytest.mark.parametrize("value", ODD_VALUES, ids=_value_id)
def test_other_methods_answer_odd_values_as_the_bottom_does(
    stack: ChainVM, method: str, value: Any
) -> None:
    """Each layer raises the same error type as the C-chain VM at the bottom."""
    layers = list(_layers(stack))
    expected = _outcome(getattr(layers[-1], method), value)
    for layer in layers:
        assert _outcome(getattr(layer, method), value) is expected, type(layer).__name__


def _wide_views(block_id: bytes) -> list[Any]:
    """Views of ``block_id`` whose items are wider than a byte (typed ``Any``: the methods
    are annotated for bytes, and what they do with a view is what is tested)."""
    return [
        memoryview(array("I", block_id)),
        memoryview(array("Q", block_id)),
        memoryview(block_id).cast("I"),
        memoryview(block_id).cast("B", (4, 8)),
        memoryview(array("H", block_id * 2)).cast("B").cast("H"),
    ]


def test_check_block_id_refuses_views_of_wider_items() -> None:
    """A view whose items are not single bytes is ValueError; a flat byte view is read."""
    block_id = bytes(range(32))
    for view in _wide_views(block_id):
        with pytest.raises(ValueError, match="memoryview of format"):
            check_block_id(view)
    assert check_block_id(memoryview(block_id)) == block_id
    assert check_block_id(memoryview(bytearray(block_id))) == block_id
    assert check_block_id(memoryview(array("B", block_id))) == block_id
    assert check_block_id(memoryview(block_id).cast("c")) == block_id


def test_a_wide_view_of_a_served_id_is_value_error_through_the_stack(stack: ChainVM) -> None:
    """get_block, get_ancestors and set_preference with a wide view of the last accepted
    ID raise ValueError at every layer; the same bytes as a flat view are served."""
    block_id = stack.last_accepted()
    for layer in _layers(stack):
        for view in _wide_views(block_id):
            with pytest.raises(ValueError):
                layer.get_block(view)
            with pytest.raises(ValueError):
                get_ancestors(layer, view)
            with pytest.raises(ValueError):
                layer.set_preference(view)
    flat: Any = memoryview(block_id)
    assert stack.get_block(flat).id == block_id
    assert get_ancestors(stack, flat)[0] == bytes(stack.get_block(block_id))
