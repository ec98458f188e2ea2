"""TransitionVM through the conformance kit, where the kit applies: after the transition."""

from __future__ import annotations

from vmstack.conformance import LayerConformance, MemoryVM
from vmstack.conformance.kit import KIT_START_TIME
from vmstack.interfaces import ChainVM
from vmstack.transition import SerialChainVM, TransitionVM


class TestTransitionedAtGenesis(LayerConformance):
    """A transition at time 0 hands the chain to post from genesis on: a pure pass-through."""

    def wrap(self, inner: ChainVM) -> ChainVM:
        return TransitionVM(SerialChainVM(inner), inner, transition_time=0)


class TestTransitionBuiltThroughTheLayer(LayerConformance):
    """A chain built through the layer, whose first block (built by pre) is the transition
    block, so every chain the kit draws has passed the transition."""

    def wrap(self, inner: ChainVM) -> ChainVM:
        return TransitionVM(SerialChainVM(inner), inner, transition_time=KIT_START_TIME + 1)

    def extend_chain(self, layer: ChainVM, inner: MemoryVM, count: int) -> list[bytes]:
        ids = []
        for _ in range(count):
            inner.clock.advance(2.0)  # type: ignore[attr-defined]
            block = layer.build_block()
            block.verify()
            layer.set_preference(block.id)
            block.accept()
            ids.append(block.id)
        assert isinstance(layer, TransitionVM) and layer.transitioned is (count > 0)
        return ids
