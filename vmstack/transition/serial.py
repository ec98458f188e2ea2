"""A view of a VM that offers only the ``ChainVM`` methods: a VM that cannot batch.

Wrapping a C-chain VM in :class:`SerialChainVM` gives the stack a pre-transition VM that
behaves like coreth's: the same store and codec, one block per call, and no batched
protocol at all (``isinstance(view, BatchedChainVM)`` is false).
"""

from __future__ import annotations

from vmstack.interfaces import Block, ChainVM

__all__ = ["SerialChainVM"]


class SerialChainVM:
    """Forwards the six ``ChainVM`` methods to ``inner`` and nothing else.

    It is not a layer of its own in :func:`vmstack.describe_stack` terms; it hides a
    capability. Blocks are the inner VM's blocks, unchanged.
    """

    batching = False

    def __init__(self, inner: ChainVM) -> None:
        self._inner = inner

    @property
    def inner(self) -> ChainVM:
        return self._inner

    def get_block(self, block_id: bytes) -> Block:
        return self._inner.get_block(block_id)

    def parse_block(self, data: bytes) -> Block:
        return self._inner.parse_block(data)

    def build_block(self) -> Block:
        return self._inner.build_block()

    def set_preference(self, block_id: bytes) -> None:
        self._inner.set_preference(block_id)

    def last_accepted(self) -> bytes:
        return self._inner.last_accepted()

    def get_block_id_at_height(self, height: int) -> bytes:
        return self._inner.get_block_id_at_height(height)
