"""The proposer layer decides as avalanchego's proposervm does: a post-fork reject forgets
the wrapper and never rejects its inner block, accepting an inner block rejects its
processing siblings and their descendants, one inner verify serves every wrapper of an
inner block (even after an earlier wrapper was rejected), and a pre-fork reject is the
inner reject.

Every scenario runs over the memory VM, over the full stack (the C-chain VM below) and
over the C-chain part served by another process (the proposer layer in this one, its
inner VM a ``VMClient`` speaking protocol 45), with a recording layer directly below the
proposer layer that sees every decision that
reaches the inner VM and refuses to accept an object that was never verified (as
upstream's ``wrappedBlock`` does). The scenarios named after upstream tests are ported
from them (notice below); ``tests/wrappers/rpc/test_plugin_decisions.py`` drives two
plugins through the transition and the fork with plain vm.VM messages.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import attrs
import pytest

from vmstack import SimClock, build_stack
from vmstack.clock import Clock
from vmstack.conformance import MemoryVM, memory_vm
from vmstack.interfaces import Block, ChainVM
from vmstack.layers import PassThroughBlock, PassThroughVM
from vmstack.store import MemoryStore
from vmstack.wrappers.proposer.block import ProposerBlock
from vmstack.wrappers.proposer.envelope import build_signed, build_unsigned
from vmstack.wrappers.proposer.staking import StakingKey
from vmstack.wrappers.proposer.vm import ProposerVM
from vmstack.wrappers.rpc import spawn

from . import CHAIN_ID, node_key

# The scenarios below are ported from avalanchego (github.com/ava-labs/avalanchego),
# whose tests carry this notice:
#
#   Copyright (C) 2019-2025, Ava Labs, Inc. All rights reserved.
#
#   Redistribution and use in source and binary forms, with or without modification, are
#   permitted provided that the following conditions are met:
#   1. Redistributions of source code must retain the above copyright notice, this list of
#      conditions and the following disclaimer.
#   2. Redistributions in binary form must reproduce the above copyright notice, this list
#      of conditions and the following disclaimer in the documentation and/or other
#      materials provided with the distribution.
#   3. Neither the name of the copyright holder nor the names of its contributors may be
#      used to endorse or promote products derived from this software without specific
#      prior written permission.
#
#   THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS "AS IS" AND ANY
#   EXPRESS OR IMPLIED WARRANTIES, INCLUDING, BUT NOT LIMITED TO, THE IMPLIED WARRANTIES OF
#   MERCHANTABILITY AND FITNESS FOR A PARTICULAR PURPOSE ARE DISCLAIMED. IN NO EVENT SHALL
#   THE COPYRIGHT HOLDER OR CONTRIBUTORS BE LIABLE FOR ANY DIRECT, INDIRECT, INCIDENTAL,
#   SPECIAL, EXEMPLARY, OR CONSEQUENTIAL DAMAGES (INCLUDING, BUT NOT LIMITED TO,
#   PROCUREMENT OF SUBSTITUTE GOODS OR SERVICES; LOSS OF USE, DATA, OR PROFITS; OR BUSINESS
#   INTERRUPTION) HOWEVER CAUSED AND ON ANY THEORY OF LIABILITY, WHETHER IN CONTRACT,
#   STRICT LIABILITY, OR TORT (INCLUDING NEGLIGENCE OR OTHERWISE) ARISING IN ANY WAY OUT OF
#   THE USE OF THIS SOFTWARE, EVEN IF ADVISED OF THE POSSIBILITY OF SUCH DAMAGE.

OTHER_PROPOSER = StakingKey.generate(seed=b"a second proposer")
START = 1_000.0


class LoggedBlock(PassThroughBlock):
    """A block below the proposer layer that accepts only if this very object verified."""

    __slots__ = ("verified",)

    def __init__(self, inner: Block, layer: PassThroughVM) -> None:
        super().__init__(inner, layer)
        self.verified = False

    def verify(self) -> None:
        super().verify()
        self.verified = True

    def accept(self) -> None:
        assert self.verified, "accept of an object that was never verified"
        super().accept()


class DecisionLog(PassThroughVM):
    """Records every decision that reaches the VM below: (method, block ID)."""

    block_type = LoggedBlock

    def __init__(self, inner: ChainVM) -> None:
        super().__init__(inner)
        self.decisions: list[tuple[str, bytes]] = []

    def intercept(self, method: str, forward: Callable[..., Any], *args: Any) -> Any:
        if method.startswith("block."):
            self.decisions.append((method[len("block.") :], args[0].id))
        return forward(*args)

    def of(self, block_id: bytes) -> list[str]:
        """The decisions that reached the block ``block_id`` below, in order."""
        return [decision for decision, decided in self.decisions if decided == block_id]

    def count(self, decision: str) -> int:
        return sum(1 for made, _ in self.decisions if made == decision)


@attrs.define
class Node:
    """A proposer layer over a recorded VM below, on a simulated clock."""

    vm: ProposerVM
    log: DecisionLog
    clock: SimClock

    def grow(self, count: int) -> list[ProposerBlock]:
        """Build, verify, prefer and accept ``count`` blocks, two seconds apart."""
        built = []
        for _ in range(count):
            self.clock.advance(2)
            block = self.vm.build_block()
            block.verify()
            self.vm.set_preference(block.id)
            block.accept()
            built.append(block)
        return built

    def build(self, *, on: ProposerBlock | None = None) -> ProposerBlock:
        """Build on ``on`` (default: the preferred block) a second later, and verify."""
        if on is not None:
            self.vm.set_preference(on.id)
        self.clock.advance(1)
        block = self.vm.build_block()
        block.verify()
        return block

    def build_inner(self) -> bytes:
        """Bytes of a new block of the VM below, built on its preferred block, a second
        later (not through the proposer layer: as a peer's proposer would wrap it)."""
        self.clock.advance(1)
        return bytes(self.log.inner.build_block())

    def rewrap(self, parent: ProposerBlock, inner: bytes, *, delay: int = 1) -> ProposerBlock:
        """A second envelope on ``parent`` over ``inner`` from another proposer, parsed."""
        envelope = build_signed(
            parent.id,
            parent.timestamp + delay,
            0,
            inner,
            key=OTHER_PROPOSER,
            chain_id=self.vm.chain_id,
        )
        return self.vm.parse_block(bytes(envelope))


def memory_node(fork_time: float, clock: SimClock, pchain_height: int) -> Node:
    inner: MemoryVM = memory_vm(batching=True, clock=clock)
    log = DecisionLog(inner)
    vm = ProposerVM(
        log,
        fork_time=fork_time,
        chain_id=CHAIN_ID,
        clock=clock,
        staking_key=node_key(),
        pchain_height=pchain_height,
    )
    return Node(vm, log, clock)


def full_stack_node(
    fork_time: float, clock: SimClock, pchain_height: int, out_of_process: ChainVM | None = None
) -> Node:
    logs: list[DecisionLog] = []

    def log_below(inner: ChainVM) -> ChainVM:
        logs.append(DecisionLog(inner))
        return logs[-1]

    vm = build_stack(
        MemoryStore(),
        clock=clock,
        fork_time=fork_time,
        staking_key=node_key(),
        pchain_height=pchain_height,
        extra_layers={"C": [log_below]},
        out_of_process=out_of_process,
    )
    assert isinstance(vm, ProposerVM)
    return Node(vm, logs[0], clock)


MakeNode = Callable[[float, SimClock, int], Node]


@pytest.fixture(
    params=[
        "memory",
        "full-stack",
        pytest.param("out-of-process", marks=pytest.mark.slow),
    ]
)
def make_node(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MakeNode]:
    """How a node is made: over the memory VM, over the full stack, or over the C-chain
    part served by another process (``spawn``), the proposer layer in this one."""
    if request.param == "memory":
        yield memory_node
        return
    if request.param == "full-stack":
        yield full_stack_node
        return
    with ExitStack() as processes:

        def out_of_process_node(fork_time: float, clock: SimClock, pchain_height: int) -> Node:
            client = processes.enter_context(spawn(tmp_path / "served", clock=clock))
            return full_stack_node(fork_time, clock, pchain_height, out_of_process=client)

        yield out_of_process_node


def forked(make_node: MakeNode, *, blocks: int = 3, pchain_height: int = 0) -> Node:
    """A node whose chain forks at START, with ``blocks`` accepted blocks above genesis:
    the first pre-fork (on genesis, before the fork), the second the first post-fork block
    (unsigned), the others signed post-fork blocks."""
    clock: Clock = SimClock(START)
    node = make_node(START, clock, pchain_height)  # type: ignore[arg-type]
    node.grow(blocks)
    node.log.decisions.clear()
    return node


# --- ported scenarios -------------------------------------------------------------------------


def test_reject_post_fork_block_inner_block_is_not_rejected(make_node: MakeNode) -> None:
    """TestBlockReject_PostForkBlock_InnerBlockIsNotRejected."""
    node = forked(make_node)
    block = node.build()
    assert block.post_fork
    block.reject()
    assert node.log.of(block.inner.id) == ["verify"]


def test_reject_pre_fork_block_inner_block_is_rejected(make_node: MakeNode) -> None:
    """TestBlockReject_PreForkBlock_InnerBlockIsRejected."""
    clock = SimClock(START)
    node = make_node(math.inf if make_node is memory_node else 10.0**12, clock, 0)
    node.grow(2)
    block = node.build()
    assert not block.post_fork
    block.reject()
    assert node.log.of(block.id) == ["verify", "reject"]


def test_two_pro_blocks_with_same_core_block_one_is_accepted(make_node: MakeNode) -> None:
    """TestBlockAccept_PostForkBlock_TwoProBlocksWithSameCoreBlock_OneIsAccepted: the inner
    block is verified once and accepted once with the first envelope; rejecting the
    second rejects nothing below."""
    node = forked(make_node)
    parent = node.vm.get_block(node.vm.last_accepted())
    first = node.build()
    second = node.rewrap(parent, bytes(first.inner), delay=2)
    assert second.id != first.id and second.inner.id == first.inner.id
    second.verify()
    first.accept()
    assert node.vm.last_accepted() == first.id
    second.reject()
    assert node.log.of(first.inner.id) == ["verify", "accept"]
    assert node.log.count("reject") == 0


def test_inner_block_deduplication(make_node: MakeNode) -> None:
    """TestInnerBlockDeduplication: two unsigned first post-fork envelopes (P-chain heights
    0 and 1) of one inner block, parsed into distinct objects below; the second, accepted,
    reaches the object the first verified."""
    node = forked(make_node, blocks=1, pchain_height=1)
    parent_id = node.vm.last_accepted()
    parent = node.vm.get_block(parent_id)
    inner = node.build_inner()
    timestamp = max(parent.timestamp, int(node.clock()))
    envelopes = [build_unsigned(parent_id, timestamp, height, inner) for height in (0, 1)]
    first = node.vm.parse_block(bytes(envelopes[0]))
    first.verify()
    node.vm.set_preference(first.id)
    second = node.vm.parse_block(bytes(envelopes[1]))
    assert second.inner is not first.inner
    second.verify()
    node.vm.set_preference(second.id)
    second.accept()
    assert node.log.of(first.inner.id) == ["verify", "accept"]
    assert node.vm.last_accepted() == second.id


def test_two_pro_blocks_with_same_parent_can_both_verify(make_node: MakeNode) -> None:
    """TestTwoProBlocksWithSameParentCanBothVerify: one built here, one from the network
    over another inner block on the same parent."""
    node = forked(make_node)
    parent = node.vm.get_block(node.vm.last_accepted())
    built = node.build()
    network = node.rewrap(parent, node.build_inner(), delay=2)
    assert network.parent_id == built.parent_id and network.inner.id != built.inner.id
    network.verify()
    assert node.vm.get_block(network.id).id == network.id


def test_two_forks_one_is_accepted(make_node: MakeNode) -> None:
    """TestTwoForks_OneIsAccepted: accepting A(X) rejects Y and its child Z below at once,
    before the engine rejects B(Y) and C(Z); those rejects then reach nothing."""
    node = forked(make_node)
    parent = node.vm.get_block(node.vm.last_accepted())
    a = node.build()
    b = node.rewrap(parent, node.build_inner(), delay=2)
    b.verify()
    c = node.build(on=b)
    assert c.parent_id == b.id and c.inner.parent_id == b.inner.id
    a.accept()
    assert node.log.of(a.inner.id) == ["verify", "accept"]
    assert node.log.of(b.inner.id) == ["verify", "reject"]
    assert node.log.of(c.inner.id) == ["verify", "reject"]
    b.reject()
    c.reject()
    assert node.log.count("reject") == 2


# --- the rules of section "decisions" beyond upstream's tests ---------------------------------


def test_one_inner_verify_even_after_an_earlier_wrapper_was_rejected(make_node: MakeNode) -> None:
    """An inner block whose only envelope was rejected stays verified: a later envelope of
    it verifies without verifying it again, and is accepted."""
    node = forked(make_node)
    parent = node.vm.get_block(node.vm.last_accepted())
    first = node.build()
    first.reject()
    second = node.rewrap(parent, bytes(first.inner), delay=2)
    second.verify()
    node.vm.set_preference(second.id)
    second.accept()
    assert node.log.of(first.inner.id) == ["verify", "accept"]
    assert node.vm.last_accepted() == second.id


def test_every_verified_inner_block_gets_exactly_one_decision(make_node: MakeNode) -> None:
    """A tree of envelopes (two over one inner block, a losing branch two deep) decided as
    an engine decides it, winners first: each inner block verified gets one decision."""
    node = forked(make_node)
    parent = node.vm.get_block(node.vm.last_accepted())
    winner = node.build()
    twin = node.rewrap(parent, bytes(winner.inner), delay=2)
    twin.verify()
    loser = node.rewrap(parent, node.build_inner(), delay=3)
    loser.verify()
    losing_child = node.build(on=loser)
    winning_child = node.build(on=winner)
    node.vm.set_preference(winning_child.id)
    winner.accept()
    for block in (twin, loser, losing_child):
        block.reject()
    winning_child.accept()
    verified = {block_id for made, block_id in node.log.decisions if made == "verify"}
    for block_id in verified:
        decisions = [made for made in node.log.of(block_id) if made != "verify"]
        assert len(decisions) == 1, (block_id.hex(), decisions)
    assert node.log.of(winner.inner.id) == ["verify", "accept"]
    assert node.log.of(loser.inner.id) == ["verify", "reject"]
    assert node.log.of(losing_child.inner.id) == ["verify", "reject"]
    assert node.vm.last_accepted() == winning_child.id


def test_rejecting_a_pre_fork_parent_rejects_the_post_fork_children_below() -> None:
    """At the fork: a post-fork block on a processing pre-fork block whose parent loses is
    rejected below with it, though no sibling of its inner block is ever accepted."""
    clock = SimClock(START)
    node = memory_node(START + 3, clock, 0)
    node.grow(1)
    clock.advance(3)
    pre_fork = node.build()
    assert not pre_fork.post_fork and pre_fork.timestamp >= START + 3
    post_fork = node.build(on=pre_fork)
    assert post_fork.post_fork
    node.log.decisions.clear()
    pre_fork.reject()
    post_fork.reject()
    assert node.log.decisions == [("reject", pre_fork.id), ("reject", post_fork.inner.id)]
