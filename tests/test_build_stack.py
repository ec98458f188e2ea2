"""Tests for build_stack: the full C-chain stack, its layer order and its answers."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry

from vmstack import ChainVM, SimClock, batched_parse_block, describe_stack, get_ancestors
from vmstack.batching import serial_get_ancestors
from vmstack.cchain import CChainVM, generate_chain
from vmstack.errors import ConfigMismatch, StoreCorrupted
from vmstack.interfaces import find_layer
from vmstack.stack import build_stack
from vmstack.store import KeyValueStore, LMDBStore, MemoryStore
from vmstack.store.keyspaces import CONFIG_CHAIN
from vmstack.transition import TransitionVM

START = 1_700_000_000.0
BLOCKS = 30


def full_stack(store: KeyValueStore, clock: SimClock, *, layers: bool = True) -> ChainVM:
    return build_stack(
        store,
        fork_time=START + 2 * 20,
        transition_time=START + 2 * 10,
        tracer=TracerProvider().get_tracer("test") if layers else None,
        registry=CollectorRegistry() if layers else None,
        clock=clock,
    )


@pytest.fixture(scope="module")
def chain() -> tuple[MemoryStore, list[bytes]]:
    """A 30-block chain built through the full stack: transition at 10, fork at 20."""
    store = MemoryStore()
    clock = SimClock(START)
    ids = generate_chain(
        full_stack(store, clock), blocks=BLOCKS, txs_per_block=2, seed=5, clock=clock
    )
    return store, ids


def test_layer_order_top_to_bottom() -> None:
    """The stack reads back in the order of ARCHITECTURE.md, section 2, each layer's
    capability beside it."""
    stack = full_stack(MemoryStore(), SimClock(START))
    assert [layer.label for layer in describe_stack(stack)] == [
        "TracedVM(proposervm)",
        "MeteredVM(proposervm)",
        "ProposerVM",
        "TracedVM(C)",
        "MeteredVM(C)",
        "TransitionVM",
        "SerialChainVM",
        "CChainVM",
    ]
    assert describe_stack(stack).top.batching
    assert not describe_stack(stack)[3].batching  # before the transition: coreth-like


def test_none_leaves_layers_out() -> None:
    """Without tracer, registry, fork or transition the stack is the C-chain VM alone."""
    assert [layer.kind for layer in describe_stack(build_stack(MemoryStore()))] == ["CChainVM"]


def test_chain_through_the_full_stack_crosses_transition_and_fork(
    chain: tuple[MemoryStore, list[bytes]],
) -> None:
    """generate_chain on the full stack passes the transition and the fork."""
    store, ids = chain
    stack = full_stack(store, SimClock(START + 2 * BLOCKS))
    assert stack.last_accepted() == ids[-1]
    transition = find_layer(stack, TransitionVM)
    assert transition.transitioned


@pytest.mark.parametrize("max_blocks_num", [1, 5, 12, 25, 2000])
def test_ancestors_from_tip_to_genesis_equal_the_fallback(
    chain: tuple[MemoryStore, list[bytes]], max_blocks_num: int
) -> None:
    """From the tip through fork and transition down to genesis, batched == fallback."""
    store, ids = chain
    stack = full_stack(store, SimClock(START + 2 * BLOCKS))
    batched = get_ancestors(stack, ids[-1], max_blocks_num=max_blocks_num, clock=SimClock())
    fallback = serial_get_ancestors(stack, ids[-1], max_blocks_num=max_blocks_num, clock=SimClock())
    assert batched == fallback
    assert len(batched) == min(max_blocks_num, BLOCKS + 1)


def test_answers_do_not_depend_on_pass_through_layers(
    chain: tuple[MemoryStore, list[bytes]],
) -> None:
    """Rule 6: adding or removing tracing and metering changes no byte of the answer."""
    store, ids = chain
    clock = SimClock(START + 2 * BLOCKS)
    with_layers = get_ancestors(full_stack(store, clock), ids[-1], clock=SimClock())
    without = get_ancestors(full_stack(store, clock, layers=False), ids[-1], clock=SimClock())
    assert with_layers == without


def test_a_second_node_parses_and_executes_the_chain(
    chain: tuple[MemoryStore, list[bytes]],
) -> None:
    """A fresh node parses the whole answer newest first, then executes it oldest first."""
    store, ids = chain
    answer = get_ancestors(
        full_stack(store, SimClock(START + 2 * BLOCKS)), ids[-1], clock=SimClock()
    )
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
        ids = generate_chain(
            full_stack(store, clock), blocks=24, txs_per_block=1, seed=2, clock=clock
        )
        before = get_ancestors(full_stack(store, clock), ids[-1], clock=SimClock())
    with LMDBStore(tmp_path / "db") as store:
        stack = full_stack(store, clock)
        assert stack.last_accepted() == ids[-1]
        assert get_ancestors(stack, ids[-1], clock=SimClock()) == before


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"chain_id": 1}, "chain_id"),
        ({"transition_time": START + 99}, "transition_time"),
        ({"transition_time": None}, "transition_time"),
        ({"fork_time": START + 99}, "fork_time"),
        ({"fork_time": None}, "fork_time"),
        ({"settle_lag": 3}, "settle_lag"),
    ],
)
def test_a_store_refuses_another_configuration(change: dict[str, object], field: str) -> None:
    """A store remembers the stack configuration it was built with; another one is a
    ConfigMismatch naming the option, raised before any layer serves."""
    store = MemoryStore()
    options: dict[str, object] = {
        "fork_time": START + 40,
        "transition_time": START + 20,
        "chain_id": 43114,
        "settle_lag": 0,
    }
    build_stack(store, clock=SimClock(START), **options)  # type: ignore[arg-type]
    build_stack(store, clock=SimClock(START), **options)  # type: ignore[arg-type]
    with pytest.raises(ConfigMismatch) as raised:
        build_stack(store, clock=SimClock(START), **{**options, **change})  # type: ignore[arg-type]
    assert raised.value.field == field
    assert field in str(raised.value)


def test_a_damaged_configuration_record_is_store_corrupted() -> None:
    """The record carries a checksum: a flipped bit is StoreCorrupted, not a mismatch."""
    store = MemoryStore()
    build_stack(store, clock=SimClock(START), transition_time=START + 20)
    key = CONFIG_CHAIN.prefix
    damaged = bytearray(store.get(key))
    damaged[-3] ^= 0x01
    store.put(key, bytes(damaged))
    with pytest.raises(StoreCorrupted, match="configuration record"):
        build_stack(store, clock=SimClock(START), transition_time=START + 20)


def test_a_served_part_is_held_to_the_chain_record_only(tmp_path: Path) -> None:
    """The C-chain part served to a proposer elsewhere skips the proposer record, but not
    the chain's; a read-only store without records is opened as it is."""
    with LMDBStore(tmp_path / "db") as store:
        build_stack(store, clock=SimClock(START), fork_time=START + 40, transition_time=START + 20)
    with LMDBStore(tmp_path / "db", readonly=True) as store:
        build_stack(store, clock=SimClock(START), transition_time=START + 20, served_part=True)
        with pytest.raises(ConfigMismatch, match="transition_time"):
            build_stack(store, clock=SimClock(START), served_part=True)
    with LMDBStore(tmp_path / "fresh") as store:
        CChainVM(store, clock=SimClock(START))
    with LMDBStore(tmp_path / "fresh", readonly=True) as store:
        build_stack(store, clock=SimClock(START))
        assert not store.has(CONFIG_CHAIN.prefix)


