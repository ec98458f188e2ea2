"""The base of every contract mixin: the hooks a layer's test class overrides and the
machinery that builds fresh stacks (and twins of them) through those hooks.

:class:`KitBase` joins the declarations (:mod:`vmstack.conformance.declarations`) and the
shared checks (:mod:`vmstack.conformance.checks`) to the stacks: :meth:`KitBase.kit_stack`
puts the layer (:meth:`~KitBase.wrap`) over a recording VM (:meth:`~KitBase.make_inner`) and
grows the chain (:meth:`~KitBase.extend_chain`); :meth:`~KitBase.fresh_blocks` grows a twin
stack the same way for blocks a stack has never seen; :meth:`~KitBase.kit_explore` runs a
check as a Hypothesis property. Nothing is shared between tests.

This module imports pytest and Hypothesis: it is for test suites.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from vmstack.clock import SimClock
from vmstack.conformance.checks import KitChecks, cost
from vmstack.conformance.doubles import MemoryVM, memory_vm
from vmstack.conformance.plugin import MAX_EXAMPLES_OPTION
from vmstack.conformance.stacks import KIT_FETCH_COST, KIT_START_TIME, KitStack
from vmstack.interfaces import ChainVM
from vmstack.layers import supports_batching

__all__ = ["KitBase"]


class KitBase(KitChecks):
    """The hooks, declarations and helpers every contract mixin uses. Override :meth:`wrap`.

    Subclass :class:`~vmstack.conformance.LayerConformance` (all the contracts) or the
    contract mixins you want, in a module pytest collects, under a name pytest collects
    (``Test...``). The tests build fresh stacks with :meth:`kit_stack`; nothing is shared.
    """

    _kit_examples: int | None = None

    # --- hooks ---------------------------------------------------------------------------

    def wrap(self, inner: ChainVM) -> ChainVM:
        """Put the layer under test over ``inner`` and return the top of the result.

        ``inner`` is a :class:`~vmstack.conformance.MemoryVM`; a layer that needs a clock
        takes ``inner.clock`` (the kit's simulated clock)."""
        raise NotImplementedError(
            f"{type(self).__name__} must override wrap(self, inner) to put its layer over inner"
        )

    def make_inner(self, *, batching: bool, clock: SimClock) -> MemoryVM:
        """The recording VM under the layer, with or without the batched protocol, on
        ``clock``, each block read costing :data:`KIT_FETCH_COST`; it holds only its genesis
        block. Default: :func:`~vmstack.conformance.memory_vm`."""
        return memory_vm(batching=batching, clock=clock, fetch_cost=KIT_FETCH_COST)

    def extend_chain(self, layer: ChainVM, inner: MemoryVM, count: int) -> list[bytes]:
        """Add ``count`` accepted blocks to the chain; return their IDs as the layer serves
        them, oldest first. Default: :meth:`MemoryVM.extend_chain` on ``inner``. A layer
        with blocks of its own builds them through ``layer`` instead."""
        return inner.extend_chain(count)

    # --- set-up --------------------------------------------------------------------------

    @pytest.fixture(autouse=True)
    def _vmstack_kit_setup(self, request: pytest.FixtureRequest) -> None:
        self._kit_examples = request.config.getoption(MAX_EXAMPLES_OPTION, default=None)
        self.kit_check_declarations()

    # --- stacks --------------------------------------------------------------------------

    def kit_stack(self, *, batching: bool, blocks: int | None = None) -> KitStack:
        """A fresh stack: :meth:`wrap` over :meth:`make_inner`, grown by :meth:`extend_chain`
        to ``blocks`` blocks above genesis (default :attr:`chain_length`), with empty
        records."""
        clock = SimClock(KIT_START_TIME)
        inner = self.make_inner(batching=batching, clock=clock)
        layer = self.wrap(inner)
        genesis = layer.last_accepted()
        count = self.chain_length if blocks is None else blocks
        ids = (genesis, *self.extend_chain(layer, inner, count))
        stack = KitStack(layer=layer, inner=inner, ids=ids, clock=clock)
        stack.settle()
        return stack

    def kit_chain(self, stack: KitStack) -> list[bytes]:
        """The bytes of every block of ``stack``'s chain as the layer serves them, genesis
        first (read one by one through the layer; the records are cleared after)."""
        chain = [bytes(stack.layer.get_block(block_id)) for block_id in stack.ids]
        stack.settle()
        return chain

    def drawn_chain(
        self, data: st.DataObject, batching: bool, minimum: int = 1
    ) -> tuple[KitStack, list[bytes]]:
        """A stack over a chain of a drawn length, and its blocks' bytes."""
        length = data.draw(st.integers(minimum, self.max_chain_length), label="blocks")
        stack = self.kit_stack(batching=batching, blocks=length)
        return stack, self.kit_chain(stack)

    def fresh_blocks(self, stack: KitStack, count: int) -> list[bytes]:
        """Bytes of ``count`` valid blocks extending ``stack``'s chain that ``stack`` has
        never seen (grown on a twin stack)."""
        length = len(stack.ids) - 1
        twin = self.kit_stack(batching=supports_batching(stack.inner), blocks=length + count)
        assert twin.ids[: length + 1] == stack.ids, (
            "two stacks grown the same way must hold the same chain (extend_chain must be "
            "deterministic)"
        )
        return self.kit_chain(twin)[length + 1 :]

    def kit_explore(self, check: Callable[..., None], **strategies: st.SearchStrategy[Any]) -> None:
        """Run ``check`` as a Hypothesis property over ``strategies``."""
        examples = self._kit_examples or self.max_examples
        phases = [Phase.explicit, Phase.generate] if self._kit_expecting_failure else list(Phase)
        run = settings(
            max_examples=examples,
            deadline=None,
            database=None,
            phases=phases,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )(given(**strategies)(check))
        run()

    def draw_request(self, data: st.DataObject, chain: Sequence[bytes]) -> tuple[int, int, int]:
        """A requested height, ``max_blocks_num`` and ``max_blocks_size`` for ``chain``."""
        index = data.draw(st.integers(0, len(chain) - 1), label="requested height")
        num = data.draw(st.integers(1, len(chain) + 2), label="max_blocks_num")
        size = data.draw(st.integers(0, cost(chain) + 8), label="max_blocks_size")
        return index, num, size
