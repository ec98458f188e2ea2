"""SnowmanEngine over real in-process stacks, with a test transport: the engines build,
poll and decide on whole C-chain stacks (build_stack over a MemoryStore), as avalanchego's
TestEngineNetworkBuildsAndAcceptsBlocks does over its test VMs."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import pytest

from tests.support.transactions import signed_transfer
from vmstack import BlockNotFound, SimClock, build_stack, submit_transactions
from vmstack.cchain import DEV_KEYS, DynamicFeeTx, keccak256
from vmstack.consensus import Parameters
from vmstack.consensus.engine import (
    Chits,
    Get,
    Message,
    PullQuery,
    PushQuery,
    SnowmanEngine,
    StakeSampler,
)
from vmstack.store import MemoryStore

START = 1_700_000_000.0
PARAMS = Parameters(
    k=2, alpha_preference=2, alpha_confidence=2, beta=3, concurrent_repolls=1, optimal_processing=4
)


class Network:
    """Engines joined by a queue: ``send`` enqueues, :meth:`deliver` hands messages over in
    order until none is left (a bounded number, so a loop would fail, not hang)."""

    def __init__(self, nodes: int, params: Parameters = PARAMS) -> None:
        self.clock = SimClock(START)
        self.ids = [b"node-%d" % index for index in range(nodes)]
        self.queue: deque[tuple[bytes, bytes, Message]] = deque()
        self.sent: list[tuple[bytes, bytes, Message]] = []
        self.cut: set[bytes] = set()
        weights = dict.fromkeys(self.ids, 1)
        self.vms = [build_stack(MemoryStore(), clock=self.clock) for _ in self.ids]
        self.engines = [
            SnowmanEngine(
                vm,
                params,
                node_id=node_id,
                sampler=StakeSampler(weights, seed=index),
                send=self._sender(node_id),
                clock=self.clock,
            )
            for index, (vm, node_id) in enumerate(zip(self.vms, self.ids, strict=True))
        ]

    def _sender(self, source: bytes) -> Callable[[bytes, Message], None]:
        def send(destination: bytes, message: Message) -> None:
            self.sent.append((source, destination, message))
            if destination not in self.cut and source not in self.cut:
                self.queue.append((source, destination, message))

        return send

    def deliver(self, most: int = 100_000) -> int:
        delivered = 0
        while self.queue:
            source, destination, message = self.queue.popleft()
            self.engines[self.ids.index(destination)].receive(source, message)
            delivered += 1
            assert delivered < most, "the engines do not settle"
        return delivered


def _transfer(key: int, nonce: int) -> DynamicFeeTx:
    return signed_transfer(
        nonce, key=DEV_KEYS[key], to=keccak256(b"to %d" % nonce)[12:], value=1 + nonce
    )


def test_two_engines_build_and_accept_blocks() -> None:
    """Two nodes take turns building; every block is accepted on both, in one order, and
    both stacks end on the same last accepted block."""
    network = Network(2)
    for round_number in range(20):
        network.clock.advance(2.0)
        network.engines[round_number % 2].notify_pending()
        network.deliver()
    first, second = network.engines
    assert len(first.accepted_ids) == 20
    assert first.accepted_ids == second.accepted_ids
    assert not first.rejected_ids and not second.rejected_ids
    assert (
        network.vms[0].last_accepted() == network.vms[1].last_accepted() == first.accepted_ids[-1]
    )
    assert first.last_accepted()[1] == 20
    assert any(isinstance(message, PullQuery) for _, _, message in network.sent)
    assert any(isinstance(message, PushQuery) for _, _, message in network.sent)


THREE = Parameters(
    k=3, alpha_preference=2, alpha_confidence=2, beta=3, concurrent_repolls=1, optimal_processing=4
)


def test_competing_blocks_one_wins_everywhere() -> None:
    """Two of three nodes build on the same parent at once (different transactions): one
    block is accepted on every node, the other rejected on every node that issued it, each
    decided once, and no stack serves the loser."""
    network = Network(3, THREE)
    network.clock.advance(2.0)
    for index, vm in enumerate(network.vms[:2]):
        submit_transactions(vm, [_transfer(index, 0)])
    for engine in network.engines[:2]:
        engine.notify_pending()
    network.deliver()
    first, second, third = network.engines
    assert len(first.accepted_ids) == 1
    assert first.accepted_ids == second.accepted_ids == third.accepted_ids
    assert first.rejected_ids == second.rejected_ids == third.rejected_ids
    assert len(first.rejected_ids) == 1
    loser = first.rejected_ids[0]
    for vm in network.vms:
        assert vm.last_accepted() == first.accepted_ids[0]
        with pytest.raises(BlockNotFound):
            vm.get_block(loser)


def test_no_polls_without_enough_connected_stake() -> None:
    """A node that sees half the stake (below alpha_confidence / k = 1) sends no query; its
    block stays processing until the peer is connected again."""
    network = Network(2)
    lonely = network.engines[0]
    lonely.disconnected(network.ids[1])
    network.clock.advance(2.0)
    lonely.notify_pending()
    network.deliver()
    queries = [m for _, _, m in network.sent if isinstance(m, (PushQuery, PullQuery))]
    assert queries == []
    assert lonely.consensus.num_processing() == 1 and not lonely.accepted_ids
    lonely.connected(network.ids[1])
    network.deliver()
    assert len(lonely.accepted_ids) == 1
    assert network.engines[1].accepted_ids == lonely.accepted_ids


def test_a_block_whose_parent_is_missing_waits_for_it() -> None:
    """A node that missed a block (its link was cut) fetches the parent when the child
    arrives, then issues both in order."""
    network = Network(2)
    network.clock.advance(2.0)
    network.cut.add(network.ids[1])
    builder = network.engines[0]
    builder.disconnected(network.ids[1])
    builder.notify_pending()  # no poll: the builder sees half the stake
    network.deliver()
    network.clock.advance(2.0)
    builder.notify_pending()
    network.deliver()
    assert builder.consensus.num_processing() == 2
    network.cut.clear()
    builder.connected(network.ids[1])
    network.deliver()
    peer = network.engines[1]
    assert peer.accepted_ids == builder.accepted_ids and len(peer.accepted_ids) == 2
    fetched = [m.block_id for source, _, m in network.sent if isinstance(m, Get)]
    assert builder.accepted_ids[0] in fetched


def test_stake_sampler_draws_with_multiplicity() -> None:
    """A validator with most of the stake is drawn several times in one sample; a sample
    larger than the stake's units is refused."""
    sampler = StakeSampler({b"a": 18, b"b": 2}, seed=3)
    drawn = sampler.sample(20)
    assert drawn is not None and sorted(set(drawn)) == [b"a", b"b"]
    assert drawn.count(b"a") == 18
    assert sampler.sample(21) is None
    with pytest.raises(ValueError, match="positive stake"):
        StakeSampler({b"a": 0})


