"""The contract mixins of the kit, one per promise a layer makes.

Each mixin is a set of pytest tests over :class:`~vmstack.conformance.base.KitBase`; each test
checks one named rule (see :data:`~vmstack.conformance.base.RULES`).
:class:`~vmstack.conformance.LayerConformance` is all of them together; a test class may
also inherit only some.

- :class:`ForwardingContract`: batched calls reach the VM below as ONE call (or are refused
  when it cannot batch, or answered by a layer that declares it answers them itself); the
  capability is visible; answers do not depend on the path or on the layer; the one-block
  methods forward.
- :class:`BudgetContract`: the rules of ``get_ancestors`` answers: order, the ``[]``
  sentinel, the first block, count, size and time budgets over the whole answer, long
  answers, bad limits; every element exactly ``bytes``.
- :class:`ParsingContract`: ``batched_parse_block``: input order, ``[]`` for ``[]``,
  all-or-nothing with the failing index.
- :class:`ErrorContract`: errors from below come up unchanged (the very object), a failure
  on the first block is not turned into ``[]`` and a mid-walk failure gives the partial
  answer.
- :class:`DecisionContract`: ``verify``, ``accept`` and ``reject`` reach the block below for
  blocks from every source; a rejected or replaced block is not served afterwards.
- :class:`WrappingContract`: every block returned is a ``Block`` of its own that shows the
  fields of the block below; parent IDs follow the chain; the declarations hold.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import strategies as st

from vmstack.batching import (
    DEFAULT_MAX_BLOCKS_NUM,
    MAX_CONTAINERS_LEN,
    AncestorBudget,
    batched_parse_block,
    get_ancestors,
    supports_batching,
    walk_ancestors,
)
from vmstack.clock import SimClock
from vmstack.conformance.base import KitBase
from vmstack.conformance.checks import batched, cost, reaches, untimed_expected
from vmstack.conformance.declarations import DECLARATIONS_HOLD, Declaration, rule
from vmstack.conformance.doubles import BatchedMemoryVM, Call, MemoryBlock
from vmstack.conformance.stacks import (
    CAPABILITIES,
    INNER_BATCHES,
    INNER_SERIAL,
    KIT_FETCH_COST,
    KIT_START_TIME,
    KIT_TIME_BUDGET,
    UNKNOWN_ID,
    KitFault,
    KitStack,
)
from vmstack.errors import (
    BatchingNotImplemented,
    BlockNotFound,
    InvalidBlock,
    StoreCorrupted,
    VMStackError,
)
from vmstack.interfaces import Block
from vmstack.stack import describe_stack

__all__ = [
    "BudgetContract",
    "DecisionContract",
    "ErrorContract",
    "ForwardingContract",
    "ParsingContract",
    "WrappingContract",
]

#: A time budget long enough for every block of the long chain to be read below.
_LONG_TIME_BUDGET = 60.0


class ForwardingContract(KitBase):
    """Batched calls are one call below; refusals, capability and the one-block methods."""

    @INNER_BATCHES
    @rule("forwarding.one-call",
          "over a VM that batches, get_ancestors reaches it as exactly one call with the "
          "caller's arguments, and no get_block call")
    def test_get_ancestors_is_one_call_below(self, inner_batches: bool) -> None:
        def check(data: st.DataObject) -> None:
            stack, chain = self.drawn_chain(data, inner_batches)
            index, num, size = self.draw_request(data, chain)
            block_id = stack.ids[index]

            def call() -> object:
                return batched(stack.layer).get_ancestors(block_id, num, size,
                                                          KIT_TIME_BUDGET)

            if not self.layer_batches(stack):
                self.expect_refusal_or_answer(stack, call, "get_ancestors")
                return
            self.check_ancestors(stack, chain, index, num=num, size=size,
                                 seconds=KIT_TIME_BUDGET, call=call, what="get_ancestors")
            self.assert_forwarded_once(
                stack, Call("get_ancestors", (block_id, num, size, KIT_TIME_BUDGET)))

        self.kit_explore(check, data=st.data())

    @INNER_BATCHES
    @rule("forwarding.parse-one-call",
          "over a VM that batches, batched_parse_block reaches it as exactly one call with "
          "the caller's batch, and no parse_block call")
    def test_batched_parse_is_one_call_below(self, inner_batches: bool) -> None:
        def check(data: st.DataObject) -> None:
            stack, chain = self.drawn_chain(data, inner_batches)
            length = len(chain) - 1
            order = data.draw(st.permutations(range(1, length + 1)), label="order")
            picks = order[: data.draw(st.integers(1, length), label="batch length")]
            batch = [chain[i] for i in picks]
            parsed = self.expect_refusal_or_answer(
                stack, lambda: batched(stack.layer).batched_parse_block(batch),
                "batched_parse_block")
            if parsed is None:
                return
            assert isinstance(parsed, list)
            self.assert_forwarded_once(stack, Call("batched_parse_block", (tuple(batch),)))
            assert [block.id for block in parsed] == [stack.ids[i] for i in picks], (
                "batched_parse_block must return the blocks of the batch, in input order")

        self.kit_explore(check, data=st.data())

    @INNER_SERIAL
    @rule("forwarding.refusal",
          "over a VM that cannot batch, both batched methods raise BatchingNotImplemented "
          "without calling below and the layer says it cannot batch; a layer that declares "
          "it answers batched calls itself answers them as the fallback would")
    def test_refuses_or_answers_without_batching(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches)
        chain = self.kit_chain(stack)
        layer = batched(stack.layer)
        if self.layer_batches(stack):
            self.check_ancestors(
                stack, chain, len(chain) - 1, num=len(chain), size=MAX_CONTAINERS_LEN,
                seconds=KIT_TIME_BUDGET, what="get_ancestors",
                call=lambda: self.expect_refusal_or_answer(
                    stack, lambda: layer.get_ancestors(stack.tip, len(chain),
                                                       MAX_CONTAINERS_LEN, KIT_TIME_BUDGET),
                    "get_ancestors"))
            parsed = self.expect_refusal_or_answer(
                stack, lambda: layer.batched_parse_block(chain[1:]), "batched_parse_block")
            assert isinstance(parsed, list)
            assert [block.id for block in parsed] == list(stack.ids[1:]), (
                "the layer's own batched_parse_block answer must be every block, in order")
            assert supports_batching(stack.layer), (
                "a layer that answers batched calls itself must say so (batching = True)")
            return
        for method, call in (
                ("get_ancestors", lambda: layer.get_ancestors(
                    stack.tip, len(chain), MAX_CONTAINERS_LEN, KIT_TIME_BUDGET)),
                ("batched_parse_block", lambda: layer.batched_parse_block(chain[1:]))):
            self.expect_refusal_or_answer(stack, call, method)
        assert stack.inner.calls == [], (
            f"refusing a batched call must not call the VM below; it saw {stack.inner.calls!r}")
        assert not supports_batching(stack.layer), (
            "the layer must say it cannot batch (batching = False) when the VM below cannot")

    @CAPABILITIES
    @rule("forwarding.capability-visible",
          "supports_batching tells the truth about the layer, the layer exposes the VM "
          "below as `inner`, and describe_stack reads the stack down to the bottom VM")
    def test_capability_is_visible(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches, blocks=2)
        assert supports_batching(stack.layer) is self.layer_batches(stack), (
            f"supports_batching(layer) must be {self.layer_batches(stack)}: the layer "
            + ("answers batched calls itself" if self.answers_itself
               else "batches exactly when the VM directly below it does"))
        description = describe_stack(stack.layer)
        assert description.top.kind == type(stack.layer).__name__
        if self.boundary:
            return
        assert reaches(stack.layer, stack.inner), (
            "the layer must expose the VM below it as `inner` (a property), down to the "
            "inner VM")
        assert len(description) >= 2
        assert description.bottom.kind == type(stack.inner).__name__
        assert description.bottom.batching is inner_batches

    @INNER_BATCHES
    @rule("forwarding.capability-live",
          "the layer asks at each call whether the VM below batches: when that VM stops or "
          "starts batching, the layer's batching, refusals and forwarding follow at once")
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
            for batching in (not switched_off_first, switched_off_first,
                             not switched_off_first):
                inner.batching = batching
                self.check_capability_now(stack, chain, batching)

    def check_capability_now(self, stack: KitStack, chain: list[bytes],
                             batching: bool) -> None:
        """The layer's capability, its batched answer or refusal, and the engine's answer
        are what the VM below (now ``batching`` or not) calls for."""
        expected = self.layer_batches(stack)
        assert supports_batching(stack.layer) is expected, (
            f"after the VM below {'started' if batching else 'stopped'} batching, "
            f"supports_batching(layer) must be {expected}")
        stack.settle()
        answer = self.expect_refusal_or_answer(
            stack, lambda: batched(stack.layer).get_ancestors(
                stack.tip, 10, MAX_CONTAINERS_LEN, KIT_TIME_BUDGET), "get_ancestors")
        if answer is not None:
            assert answer == chain[::-1][:10], "the batched answer must be the newest 10 blocks"
        assert get_ancestors(stack.layer, stack.tip, max_blocks_num=10,
                             max_retrieval_time=KIT_TIME_BUDGET,
                             clock=stack.clock) == chain[::-1][:10]

    @rule("forwarding.path-independence",
          "the batched answer, the engine's fallback answer and a serial walk through the "
          "layer are the same bytes (get_ancestors) and the same blocks (batched parse)")
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
                answers.append(self.check_ancestors(
                    stack, chain, index, num=num, size=size, seconds=KIT_TIME_BUDGET,
                    what="get_ancestors (engine helper)",
                    call=lambda stack=stack: get_ancestors(  # type: ignore[misc]
                        stack.layer, block_id, max_blocks_num=num, max_blocks_size=size,
                        max_retrieval_time=KIT_TIME_BUDGET, clock=stack.clock)))

            def fetch(wanted: bytes) -> tuple[bytes, bytes]:
                block = batching.layer.get_block(wanted)
                return bytes(block), block.parent_id

            walked = walk_ancestors(fetch, block_id, AncestorBudget(
                num, size, KIT_TIME_BUDGET, clock=batching.clock)).blocks
            assert answers[0] == answers[1] == walked, (
                "over a VM that batches, over one that does not, and walked block by block "
                "through the layer, get_ancestors must give the same bytes")
            parsed = [batched_parse_block(stack.layer, chain[1:]) for stack in (batching, serial)]
            assert [[bytes(block) for block in blocks] for blocks in parsed] == [chain[1:]] * 2
            assert [block.id for block in parsed[0]] == [block.id for block in parsed[1]]

        self.kit_explore(check, data=st.data())

    @CAPABILITIES
    @rule("forwarding.transparent",
          "a layer serving the blocks of the VM below answers get_ancestors exactly as that "
          "VM alone does")
    def test_answers_do_not_depend_on_the_layer(self, inner_batches: bool) -> None:
        def check(data: st.DataObject) -> None:
            stack, chain = self.drawn_chain(data, inner_batches)
            index, num, size = self.draw_request(data, chain)
            block_id = stack.ids[index]
            through_layer = self.check_ancestors(
                stack, chain, index, num=num, size=size, seconds=KIT_TIME_BUDGET,
                what="get_ancestors (engine helper)",
                call=lambda: get_ancestors(stack.layer, block_id, max_blocks_num=num,
                                           max_blocks_size=size, clock=stack.clock,
                                           max_retrieval_time=KIT_TIME_BUDGET))
            if self.own_blocks:
                return
            alone = get_ancestors(stack.inner, block_id, max_blocks_num=num,
                                  max_blocks_size=size, max_retrieval_time=KIT_TIME_BUDGET,
                                  clock=stack.clock)
            assert through_layer == alone, "the answer must not change when the layer is removed"

        self.kit_explore(check, data=st.data())

    @CAPABILITIES
    @rule("forwarding.get-block",
          "get_block returns the block with that ID (height, bytes, parent) and raises "
          "BlockNotFound for an unknown ID; one call below per call for a layer without "
          "memory")
    def test_get_block_forwards(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches, blocks=6)
        chain = self.kit_chain(stack)
        for height, block_id in enumerate(stack.ids):
            block = self.check_block(stack.layer.get_block(block_id), "get_block")
            assert (block.id, block.height, bytes(block)) == (block_id, height, chain[height])
        if self.counts_calls:
            assert stack.inner.calls_to("get_block") == [
                Call("get_block", (block_id,)) for block_id in stack.ids], (
                "each get_block must reach the VM below as one call with the same ID")
        with pytest.raises(BlockNotFound):
            stack.layer.get_block(UNKNOWN_ID)

    @CAPABILITIES
    @rule("forwarding.parse-block",
          "parse_block gives the block of the bytes and raises InvalidBlock for bytes that "
          "are not a block")
    def test_parse_block_forwards(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches, blocks=6)
        chain = self.kit_chain(stack)
        for height in range(1, len(chain)):
            block = self.check_block(stack.layer.parse_block(chain[height]), "parse_block")
            assert (block.id, block.height, bytes(block)) == (
                stack.ids[height], height, chain[height])
        if self.counts_calls:
            assert stack.inner.calls_to("parse_block") == [
                Call("parse_block", (data,)) for data in chain[1:]], (
                "each parse_block must reach the VM below as one call with the same bytes")
        with pytest.raises(InvalidBlock):
            stack.layer.parse_block(b"not a block")

    @CAPABILITIES
    @rule("forwarding.build-block",
          "build_block builds one block, through the VM below, on the preferred block")
    def test_build_block_forwards(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches, blocks=3)
        block = self.check_block(stack.layer.build_block(), "build_block")
        assert block.parent_id == stack.tip
        assert block.height == len(stack.ids)
        assert len(stack.inner.calls_to("build_block")) == 1

    @CAPABILITIES
    @rule("forwarding.set-preference",
          "set_preference reaches the VM below (the next block builds on it) and raises "
          "BlockNotFound for an unknown block")
    def test_set_preference_forwards(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches, blocks=5)
        stack.layer.set_preference(stack.ids[2])
        if self.counts_calls:
            assert stack.inner.calls_to("set_preference") == [
                Call("set_preference", (stack.ids[2],))], (
                "set_preference must reach the VM below as one call with the same ID")
        assert stack.layer.build_block().parent_id == stack.ids[2], (
            "after set_preference(X) the next block must build on X")
        with pytest.raises(BlockNotFound):
            stack.layer.set_preference(UNKNOWN_ID)

    @CAPABILITIES
    @rule("forwarding.last-accepted",
          "last_accepted is the tip of the chain, and follows every accept (never stale)")
    def test_last_accepted_follows_accepts(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches, blocks=5)
        assert stack.layer.last_accepted() == stack.tip
        if self.counts_calls:
            assert stack.inner.calls_to("last_accepted") == [Call("last_accepted")], (
                "last_accepted must reach the VM below as one call")
        for _ in range(3):
            block = stack.layer.build_block()
            block.verify()
            stack.layer.set_preference(block.id)
            block.accept()
            assert stack.layer.last_accepted() == block.id, (
                "last_accepted must name the block accepted last")

    @CAPABILITIES
    @rule("forwarding.height-index",
          "get_block_id_at_height maps every accepted height to its block and raises "
          "BlockNotFound above the tip")
    def test_get_block_id_at_height_forwards(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches, blocks=5)
        for height, block_id in enumerate(stack.ids):
            assert stack.layer.get_block_id_at_height(height) == block_id, (
                f"get_block_id_at_height({height}) must name the block at that height")
        if self.counts_calls:
            assert stack.inner.calls_to("get_block_id_at_height") == [
                Call("get_block_id_at_height", (height,))
                for height in range(len(stack.ids))], (
                "each get_block_id_at_height must reach the VM below as one call")
        with pytest.raises(BlockNotFound):
            stack.layer.get_block_id_at_height(len(stack.ids))


class BudgetContract(KitBase):
    """``get_ancestors`` answers: order, sentinel, and count, size and time budgets."""

    @CAPABILITIES
    @rule("budgets.order", "get_ancestors answers the requested block, then its parent, and "
                           "so on down to genesis")
    def test_ancestors_come_newest_first(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches)
        chain = self.kit_chain(stack)
        for index in (len(chain) - 1, len(chain) // 2, 0):
            answer = self.check_answer_types(
                get_ancestors(stack.layer, stack.ids[index], clock=stack.clock),
                "get_ancestors")
            assert answer == chain[index::-1], (
                f"a request of height {index} must give heights {index}..0, newest first")

    @CAPABILITIES
    @rule("budgets.empty-sentinel",
          "get_ancestors of an unknown or rejected block is [] (not an error); a processing "
          "block is served")
    def test_unknown_or_rejected_block_gives_empty_answer(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches)
        chain = self.kit_chain(stack)
        assert get_ancestors(stack.layer, UNKNOWN_ID, clock=stack.clock) == []
        if self.layer_batches(stack):
            assert batched(stack.layer).get_ancestors(
                UNKNOWN_ID, 10, MAX_CONTAINERS_LEN, KIT_TIME_BUDGET) == [], (
                "the layer's get_ancestors of an unknown block must be []")
        processing = stack.layer.build_block()
        processing.verify()
        assert get_ancestors(stack.layer, processing.id, clock=stack.clock) == [
            bytes(processing), *chain[::-1]], "a processing block is served with its ancestors"
        rejected = stack.layer.build_block()
        rejected.verify()
        rejected.reject()
        assert get_ancestors(stack.layer, rejected.id, clock=stack.clock) == [], (
            "a rejected block is not served: its answer is []")

    @CAPABILITIES
    @rule("budgets.first-block",
          "the first block is always included: a size budget of 0, a count of 1 or a time "
          "budget of 0 give exactly the requested block")
    def test_first_block_is_always_included(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches)
        chain = self.kit_chain(stack)
        for num, size, seconds in ((10, 0, KIT_TIME_BUDGET), (1, MAX_CONTAINERS_LEN, 1.0),
                                   (10, MAX_CONTAINERS_LEN, 0.0)):
            answer = get_ancestors(stack.layer, stack.tip, max_blocks_num=num,
                                   max_blocks_size=size, max_retrieval_time=seconds,
                                   clock=stack.clock)
            assert answer == [chain[-1]], (
                f"max_blocks_num={num}, max_blocks_size={size}, max_retrieval_time={seconds} "
                f"must give exactly the requested block, got {len(answer)} blocks")

    @CAPABILITIES
    @rule("budgets.size-exact",
          "a size budget equal to the cost of k blocks (len + 4 each) gives k blocks; one "
          "byte less gives k - 1 (at least 1)")
    def test_size_budget_is_exact(self, inner_batches: bool) -> None:
        def check(data: st.DataObject) -> None:
            stack, chain = self.drawn_chain(data, inner_batches)
            count = data.draw(st.integers(1, len(chain)), label="blocks that fit")
            newest = chain[::-1][:count]
            for size, want in ((cost(newest), newest),
                               (cost(newest) - 1, newest[: max(count - 1, 1)])):
                answer = get_ancestors(stack.layer, stack.tip, max_blocks_size=size,
                                       max_retrieval_time=KIT_TIME_BUDGET, clock=stack.clock)
                assert answer == want, (
                    f"max_blocks_size={size} must give {len(want)} blocks, got {len(answer)}")

        self.kit_explore(check, data=st.data())

    @CAPABILITIES
    @rule("budgets.count", "at most max_blocks_num blocks come back, the newest ones")
    def test_max_blocks_num_caps_the_answer(self, inner_batches: bool) -> None:
        def check(data: st.DataObject) -> None:
            stack, chain = self.drawn_chain(data, inner_batches)
            num = data.draw(st.integers(1, len(chain) + 3), label="max_blocks_num")
            answer = get_ancestors(stack.layer, stack.tip, max_blocks_num=num,
                                   max_retrieval_time=KIT_TIME_BUDGET, clock=stack.clock)
            assert answer == chain[::-1][:num], (
                f"max_blocks_num={num} must give {min(num, len(chain))} blocks, "
                f"got {len(answer)}")

        self.kit_explore(check, data=st.data())

    @CAPABILITIES
    @rule("budgets.rule",
          "for any requested block, count and size, the answer (through the engine helper "
          "and through the layer's own get_ancestors) is what the budget rule allows")
    def test_budgets_follow_the_rule(self, inner_batches: bool) -> None:
        def check(data: st.DataObject) -> None:
            stack, chain = self.drawn_chain(data, inner_batches)
            index, num, size = self.draw_request(data, chain)
            block_id = stack.ids[index]
            self.check_ancestors(
                stack, chain, index, num=num, size=size, seconds=KIT_TIME_BUDGET,
                what="get_ancestors (engine helper)",
                call=lambda: get_ancestors(stack.layer, block_id, max_blocks_num=num,
                                           max_blocks_size=size, clock=stack.clock,
                                           max_retrieval_time=KIT_TIME_BUDGET))
            if self.layer_batches(stack):
                self.check_ancestors(
                    stack, chain, index, num=num, size=size, seconds=KIT_TIME_BUDGET,
                    what="the layer's get_ancestors",
                    call=lambda: batched(stack.layer).get_ancestors(block_id, num, size,
                                                                    KIT_TIME_BUDGET))

        self.kit_explore(check, data=st.data())

    @CAPABILITIES
    @rule("budgets.time",
          "the time budget starts with the call and covers the whole answer: every block "
          "read below is read before the deadline, and the answer stops short of count and "
          "size only once the time is up (each read below costs the kit's clock time)")
    def test_time_budget_covers_the_whole_answer(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches)
        chain = self.kit_chain(stack)
        for reads in (0, 1, 3, 10, len(chain) // 2, len(chain) - 2):
            self.check_time_budget(stack, chain, len(chain) - 1,
                                   (reads + 0.5) * KIT_FETCH_COST)

        def check(data: st.DataObject) -> None:
            stack, chain = self.drawn_chain(data, inner_batches, minimum=2)
            index = data.draw(st.integers(1, len(chain) - 1), label="requested height")
            reads = data.draw(st.integers(0, len(chain) + 1), label="reads that fit")
            fraction = data.draw(st.sampled_from([0.0, 0.25, 0.5, 0.999]), label="fraction")
            self.check_time_budget(stack, chain, index, (reads + fraction) * KIT_FETCH_COST)

        self.kit_explore(check, data=st.data())

    def check_time_budget(self, stack: KitStack, chain: list[bytes], index: int,
                          seconds: float) -> None:
        """A request of ``chain[index]`` with a time budget of ``seconds`` (and count and
        size that never bind), through the engine helper and the layer's own method."""
        block_id = stack.ids[index]
        num = len(chain) + 1
        self.check_ancestors(
            stack, chain, index, num=num, size=MAX_CONTAINERS_LEN, seconds=seconds,
            what="get_ancestors (engine helper)",
            call=lambda: get_ancestors(stack.layer, block_id, max_blocks_num=num,
                                       max_retrieval_time=seconds, clock=stack.clock))
        if self.layer_batches(stack):
            self.check_ancestors(
                stack, chain, index, num=num, size=MAX_CONTAINERS_LEN, seconds=seconds,
                what="the layer's get_ancestors",
                call=lambda: batched(stack.layer).get_ancestors(
                    block_id, num, MAX_CONTAINERS_LEN, seconds))

    @CAPABILITIES
    @rule("budgets.long-answers",
          "long answers (thousands of blocks) obey the same rule to the last block: no cap "
          "of the layer's own, no block dropped or added at the end or past some length")
    def test_long_answers_follow_the_rule(self, inner_batches: bool) -> None:
        length = self.long_chain_length
        stack = self.kit_stack(batching=inner_batches, blocks=length)
        chain = self.kit_chain(stack)
        tip = len(chain) - 1
        middle = length * 3 // 5
        size_fit = cost(chain[::-1][: length - 155])
        requests = [
            (tip, length + 10, MAX_CONTAINERS_LEN, _LONG_TIME_BUDGET),
            (tip, DEFAULT_MAX_BLOCKS_NUM, MAX_CONTAINERS_LEN, _LONG_TIME_BUDGET),
            (tip, length, MAX_CONTAINERS_LEN, _LONG_TIME_BUDGET),
            (tip, length + 10, size_fit, _LONG_TIME_BUDGET),
            (tip, length + 10, size_fit - 1, _LONG_TIME_BUDGET),
            (middle, length + 10, MAX_CONTAINERS_LEN, _LONG_TIME_BUDGET),
            (tip, length + 10, MAX_CONTAINERS_LEN, (length - 277.5) * KIT_FETCH_COST),
        ]
        for index, num, size, seconds in requests:
            block_id = stack.ids[index]
            self.check_ancestors(
                stack, chain, index, num=num, size=size, seconds=seconds,
                what=f"get_ancestors (engine helper) of {index + 1} blocks",
                call=lambda: get_ancestors(
                    stack.layer, block_id, max_blocks_num=num,  # noqa: B023
                    max_blocks_size=size, max_retrieval_time=seconds,  # noqa: B023
                    clock=stack.clock))
            if self.layer_batches(stack):
                self.check_ancestors(
                    stack, chain, index, num=num, size=size, seconds=seconds,
                    what=f"the layer's get_ancestors of {index + 1} blocks",
                    call=lambda: batched(stack.layer).get_ancestors(
                        block_id, num, size, seconds))  # noqa: B023
        assert untimed_expected(chain, tip, length + 10, MAX_CONTAINERS_LEN) == chain[::-1]

    @CAPABILITIES
    @rule("budgets.bad-limits",
          "bad limits (count < 1, a negative size or time, NaN) or a malformed block ID "
          "raise ValueError")
    def test_bad_limits_raise_value_error(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches, blocks=3)
        bad_limits = ((0, MAX_CONTAINERS_LEN, 1.0), (-1, MAX_CONTAINERS_LEN, 1.0),
                      (10, -1, 1.0), (10, MAX_CONTAINERS_LEN, -0.5),
                      (10, MAX_CONTAINERS_LEN, math.nan))
        for num, size, seconds in bad_limits:
            with pytest.raises(ValueError):
                get_ancestors(stack.layer, stack.tip, max_blocks_num=num,
                              max_blocks_size=size, max_retrieval_time=seconds,
                              clock=stack.clock)
            if self.layer_batches(stack):
                with pytest.raises(ValueError):
                    batched(stack.layer).get_ancestors(stack.tip, num, size, seconds)
        with pytest.raises(ValueError):
            get_ancestors(stack.layer, stack.tip[:31], clock=stack.clock)