def test_build_stack_passes_the_validators_to_the_proposer_layer() -> None:
    """With a validator set the proposer layer enforces its windows: a node that is not in
    the set may not build, a node alone in it builds signed; without a fork no set."""
    from vmstack.errors import ProposerWindowNotStarted
    from vmstack.wrappers.proposer import ProposerVM
    from vmstack.wrappers.proposer.staking import StakingKey

    key, other = StakingKey.generate(seed=b"stack node a"), StakingKey.generate(seed=b"b")
    clock = SimClock(1_000.0)
    for node_key, builds in ((key, True), (other, False)):
        vm = build_stack(
            MemoryStore(),
            fork_time=0.0,
            clock=clock,
            staking_key=node_key,
            validators={key.node_id: 1},
            durango_time=0.0,
        )
        proposer = find_layer(vm, ProposerVM)
        assert proposer is not None and proposer.windower is not None
        clock.advance(10.0)
        first = vm.build_block()  # the first post-fork block: no window yet
        first.verify()
        first.accept()
        clock.advance(10.0)
        if builds:
            vm.build_block().verify()
        else:
            with pytest.raises(ProposerWindowNotStarted):
                vm.build_block()
    with pytest.raises(ValueError, match="fork_time"):
        build_stack(MemoryStore(), validators={key.node_id: 1})
