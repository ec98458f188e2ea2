"""The layer conformance kit: inherit :class:`LayerConformance`, get the layer tests.

A layer's author writes, in their own test suite::

    from vmstack.conformance import LayerConformance

    class TestMyLayer(LayerConformance):
        def wrap(self, inner):
            return MyLayer(inner)

and pytest collects the inherited tests. They put the layer over a recording in-memory VM
(:func:`vmstack.conformance.memory_vm`) — once over one that batches and once over one that
does not — and check the contract of DESIGN sections 3, 5 and 8 through the layer:

- a batched call over a batching VM is forwarded as ONE call, with no per-block call below;
- over a VM that cannot batch, both batched methods raise ``BatchingNotImplemented`` without
  calling anything below, and the engine helpers' fallback answers are identical to the
  batched answers over a batching VM (path independence, byte for byte);
- every rule of section 3 holds through the layer: order, ``[]`` for an unknown or rejected
  block, the first block always included, the exact size boundary, ``max_blocks_num``, errors
  on the first block propagating, partial answers after a mid-walk failure, ``ValueError``
  for bad limits, and ``batched_parse_block``'s order, ``[]`` and ``InvalidBlock`` index;
- errors from below come up unchanged: the same type and the very same object;
- every block returned is the layer's own wrapper, and ``verify/accept/reject`` reach the
  inner block;
- ``get_block``, ``parse_block``, ``build_block``, ``set_preference``, ``last_accepted`` and
  ``get_block_id_at_height`` forward correctly.

Hypothesis draws chain lengths, requested blocks and budgets. Its example count per property
is :attr:`LayerConformance.max_examples`, or ``--vmstack-max-examples N`` on the pytest
command line (the vmstack pytest plugin adds it).

Hooks for layers that need more than ``wrap``: :meth:`~LayerConformance.make_inner` (another
inner VM setup), :meth:`~LayerConformance.extend_chain` (grow the chain through the layer),
and two class attributes, :attr:`~LayerConformance.pass_through` and
:attr:`~LayerConformance.refuses_without_batching`, for layers that answer partly themselves
(a proposer layer walks its own blocks, and completes the answer from a serial VM below by
walking it itself).

This module imports pytest and Hypothesis: it is for test suites, and
:mod:`vmstack.conformance` imports it only when :class:`LayerConformance` is asked for.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vmstack.batching import (
    CONTAINER_LEN_OVERHEAD,
    MAX_CONTAINERS_LEN,
    AncestorBudget,
    batched_parse_block,
    get_ancestors,
    supports_batching,
    walk_ancestors,
)
from vmstack.clock import SimClock
from vmstack.conformance.doubles import Call, MemoryBlock, MemoryVM, memory_vm
from vmstack.conformance.plugin import MAX_EXAMPLES_OPTION
from vmstack.errors import (
    BatchingNotImplemented,
    BlockNotFound,
    InvalidBlock,
    StoreCorrupted,
)
from vmstack.interfaces import BatchedChainVM, Block, ChainVM
from vmstack.stack import describe_stack

__all__ = ["KIT_START_TIME", "KIT_TIME_BUDGET", "KitFault", "KitStack", "LayerConformance"]

#: Where the kit's simulated clock starts (seconds).
KIT_START_TIME = 1_700_000_000.0
#: The time budget of the kit's ancestor requests: the clock is simulated and stands still,
#: so any positive budget never runs out, and the other two budgets decide.
KIT_TIME_BUDGET = 1.0

_CAPABILITIES = pytest.mark.parametrize(
    "inner_batches", [True, False], ids=["inner-batches", "inner-does-not-batch"])
_INNER_BATCHES = pytest.mark.parametrize("inner_batches", [True], ids=["inner-batches"])
_INNER_SERIAL = pytest.mark.parametrize("inner_batches", [False],
                                        ids=["inner-does-not-batch"])

_UNKNOWN_ID = hashlib.sha256(b"vmstack conformance: a block nobody has").digest()
_PER_BLOCK_METHODS = ("get_block", "parse_block")


class KitFault(RuntimeError):
    """An error the kit injects below the layer; the layer must let the very object up."""


@attrs.frozen
class KitStack:
    """One stack under test: the layer (``layer``) over the recording VM (``inner``).

    ``ids`` is the chain as the layer serves it, genesis first and the tip last, so
    ``ids[h]`` is the block at height ``h``. ``clock`` is the simulated clock of the inner VM
    (it stands still unless a test advances it).
    """

    layer: ChainVM
    inner: MemoryVM
    ids: tuple[bytes, ...]
    clock: SimClock

    @property
    def tip(self) -> bytes:
        """The newest block of the chain (the last accepted one)."""
        return self.ids[-1]

    def settle(self) -> None:
        """Forget the inner VM's call record, so a test sees only the calls it causes."""
        self.inner.calls.clear()


