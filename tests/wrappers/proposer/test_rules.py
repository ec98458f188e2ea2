"""The proposer layer's rules are functions of what they read: they run against any
``ProposerChain`` with the layer's settings passed in, and read no layer's internals."""

from __future__ import annotations

import ast
import inspect
from typing import Any, cast

import attrs
import pytest

from vmstack.clock import SimClock
from vmstack.conformance import MemoryVM, memory_vm
from vmstack.errors import InvalidBlock
from vmstack.interfaces import ChainVM
from vmstack.wrappers.proposer import verify
from vmstack.wrappers.proposer.block import ProposerBlock
from vmstack.wrappers.proposer.envelope import build_unsigned
from vmstack.wrappers.proposer.verify import (
    BlockFacts,
    ProposerChain,
    check_post_fork,
    check_pre_fork,
)

PARENT = b"\x51" * 32


@attrs.define
class DictChain:
    """A ``ProposerChain`` from plain dictionaries: a post-fork parent ``PARENT`` that is
    processing, over the inner VM's last accepted block."""

    inner_vm: MemoryVM
    processing: dict[bytes, BlockFacts] = attrs.field(factory=dict)

    @property
    def inner(self) -> ChainVM:
        return self.inner_vm

    def last_accepted(self) -> bytes:
        return self.inner_vm.last_accepted()

    def processing_facts(self, block_id: bytes) -> BlockFacts | None:
        return self.processing.get(block_id)

    def accepted_facts(self, block_id: bytes) -> BlockFacts | None:
        return None

    def is_accepted(self, block_id: bytes) -> bool:
        return False

    def envelope_of_inner(self, inner_id: bytes) -> bytes | None:
        return next(
            (block_id for block_id, facts in self.processing.items() if facts.inner_id == inner_id),
            None,
        )

    def accepted_envelope_of_inner(self, inner_id: bytes) -> bytes | None:
        return None

    def pre_fork_facts(self, block_id: bytes) -> BlockFacts | None:
        return None


def _chain_with_processing_parent() -> tuple[DictChain, MemoryVM, SimClock]:
    clock = SimClock(100.0)
    inner = memory_vm(clock=clock)
    chain = DictChain(inner)
    chain.processing[PARENT] = BlockFacts(True, 90, 2, inner.last_accepted())
    return chain, inner, clock


def _child(inner: MemoryVM, *, timestamp: int, pchain_height: int) -> ProposerBlock:
    """A post-fork child of ``PARENT``: no layer is behind it, as the rules need none."""
    inner_block = inner.build_block()
    envelope = build_unsigned(PARENT, timestamp, pchain_height, bytes(inner_block))
    return ProposerBlock(cast(Any, None), inner_block, envelope)


def test_a_dictionary_chain_is_a_proposer_chain() -> None:
    """The protocol the rules read is satisfied by a plain object, no layer needed."""
    chain, _, _ = _chain_with_processing_parent()
    reader: ProposerChain = chain
    assert reader.processing_facts(PARENT) == BlockFacts(True, 90, 2, chain.last_accepted())


@pytest.mark.parametrize("current, passes", [(1, False), (2, True), (7, True)])
def test_post_fork_rule_reads_the_pchain_height_it_is_given(current: int, passes: bool) -> None:
    """The P-chain height comes from the callable passed in: a block naming a height above
    it fails, one at or below it passes."""
    chain, inner, clock = _chain_with_processing_parent()
    block = _child(inner, timestamp=95, pchain_height=2)
    assert block.envelope is not None
    reads: list[int] = []

    def pchain_height() -> int:
        reads.append(current)
        return current

    def check() -> None:
        check_post_fork(
            chain,
            block,
            cast(Any, block.envelope),
            fork_time=0.0,
            clock=clock,
            pchain_height=pchain_height,
            windower=None,
            durango_time=0.0,
        )

    if passes:
        check()
    else:
        with pytest.raises(InvalidBlock, match=r"P-chain height 2 is ahead of the P-chain \(1\)"):
            check()
    assert reads == [current]


def test_post_fork_rule_reads_the_clock_it_is_given() -> None:
    """The skew is measured against the clock passed in, not the block's layer."""
    chain, inner, clock = _chain_with_processing_parent()
    block = _child(inner, timestamp=200, pchain_height=2)
    with pytest.raises(InvalidBlock, match="too far in the future"):
        check_post_fork(
            chain,
            block,
            cast(Any, block.envelope),
            fork_time=0.0,
            clock=clock,
            pchain_height=lambda: 2,
            windower=None,
            durango_time=0.0,
        )
    clock.advance(95)
    check_post_fork(
        chain,
        block,
        cast(Any, block.envelope),
        fork_time=0.0,
        clock=clock,
        pchain_height=lambda: 2,
        windower=None,
        durango_time=0.0,
    )


def test_pre_fork_rule_refuses_a_child_of_a_processing_post_fork_block() -> None:
    """A pre-fork block whose parent the chain says is a processing post-fork block is
    refused; the same block over a parent it does not know passes."""
    inner = memory_vm(clock=SimClock(100.0))
    chain = DictChain(inner)
    block = ProposerBlock(cast(Any, None), inner.build_block(), None)
    check_pre_fork(chain, block, fork_time=50.0)
    chain.processing[block.parent_id] = BlockFacts(True, 0, 0, b"\0" * 32)
    with pytest.raises(InvalidBlock, match="never has a pre-fork child"):
        check_pre_fork(chain, block, fork_time=50.0)


def test_no_rule_reads_a_private_attribute_of_another_object() -> None:
    """Every ``x._name`` in the rules module is ``self._name`` inside its own class."""
    tree = ast.parse(inspect.getsource(verify))
    private = [
        f"{ast.unparse(node)} (line {node.lineno})"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and not (isinstance(node.value, ast.Name) and node.value.id == "self")
    ]
    assert private == []
