"""The parsing contract: ``batched_parse_block`` keeps input order, answers ``[]`` for
``[]`` and is all-or-nothing, naming the failing index. Each test checks one rule named
``parse.*``.
"""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import strategies as st

from vmstack.batching import batched_parse_block, get_ancestors
from vmstack.conformance.base import KitBase
from vmstack.conformance.checks import batched
from vmstack.conformance.declarations import rule
from vmstack.conformance.stacks import CAPABILITIES
from vmstack.errors import InvalidBlock

__all__ = ["ParsingContract"]


class ParsingContract(KitBase):
    """``batched_parse_block``: order, empty input, all-or-nothing."""

    @CAPABILITIES
    @rule(
        "parse.order",
        "batched_parse_block returns one block per element, in input order (duplicates included)",
    )
    def test_batched_parse_keeps_input_order(self, inner_batches: bool) -> None:
        def check(data: st.DataObject) -> None:
            stack, chain = self.drawn_chain(data, inner_batches)
            length = len(chain) - 1
            picks = data.draw(
                st.lists(st.integers(1, length), min_size=1, max_size=length), label="heights"
            )
            batch = [chain[i] for i in picks]
            calls: list[tuple[str, Callable[[], object]]] = [
                (
                    "batched_parse_block (engine helper)",
                    lambda: batched_parse_block(stack.layer, batch),
                )
            ]
            if self.layer_batches(stack):
                calls.append(
                    (
                        "the layer's batched_parse_block",
                        lambda: batched(stack.layer).batched_parse_block(batch),
                    )
                )
            for what, call in calls:
                parsed = call()
                assert isinstance(parsed, list), f"{what} must return a list"
                for block in parsed:
                    self.check_block(block, what)
                assert [block.id for block in parsed] == [stack.ids[i] for i in picks], (
                    f"{what} must return the blocks in input order"
                )
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
    @rule(
        "parse.all-or-nothing",
        "a bad element fails the whole batch with InvalidBlock naming its index, and "
        "none of the batch becomes served",
    )
    def test_batched_parse_names_the_bad_index(self, inner_batches: bool) -> None:
        def check(data: st.DataObject) -> None:
            length = data.draw(st.integers(1, self.max_chain_length // 2), label="blocks")
            extra = data.draw(st.integers(1, 6), label="new blocks")
            stack = self.kit_stack(batching=inner_batches, blocks=length)
            fresh = self.fresh_blocks(stack, extra)
            bad_index = data.draw(st.integers(0, len(fresh)), label="bad index")
            bad = data.draw(
                st.sampled_from([b"", b"not a block", fresh[0][:40], b"XX" + fresh[0][2:]]),
                label="bad element",
            )
            batch = [*fresh[:bad_index], bad, *fresh[bad_index:]]
            calls: list[tuple[str, Callable[[], object]]] = [
                (
                    "batched_parse_block (engine helper)",
                    lambda: batched_parse_block(stack.layer, batch),
                )
            ]
            if self.layer_batches(stack):
                calls.append(
                    (
                        "the layer's batched_parse_block",
                        lambda: batched(stack.layer).batched_parse_block(batch),
                    )
                )
            for what, call in calls:
                try:
                    answer = call()
                except InvalidBlock as failure:
                    assert failure.index == bad_index, (
                        f"{what}: InvalidBlock must name index {bad_index}, it named "
                        f"{failure.index}"
                    )
                else:
                    raise AssertionError(
                        f"{what} of a batch with a bad element at {bad_index} returned "
                        f"{len(answer) if isinstance(answer, list) else answer!r} blocks; the "
                        "whole batch must fail with InvalidBlock"
                    )
            for block in fresh:
                parsed_id = batched_parse_block(stack.layer, [block])[0].id
                assert get_ancestors(stack.layer, parsed_id, clock=stack.clock) == [], (
                    "a block of a failed batch must not become served"
                )

        self.kit_explore(check, data=st.data())