def _expected(chain: Sequence[bytes], index: int, max_blocks_num: int,
              max_blocks_size: int) -> list[bytes]:
    """What rules 3 and 4 allow for a request of ``chain[index]`` (chain oldest first),
    with a time budget that never runs out."""
    budget = AncestorBudget(max_blocks_num, max_blocks_size, KIT_TIME_BUDGET, clock=SimClock())
    budget.extend(reversed(chain[: index + 1]))
    return budget.blocks


def _cost(blocks: Sequence[bytes]) -> int:
    return sum(len(block) + CONTAINER_LEN_OVERHEAD for block in blocks)


def _batched(layer: ChainVM) -> BatchedChainVM:
    assert isinstance(layer, BatchedChainVM), (
        f"{type(layer).__name__} lacks get_ancestors / batched_parse_block: a layer always "
        "has both, forwarding them when the VM below batches and raising "
        "BatchingNotImplemented when it does not")
    return layer


def _reaches(layer: object, inner: object) -> bool:
    seen: set[int] = set()
    current: object = layer
    while current is not None and id(current) not in seen:
        if current is inner:
            return True
        seen.add(id(current))
        current = getattr(current, "inner", None)
    return False


class LayerConformance:
    """Mixin test class: the conformance tests of a layer. Override :meth:`wrap`.

    Subclass it in a module pytest collects, under a name pytest collects (``Test...``). The
    tests build fresh stacks with :meth:`kit_stack`; nothing is shared between tests.
    """

    #: True for a layer that answers exactly what the layer below answers (tracing,
    #: metering, logging): the kit then also checks that each call is forwarded with the
    #: same arguments and that removing the layer changes no answer. A layer that answers
    #: partly itself sets False, and the kit checks its answers against the fallback walk.
    pass_through: ClassVar[bool] = True
    #: True for a layer that refuses batched calls (``BatchingNotImplemented``) when the VM
    #: below cannot batch. A layer that completes the answer itself sets False, and the kit
    #: checks that its batched answers are complete and equal to the fallback instead.
    refuses_without_batching: ClassVar[bool] = True
    #: Hypothesis examples per property (``--vmstack-max-examples`` overrides it).
    max_examples: ClassVar[int] = 15
    #: Blocks above genesis in the chain of the tests that do not draw a length.
    chain_length: ClassVar[int] = 24
    #: The longest chain (blocks above genesis) Hypothesis draws.
    max_chain_length: ClassVar[int] = 40

    _kit_examples: int | None = None

    # --- hooks ---------------------------------------------------------------------------

    def wrap(self, inner: ChainVM) -> ChainVM:
        """Put the layer under test over ``inner`` and return the top of the result."""
        raise NotImplementedError(
            f"{type(self).__name__} must override wrap(self, inner) to put its layer "
            "over inner")

    def make_inner(self, *, batching: bool, clock: SimClock) -> MemoryVM:
        """The recording VM under the layer, with or without the batched protocol, on
        ``clock``; it holds only its genesis block. Default: :func:`memory_vm`."""
        return memory_vm(batching=batching, clock=clock)

    def extend_chain(self, layer: ChainVM, inner: MemoryVM, count: int) -> list[bytes]:
        """Add ``count`` accepted blocks to the chain; return their IDs as the layer serves
        them, oldest first. Default: :meth:`MemoryVM.extend_chain` on ``inner``. A layer
        with blocks of its own builds them through ``layer`` instead."""
        return inner.extend_chain(count)

    # --- helpers -------------------------------------------------------------------------

    @pytest.fixture(autouse=True)
    def _vmstack_kit_options(self, request: pytest.FixtureRequest) -> None:
        self._kit_examples = request.config.getoption(MAX_EXAMPLES_OPTION, default=None)

    def kit_stack(self, *, batching: bool, blocks: int | None = None) -> KitStack:
        """A fresh stack: :meth:`wrap` over :meth:`make_inner`, grown by :meth:`extend_chain`
        to ``blocks`` blocks above genesis (default :attr:`chain_length`), with an empty
        call record."""
        clock = SimClock(KIT_START_TIME)
        inner = self.make_inner(batching=batching, clock=clock)
        layer = self.wrap(inner)
        genesis = layer.last_accepted()
        count = self.chain_length if blocks is None else blocks
        ids = (genesis, *self.extend_chain(layer, inner, count))
        stack = KitStack(layer=layer, inner=inner, ids=ids, clock=clock)
        stack.settle()
        return stack

    def _drawn_chain(self, data: st.DataObject,
                     batching: bool) -> tuple[KitStack, list[bytes]]:
        """A stack over a chain of a drawn length, and its blocks' bytes (see
        :meth:`kit_chain`)."""
        length = data.draw(st.integers(1, self.max_chain_length), label="blocks")
        stack = self.kit_stack(batching=batching, blocks=length)
        return stack, self.kit_chain(stack)

    def kit_chain(self, stack: KitStack) -> list[bytes]:
        """The bytes of every block of ``stack``'s chain as the layer serves them, genesis
        first (read one by one through the layer; the call record is cleared after)."""
        chain = [bytes(stack.layer.get_block(block_id)) for block_id in stack.ids]
        stack.settle()
        return chain

    def kit_explore(self, check: Callable[..., None],
                    **strategies: st.SearchStrategy[Any]) -> None:
        """Run ``check`` as a Hypothesis property over ``strategies``."""
        examples = self._kit_examples or self.max_examples
        run = settings(max_examples=examples, deadline=None,
                       suppress_health_check=[HealthCheck.too_slow])(given(**strategies)(check))
        run()

    def _draw_request(self, data: st.DataObject, chain: Sequence[bytes]) -> tuple[int, int, int]:
        index = data.draw(st.integers(0, len(chain) - 1), label="requested height")
        num = data.draw(st.integers(1, len(chain) + 2), label="max_blocks_num")
        size = data.draw(st.integers(0, _cost(chain) + 8), label="max_blocks_size")
        return index, num, size

    def _assert_no_per_block_calls(self, stack: KitStack) -> None:
        per_block = [call for call in stack.inner.calls if call.method in _PER_BLOCK_METHODS]
        assert not per_block, (
            f"a batched call through the layer made {len(per_block)} per-block call(s) to "
            f"the VM below (first: {per_block[0].method}); it must be forwarded as one call")

    def _assert_forwarded_once(self, stack: KitStack, call: Call) -> None:
        self._assert_no_per_block_calls(stack)
        forwarded = stack.inner.calls_to(call.method)
        if self.pass_through:
            assert forwarded == [call], (
                f"expected exactly one {call.method} call below, with the caller's "
                f"arguments; the VM below saw {forwarded!r}")
        else:
            assert len(forwarded) <= 1, (
                f"{len(forwarded)} {call.method} calls below for one call: at most one")

    def _assert_wrapped(self, stack: KitStack, block: Block, what: str) -> None:
        assert not isinstance(block, MemoryBlock), (
            f"{what} returned the inner VM's own block; a layer wraps every block it returns")
        if not self.pass_through:
            return
        below = stack.inner.parse_block(bytes(block))
        assert block is not below, f"{what} returned the inner VM's own block object"
        assert (block.id, block.parent_id, block.height, block.timestamp, bytes(block)) == (
            below.id, below.parent_id, below.height, below.timestamp, bytes(below)), (
            f"the block {what} returned does not forward id / parent_id / height / "
            "timestamp / bytes to the block it wraps")

    # --- batched calls are forwarded as one call -----------------------------------------

    @_INNER_BATCHES
    def test_get_ancestors_is_one_forwarded_call(self, inner_batches: bool) -> None:
        """Over a batching VM, ``get_ancestors`` is one call below and no per-block call."""

        def check(data: st.DataObject) -> None:
            stack, chain = self._drawn_chain(data, inner_batches)
            index, num, size = self._draw_request(data, chain)
            block_id = stack.ids[index]
            answer = _batched(stack.layer).get_ancestors(block_id, num, size, KIT_TIME_BUDGET)
            self._assert_forwarded_once(
                stack, Call("get_ancestors", (block_id, num, size, KIT_TIME_BUDGET)))
            assert answer == _expected(chain, index, num, size)

        self.kit_explore(check, data=st.data())

    @_INNER_BATCHES
    def test_batched_parse_block_is_one_forwarded_call(self, inner_batches: bool) -> None:
        """Over a batching VM, ``batched_parse_block`` is one call below and no
        ``parse_block`` call."""

        def check(data: st.DataObject) -> None:
            stack, chain = self._drawn_chain(data, inner_batches)
            length = len(chain) - 1  # blocks above genesis
            order = data.draw(st.permutations(range(1, length + 1)), label="order")
            picks = order[: data.draw(st.integers(1, length), label="batch length")]
            batch = [chain[i] for i in picks]
            parsed = _batched(stack.layer).batched_parse_block(batch)
            self._assert_forwarded_once(stack, Call("batched_parse_block", (tuple(batch),)))
            assert [block.id for block in parsed] == [stack.ids[i] for i in picks]
            assert [bytes(block) for block in parsed] == batch

        self.kit_explore(check, data=st.data())

    @_INNER_SERIAL
    def test_refuses_batched_calls_when_the_inner_vm_cannot_batch(
            self, inner_batches: bool) -> None:
        """Over a VM that cannot batch, both batched methods raise
        ``BatchingNotImplemented`` and call nothing below."""
        stack = self.kit_stack(batching=inner_batches)
        chain = self.kit_chain(stack)
        layer = _batched(stack.layer)
        if not self.refuses_without_batching:
            answer = layer.get_ancestors(stack.tip, len(chain), MAX_CONTAINERS_LEN,
                                         KIT_TIME_BUDGET)
            assert answer == chain[::-1], "the layer's own answer must be complete"
            parsed = layer.batched_parse_block(chain[1:])
            assert [block.id for block in parsed] == list(stack.ids[1:])
            return
        with pytest.raises(BatchingNotImplemented):
            layer.get_ancestors(stack.tip, len(chain), MAX_CONTAINERS_LEN, KIT_TIME_BUDGET)
        with pytest.raises(BatchingNotImplemented):
            layer.batched_parse_block(chain[1:])
        assert stack.inner.calls == [], (
            f"refusing a batched call must not call the VM below; it saw {stack.inner.calls!r}")
        assert not supports_batching(stack.layer), (
            "the layer must say it cannot batch (batching = False) when the VM below cannot")

    @_CAPABILITIES
    def test_capability_is_detected_through_the_layer(self, inner_batches: bool) -> None:
        """``supports_batching`` and ``describe_stack`` tell the truth through the layer."""
        stack = self.kit_stack(batching=inner_batches, blocks=2)
        expected = inner_batches or not self.refuses_without_batching
        assert supports_batching(stack.layer) is expected
        assert _reaches(stack.layer, stack.inner), (
            "the layer must expose the VM below it as `inner`, down to the inner VM")
        description = describe_stack(stack.layer)
        assert len(description) >= 2
        assert description.top.kind == type(stack.layer).__name__
        assert description.bottom.kind == type(stack.inner).__name__
        assert description.bottom.batching is inner_batches

    # --- path independence ---------------------------------------------------------------

    def test_fallback_answers_equal_batched_answers(self) -> None:
        """The fallback over a VM that cannot batch, the serial walk through the layer and
        the batched answer are the same bytes."""

        def check(data: st.DataObject) -> None:
            length = data.draw(st.integers(1, self.max_chain_length), label="blocks")
            batching = self.kit_stack(batching=True, blocks=length)
            serial = self.kit_stack(batching=False, blocks=length)
            assert batching.ids == serial.ids, "both inner VMs must hold the same chain"
            chain = self.kit_chain(batching)
            index, num, size = self._draw_request(data, chain)
            block_id = batching.ids[index]
            batched_answer = get_ancestors(batching.layer, block_id, max_blocks_num=num,
                                           max_blocks_size=size, clock=batching.clock)
            fallback_answer = get_ancestors(serial.layer, block_id, max_blocks_num=num,
                                            max_blocks_size=size, clock=serial.clock)

            def fetch(wanted: bytes) -> tuple[bytes, bytes]:
                block = batching.layer.get_block(wanted)
                return bytes(block), block.parent_id

            walked = walk_ancestors(fetch, block_id, AncestorBudget(
                num, size, KIT_TIME_BUDGET, clock=batching.clock))
            assert batched_answer == fallback_answer == walked == _expected(
                chain, index, num, size)
            batch = chain[1:]
            parsed_batched = batched_parse_block(batching.layer, batch)
            parsed_fallback = batched_parse_block(serial.layer, batch)
            assert [bytes(block) for block in parsed_batched] == batch
            assert [bytes(block) for block in parsed_fallback] == batch
            assert [block.id for block in parsed_batched] == [
                block.id for block in parsed_fallback]

        self.kit_explore(check, data=st.data())

    @_CAPABILITIES
    def test_answers_do_not_depend_on_the_layer(self, inner_batches: bool) -> None:
        """A pass-through layer's answers equal those of the VM below it alone."""
        if not self.pass_through:
            pytest.skip("the layer answers partly itself (pass_through = False)")

        def check(data: st.DataObject) -> None:
            stack, chain = self._drawn_chain(data, inner_batches)
            index, num, size = self._draw_request(data, chain)
            block_id = stack.ids[index]
            through_layer = get_ancestors(stack.layer, block_id, max_blocks_num=num,
                                          max_blocks_size=size, clock=stack.clock)
            alone = get_ancestors(stack.inner, block_id, max_blocks_num=num,
                                  max_blocks_size=size, clock=stack.clock)
            assert through_layer == alone

        self.kit_explore(check, data=st.data())

    # --- the rules of DESIGN section 3 through the layer ---------------------------------

    @_CAPABILITIES
    def test_ancestors_come_newest_first(self, inner_batches: bool) -> None:
        """The answer is the requested block, then its parent, and so on down to genesis."""
        stack = self.kit_stack(batching=inner_batches)
        chain = self.kit_chain(stack)
        assert get_ancestors(stack.layer, stack.tip, clock=stack.clock) == chain[::-1]
        middle = len(chain) // 2
        assert get_ancestors(stack.layer, stack.ids[middle], clock=stack.clock) == (
            chain[middle::-1])

    @_CAPABILITIES
    def test_unknown_or_rejected_block_gives_empty_answer(self, inner_batches: bool) -> None:
        """An unknown or rejected block gives ``[]``; a processing block is served."""
        stack = self.kit_stack(batching=inner_batches)
        chain = self.kit_chain(stack)
        assert get_ancestors(stack.layer, _UNKNOWN_ID, clock=stack.clock) == []
        if inner_batches or not self.refuses_without_batching:
            assert _batched(stack.layer).get_ancestors(
                _UNKNOWN_ID, 10, MAX_CONTAINERS_LEN, KIT_TIME_BUDGET) == []
        processing = stack.layer.build_block()
        processing.verify()
        assert get_ancestors(stack.layer, processing.id, clock=stack.clock) == [
            bytes(processing), *chain[::-1]]
        rejected = stack.layer.build_block()
        rejected.verify()
        rejected.reject()
        assert get_ancestors(stack.layer, rejected.id, clock=stack.clock) == []

    @_CAPABILITIES
    def test_first_block_is_always_included(self, inner_batches: bool) -> None:
        """A size budget of 0, a count of 1 or a time budget of 0 still give the first
        block."""
        stack = self.kit_stack(batching=inner_batches)
        chain = self.kit_chain(stack)
        for num, size, seconds in ((10, 0, KIT_TIME_BUDGET), (1, MAX_CONTAINERS_LEN, 1.0),
                                   (10, MAX_CONTAINERS_LEN, 0.0)):
            answer = get_ancestors(stack.layer, stack.tip, max_blocks_num=num,
                                   max_blocks_size=size, max_retrieval_time=seconds,
                                   clock=stack.clock)
            assert answer == [chain[-1]], (num, size, seconds)

    @_CAPABILITIES
    def test_size_budget_is_exact(self, inner_batches: bool) -> None:
        """A size budget equal to the cost of k blocks gives k blocks; one byte less, k-1."""

        def check(data: st.DataObject) -> None:
            stack, chain = self._drawn_chain(data, inner_batches)
            count = data.draw(st.integers(1, len(chain)), label="blocks that fit")
            newest = chain[::-1][:count]
            exact = get_ancestors(stack.layer, stack.tip, max_blocks_size=_cost(newest),
                                  clock=stack.clock)
            assert exact == newest
            short = get_ancestors(stack.layer, stack.tip, max_blocks_size=_cost(newest) - 1,
                                  clock=stack.clock)
            assert short == newest[: max(count - 1, 1)]

        self.kit_explore(check, data=st.data())

    @_CAPABILITIES
    def test_max_blocks_num_caps_the_answer(self, inner_batches: bool) -> None:
        """At most ``max_blocks_num`` blocks come back, the newest ones."""

        def check(data: st.DataObject) -> None:
            stack, chain = self._drawn_chain(data, inner_batches)
            num = data.draw(st.integers(1, len(chain) + 3), label="max_blocks_num")
            answer = get_ancestors(stack.layer, stack.tip, max_blocks_num=num,
                                   clock=stack.clock)
            assert answer == chain[::-1][:num]

        self.kit_explore(check, data=st.data())

    @_CAPABILITIES
    def test_budgets_follow_the_rule(self, inner_batches: bool) -> None:
        """For any requested block, count and size, the answer is what rule 4 allows."""

        def check(data: st.DataObject) -> None:
            stack, chain = self._drawn_chain(data, inner_batches)
            index, num, size = self._draw_request(data, chain)
            answer = get_ancestors(stack.layer, stack.ids[index], max_blocks_num=num,
                                   max_blocks_size=size, clock=stack.clock)
            assert answer == _expected(chain, index, num, size)

        self.kit_explore(check, data=st.data())

    @_CAPABILITIES
    def test_error_on_first_block_propagates(self, inner_batches: bool) -> None:
        """An error other than ``BlockNotFound`` on the requested block comes up as is."""
        for fault in (KitFault("injected on the first block"),
                      StoreCorrupted("injected on the first block")):
            stack = self.kit_stack(batching=inner_batches, blocks=4)
            stack.inner.fail_block(stack.tip, fault)
            with pytest.raises(type(fault)) as raised:
                get_ancestors(stack.layer, stack.tip, clock=stack.clock)
            assert raised.value is fault, "the error must come up as the very same object"

    @_CAPABILITIES
    def test_mid_walk_failure_gives_partial_answer(self, inner_batches: bool) -> None:
        """``BlockNotFound`` or another error on an ancestor ends the answer just above it."""

        def check(data: st.DataObject) -> None:
            length = data.draw(st.integers(2, self.max_chain_length), label="blocks")
            stack = self.kit_stack(batching=inner_batches, blocks=length)
            chain = self.kit_chain(stack)
            broken = data.draw(st.integers(0, length - 1), label="broken height")
            fault = data.draw(st.sampled_from(["not found", "corrupted", "other"]),
                              label="fault")
            error = {"not found": BlockNotFound("injected mid-walk"),
                     "corrupted": StoreCorrupted("injected mid-walk"),
                     "other": KitFault("injected mid-walk")}[fault]
            stack.inner.fail_block(stack.ids[broken], error)
            answer = get_ancestors(stack.layer, stack.tip, clock=stack.clock)
            assert answer == chain[:broken:-1]

        self.kit_explore(check, data=st.data())

    @_CAPABILITIES
    def test_bad_limits_raise_value_error(self, inner_batches: bool) -> None:
        """Bad limits or a malformed block ID raise ``ValueError`` through the helper."""
        stack = self.kit_stack(batching=inner_batches, blocks=3)
        bad_limits = ((0, MAX_CONTAINERS_LEN, 1.0), (-1, MAX_CONTAINERS_LEN, 1.0),
                      (10, -1, 1.0), (10, MAX_CONTAINERS_LEN, -0.5),
                      (10, MAX_CONTAINERS_LEN, math.nan))
        for num, size, seconds in bad_limits:
            with pytest.raises(ValueError):
                get_ancestors(stack.layer, stack.tip, max_blocks_num=num,
                              max_blocks_size=size, max_retrieval_time=seconds,
                              clock=stack.clock)
        with pytest.raises(ValueError):
            get_ancestors(stack.layer, stack.tip[:31], clock=stack.clock)
        if inner_batches and self.pass_through:
            with pytest.raises(ValueError):
                _batched(stack.layer).get_ancestors(stack.tip, 0, MAX_CONTAINERS_LEN, 1.0)

    @_CAPABILITIES
    def test_batched_parse_keeps_input_order(self, inner_batches: bool) -> None:
        """``batched_parse_block`` returns wrapped blocks in input order."""

        def check(data: st.DataObject) -> None:
            stack, chain = self._drawn_chain(data, inner_batches)
            length = len(chain) - 1  # blocks above genesis
            picks = data.draw(st.lists(st.integers(1, length), min_size=1, max_size=length),
                              label="heights")
            batch = [chain[i] for i in picks]
            parsed = batched_parse_block(stack.layer, batch)
            assert [block.id for block in parsed] == [stack.ids[i] for i in picks]
            assert [bytes(block) for block in parsed] == batch
            for block in parsed:
                self._assert_wrapped(stack, block, "batched_parse_block")

        self.kit_explore(check, data=st.data())

    @_CAPABILITIES
    def test_batched_parse_of_nothing_is_nothing(self, inner_batches: bool) -> None:
        """An empty batch gives ``[]``."""
        stack = self.kit_stack(batching=inner_batches, blocks=2)
        assert batched_parse_block(stack.layer, []) == []
        if inner_batches or not self.refuses_without_batching:
            assert _batched(stack.layer).batched_parse_block([]) == []

    @_CAPABILITIES
    def test_batched_parse_names_the_bad_index(self, inner_batches: bool) -> None:
        """A bad element fails the whole batch with ``InvalidBlock`` naming its index, and
        none of the batch becomes served."""

        def check(data: st.DataObject) -> None:
            length = data.draw(st.integers(1, self.max_chain_length // 2), label="blocks")
            extra = data.draw(st.integers(1, 6), label="new blocks")
            stack = self.kit_stack(batching=inner_batches, blocks=length)
            longer = self.kit_stack(batching=inner_batches, blocks=length + extra)
            assert longer.ids[: length + 1] == stack.ids, "both VMs must grow the same chain"
            fresh = self.kit_chain(longer)[length + 1:]
            bad_index = data.draw(st.integers(0, len(fresh)), label="bad index")
            bad = data.draw(st.sampled_from([b"", b"not a block", fresh[0][:40],
                                             b"XX" + fresh[0][2:]]), label="bad element")
            batch = [*fresh[:bad_index], bad, *fresh[bad_index:]]
            with pytest.raises(InvalidBlock) as raised:
                batched_parse_block(stack.layer, batch)
            assert raised.value.index == bad_index, (
                f"InvalidBlock must name index {bad_index}, it named {raised.value.index}")
            for block_id in longer.ids[length + 1:]:
                assert get_ancestors(stack.layer, block_id, clock=stack.clock) == []

        self.kit_explore(check, data=st.data())

    # --- errors pass through unchanged ---------------------------------------------------

    @_CAPABILITIES
    @pytest.mark.parametrize("method", [
        "get_block", "parse_block", "build_block", "set_preference", "last_accepted",
        "get_block_id_at_height", "block.verify", "block.accept", "block.reject"])
    def test_errors_pass_through_unchanged(self, inner_batches: bool, method: str) -> None:
        """An error raised below comes up through the layer as the very same object."""
        self._check_error_passes(inner_batches, method)

    @_INNER_BATCHES
    @pytest.mark.parametrize("method", ["get_ancestors", "batched_parse_block"])
    def test_batched_errors_pass_through_unchanged(self, inner_batches: bool,
                                                   method: str) -> None:
        """An error raised by a batched method below comes up as the very same object."""
        self._check_error_passes(inner_batches, method)

    def _check_error_passes(self, inner_batches: bool, method: str) -> None:
        stack = self.kit_stack(batching=inner_batches, blocks=4)
        chain = self.kit_chain(stack)
        layer = stack.layer
        action: Callable[[], object]
        if method.startswith("block."):
            block = layer.build_block()
            if method != "block.verify":
                block.verify()
            action = {"block.verify": block.verify, "block.accept": block.accept,
                      "block.reject": block.reject}[method]
        else:
            actions: dict[str, Callable[[], object]] = {
                "get_block": lambda: layer.get_block(stack.tip),
                "parse_block": lambda: layer.parse_block(chain[-1]),
                "build_block": layer.build_block,
                "set_preference": lambda: layer.set_preference(stack.tip),
                "last_accepted": layer.last_accepted,
                "get_block_id_at_height": lambda: layer.get_block_id_at_height(1),
                "get_ancestors": lambda: _batched(layer).get_ancestors(
                    stack.tip, 10, MAX_CONTAINERS_LEN, KIT_TIME_BUDGET),
                "batched_parse_block": lambda: _batched(layer).batched_parse_block(chain[1:]),
            }
            action = actions[method]
        fault = KitFault(f"injected into {method}")
        stack.inner.fail_next(method, fault)
        with pytest.raises(KitFault) as raised:
            action()
        assert raised.value is fault, (
            f"{method}: the error from below must come up as the very same object, got "
            f"{raised.value!r}")

    @_INNER_BATCHES
    def test_batching_not_implemented_from_below_passes_up_unchanged(
            self, inner_batches: bool) -> None:
        """``BatchingNotImplemented`` raised below reaches the engine as is, and the helper
        then falls back to a complete answer."""
        stack = self.kit_stack(batching=inner_batches)
        chain = self.kit_chain(stack)
        layer = _batched(stack.layer)
        for method in ("get_ancestors", "batched_parse_block"):
            refusal = BatchingNotImplemented(f"injected into {method}")
            stack.inner.fail_next(method, refusal)
            if method == "get_ancestors":
                def call() -> object:
                    return layer.get_ancestors(stack.tip, len(chain), MAX_CONTAINERS_LEN,
                                               KIT_TIME_BUDGET)
            else:
                def call() -> object:
                    return layer.batched_parse_block(chain[1:])
            if self.refuses_without_batching:
                with pytest.raises(BatchingNotImplemented) as raised:
                    call()
                assert raised.value is refusal, (
                    f"{method}: BatchingNotImplemented from below must come up as the very "
                    f"same object, got {raised.value!r}")
            else:
                call()
        stack.inner.fail_next("get_ancestors", BatchingNotImplemented("injected"))
        assert get_ancestors(stack.layer, stack.tip, clock=stack.clock) == chain[::-1]
        stack.inner.fail_next("batched_parse_block", BatchingNotImplemented("injected"))
        parsed = batched_parse_block(stack.layer, chain[1:])
        assert [block.id for block in parsed] == list(stack.ids[1:])

    # --- blocks are wrapped and decisions reach the inner block --------------------------

    @_CAPABILITIES
    def test_returned_blocks_are_wrapped(self, inner_batches: bool) -> None:
        """Every block the layer returns wraps the inner block and forwards its fields."""
        stack = self.kit_stack(batching=inner_batches)
        chain = self.kit_chain(stack)
        layer = stack.layer
        self._assert_wrapped(stack, layer.get_block(stack.tip), "get_block")
        self._assert_wrapped(stack, layer.parse_block(chain[-1]), "parse_block")
        self._assert_wrapped(stack, layer.build_block(), "build_block")
        for block in batched_parse_block(layer, chain[1:4]):
            self._assert_wrapped(stack, block, "batched_parse_block")
        if inner_batches or not self.refuses_without_batching:
            for block in _batched(layer).batched_parse_block(chain[1:4]):
                self._assert_wrapped(stack, block, "batched_parse_block")

    @_CAPABILITIES
    def test_block_decisions_reach_the_inner_block(self, inner_batches: bool) -> None:
        """``verify``, ``accept`` and ``reject`` on the layer's blocks reach the inner block
        once each (blocks from ``build_block`` and from ``batched_parse_block``)."""
        stack = self.kit_stack(batching=inner_batches)
        layer = stack.layer
        built = layer.build_block()
        stack.settle()
        built.verify()
        built.accept()
        assert layer.last_accepted() == built.id
        other = layer.build_block()
        other.verify()
        other.reject()
        self._assert_decisions(stack.inner, [("verify", built), ("accept", built),
                                             ("verify", other), ("reject", other)])

        twin = self.kit_stack(batching=inner_batches)
        longer = self.kit_stack(batching=inner_batches, blocks=self.chain_length + 2)
        fresh = self.kit_chain(longer)[self.chain_length + 1:]
        parsed = batched_parse_block(twin.layer, fresh)
        twin.settle()
        for block in parsed:
            block.verify()
            block.accept()
        self._assert_decisions(twin.inner, [(decision, block) for block in parsed
                                            for decision in ("verify", "accept")])
        assert twin.layer.last_accepted() == parsed[-1].id

    def _assert_decisions(self, inner: MemoryVM, expected: list[tuple[str, Block]]) -> None:
        """The inner VM saw exactly these block decisions, in order: on the same block IDs
        for a pass-through layer, on the inner blocks (whatever their IDs) otherwise."""
        seen = [call for call in inner.calls if call.method.startswith("block.")]
        if self.pass_through:
            assert seen == [Call(f"block.{decision}", (block.id,))
                            for decision, block in expected], (
                f"the inner blocks saw {seen!r}; each decision must reach them once")
        else:
            assert [call.method for call in seen] == [
                f"block.{decision}" for decision, _ in expected], (
                f"the inner blocks saw {[call.method for call in seen]}; each decision "
                "must reach them once")

    # --- the one-block methods forward correctly -----------------------------------------

    @_CAPABILITIES
    def test_get_block_forwards(self, inner_batches: bool) -> None:
        """``get_block`` returns the inner VM's block, unknown IDs raise ``BlockNotFound``."""
        stack = self.kit_stack(batching=inner_batches, blocks=6)
        chain = self.kit_chain(stack)
        for height, block_id in enumerate(stack.ids):
            block = stack.layer.get_block(block_id)
            assert (block.id, block.height, bytes(block)) == (block_id, height, chain[height])
            if height:
                assert block.parent_id == stack.ids[height - 1]
        if self.pass_through:
            assert stack.inner.calls == [Call("get_block", (block_id,))
                                         for block_id in stack.ids]
        with pytest.raises(BlockNotFound):
            stack.layer.get_block(_UNKNOWN_ID)

    @_CAPABILITIES
    def test_parse_block_forwards(self, inner_batches: bool) -> None:
        """``parse_block`` gives the block of the bytes; bad bytes raise ``InvalidBlock``."""
        stack = self.kit_stack(batching=inner_batches, blocks=6)
        chain = self.kit_chain(stack)
        for height in range(1, len(chain)):
            block = stack.layer.parse_block(chain[height])
            assert (block.id, block.height, bytes(block)) == (
                stack.ids[height], height, chain[height])
        if self.pass_through:
            assert stack.inner.calls == [Call("parse_block", (data,)) for data in chain[1:]]
        with pytest.raises(InvalidBlock):
            stack.layer.parse_block(b"not a block")

    @_CAPABILITIES
    def test_build_block_forwards(self, inner_batches: bool) -> None:
        """``build_block`` builds one block on the preferred block, through the VM below."""
        stack = self.kit_stack(batching=inner_batches, blocks=3)
        block = stack.layer.build_block()
        assert block.parent_id == stack.tip
        assert block.height == len(stack.ids)
        assert len(stack.inner.calls_to("build_block")) == 1

    @_CAPABILITIES
    def test_set_preference_forwards(self, inner_batches: bool) -> None:
        """``set_preference`` reaches the VM below: the next block builds on it."""
        stack = self.kit_stack(batching=inner_batches, blocks=5)
        stack.layer.set_preference(stack.ids[2])
        if self.pass_through:
            assert stack.inner.calls == [Call("set_preference", (stack.ids[2],))]
        assert stack.layer.build_block().parent_id == stack.ids[2]
        with pytest.raises(BlockNotFound):
            stack.layer.set_preference(_UNKNOWN_ID)

    @_CAPABILITIES
    def test_last_accepted_forwards(self, inner_batches: bool) -> None:
        """``last_accepted`` is the tip of the chain."""
        stack = self.kit_stack(batching=inner_batches, blocks=5)
        assert stack.layer.last_accepted() == stack.tip
        if self.pass_through:
            assert stack.inner.calls == [Call("last_accepted")]

    @_CAPABILITIES
    def test_get_block_id_at_height_forwards(self, inner_batches: bool) -> None:
        """``get_block_id_at_height`` maps every height of the chain to its block."""
        stack = self.kit_stack(batching=inner_batches, blocks=5)
        for height, block_id in enumerate(stack.ids):
            assert stack.layer.get_block_id_at_height(height) == block_id
        if self.pass_through:
            assert stack.inner.calls == [Call("get_block_id_at_height", (height,))
                                         for height in range(len(stack.ids))]
        with pytest.raises(BlockNotFound):
            stack.layer.get_block_id_at_height(len(stack.ids))
