"""The decision contract: ``verify``, ``accept`` and ``reject`` reach the block below,
for blocks from every source, exactly once; a rejected or replaced block is not served
afterwards. Each test checks one rule named ``decisions.*``.
"""

from __future__ import annotations

import pytest

from vmstack.batching import MAX_CONTAINERS_LEN, batched_parse_block, get_ancestors
from vmstack.conformance.base import KitBase
from vmstack.conformance.checks import batched
from vmstack.conformance.declarations import rule
from vmstack.conformance.stacks import CAPABILITIES, KIT_TIME_BUDGET, KitStack
from vmstack.errors import BlockNotFound
from vmstack.interfaces import Block

__all__ = ["DecisionContract"]

#: Where a block can come from, for the decision rules.
_SOURCES = [
    "build_block",
    "parse_block",
    "get_block",
    "get_block-again",
    "batched_parse_block",
    "engine-batched_parse_block",
]
_DECISIONS = [
    (source, decision)
    for source in _SOURCES
    for decision in ("verify", "accept", "reject")
    if not (source.startswith("get_block") and decision == "verify")
]


class DecisionContract(KitBase):
    """``verify``/``accept``/``reject`` reach below for blocks from any source."""

    def obtain(self, stack: KitStack, source: str) -> Block:
        """A block one above the tip, built through the layer and then obtained from
        ``source`` (verified first where the source serves only verified blocks)."""
        layer = stack.layer
        built = layer.build_block()
        data = bytes(built)
        if source == "build_block":
            return built
        if source == "parse_block":
            return layer.parse_block(data)
        if source == "batched_parse_block" and self.layer_batches(stack):
            return batched(layer).batched_parse_block([data])[0]
        if source.endswith("batched_parse_block"):
            return batched_parse_block(layer, [data])[0]
        built.verify()
        block = layer.get_block(built.id)
        if source == "get_block-again":
            block = layer.get_block(built.id)
        return block

    @CAPABILITIES
    @pytest.mark.parametrize(("source", "decision"), _DECISIONS)
    @rule(
        "decisions.reach-below",
        "verify, accept and reject on a block the layer returned (from build_block, "
        "parse_block, get_block, a repeated get_block, batched_parse_block or the engine "
        "helper) reach the block below exactly once, and an accepted block becomes the "
        "last accepted one",
    )
    def test_decisions_reach_the_block_below(
        self, inner_batches: bool, source: str, decision: str
    ) -> None:
        stack = self.kit_stack(batching=inner_batches, blocks=3)
        block = self.obtain(stack, source)
        self.check_block(block, source)
        if decision != "verify" and not source.startswith("get_block"):
            block.verify()
        stack.settle()
        getattr(block, decision)()
        self.assert_decisions(stack, [(decision, block)])
        if decision == "accept":
            assert stack.layer.last_accepted() == block.id, (
                f"after accepting a block from {source}, last_accepted must name it"
            )
            assert stack.layer.get_block_id_at_height(block.height) == block.id

    @CAPABILITIES
    @pytest.mark.parametrize("source", _SOURCES)
    @rule(
        "decisions.rejected-not-served",
        "a block rejected through the layer is not served afterwards: get_block raises "
        "BlockNotFound and get_ancestors answers []",
    )
    def test_rejected_blocks_are_not_served(self, inner_batches: bool, source: str) -> None:
        stack = self.kit_stack(batching=inner_batches, blocks=3)
        block = self.obtain(stack, source)
        if not source.startswith("get_block"):
            block.verify()
        served = stack.layer.get_block(block.id)
        assert served.id == block.id
        block.reject()
        self.assert_not_served(stack, block.id, f"a block from {source} after reject")

    def assert_not_served(self, stack: KitStack, block_id: bytes, what: str) -> None:
        """``block_id`` is served by no method of the layer."""
        with pytest.raises(BlockNotFound):
            stack.layer.get_block(block_id)
        assert get_ancestors(stack.layer, block_id, clock=stack.clock) == [], (
            f"{what}: get_ancestors must answer []"
        )
        if self.layer_batches(stack):
            assert (
                batched(stack.layer).get_ancestors(
                    block_id, 10, MAX_CONTAINERS_LEN, KIT_TIME_BUDGET
                )
                == []
            ), f"{what}: the layer's get_ancestors must answer []"

    @CAPABILITIES
    @rule(
        "decisions.reorg",
        "when one of two competing blocks is accepted and the other rejected (through "
        "other objects than the ones read before), nothing stale is served: the loser "
        "is gone, the winner is at its height and is the last accepted block",
    )
    def test_nothing_stale_after_a_reorg(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches, blocks=3)
        layer = stack.layer
        loser = layer.build_block()
        loser.verify()
        layer.set_preference(stack.tip)
        winner = layer.build_block()
        winner.verify()
        assert loser.id != winner.id and loser.height == winner.height
        for block_id in (loser.id, winner.id, loser.id, winner.id):
            layer.get_block(block_id)
        get_ancestors(layer, loser.id, clock=stack.clock)
        layer.set_preference(winner.id)
        layer.parse_block(bytes(winner)).accept()
        layer.parse_block(bytes(loser)).reject()
        self.assert_not_served(stack, loser.id, "the rejected competitor")
        assert layer.get_block(winner.id).id == winner.id
        assert layer.get_block_id_at_height(winner.height) == winner.id
        assert layer.last_accepted() == winner.id
        assert get_ancestors(layer, winner.id, clock=stack.clock)[0] == bytes(winner)
        child = layer.build_block()
        assert child.parent_id == winner.id, "the next block must build on the winner"
