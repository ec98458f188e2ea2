"""Tests for build_stack: the full C-chain stack, its layer order and its answers."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry

from vmstack import ChainVM, SimClock, batched_parse_block, describe_stack, get_ancestors
from vmstack.batching import serial_get_ancestors
from vmstack.cchain import generate_chain
from vmstack.stack import build_stack
from vmstack.store import KeyValueStore, LMDBStore, MemoryStore
from vmstack.transition import TransitionVM

START = 1_700_000_000.0
BLOCKS = 30


def full_stack(store: KeyValueStore, clock: SimClock, *, layers: bool = True) -> ChainVM:
    return build_stack(store, fork_time=START + 2 * 20, transition_time=START + 2 * 10,
                       tracer=TracerProvider().get_tracer("test") if layers else None,
                       registry=CollectorRegistry() if layers else None, clock=clock)


@pytest.fixture(scope="module")
def chain() -> tuple[MemoryStore, list[bytes]]:
    """A 30-block chain built through the full stack: transition at 10, fork at 20."""
    store = MemoryStore()
    clock = SimClock(START)
    ids = generate_chain(full_stack(store, clock), blocks=BLOCKS, txs_per_block=2, seed=5,
                         clock=clock)
    return store, ids


def test_layer_order_top_to_bottom() -> None:
    """The stack reads back in DESIGN order, each layer's capability beside it."""
    stack = full_stack(MemoryStore(), SimClock(START))
    assert [layer.label for layer in describe_stack(stack)] == [
        "TracedVM(proposervm)", "MeteredVM(proposervm)", "ProposerVM", "TracedVM(C)",
        "MeteredVM(C)", "TransitionVM", "SerialChainVM", "CChainVM"]
    assert describe_stack(stack).top.batching
    assert not describe_stack(stack)[3].batching  # before the transition: coreth-like


def test_none_leaves_layers_out() -> None:
    """Without tracer, registry, fork or transition the stack is the C-chain VM alone."""
    assert [layer.kind for layer in describe_stack(build_stack(MemoryStore()))] == ["CChainVM"]


def test_chain_through_the_full_stack_crosses_transition_and_fork(
        chain: tuple[MemoryStore, list[bytes]]) -> None:
    """generate_chain on the full stack passes the transition and the fork."""
    store, ids = chain
    stack = full_stack(store, SimClock(START + 2 * BLOCKS))
    assert stack.last_accepted() == ids[-1]
    transition = next(layer for layer in _layers(stack) if isinstance(layer, TransitionVM))
    assert transition.transitioned


@pytest.mark.parametrize("max_blocks_num", [1, 5, 12, 25, 2000])
def test_ancestors_from_tip_to_genesis_equal_the_fallback(
        chain: tuple[MemoryStore, list[bytes]], max_blocks_num: int) -> None:
    """From the tip through fork and transition down to genesis, batched == fallback."""
    store, ids = chain
    stack = full_stack(store, SimClock(START + 2 * BLOCKS))
    batched = get_ancestors(stack, ids[-1], max_blocks_num=max_blocks_num, clock=SimClock())
    fallback = serial_get_ancestors(stack, ids[-1], max_blocks_num=max_blocks_num,
                                    clock=SimClock())
    assert batched == fallback
    assert len(batched) == min(max_blocks_num, BLOCKS + 1)


def test_answers_do_not_depend_on_pass_through_layers(
        chain: tuple[MemoryStore, list[bytes]]) -> None:
    """Rule 6: adding or removing tracing and metering changes no byte of the answer."""
    store, ids = chain
    clock = SimClock(START + 2 * BLOCKS)
    with_layers = get_ancestors(full_stack(store, clock), ids[-1], clock=SimClock())
    without = get_ancestors(full_stack(store, clock, layers=False), ids[-1], clock=SimClock())
    assert with_layers == without


def test_a_second_node_parses_and_executes_the_chain(
        chain: tuple[MemoryStore, list[bytes]]) -> None:
    """A fresh node parses the whole answer newest first, then executes it oldest first."""
    store, ids = chain
    answer = get_ancestors(full_stack(store, SimClock(START + 2 * BLOCKS)), ids[-1],
                           clock=SimClock())
    node = full_stack(MemoryStore(), SimClock(START + 2 * BLOCKS))
    blocks = batched_parse_block(node, answer[:-1])
    for block in reversed(blocks):
        block.verify()
        block.accept()
    assert node.last_accepted() == ids[-1]


def test_restarted_lmdb_stack_serves_the_same_answers(tmp_path: Path) -> None:
    """A stack reopened over its LMDB store resumes with the same chain and answers."""
    clock = SimClock(START)
    with LMDBStore(tmp_path / "db") as store:
        ids = generate_chain(full_stack(store, clock), blocks=24, txs_per_block=1, seed=2,
                             clock=clock)
        before = get_ancestors(full_stack(store, clock), ids[-1], clock=SimClock())
    with LMDBStore(tmp_path / "db") as store:
        stack = full_stack(store, clock)
        assert stack.last_accepted() == ids[-1]
        assert get_ancestors(stack, ids[-1], clock=SimClock()) == before


def _layers(vm: object) -> list[object]:
    found = []
    while vm is not None:
        found.append(vm)
        vm = getattr(vm, "inner", None)
    return found
