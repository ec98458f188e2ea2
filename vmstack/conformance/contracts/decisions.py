"""The decision contract: ``verify``, ``accept`` and ``reject`` reach the block below,
for blocks from every source, exactly once; a rejected or replaced block is not served
afterwards. Each test checks one rule named ``decisions.*``.

The decisions a consensus engine makes (docs/decisions.md) have rules of their own:
siblings and their children verify independently; every block verified below gets exactly
one of ``accept`` / ``reject`` when the engine decides the tree; a rejected block whose
block below is shared with another of the layer's blocks (two envelopes of one block)
leaves it verified and undecided, to be accepted through the other; a switch of
preference between processing blocks, and back, is forwarded every time.
"""

from __future__ import annotations

import pytest

from vmstack.batching import MAX_CONTAINERS_LEN, batched_parse_block, get_ancestors
from vmstack.conformance.base import KitBase
from vmstack.conformance.checks import batched
from vmstack.conformance.declarations import rule
from vmstack.conformance.stacks import CAPABILITIES, KIT_TIME_BUDGET, KitStack
from vmstack.errors import BlockNotFound
from vmstack.interfaces import Block, ChainVM

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
        "last accepted one; a reject of a block of the layer's own (an envelope) leaves "
        "the block below undecided until a sibling is accepted, which rejects it once",
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
        if decision == "reject" and self.own_blocks:
            # Another envelope may still carry the block below: its decision comes with
            # the accept of a sibling (docs/decisions.md).
            self.assert_decisions(stack, [])
            sibling = self.build_on(stack, stack.tip)
            sibling.accept()
            self.assert_decisions(
                stack, [("verify", sibling), ("accept", sibling), ("reject", block)]
            )
            return
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

    # --- decisions under consensus --------------------------------------------------------

    def build_on(self, stack: KitStack, parent_id: bytes) -> Block:
        """A block built through the layer on ``parent_id`` (preferred first) a second of
        the kit's clock after the previous one, verified."""
        stack.layer.set_preference(parent_id)
        stack.clock.advance(1.0)
        block = stack.layer.build_block()
        assert block.parent_id == parent_id, (
            "after set_preference(X) the next block must build on X, even when X is processing"
        )
        block.verify()
        return block

    def decisions_below(self, stack: KitStack) -> dict[bytes, list[str]]:
        """Every block the VM below saw a decision on: ID -> its decisions, in order."""
        seen: dict[bytes, list[str]] = {}
        for made in stack.inner.calls:
            if made.method.startswith("block."):
                seen.setdefault(made.args[0], []).append(made.method[len("block.") :])
        return seen

    def two_branches(self, stack: KitStack) -> tuple[Block, Block, Block, Block]:
        """Two siblings on the tip and a child on each, all verified through the layer:
        ``(a, b, a_child, b_child)``."""
        a = self.build_on(stack, stack.tip)
        b = self.build_on(stack, stack.tip)
        assert a.id != b.id and a.height == b.height, (
            "two blocks built on one parent at different times are two siblings"
        )
        a_child = self.build_on(stack, a.id)
        b_child = self.build_on(stack, b.id)
        return a, b, a_child, b_child

    @CAPABILITIES
    @rule(
        "decisions.siblings-verify",
        "two siblings on the last accepted block and a child built on each (while its "
        "parent is processing) all verify, in any order, each verify reaching below "
        "once, and all four are served",
    )
    def test_siblings_and_their_children_verify_independently(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches, blocks=3)
        stack.settle()
        blocks = self.two_branches(stack)
        for block in blocks:
            assert stack.layer.get_block(block.id).id == block.id, (
                "a verified block is served while it is processing"
            )
        verified = [
            block_id
            for block_id, decisions in self.decisions_below(stack).items()
            for decision in decisions
            if decision == "verify"
        ]
        assert len(verified) == len(set(verified)) == len(blocks), (
            f"each of the {len(blocks)} verifies (two siblings, a child on each) must reach "
            f"one block below once; the VM below saw {len(verified)} verifies of "
            f"{len(set(verified))} blocks"
        )

    @CAPABILITIES
    @rule(
        "decisions.one-decision",
        "when the engine accepts one branch of two (the winner, then its child) and "
        "rejects the other (the loser, then its child), every block verified below gets "
        "exactly one of accept / reject, the winners accept and the losers reject",
    )
    def test_every_verified_block_below_gets_one_decision(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches, blocks=3)
        stack.settle()
        a, b, a_child, b_child = self.two_branches(stack)
        stack.layer.set_preference(a_child.id)
        a.accept()
        b.reject()
        b_child.reject()
        a_child.accept()
        seen = self.decisions_below(stack)
        decided = {
            block_id: [decision for decision in decisions if decision != "verify"]
            for block_id, decisions in seen.items()
        }
        verified = [block_id for block_id, decisions in seen.items() if "verify" in decisions]
        wrong = {
            block_id.hex()[:8]: decided[block_id]
            for block_id in verified
            if len(decided[block_id]) != 1
        }
        assert not wrong, (
            "every block verified below gets exactly one of accept / reject; these got "
            f"another number: {wrong}"
        )
        outcomes = sorted(decisions[0] for decisions in decided.values() if decisions)
        assert outcomes == ["accept", "accept", "reject", "reject"], (
            "the winner and its child are accepted below, the loser and its child "
            f"rejected; the VM below saw {outcomes}"
        )
        assert stack.layer.last_accepted() == a_child.id

    @CAPABILITIES
    @rule(
        "decisions.shared-block-kept",
        "when the VM below builds one block twice and the layer wraps it in two blocks "
        "of its own, rejecting the first never rejects the block below: the second "
        "verifies without verifying it again and is accepted, the block below accepted "
        "once (a layer whose blocks are the ones below rejects the one block once)",
    )
    def test_a_rejected_wrapper_keeps_a_shared_block_below(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches, blocks=3)
        stack.settle()
        first = self.build_on(stack, stack.tip)
        stack.inner.repeat_next_build()
        stack.clock.advance(1.0)
        second = stack.layer.build_block()
        if second.id == first.id:
            # No envelope of its own: the two builds are one block, decided as one.
            first.reject()
            rejects = self.decisions_below(stack).get(first.id, []).count("reject")
            assert rejects == 1, f"the one block's reject must reach below once, not {rejects}"
            return
        first.reject()
        assert not any(
            "reject" in decisions for decisions in self.decisions_below(stack).values()
        ), "rejecting a block whose block below another block wraps must not reject it below"
        second.verify()
        stack.layer.set_preference(second.id)
        second.accept()
        seen = self.decisions_below(stack)
        assert list(seen.values()) == [["verify", "accept"]], (
            "the shared block below is verified once and accepted once, never rejected; "
            f"the VM below saw {[(k.hex()[:8], v) for k, v in seen.items()]}"
        )
        assert stack.layer.last_accepted() == second.id

    @CAPABILITIES
    @rule(
        "decisions.preference-switch",
        "switching the preference between two processing siblings, and back, is "
        "forwarded every time: each next block builds on the block preferred last",
    )
    def test_a_preference_switch_is_forwarded(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches, blocks=3)
        a = self.build_on(stack, stack.tip)
        b = self.build_on(stack, stack.tip)
        layer: ChainVM = stack.layer
        for preferred in (a, b, a, b):
            layer.set_preference(preferred.id)
            stack.clock.advance(1.0)
            child = layer.build_block()
            assert child.parent_id == preferred.id, (
                "after a switch of preference to a processing sibling the next block must "
                "build on it, however often the preference went back and forth"
            )
