"""The forwarding contract: batched calls reach the VM below as ONE call.

Over a VM that batches, each batched call is one call below with the caller's arguments
and no per-block call; over one that cannot, both batched methods are refused with
``BatchingNotImplemented`` (or answered, by a layer that declares it answers them itself).
The capability is visible and followed at each call, answers do not depend on the path or on
the layer, and the one-block methods forward. Each test checks one rule named
``forwarding.*``.
"""

from __future__ import annotations

import pytest
from hypothesis import strategies as st

from vmstack.batching import (
    MAX_CONTAINERS_LEN,
    AncestorBudget,
    batched_parse_block,
    get_ancestors,
    walk_ancestors,
)
from vmstack.clock import SimClock
from vmstack.conformance.base import KitBase
from vmstack.conformance.checks import batched, reaches
from vmstack.conformance.declarations import rule
from vmstack.conformance.doubles import BatchedMemoryVM, Call
from vmstack.conformance.stacks import (
    CAPABILITIES,
    INNER_BATCHES,
    INNER_SERIAL,
    KIT_START_TIME,
    KIT_TIME_BUDGET,
    UNKNOWN_ID,
    KitStack,
)
from vmstack.describe import describe_stack
from vmstack.errors import BlockNotFound, InvalidBlock
from vmstack.layers import supports_batching

__all__ = ["ForwardingContract"]