class ParsingContract(KitBase):
    """``batched_parse_block``: order, empty input, all-or-nothing."""

    @CAPABILITIES
    @rule("parse.order", "batched_parse_block returns one block per element, in input order "
                         "(duplicates included)")
    def test_batched_parse_keeps_input_order(self, inner_batches: bool) -> None:
        def check(data: st.DataObject) -> None:
            stack, chain = self.drawn_chain(data, inner_batches)
            length = len(chain) - 1
            picks = data.draw(st.lists(st.integers(1, length), min_size=1, max_size=length),
                              label="heights")
            batch = [chain[i] for i in picks]
            calls: list[tuple[str, Callable[[], object]]] = [
                ("batched_parse_block (engine helper)",
                 lambda: batched_parse_block(stack.layer, batch))]
            if self.layer_batches(stack):
                calls.append(("the layer's batched_parse_block",
                              lambda: batched(stack.layer).batched_parse_block(batch)))
            for what, call in calls:
                parsed = call()
                assert isinstance(parsed, list), f"{what} must return a list"
                for block in parsed:
                    self.check_block(block, what)
                assert [block.id for block in parsed] == [stack.ids[i] for i in picks], (
                    f"{what} must return the blocks in input order")
                assert [bytes(block) for block in parsed] == batch

        self.kit_explore(check, data=st.data())

    @CAPABILITIES
    @rule("parse.empty", "an empty batch gives []")
    def test_batched_parse_of_nothing_is_nothing(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches, blocks=2)
        assert batched_parse_block(stack.layer, []) == []
        if self.layer_batches(stack):
            assert batched(stack.layer).batched_parse_block([]) == []

    @CAPABILITIES
    @rule("parse.all-or-nothing",
          "a bad element fails the whole batch with InvalidBlock naming its index, and "
          "none of the batch becomes served")
    def test_batched_parse_names_the_bad_index(self, inner_batches: bool) -> None:
        def check(data: st.DataObject) -> None:
            length = data.draw(st.integers(1, self.max_chain_length // 2), label="blocks")
            extra = data.draw(st.integers(1, 6), label="new blocks")
            stack = self.kit_stack(batching=inner_batches, blocks=length)
            fresh = self.fresh_blocks(stack, extra)
            bad_index = data.draw(st.integers(0, len(fresh)), label="bad index")
            bad = data.draw(st.sampled_from([b"", b"not a block", fresh[0][:40],
                                             b"XX" + fresh[0][2:]]), label="bad element")
            batch = [*fresh[:bad_index], bad, *fresh[bad_index:]]
            calls: list[tuple[str, Callable[[], object]]] = [
                ("batched_parse_block (engine helper)",
                 lambda: batched_parse_block(stack.layer, batch))]
            if self.layer_batches(stack):
                calls.append(("the layer's batched_parse_block",
                              lambda: batched(stack.layer).batched_parse_block(batch)))
            for what, call in calls:
                try:
                    answer = call()
                except InvalidBlock as failure:
                    assert failure.index == bad_index, (
                        f"{what}: InvalidBlock must name index {bad_index}, it named "
                        f"{failure.index}")
                else:
                    raise AssertionError(
                        f"{what} of a batch with a bad element at {bad_index} returned "
                        f"{len(answer) if isinstance(answer, list) else answer!r} blocks; the "
                        "whole batch must fail with InvalidBlock")
            for block in fresh:
                parsed_id = batched_parse_block(stack.layer, [block])[0].id
                assert get_ancestors(stack.layer, parsed_id, clock=stack.clock) == [], (
                    "a block of a failed batch must not become served")

        self.kit_explore(check, data=st.data())


#: The methods whose errors the kit injects below, with how to call each through a layer.
_ERROR_METHODS = ["get_block", "parse_block", "build_block", "set_preference",
                  "last_accepted", "get_block_id_at_height", "block.verify", "block.accept",
                  "block.reject"]


class ErrorContract(KitBase):
    """Errors from below come up unchanged; failures in walks follow the rules."""

    def assert_same_error(self, raised: BaseException, fault: BaseException,
                          what: str) -> None:
        """``raised`` is ``fault`` itself, or for a layer across a process boundary an
        equal copy (a ``VMStackError`` carrying the message for errors outside the tree)."""
        if not self.boundary:
            assert raised is fault, (
                f"{what}: the error from below must come up as the very same object "
                f"({fault!r}), got {raised!r}")
            return
        if isinstance(fault, VMStackError | ValueError):
            assert type(raised) is type(fault) and str(raised) == str(fault), (
                f"{what}: across a process boundary the error must come up as an equal copy "
                f"({fault!r}), got {raised!r}")
            if isinstance(fault, InvalidBlock):
                assert isinstance(raised, InvalidBlock) and raised.index == fault.index
        else:
            assert isinstance(raised, VMStackError) and str(fault) in str(raised), (
                f"{what}: across a process boundary an error outside vmstack's tree must "
                f"come up as a VMStackError carrying its message ({fault!r}), got {raised!r}")

    def expect_error(self, fault: BaseException, call: Callable[[], object],
                     what: str) -> None:
        """``call`` must raise ``fault`` (see :meth:`assert_same_error`)."""
        try:
            answer = call()
        except Exception as raised:
            self.assert_same_error(raised, fault, what)
        else:
            raise AssertionError(
                f"{what}: the error injected below ({fault!r}) was swallowed; the call "
                f"returned {type(answer).__name__}")

    @CAPABILITIES
    @pytest.mark.parametrize("method", _ERROR_METHODS)
    @rule("errors.unchanged",
          "an error raised below comes up through the layer unchanged: the very same "
          "object, not wrapped, replaced or swallowed")
    def test_errors_pass_through_unchanged(self, inner_batches: bool, method: str) -> None:
        for fault in (KitFault(f"injected into {method}"),
                      StoreCorrupted(f"injected into {method}")):
            stack = self.kit_stack(batching=inner_batches, blocks=4)
            action = self.error_action(stack, method)
            stack.inner.fail_next(method, fault)
            self.expect_error(fault, action, method)

    def error_action(self, stack: KitStack, method: str) -> Callable[[], object]:
        """The call through the layer that makes ``method`` run below."""
        layer = stack.layer
        if method.startswith("block."):
            block = layer.build_block()
            if method != "block.verify":
                block.verify()
            return {"block.verify": block.verify, "block.accept": block.accept,
                    "block.reject": block.reject}[method]
        tip = layer.get_block(stack.tip)
        stack.settle()
        actions: dict[str, Callable[[], object]] = {
            "get_block": lambda: layer.get_block(stack.ids[1]),
            "parse_block": lambda: layer.parse_block(bytes(tip)),
            "build_block": layer.build_block,
            "set_preference": lambda: layer.set_preference(stack.tip),
            "last_accepted": layer.last_accepted,
            "get_block_id_at_height": lambda: layer.get_block_id_at_height(1),
        }
        return actions[method]

    @INNER_BATCHES
    @rule("errors.batched-ancestors-unchanged",
          "an error raised by get_ancestors below comes up through the layer's "
          "get_ancestors unchanged")
    def test_get_ancestors_errors_pass_through(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches, blocks=4)
        if not self.layer_batches(stack):
            return
        fault = KitFault("injected into get_ancestors")
        stack.inner.fail_next("get_ancestors", fault)
        self.expect_error(fault, lambda: batched(stack.layer).get_ancestors(
            stack.tip, 10, MAX_CONTAINERS_LEN, KIT_TIME_BUDGET), "get_ancestors")

    @INNER_BATCHES
    @rule("errors.batched-parse-unchanged",
          "an error raised by batched_parse_block below comes up through the layer's "
          "batched_parse_block unchanged")
    def test_batched_parse_errors_pass_through(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches, blocks=4)
        chain = self.kit_chain(stack)
        if not self.layer_batches(stack):
            return
        for fault in (KitFault("injected into batched_parse_block"),
                      InvalidBlock("injected into batched_parse_block", index=1)):
            stack.inner.fail_next("batched_parse_block", fault)
            self.expect_error(fault, lambda: batched(stack.layer).batched_parse_block(
                chain[1:]), "batched_parse_block")

    @INNER_BATCHES
    @rule("errors.batching-not-implemented",
          "BatchingNotImplemented raised below comes up unchanged (a layer that answers "
          "batched calls itself answers instead, as the fallback would); the engine helper "
          "then falls back to a complete answer")
    def test_batching_not_implemented_from_below(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches)
        chain = self.kit_chain(stack)
        if not self.layer_batches(stack):
            return
        layer = batched(stack.layer)
        calls: dict[str, tuple[Callable[[], object], Callable[[object], object]]] = {
            "get_ancestors": (
                lambda: layer.get_ancestors(stack.tip, len(chain), MAX_CONTAINERS_LEN,
                                            KIT_TIME_BUDGET),
                lambda answer: answer),
            "batched_parse_block": (
                lambda: layer.batched_parse_block(chain[1:]),
                lambda answer: [bytes(block) for block in answer]),  # type: ignore[attr-defined]
        }
        complete = {"get_ancestors": chain[::-1], "batched_parse_block": chain[1:]}
        for method, (call, as_bytes) in calls.items():
            refusal = BatchingNotImplemented(f"injected into {method}")
            stack.inner.fail_next(method, refusal)
            if self.answers_itself:
                assert as_bytes(call()) == complete[method], (
                    f"{method}: a layer that answers batched calls itself must answer "
                    "completely (as the fallback would) when the VM below refuses")
            else:
                self.expect_error(refusal, call, method)
            stack.inner.forget_records()
        stack.inner.fail_next("get_ancestors", BatchingNotImplemented("injected"))
        assert get_ancestors(stack.layer, stack.tip, max_retrieval_time=KIT_TIME_BUDGET,
                             clock=stack.clock) == chain[::-1], (
            "after BatchingNotImplemented from below, the engine's fallback must give the "
            "whole answer")
        stack.inner.fail_next("batched_parse_block", BatchingNotImplemented("injected"))
        parsed = batched_parse_block(stack.layer, chain[1:])
        assert [block.id for block in parsed] == list(stack.ids[1:])

    @CAPABILITIES
    @rule("errors.first-block",
          "an error other than BlockNotFound on the requested block comes up unchanged "
          "(it is not turned into [])")
    def test_error_on_first_block_propagates(self, inner_batches: bool) -> None:
        for fault in (KitFault("injected on the first block"),
                      StoreCorrupted("injected on the first block")):
            stack = self.kit_stack(batching=inner_batches, blocks=4)
            stack.inner.fail_block(stack.tip, fault)
            self.expect_error(fault, lambda: get_ancestors(
                stack.layer, stack.tip, clock=stack.clock),  # noqa: B023
                "get_ancestors of a block whose read fails")

    @CAPABILITIES
    @rule("errors.mid-walk",
          "BlockNotFound or another error on an ancestor ends the answer just above it "
          "(the partial answer is returned, not an error)")
    def test_mid_walk_failure_gives_partial_answer(self, inner_batches: bool) -> None:
        def check(data: st.DataObject) -> None:
            length = data.draw(st.integers(2, self.max_chain_length), label="blocks")
            stack = self.kit_stack(batching=inner_batches, blocks=length)
            # The chain's bytes are read on a twin stack: a layer with memory must not
            # have seen the blocks before the fault is injected below.
            chain = self.kit_chain(self.kit_stack(batching=inner_batches, blocks=length))
            broken = data.draw(st.integers(0, length - 1), label="broken height")
            fault = data.draw(st.sampled_from(["not found", "corrupted", "other"]),
                              label="fault")
            error = {"not found": BlockNotFound("injected mid-walk"),
                     "corrupted": StoreCorrupted("injected mid-walk"),
                     "other": KitFault("injected mid-walk")}[fault]
            stack.inner.fail_block(stack.ids[broken], error)
            answer = get_ancestors(stack.layer, stack.tip, max_retrieval_time=KIT_TIME_BUDGET,
                                   clock=stack.clock)
            assert answer == chain[:broken:-1], (
                f"a failure reading height {broken} must end the answer just above it: "
                f"{length - broken} blocks, got {len(answer)}")

        self.kit_explore(check, data=st.data())

    @CAPABILITIES
    @rule("errors.bad-arguments",
          "parse_block and batched_parse_block with arguments that are not bytes raise what "
          "the VM below raises (InvalidBlock, ValueError), not a TypeError of the layer")
    def test_bad_arguments_get_the_errors_of_below(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches, blocks=3)
        chain = self.kit_chain(stack)
        reference = self.make_inner(batching=inner_batches, clock=stack.clock)
        cases: list[tuple[str, Callable[[Any], object], Callable[[Any], object], object]] = []
        not_bytes: tuple[object, ...] = (None, 12345, "text", 1.5)
        for element in not_bytes:
            cases.append(("parse_block", stack.layer.parse_block, reference.parse_block,
                          element))
        if self.layer_batches(stack) and supports_batching(reference):
            not_batches: tuple[object, ...] = ([chain[1], None], [chain[1], 7], None, 5)
            for batch in not_batches:
                cases.append(("batched_parse_block",
                              batched(stack.layer).batched_parse_block,
                              batched(reference).batched_parse_block, batch))
        for method, through_layer, alone, argument in cases:
            with pytest.raises(Exception) as below:
                alone(argument)
            with pytest.raises(Exception) as raised:
                through_layer(argument)
            assert type(raised.value) is type(below.value) and (
                getattr(raised.value, "index", None) == getattr(below.value, "index", None)), (
                f"{method}({argument!r}): the VM below raises {below.value!r}, through the "
                f"layer it must be the same error, got {raised.value!r}")


#: Where a block can come from, for the decision rules.
_SOURCES = ["build_block", "parse_block", "get_block", "get_block-again",
            "batched_parse_block", "engine-batched_parse_block"]
_DECISIONS = [(source, decision) for source in _SOURCES
              for decision in ("verify", "accept", "reject")
              if not (source.startswith("get_block") and decision == "verify")]


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
    @rule("decisions.reach-below",
          "verify, accept and reject on a block the layer returned (from build_block, "
          "parse_block, get_block, a repeated get_block, batched_parse_block or the engine "
          "helper) reach the block below exactly once, and an accepted block becomes the "
          "last accepted one")
    def test_decisions_reach_the_block_below(self, inner_batches: bool, source: str,
                                             decision: str) -> None:
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
                f"after accepting a block from {source}, last_accepted must name it")
            assert stack.layer.get_block_id_at_height(block.height) == block.id

    @CAPABILITIES
    @pytest.mark.parametrize("source", _SOURCES)
    @rule("decisions.rejected-not-served",
          "a block rejected through the layer is not served afterwards: get_block raises "
          "BlockNotFound and get_ancestors answers []")
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
            f"{what}: get_ancestors must answer []")
        if self.layer_batches(stack):
            assert batched(stack.layer).get_ancestors(
                block_id, 10, MAX_CONTAINERS_LEN, KIT_TIME_BUDGET) == [], (
                f"{what}: the layer's get_ancestors must answer []")

    @CAPABILITIES
    @rule("decisions.reorg",
          "when one of two competing blocks is accepted and the other rejected (through "
          "other objects than the ones read before), nothing stale is served: the loser "
          "is gone, the winner is at its height and is the last accepted block")
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


