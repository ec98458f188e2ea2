"""What every pass-through layer shares: the wrapped block's fields and the capability rule.

A pass-through layer (tracing, metering, a user's logging layer) has the same shape
everywhere (ARCHITECTURE.md, section 5):

- it takes ``inner`` first and everything else keyword-only;
- it keeps a :class:`~vmstack.capability.BatchingWatch` of ``inner``, made at
  construction: whether the VM below batches is computed once and updated when that VM
  announces a change (a transition layer cannot batch before its transition and can after
  it); a VM below that announces nothing is asked at each call;
- it always has both batched methods. Each call takes ``watch.ready()``: ``None`` when the
  VM below cannot batch now, and the call raises
  :class:`~vmstack.errors.BatchingNotImplemented` at once (made by :func:`refusal`), without
  calling anything below and without a span or a metric, so the engine helper falls back to
  one call per block through the whole stack; otherwise it is forwarded as exactly one call;
- its ``batching`` property (which :func:`vmstack.batching.supports_batching` reads) is
  ``watch.now``, and its ``watch_batching`` is ``watch.watch``, so the layers above it
  learn of a change in turn (the :class:`~vmstack.interfaces.AnnouncesBatching` protocol);
- every block it returns wraps the inner block (a :class:`WrappedBlock`), so that
  ``verify/accept/reject`` pass through the layer on their way down.

Every forwarded method is written out in the layer itself; nothing is forwarded implicitly.
"""

from __future__ import annotations

import abc

from vmstack.capability import BatchingWatch
from vmstack.errors import BatchingNotImplemented
from vmstack.interfaces import Block, ChainVM

__all__ = ["BatchingWatch", "WrappedBlock", "refusal"]


def refusal(layer: str, inner: ChainVM) -> BatchingNotImplemented:
    """The error a layer raises for a batched call when the VM below cannot batch."""
    return BatchingNotImplemented(
        f"{layer} cannot batch: the VM below it ({type(inner).__name__}) does not")


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
