"""TransitionVM through the conformance kit, before its transition, after it, and across it.

The layer's capability changes with the transition: before it the VM in charge (``pre``)
cannot batch and the layer refuses batched calls even over a VM that batches; after it the
layer forwards them to ``post``. The kit reads the capability from the VM directly below the
layer (``inner``, asked at each call), so the same kit, with no declaration, checks each
side of the change.
"""

from __future__ import annotations

import math
from typing import ClassVar

import pytest

from vmstack.conformance import LayerConformance, MemoryVM
from vmstack.conformance.stacks import KIT_START_TIME
from vmstack.interfaces import ChainVM
from vmstack.transition import SerialChainVM, TransitionVM

#: Seconds between the blocks the kit grows through the layer.
STEP = 2.0


class _TransitionKit(LayerConformance):
    """The kit over ``TransitionVM(SerialChainVM(inner), inner)``, the chain grown through
    the layer one block every :data:`STEP` seconds."""

    #: When the transition happens, on the kit's clock.
    transition_time: ClassVar[float]

    def wrap(self, inner: ChainVM) -> ChainVM:
        assert isinstance(inner, MemoryVM)
        return TransitionVM(
            SerialChainVM(inner), inner, transition_time=self.transition_time, clock=inner.clock
        )

    def extend_chain(self, layer: ChainVM, inner: MemoryVM, count: int) -> list[bytes]:
        ids = []
        for _ in range(count):
            inner.clock.advance(STEP)  # type: ignore[attr-defined]
            block = layer.build_block()
            block.verify()
            layer.set_preference(block.id)
            block.accept()
            ids.append(block.id)
        return ids


@pytest.mark.thorough  # the whole kit again, over another arrangement: the full suite runs it
class TestBeforeTheTransition(_TransitionKit):
    """The transition never comes: ``pre`` is in charge of every chain the kit grows."""

    transition_time = math.inf

    def extend_chain(self, layer: ChainVM, inner: MemoryVM, count: int) -> list[bytes]:
        ids = super().extend_chain(layer, inner, count)
        assert isinstance(layer, TransitionVM) and not layer.transitioned
        return ids


@pytest.mark.thorough  # the whole kit again, over another arrangement: the full suite runs it
class TestAfterTheTransition(_TransitionKit):
    """The first block the kit grows is the transition block: ``post`` is in charge of
    every chain of one block or more."""

    transition_time = KIT_START_TIME + 1

    def extend_chain(self, layer: ChainVM, inner: MemoryVM, count: int) -> list[bytes]:
        ids = super().extend_chain(layer, inner, count)
        assert isinstance(layer, TransitionVM) and layer.transitioned is (count > 0)
        return ids


class TestAcrossTheTransition(_TransitionKit):
    """The thirteenth block is the transition block: the chains the kit draws (1 to 40
    blocks) fall on both sides of it, and its default chain of 24 blocks has crossed it."""

    transition_time = KIT_START_TIME + 12 * STEP + 1


@pytest.mark.thorough  # the whole kit again, over another arrangement: the full suite runs it
class TestTransitionedAtGenesis(LayerConformance):
    """A transition at time 0 hands the chain to post from genesis on: a pure pass-through."""

    def wrap(self, inner: ChainVM) -> ChainVM:
        return TransitionVM(SerialChainVM(inner), inner, transition_time=0)