class WrappingContract(KitBase):
    """Blocks are the layer's own, show the fields below, and the declarations hold."""

    def assert_shows_below(self, stack: KitStack, block: Block, what: str) -> None:
        """``block`` is a ``Block`` that is not the inner VM's own object and shows the
        fields of the block below with its ID (a layer with blocks of its own: the height)."""
        self.check_block(block, what)
        assert not isinstance(block, MemoryBlock), (
            f"{what} returned the inner VM's own block; a layer returns blocks of its own "
            "(wrappers or proxies) so that decisions pass through it")
        below = stack.inner.known_block(block.id)
        if below is None:
            assert self.own_blocks, (
                f"{what} returned a block with an ID the VM below does not know")
            return
        assert (block.id, block.parent_id, block.height, block.timestamp, bytes(block)) == (
            below.id, below.parent_id, below.height, below.timestamp, bytes(below)), (
            f"the block {what} returned must show id, parent_id, height, timestamp and bytes "
            "of the block below")

    @CAPABILITIES
    @rule("wrapping.blocks",
          "every block the layer returns is a Block of its own (not the inner VM's object) "
          "showing the fields of the block below")
    def test_returned_blocks_are_the_layers_own(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches)
        chain = self.kit_chain(stack)
        layer = stack.layer
        self.assert_shows_below(stack, layer.get_block(stack.tip), "get_block")
        self.assert_shows_below(stack, layer.parse_block(chain[-1]), "parse_block")
        self.assert_shows_below(stack, layer.build_block(), "build_block")
        for block in batched_parse_block(layer, chain[1:4]):
            self.assert_shows_below(stack, block, "batched_parse_block (engine helper)")
        if self.layer_batches(stack):
            for block in batched(layer).batched_parse_block(chain[1:4]):
                self.assert_shows_below(stack, block, "the layer's batched_parse_block")

    @CAPABILITIES
    @rule("wrapping.types",
          "every element of a get_ancestors answer is exactly bytes (not bytearray or "
          "memoryview), and every block returned satisfies Block with 32-byte IDs and int "
          "height and timestamp")
    def test_answers_have_the_right_types(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches, blocks=5)
        chain = self.kit_chain(stack)
        layer = stack.layer
        self.check_answer_types(get_ancestors(layer, stack.tip, clock=stack.clock),
                                "get_ancestors (engine helper)")
        if self.layer_batches(stack):
            self.check_answer_types(batched(layer).get_ancestors(
                stack.tip, 10, MAX_CONTAINERS_LEN, KIT_TIME_BUDGET), "the layer's get_ancestors")
            for block in batched(layer).batched_parse_block(chain[1:]):
                self.check_block(block, "the layer's batched_parse_block")
        for block in batched_parse_block(layer, chain[1:]):
            self.check_block(block, "batched_parse_block (engine helper)")
        self.check_block(layer.get_block(stack.tip), "get_block")
        self.check_block(layer.parse_block(chain[-1]), "parse_block")
        self.check_block(layer.build_block(), "build_block")
        assert type(layer.last_accepted()) is bytes, "last_accepted must return bytes"
        assert type(layer.get_block_id_at_height(1)) is bytes, (
            "get_block_id_at_height must return bytes")

    @CAPABILITIES
    @rule("wrapping.parent-ids",
          "every block names its parent's ID as the layer serves it, from every method, "
          "and a built block names the preferred block")
    def test_parent_ids_follow_the_chain(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches, blocks=6)
        chain = self.kit_chain(stack)
        layer = stack.layer
        sources: list[tuple[str, list[Block]]] = [
            ("get_block", [layer.get_block(block_id) for block_id in stack.ids[1:]]),
            ("parse_block", [layer.parse_block(data) for data in chain[1:]]),
            ("batched_parse_block", batched_parse_block(layer, chain[1:])),
        ]
        for what, blocks in sources:
            assert [block.parent_id for block in blocks] == list(stack.ids[:-1]), (
                f"the blocks from {what} must name their parents' IDs")
        for preferred in (stack.ids[3], stack.tip, stack.ids[1]):
            layer.set_preference(preferred)
            assert layer.build_block().parent_id == preferred, (
                "a built block must name the preferred block as its parent")

    @CAPABILITIES
    @rule(DECLARATIONS_HOLD, "every declaration of the test class is true of the layer (a "
                             "declaration that no longer holds must be removed)")
    def test_declarations_hold(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches, blocks=4)
        layer = stack.layer
        if self.answers_itself and not inner_batches:
            try:
                batched(layer).get_ancestors(stack.tip, 3, MAX_CONTAINERS_LEN, KIT_TIME_BUDGET)
            except BatchingNotImplemented:
                raise AssertionError(
                    "declared answers-batched-calls-itself, but the layer refused a batched "
                    "call over a VM that cannot batch") from None
        if self.declares(Declaration.SERVES_BLOCKS_FROM_MEMORY):
            layer.get_block(stack.tip)
            stack.settle()
            layer.get_block(stack.tip)
            assert not stack.inner.calls_to("get_block"), (
                "declared serves-blocks-from-memory, but a repeated get_block of an "
                "accepted block was read below again")
        if self.own_blocks:
            assert any(stack.inner.known_block(block_id) is None
                       for block_id in stack.ids[1:]), (
                "declared blocks-of-its-own, but every block the layer serves has the ID of "
                "a block below")
        if self.boundary:
            fault = KitFault("injected into last_accepted")
            stack.inner.fail_next("last_accepted", fault)
            try:
                layer.last_accepted()
            except Exception as raised:
                assert raised is not fault, (
                    "declared process-boundary, but an error came up as the very object "
                    "raised below")
