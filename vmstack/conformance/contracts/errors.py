"""The error contract: errors from below come up unchanged.

An error raised below reaches the caller as the very object (an equal copy across a
process boundary); a failure on the requested block is not turned into ``[]``, and a failure
on an ancestor ends the answer just above it. Each test checks one rule named
``errors.*``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import strategies as st

from vmstack.batching import MAX_CONTAINERS_LEN, batched_parse_block, get_ancestors
from vmstack.conformance.base import KitBase
from vmstack.conformance.checks import batched
from vmstack.conformance.declarations import rule
from vmstack.conformance.stacks import (
    CAPABILITIES,
    INNER_BATCHES,
    KIT_TIME_BUDGET,
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
from vmstack.layers import supports_batching

__all__ = ["ErrorContract"]

#: The methods whose errors the kit injects below, with how to call each through a layer.
_ERROR_METHODS = [
    "get_block",
    "parse_block",
    "build_block",
    "set_preference",
    "last_accepted",
    "get_block_id_at_height",
    "block.verify",
    "block.accept",
    "block.reject",
]


class ErrorContract(KitBase):
    """Errors from below come up unchanged; failures in walks follow the rules."""

    def assert_same_error(self, raised: BaseException, fault: BaseException, what: str) -> None:
        """``raised`` is ``fault`` itself, or for a layer across a process boundary an
        equal copy (a ``VMStackError`` carrying the message for errors outside the tree)."""
        if not self.boundary:
            assert raised is fault, (
                f"{what}: the error from below must come up as the very same object "
                f"({fault!r}), got {raised!r}"
            )
            return
        if isinstance(fault, VMStackError | ValueError):
            assert type(raised) is type(fault) and str(raised) == str(fault), (
                f"{what}: across a process boundary the error must come up as an equal copy "
                f"({fault!r}), got {raised!r}"
            )
            if isinstance(fault, InvalidBlock):
                assert isinstance(raised, InvalidBlock) and raised.index == fault.index
        else:
            assert isinstance(raised, VMStackError) and str(fault) in str(raised), (
                f"{what}: across a process boundary an error outside vmstack's tree must "
                f"come up as a VMStackError carrying its message ({fault!r}), got {raised!r}"
            )

    def expect_error(self, fault: BaseException, call: Callable[[], object], what: str) -> None:
        """``call`` must raise ``fault`` (see :meth:`assert_same_error`)."""
        try:
            answer = call()
        except Exception as raised:
            self.assert_same_error(raised, fault, what)
        else:
            raise AssertionError(
                f"{what}: the error injected below ({fault!r}) was swallowed; the call "
                f"returned {type(answer).__name__}"
            )

    @CAPABILITIES
    @pytest.mark.parametrize("method", _ERROR_METHODS)
    @rule(
        "errors.unchanged",
        "an error raised below comes up through the layer unchanged: the very same "
        "object, not wrapped, replaced or swallowed",
    )
    def test_errors_pass_through_unchanged(self, inner_batches: bool, method: str) -> None:
        for fault in (
            KitFault(f"injected into {method}"),
            StoreCorrupted(f"injected into {method}"),
        ):
            stack = self.kit_stack(batching=inner_batches, blocks=4)
            action = self.error_action(stack, method)
            stack.inner.fail_next(method, fault)
            self.expect_error(fault, action, method)

    def error_action(self, stack: KitStack, method: str) -> Callable[[], object]:
        """The call through the layer that makes ``method`` run below."""
        layer = stack.layer
        if method == "block.reject" and self.own_blocks:
            # An envelope's reject leaves the block below undecided: the accept of a
            # sibling rejects it (docs/decisions.md), and the error comes up from there.
            loser = layer.build_block()
            loser.verify()
            layer.set_preference(stack.tip)
            stack.clock.advance(1.0)
            winner = layer.build_block()
            winner.verify()
            return winner.accept
        if method.startswith("block."):
            block = layer.build_block()
            if method != "block.verify":
                block.verify()
            return {
                "block.verify": block.verify,
                "block.accept": block.accept,
                "block.reject": block.reject,
            }[method]
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
    @rule(
        "errors.batched-ancestors-unchanged",
        "an error raised by get_ancestors below comes up through the layer's "
        "get_ancestors unchanged",
    )
    def test_get_ancestors_errors_pass_through(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches, blocks=4)
        if not self.layer_batches(stack):
            return
        fault = KitFault("injected into get_ancestors")
        stack.inner.fail_next("get_ancestors", fault)
        self.expect_error(
            fault,
            lambda: batched(stack.layer).get_ancestors(
                stack.tip, 10, MAX_CONTAINERS_LEN, KIT_TIME_BUDGET
            ),
            "get_ancestors",
        )

    @INNER_BATCHES
    @rule(
        "errors.batched-parse-unchanged",
        "an error raised by batched_parse_block below comes up through the layer's "
        "batched_parse_block unchanged",
    )
    def test_batched_parse_errors_pass_through(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches, blocks=4)
        chain = self.kit_chain(stack)
        if not self.layer_batches(stack):
            return
        for fault in (
            KitFault("injected into batched_parse_block"),
            InvalidBlock("injected into batched_parse_block", index=1),
        ):
            stack.inner.fail_next("batched_parse_block", fault)
            self.expect_error(
                fault,
                lambda: batched(stack.layer).batched_parse_block(chain[1:]),
                "batched_parse_block",
            )

    @INNER_BATCHES
    @rule(
        "errors.batching-not-implemented",
        "BatchingNotImplemented raised below comes up unchanged (a layer that answers "
        "batched calls itself answers instead, as the fallback would); the engine helper "
        "then falls back to a complete answer",
    )
    def test_batching_not_implemented_from_below(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches)
        chain = self.kit_chain(stack)
        if not self.layer_batches(stack):
            return
        layer = batched(stack.layer)
        calls: dict[str, tuple[Callable[[], object], Callable[[object], object]]] = {
            "get_ancestors": (
                lambda: layer.get_ancestors(
                    stack.tip, len(chain), MAX_CONTAINERS_LEN, KIT_TIME_BUDGET
                ),
                lambda answer: answer,
            ),
            "batched_parse_block": (
                lambda: layer.batched_parse_block(chain[1:]),
                lambda answer: [bytes(block) for block in answer],  # type: ignore[attr-defined]
            ),
        }
        complete = {"get_ancestors": chain[::-1], "batched_parse_block": chain[1:]}
        for method, (call, as_bytes) in calls.items():
            refusal = BatchingNotImplemented(f"injected into {method}")
            stack.inner.fail_next(method, refusal)
            if self.answers_itself:
                assert as_bytes(call()) == complete[method], (
                    f"{method}: a layer that answers batched calls itself must answer "
                    "completely (as the fallback would) when the VM below refuses"
                )
            else:
                self.expect_error(refusal, call, method)
            stack.inner.forget_records()
        stack.inner.fail_next("get_ancestors", BatchingNotImplemented("injected"))
        assert (
            get_ancestors(
                stack.layer, stack.tip, max_retrieval_time=KIT_TIME_BUDGET, clock=stack.clock
            )
            == chain[::-1]
        ), (
            "after BatchingNotImplemented from below, the engine's fallback must give the "
            "whole answer"
        )
        stack.inner.fail_next("batched_parse_block", BatchingNotImplemented("injected"))
        parsed = batched_parse_block(stack.layer, chain[1:])
        assert [block.id for block in parsed] == list(stack.ids[1:])

    @CAPABILITIES
    @rule(
        "errors.first-block",
        "an error other than BlockNotFound on the requested block comes up unchanged "
        "(it is not turned into [])",
    )
    def test_error_on_first_block_propagates(self, inner_batches: bool) -> None:
        for fault in (
            KitFault("injected on the first block"),
            StoreCorrupted("injected on the first block"),
        ):
            stack = self.kit_stack(batching=inner_batches, blocks=4)
            stack.inner.fail_block(stack.tip, fault)
            self.expect_error(
                fault,
                lambda: get_ancestors(stack.layer, stack.tip, clock=stack.clock),  # noqa: B023
                "get_ancestors of a block whose read fails",
            )

    @CAPABILITIES
    @rule(
        "errors.mid-walk",
        "BlockNotFound or another error on an ancestor ends the answer just above it "
        "(the partial answer is returned, not an error)",
    )
    def test_mid_walk_failure_gives_partial_answer(self, inner_batches: bool) -> None:
        def check(data: st.DataObject) -> None:
            length = data.draw(st.integers(2, self.max_chain_length), label="blocks")
            stack = self.kit_stack(batching=inner_batches, blocks=length)
            # The chain's bytes are read on a twin stack: a layer with memory must not
            # have seen the blocks before the fault is injected below.
            chain = self.kit_chain(self.kit_stack(batching=inner_batches, blocks=length))
            broken = data.draw(st.integers(0, length - 1), label="broken height")
            fault = data.draw(st.sampled_from(["not found", "corrupted", "other"]), label="fault")
            error = {
                "not found": BlockNotFound("injected mid-walk"),
                "corrupted": StoreCorrupted("injected mid-walk"),
                "other": KitFault("injected mid-walk"),
            }[fault]
            stack.inner.fail_block(stack.ids[broken], error)
            answer = get_ancestors(
                stack.layer, stack.tip, max_retrieval_time=KIT_TIME_BUDGET, clock=stack.clock
            )
            assert answer == chain[:broken:-1], (
                f"a failure reading height {broken} must end the answer just above it: "
                f"{length - broken} blocks, got {len(answer)}"
            )

        self.kit_explore(check, data=st.data())

    @CAPABILITIES
    @rule(
        "errors.bad-arguments",
        "parse_block and batched_parse_block with arguments that are not bytes raise what "
        "the VM below raises (InvalidBlock, ValueError), not a TypeError of the layer",
    )
    def test_bad_arguments_get_the_errors_of_below(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches, blocks=3)
        chain = self.kit_chain(stack)
        reference = self.make_inner(batching=inner_batches, clock=stack.clock)
        cases: list[tuple[str, Callable[[Any], object], Callable[[Any], object], object]] = []
        not_bytes: tuple[object, ...] = (None, 12345, "text", 1.5)
        for element in not_bytes:
            cases.append(("parse_block", stack.layer.parse_block, reference.parse_block, element))
        if self.layer_batches(stack) and supports_batching(reference):
            not_batches: tuple[object, ...] = ([chain[1], None], [chain[1], 7], None, 5)
            for batch in not_batches:
                cases.append(
                    (
                        "batched_parse_block",
                        batched(stack.layer).batched_parse_block,
                        batched(reference).batched_parse_block,
                        batch,
                    )
                )
        for method, through_layer, alone, argument in cases:
            with pytest.raises(Exception) as below:
                alone(argument)
            with pytest.raises(Exception) as raised:
                through_layer(argument)
            assert type(raised.value) is type(below.value) and (
                getattr(raised.value, "index", None) == getattr(below.value, "index", None)
            ), (
                f"{method}({argument!r}): the VM below raises {below.value!r}, through the "
                f"layer it must be the same error, got {raised.value!r}"
            )