def test_a_block_at_an_accepted_height_is_never_issued() -> None:
    """A rival of an accepted block, pushed late, is not verified (the stack does not serve
    it) and not added; the query is still answered with the accepted chain."""
    network = Network(2)
    network.clock.advance(2.0)
    network.engines[0].notify_pending()
    network.deliver()
    accepted = network.engines[0].accepted_ids[0]
    outsider = build_stack(MemoryStore(), clock=network.clock)
    submit_transactions(outsider, [_transfer(5, 0)])
    rival = outsider.build_block()
    assert rival.height == 1 and rival.id != accepted
    engine = network.engines[1]
    engine.receive(b"outsider", PushQuery(7, bytes(rival), 1))
    assert engine.consensus.num_processing() == 0
    with pytest.raises(BlockNotFound):
        network.vms[1].get_block(rival.id)
    (answer,) = [m for source, to, m in network.sent if to == b"outsider"]
    assert isinstance(answer, Chits) and answer.preferred_id_at_height == accepted


def test_a_deferred_build_is_built_later_and_listed_with_the_others() -> None:
    """With ``optimal_processing`` blocks processing, ``notify_pending`` waits; the block
    built once one is decided (inside ``receive``) is in ``built_ids`` like the first."""
    network = Network(
        2,
        Parameters(
            k=2,
            alpha_preference=2,
            alpha_confidence=2,
            beta=3,
            concurrent_repolls=1,
            optimal_processing=1,
        ),
    )
    builder = network.engines[0]
    network.clock.advance(2.0)
    builder.notify_pending()
    network.clock.advance(2.0)
    builder.notify_pending()
    assert len(builder.built_ids) == 1 and builder.consensus.num_processing() == 1
    network.deliver()
    assert len(builder.built_ids) == 2
    assert builder.accepted_ids == builder.built_ids
    assert network.engines[1].accepted_ids == builder.built_ids
