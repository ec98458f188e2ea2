"""What every layer shares: the wrapped block's fields and the refusal.

It sits below every layer (the transition layer and the wrappers alike), on the ground
floor beside ``interfaces.py`` (ARCHITECTURE.md, section 1).

A layer's blocks wrap the inner block (:class:`WrappedBlock`), so that
``verify/accept/reject`` pass through the layer on their way down. A layer over a VM
without the batched methods refuses a batched call at once with :func:`refusal`, calling
nothing below, so the engine helper falls back to one call per block through the whole
stack; a VM that has them and cannot batch now raises the same sentinel itself, and it
passes up unchanged (ARCHITECTURE.md, section 5). A pass-through layer gets all of this
from :class:`~vmstack.wrappers.passthrough.PassThroughVM`.
"""

from __future__ import annotations

import abc

from vmstack.errors import BatchingNotImplemented
from vmstack.interfaces import Block, ChainVM

__all__ = ["WrappedBlock", "refusal"]


def refusal(layer: str, inner: ChainVM) -> BatchingNotImplemented:
    """The error a layer raises for a batched call when the VM below cannot batch."""
    return BatchingNotImplemented(
        f"{layer} cannot batch: the VM below it ({type(inner).__name__}) does not"
    )


class WrappedBlock(abc.ABC):
    """A layer's block: forwards ``id``, ``parent_id``, ``height``, ``timestamp`` and the
    bytes to the block it wraps, which :attr:`inner` exposes.

    Subclasses write out ``verify``, ``accept`` and ``reject``, each reaching the inner
    block's method exactly once.
    """

    __slots__ = ("_inner",)

    def __init__(self, inner: Block) -> None:
        self._inner = inner

    @property
    def inner(self) -> Block:
        """The block of the layer below."""
        return self._inner

    @property
    def id(self) -> bytes:
        return self._inner.id

    @property
    def parent_id(self) -> bytes:
        return self._inner.parent_id

    @property
    def height(self) -> int:
        return self._inner.height

    @property
    def timestamp(self) -> int:
        return self._inner.timestamp

    def __bytes__(self) -> bytes:
        return bytes(self._inner)

    @abc.abstractmethod
    def verify(self) -> None:
        """Verify the inner block (raising what it raises)."""

    @abc.abstractmethod
    def accept(self) -> None:
        """Accept the inner block (raising what it raises)."""

    @abc.abstractmethod
    def reject(self) -> None:
        """Reject the inner block (raising what it raises)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._inner!r})"
