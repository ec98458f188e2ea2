"""The budget contract: the rules of ``get_ancestors`` answers.

Order (newest first), the ``[]`` sentinel of an unknown or rejected block, the first block
always included, count, size and time budgets over the whole answer, long answers of
thousands of blocks, and ``ValueError`` for bad limits. Each test checks one rule named
``budgets.*``.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import strategies as st

from vmstack.batching import DEFAULT_MAX_BLOCKS_NUM, MAX_CONTAINERS_LEN, get_ancestors
from vmstack.conformance.base import KitBase
from vmstack.conformance.checks import batched, cost, untimed_expected
from vmstack.conformance.declarations import rule
from vmstack.conformance.stacks import (
    CAPABILITIES,
    KIT_FETCH_COST,
    KIT_TIME_BUDGET,
    UNKNOWN_ID,
    KitStack,
)

__all__ = ["BudgetContract"]

#: A time budget long enough for every block of the long chain to be read below.
_LONG_TIME_BUDGET = 60.0


class BudgetContract(KitBase):
    """``get_ancestors`` answers: order, sentinel, and count, size and time budgets."""

    @CAPABILITIES
    @rule(
        "budgets.order",
        "get_ancestors answers the requested block, then its parent, and so on down to genesis",
    )
    def test_ancestors_come_newest_first(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches)
        chain = self.kit_chain(stack)
        for index in (len(chain) - 1, len(chain) // 2, 0):
            answer = self.check_answer_types(
                get_ancestors(stack.layer, stack.ids[index], clock=stack.clock), "get_ancestors"
            )
            assert answer == chain[index::-1], (
                f"a request of height {index} must give heights {index}..0, newest first"
            )

    @CAPABILITIES
    @rule(
        "budgets.empty-sentinel",
        "get_ancestors of an unknown or rejected block is [] (not an error); a processing "
        "block is served",
    )
    def test_unknown_or_rejected_block_gives_empty_answer(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches)
        chain = self.kit_chain(stack)
        assert get_ancestors(stack.layer, UNKNOWN_ID, clock=stack.clock) == []
        if self.layer_batches(stack):
            assert (
                batched(stack.layer).get_ancestors(
                    UNKNOWN_ID, 10, MAX_CONTAINERS_LEN, KIT_TIME_BUDGET
                )
                == []
            ), "the layer's get_ancestors of an unknown block must be []"
        processing = stack.layer.build_block()
        processing.verify()
        assert get_ancestors(stack.layer, processing.id, clock=stack.clock) == [
            bytes(processing),
            *chain[::-1],
        ], "a processing block is served with its ancestors"
        rejected = stack.layer.build_block()
        rejected.verify()
        rejected.reject()
        assert get_ancestors(stack.layer, rejected.id, clock=stack.clock) == [], (
            "a rejected block is not served: its answer is []"
        )

    @CAPABILITIES
    @rule(
        "budgets.first-block",
        "the first block is always included: a size budget of 0, a count of 1 or a time "
        "budget of 0 give exactly the requested block",
    )
    def test_first_block_is_always_included(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches)
        chain = self.kit_chain(stack)
        for num, size, seconds in (
            (10, 0, KIT_TIME_BUDGET),
            (1, MAX_CONTAINERS_LEN, 1.0),
            (10, MAX_CONTAINERS_LEN, 0.0),
        ):
            answer = get_ancestors(
                stack.layer,
                stack.tip,
                max_blocks_num=num,
                max_blocks_size=size,
                max_retrieval_time=seconds,
                clock=stack.clock,
            )
            assert answer == [chain[-1]], (
                f"max_blocks_num={num}, max_blocks_size={size}, max_retrieval_time={seconds} "
                f"must give exactly the requested block, got {len(answer)} blocks"
            )

    @CAPABILITIES
    @rule(
        "budgets.size-exact",
        "a size budget equal to the cost of k blocks (len + 4 each) gives k blocks; one "
        "byte less gives k - 1 (at least 1)",
    )
    def test_size_budget_is_exact(self, inner_batches: bool) -> None:
        def check(data: st.DataObject) -> None:
            stack, chain = self.drawn_chain(data, inner_batches)
            count = data.draw(st.integers(1, len(chain)), label="blocks that fit")
            newest = chain[::-1][:count]
            for size, want in (
                (cost(newest), newest),
                (cost(newest) - 1, newest[: max(count - 1, 1)]),
            ):
                answer = get_ancestors(
                    stack.layer,
                    stack.tip,
                    max_blocks_size=size,
                    max_retrieval_time=KIT_TIME_BUDGET,
                    clock=stack.clock,
                )
                assert answer == want, (
                    f"max_blocks_size={size} must give {len(want)} blocks, got {len(answer)}"
                )

        self.kit_explore(check, data=st.data())

    @CAPABILITIES
    @rule("budgets.count", "at most max_blocks_num blocks come back, the newest ones")
    def test_max_blocks_num_caps_the_answer(self, inner_batches: bool) -> None:
        def check(data: st.DataObject) -> None:
            stack, chain = self.drawn_chain(data, inner_batches)
            num = data.draw(st.integers(1, len(chain) + 3), label="max_blocks_num")
            answer = get_ancestors(
                stack.layer,
                stack.tip,
                max_blocks_num=num,
                max_retrieval_time=KIT_TIME_BUDGET,
                clock=stack.clock,
            )
            assert answer == chain[::-1][:num], (
                f"max_blocks_num={num} must give {min(num, len(chain))} blocks, got {len(answer)}"
            )

        self.kit_explore(check, data=st.data())

    @CAPABILITIES
    @rule(
        "budgets.rule",
        "for any requested block, count and size, the answer (through the engine helper "
        "and through the layer's own get_ancestors) is what the budget rule allows",
    )
    def test_budgets_follow_the_rule(self, inner_batches: bool) -> None:
        def check(data: st.DataObject) -> None:
            stack, chain = self.drawn_chain(data, inner_batches)
            index, num, size = self.draw_request(data, chain)
            block_id = stack.ids[index]
            self.check_ancestors(
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
            if self.layer_batches(stack):
                self.check_ancestors(
                    stack,
                    chain,
                    index,
                    num=num,
                    size=size,
                    seconds=KIT_TIME_BUDGET,
                    what="the layer's get_ancestors",
                    call=lambda: batched(stack.layer).get_ancestors(
                        block_id, num, size, KIT_TIME_BUDGET
                    ),
                )

        self.kit_explore(check, data=st.data())

    @CAPABILITIES
    @rule(
        "budgets.time",
        "the time budget starts with the call and covers the whole answer: every block "
        "read below is read before the deadline, and the answer stops short of count and "
        "size only once the time is up (each read below costs the kit's clock time)",
    )
    def test_time_budget_covers_the_whole_answer(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches)
        chain = self.kit_chain(stack)
        for reads in (0, 1, 3, 10, len(chain) // 2, len(chain) - 2):
            self.check_time_budget(stack, chain, len(chain) - 1, (reads + 0.5) * KIT_FETCH_COST)

        def check(data: st.DataObject) -> None:
            stack, chain = self.drawn_chain(data, inner_batches, minimum=2)
            index = data.draw(st.integers(1, len(chain) - 1), label="requested height")
            reads = data.draw(st.integers(0, len(chain) + 1), label="reads that fit")
            fraction = data.draw(st.sampled_from([0.0, 0.25, 0.5, 0.999]), label="fraction")
            self.check_time_budget(stack, chain, index, (reads + fraction) * KIT_FETCH_COST)

        self.kit_explore(check, data=st.data())

    def check_time_budget(
        self, stack: KitStack, chain: list[bytes], index: int, seconds: float
    ) -> None:
        """A request of ``chain[index]`` with a time budget of ``seconds`` (and count and
        size that never bind), through the engine helper and the layer's own method."""
        block_id = stack.ids[index]
        num = len(chain) + 1
        self.check_ancestors(
            stack,
            chain,
            index,
            num=num,
            size=MAX_CONTAINERS_LEN,
            seconds=seconds,
            what="get_ancestors (engine helper)",
            call=lambda: get_ancestors(
                stack.layer,
                block_id,
                max_blocks_num=num,
                max_retrieval_time=seconds,
                clock=stack.clock,
            ),
        )
        if self.layer_batches(stack):
            self.check_ancestors(
                stack,
                chain,
                index,
                num=num,
                size=MAX_CONTAINERS_LEN,
                seconds=seconds,
                what="the layer's get_ancestors",
                call=lambda: batched(stack.layer).get_ancestors(
                    block_id, num, MAX_CONTAINERS_LEN, seconds
                ),
            )

    @CAPABILITIES
    @rule(
        "budgets.long-answers",
        "long answers (thousands of blocks) obey the same rule to the last block: no cap "
        "of the layer's own, no block dropped or added at the end or past some length",
    )
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
                stack,
                chain,
                index,
                num=num,
                size=size,
                seconds=seconds,
                what=f"get_ancestors (engine helper) of {index + 1} blocks",
                call=lambda: get_ancestors(
                    stack.layer,
                    block_id,  # noqa: B023
                    max_blocks_num=num,  # noqa: B023
                    max_blocks_size=size,  # noqa: B023
                    max_retrieval_time=seconds,  # noqa: B023
                    clock=stack.clock,
                ),
            )
            if self.layer_batches(stack):
                self.check_ancestors(
                    stack,
                    chain,
                    index,
                    num=num,
                    size=size,
                    seconds=seconds,
                    what=f"the layer's get_ancestors of {index + 1} blocks",
                    call=lambda: batched(stack.layer).get_ancestors(
                        block_id,  # noqa: B023
                        num,  # noqa: B023
                        size,  # noqa: B023
                        seconds,  # noqa: B023
                    ),
                )
        assert untimed_expected(chain, tip, length + 10, MAX_CONTAINERS_LEN) == chain[::-1]

    @CAPABILITIES
    @rule(
        "budgets.bad-limits",
        "bad limits (count < 1, a negative size or time, NaN) or a malformed block ID "
        "raise ValueError",
    )
    def test_bad_limits_raise_value_error(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches, blocks=3)
        bad_limits = (
            (0, MAX_CONTAINERS_LEN, 1.0),
            (-1, MAX_CONTAINERS_LEN, 1.0),
            (10, -1, 1.0),
            (10, MAX_CONTAINERS_LEN, -0.5),
            (10, MAX_CONTAINERS_LEN, math.nan),
        )
        for num, size, seconds in bad_limits:
            with pytest.raises(ValueError):
                get_ancestors(
                    stack.layer,
                    stack.tip,
                    max_blocks_num=num,
                    max_blocks_size=size,
                    max_retrieval_time=seconds,
                    clock=stack.clock,
                )
            if self.layer_batches(stack):
                with pytest.raises(ValueError):
                    batched(stack.layer).get_ancestors(stack.tip, num, size, seconds)
        with pytest.raises(ValueError):
            get_ancestors(stack.layer, stack.tip[:31], clock=stack.clock)