class ForwardingContract(KitBase):
    """Batched calls are one call below; refusals, capability and the one-block methods."""

    @INNER_BATCHES
    @rule(
        "forwarding.one-call",
        "over a VM that batches, get_ancestors reaches it as exactly one call with the "
        "caller's arguments, and no get_block call",
    )
    def test_get_ancestors_is_one_call_below(self, inner_batches: bool) -> None:
        def check(data: st.DataObject) -> None:
            stack, chain = self.drawn_chain(data, inner_batches)
            index, num, size = self.draw_request(data, chain)
            block_id = stack.ids[index]

            def call() -> object:
                return batched(stack.layer).get_ancestors(block_id, num, size, KIT_TIME_BUDGET)

            if not self.layer_batches(stack):
                self.expect_refusal_or_answer(stack, call, "get_ancestors")
                return
            self.check_ancestors(
                stack,
                chain,
                index,
                num=num,
                size=size,
                seconds=KIT_TIME_BUDGET,
                call=call,
                what="get_ancestors",
            )
            self.assert_forwarded_once(
                stack, Call("get_ancestors", (block_id, num, size, KIT_TIME_BUDGET))
            )

        self.kit_explore(check, data=st.data())

    @INNER_BATCHES
    @rule(
        "forwarding.parse-one-call",
        "over a VM that batches, batched_parse_block reaches it as exactly one call with "
        "the caller's batch, and no parse_block call",
    )
    def test_batched_parse_is_one_call_below(self, inner_batches: bool) -> None:
        def check(data: st.DataObject) -> None:
            stack, chain = self.drawn_chain(data, inner_batches)
            length = len(chain) - 1
            order = data.draw(st.permutations(range(1, length + 1)), label="order")
            picks = order[: data.draw(st.integers(1, length), label="batch length")]
            batch = [chain[i] for i in picks]
            parsed = self.expect_refusal_or_answer(
                stack,
                lambda: batched(stack.layer).batched_parse_block(batch),
                "batched_parse_block",
            )
            if parsed is None:
                return
            assert isinstance(parsed, list)
            self.assert_forwarded_once(stack, Call("batched_parse_block", (tuple(batch),)))
            assert [block.id for block in parsed] == [stack.ids[i] for i in picks], (
                "batched_parse_block must return the blocks of the batch, in input order"
            )

        self.kit_explore(check, data=st.data())

    @INNER_SERIAL
    @rule(
        "forwarding.refusal",
        "over a VM that cannot batch, both batched methods raise BatchingNotImplemented "
        "without calling below and the layer says it cannot batch; a layer that declares "
        "it answers batched calls itself answers them as the fallback would",
    )
    def test_refuses_or_answers_without_batching(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches)
        chain = self.kit_chain(stack)
        layer = batched(stack.layer)
        if self.layer_batches(stack):
            self.check_ancestors(
                stack,
                chain,
                len(chain) - 1,
                num=len(chain),
                size=MAX_CONTAINERS_LEN,
                seconds=KIT_TIME_BUDGET,
                what="get_ancestors",
                call=lambda: self.expect_refusal_or_answer(
                    stack,
                    lambda: layer.get_ancestors(
                        stack.tip, len(chain), MAX_CONTAINERS_LEN, KIT_TIME_BUDGET
                    ),
                    "get_ancestors",
                ),
            )
            parsed = self.expect_refusal_or_answer(
                stack, lambda: layer.batched_parse_block(chain[1:]), "batched_parse_block"
            )
            assert isinstance(parsed, list)
            assert [block.id for block in parsed] == list(stack.ids[1:]), (
                "the layer's own batched_parse_block answer must be every block, in order"
            )
            assert supports_batching(stack.layer), (
                "a layer that answers batched calls itself must say so (batching = True)"
            )
            return
        for method, call in (
            (
                "get_ancestors",
                lambda: layer.get_ancestors(
                    stack.tip, len(chain), MAX_CONTAINERS_LEN, KIT_TIME_BUDGET
                ),
            ),
            ("batched_parse_block", lambda: layer.batched_parse_block(chain[1:])),
        ):
            self.expect_refusal_or_answer(stack, call, method)
        assert stack.inner.calls == [], (
            f"refusing a batched call must not call the VM below; it saw {stack.inner.calls!r}"
        )
        assert not supports_batching(stack.layer), (
            "the layer must say it cannot batch (batching = False) when the VM below cannot"
        )

    @CAPABILITIES
    @rule(
        "forwarding.capability-visible",
        "supports_batching tells the truth about the layer, the layer exposes the VM "
        "below as `inner`, and describe_stack reads the stack down to the bottom VM",
    )
    def test_capability_is_visible(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches, blocks=2)
        assert supports_batching(stack.layer) is self.layer_batches(stack), (
            f"supports_batching(layer) must be {self.layer_batches(stack)}: the layer "
            + (
                "answers batched calls itself"
                if self.answers_itself
                else "batches exactly when the VM directly below it does"
            )
        )
        description = describe_stack(stack.layer)
        assert description.top.kind == type(stack.layer).__name__
        if self.boundary:
            return
        assert reaches(stack.layer, stack.inner), (
            "the layer must expose the VM below it as `inner` (a property), down to the inner VM"
        )
        assert len(description) >= 2
        assert description.bottom.kind == type(stack.inner).__name__
        assert description.bottom.batching is inner_batches

    @INNER_BATCHES
    @rule(
        "forwarding.capability-live",
        "the layer follows the VM below at each call, nothing fixed when it is built: when "
        "that VM stops or starts batching, the layer's batching, refusals and forwarding "
        "follow at once",
    )
    def test_capability_is_asked_at_each_call(self, inner_batches: bool) -> None:
        for switched_off_first in (True, False):
            clock = SimClock(KIT_START_TIME)
            inner = self.make_inner(batching=inner_batches, clock=clock)
            if not isinstance(inner, BatchedMemoryVM):
                return  # an inner VM of the test class's own, whose capability is fixed
            inner.batching = not switched_off_first
            layer = self.wrap(inner)
            ids = (layer.last_accepted(), *self.extend_chain(layer, inner, 6))
            stack = KitStack(layer=layer, inner=inner, ids=ids, clock=clock)
            chain = self.kit_chain(stack)
            for batching in (not switched_off_first, switched_off_first, not switched_off_first):
                inner.batching = batching
                self.check_capability_now(stack, chain, batching)

    def check_capability_now(self, stack: KitStack, chain: list[bytes], batching: bool) -> None:
        """The layer's capability, its batched answer or refusal, and the engine's answer
        are what the VM below (now ``batching`` or not) calls for."""
        expected = self.layer_batches(stack)
        assert supports_batching(stack.layer) is expected, (
            f"after the VM below {'started' if batching else 'stopped'} batching, "
            f"supports_batching(layer) must be {expected}"
        )
        stack.settle()
        answer = self.expect_refusal_or_answer(
            stack,
            lambda: batched(stack.layer).get_ancestors(
                stack.tip, 10, MAX_CONTAINERS_LEN, KIT_TIME_BUDGET
            ),
            "get_ancestors",
        )
        if answer is not None:
            assert answer == chain[::-1][:10], "the batched answer must be the newest 10 blocks"
        assert (
            get_ancestors(
                stack.layer,
                stack.tip,
                max_blocks_num=10,
                max_retrieval_time=KIT_TIME_BUDGET,
                clock=stack.clock,
            )
            == chain[::-1][:10]
        )

    @rule(
        "forwarding.path-independence",
        "the batched answer, the engine's fallback answer and a serial walk through the "
        "layer are the same bytes (get_ancestors) and the same blocks (batched parse)",
    )
    def test_fallback_answers_equal_batched_answers(self) -> None:
        def check(data: st.DataObject) -> None:
            length = data.draw(st.integers(1, self.max_chain_length), label="blocks")
            batching = self.kit_stack(batching=True, blocks=length)
            serial = self.kit_stack(batching=False, blocks=length)
            assert batching.ids == serial.ids, "both inner VMs must hold the same chain"
            chain = self.kit_chain(batching)
            index, num, size = self.draw_request(data, chain)
            block_id = batching.ids[index]
            answers = []
            for stack in (batching, serial):
                answers.append(
                    self.check_ancestors(
                        stack,
                        chain,
                        index,
                        num=num,
                        size=size,
                        seconds=KIT_TIME_BUDGET,
                        what="get_ancestors (engine helper)",
                        call=lambda stack=stack: get_ancestors(  # type: ignore[misc]
                            stack.layer,
                            block_id,
                            max_blocks_num=num,
                            max_blocks_size=size,
                            max_retrieval_time=KIT_TIME_BUDGET,
                            clock=stack.clock,
                        ),
                    )
                )

            def fetch(wanted: bytes) -> tuple[bytes, bytes]:
                block = batching.layer.get_block(wanted)
                return bytes(block), block.parent_id

            walked = walk_ancestors(
                fetch, block_id, AncestorBudget(num, size, KIT_TIME_BUDGET, clock=batching.clock)
            ).blocks
            assert answers[0] == answers[1] == walked, (
                "over a VM that batches, over one that does not, and walked block by block "
                "through the layer, get_ancestors must give the same bytes"
            )
            parsed = [batched_parse_block(stack.layer, chain[1:]) for stack in (batching, serial)]
            assert [[bytes(block) for block in blocks] for blocks in parsed] == [chain[1:]] * 2
            assert [block.id for block in parsed[0]] == [block.id for block in parsed[1]]

        self.kit_explore(check, data=st.data())

    @CAPABILITIES
    @rule(
        "forwarding.transparent",
        "a layer serving the blocks of the VM below answers get_ancestors exactly as that "
        "VM alone does",
    )
    def test_answers_do_not_depend_on_the_layer(self, inner_batches: bool) -> None:
        def check(data: st.DataObject) -> None:
            stack, chain = self.drawn_chain(data, inner_batches)
            index, num, size = self.draw_request(data, chain)
            block_id = stack.ids[index]
            through_layer = self.check_ancestors(
                stack,
                chain,
                index,
                num=num,
                size=size,
                seconds=KIT_TIME_BUDGET,
                what="get_ancestors (engine helper)",
                call=lambda: get_ancestors(
                    stack.layer,
                    block_id,
                    max_blocks_num=num,
                    max_blocks_size=size,
                    clock=stack.clock,
                    max_retrieval_time=KIT_TIME_BUDGET,
                ),
            )
            if self.own_blocks:
                return
            alone = get_ancestors(
                stack.inner,
                block_id,
                max_blocks_num=num,
                max_blocks_size=size,
                max_retrieval_time=KIT_TIME_BUDGET,
                clock=stack.clock,
            )
            assert through_layer == alone, "the answer must not change when the layer is removed"

        self.kit_explore(check, data=st.data())

    @CAPABILITIES
    @rule(
        "forwarding.get-block",
        "get_block returns the block with that ID (height, bytes, parent) and raises "
        "BlockNotFound for an unknown ID; one call below per call for a layer without "
        "memory",
    )
    def test_get_block_forwards(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches, blocks=6)
        chain = self.kit_chain(stack)
        for height, block_id in enumerate(stack.ids):
            block = self.check_block(stack.layer.get_block(block_id), "get_block")
            assert (block.id, block.height, bytes(block)) == (block_id, height, chain[height])
        if self.counts_calls:
            assert stack.inner.calls_to("get_block") == [
                Call("get_block", (block_id,)) for block_id in stack.ids
            ], "each get_block must reach the VM below as one call with the same ID"
        with pytest.raises(BlockNotFound):
            stack.layer.get_block(UNKNOWN_ID)

    @CAPABILITIES
    @rule(
        "forwarding.parse-block",
        "parse_block gives the block of the bytes and raises InvalidBlock for bytes that "
        "are not a block",
    )
    def test_parse_block_forwards(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches, blocks=6)
        chain = self.kit_chain(stack)
        for height in range(1, len(chain)):
            block = self.check_block(stack.layer.parse_block(chain[height]), "parse_block")
            assert (block.id, block.height, bytes(block)) == (
                stack.ids[height],
                height,
                chain[height],
            )
        if self.counts_calls:
            assert stack.inner.calls_to("parse_block") == [
                Call("parse_block", (data,)) for data in chain[1:]
            ], "each parse_block must reach the VM below as one call with the same bytes"
        with pytest.raises(InvalidBlock):
            stack.layer.parse_block(b"not a block")

    @CAPABILITIES
    @rule(
        "forwarding.build-block",
        "build_block builds one block, through the VM below, on the preferred block",
    )
    def test_build_block_forwards(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches, blocks=3)
        block = self.check_block(stack.layer.build_block(), "build_block")
        assert block.parent_id == stack.tip
        assert block.height == len(stack.ids)
        assert len(stack.inner.calls_to("build_block")) == 1

    @CAPABILITIES
    @rule(
        "forwarding.set-preference",
        "set_preference reaches the VM below (the next block builds on it) and raises "
        "BlockNotFound for an unknown block",
    )
    def test_set_preference_forwards(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches, blocks=5)
        stack.layer.set_preference(stack.ids[2])
        if self.counts_calls:
            assert stack.inner.calls_to("set_preference") == [
                Call("set_preference", (stack.ids[2],))
            ], "set_preference must reach the VM below as one call with the same ID"
        assert stack.layer.build_block().parent_id == stack.ids[2], (
            "after set_preference(X) the next block must build on X"
        )
        with pytest.raises(BlockNotFound):
            stack.layer.set_preference(UNKNOWN_ID)

    @CAPABILITIES
    @rule(
        "forwarding.last-accepted",
        "last_accepted is the tip of the chain, and follows every accept (never stale)",
    )
    def test_last_accepted_follows_accepts(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches, blocks=5)
        assert stack.layer.last_accepted() == stack.tip
        if self.counts_calls:
            assert stack.inner.calls_to("last_accepted") == [Call("last_accepted")], (
                "last_accepted must reach the VM below as one call"
            )
        for _ in range(3):
            block = stack.layer.build_block()
            block.verify()
            stack.layer.set_preference(block.id)
            block.accept()
            assert stack.layer.last_accepted() == block.id, (
                "last_accepted must name the block accepted last"
            )

    @CAPABILITIES
    @rule(
        "forwarding.height-index",
        "get_block_id_at_height maps every accepted height to its block and raises "
        "BlockNotFound above the tip",
    )
    def test_get_block_id_at_height_forwards(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches, blocks=5)
        for height, block_id in enumerate(stack.ids):
            assert stack.layer.get_block_id_at_height(height) == block_id, (
                f"get_block_id_at_height({height}) must name the block at that height"
            )
        if self.counts_calls:
            assert stack.inner.calls_to("get_block_id_at_height") == [
                Call("get_block_id_at_height", (height,)) for height in range(len(stack.ids))
            ], "each get_block_id_at_height must reach the VM below as one call"
        with pytest.raises(BlockNotFound):
            stack.layer.get_block_id_at_height(len(stack.ids))
