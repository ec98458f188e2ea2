"""Whether a VM batches: the one walk that asks a stack, and the one answer a layer keeps.

:func:`supports_batching` asks a stack from its top: a VM without both batched methods
cannot batch; the first layer with a ``batching`` attribute answers; a VM at the bottom
with the methods batches (ARCHITECTURE.md, section 3, rule 8).

:class:`BatchingWatch` is what a layer keeps of the VM below it. The answer is computed
ONCE, when the layer is built, and updated only when it changes: a VM whose capability can
change says when, through the optional :class:`~vmstack.interfaces.AnnouncesBatching`
protocol (``watch_batching``), as :class:`~vmstack.transition.TransitionVM` does at its
transition; a pass-through layer subscribes to the VM below and re-announces to the layers
above it. A VM below that does not offer ``watch_batching`` (a user's layer or test double
with a live ``batching``) is asked at each call, as its capability may change at any time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeGuard

from vmstack.interfaces import BatchedChainVM, iter_layers

__all__ = ["BatchingWatch", "fixed_capability", "has_batched_methods", "supports_batching"]


def has_batched_methods(vm: object) -> TypeGuard[BatchedChainVM]:
    """Whether ``vm`` has both :class:`~vmstack.interfaces.BatchedChainVM` methods.

    The answer ``isinstance(vm, BatchedChainVM)`` gives, instance by instance, without its
    cost: a runtime-checkable protocol check takes tens of microseconds in CPython 3.11, and
    this question is asked on every batched call of every layer.
    """
    return (callable(getattr(vm, "get_ancestors", None))
            and callable(getattr(vm, "batched_parse_block", None)))


def supports_batching(vm: object) -> bool:
    """Whether ``vm`` answers batched calls rather than refusing them.

    A VM without the :class:`~vmstack.interfaces.BatchedChainVM` methods cannot batch. A VM
    with them says so with a ``batching`` attribute when it has one (a pass-through layer
    over a VM that cannot batch has ``batching = False``); a layer without one (it has an
    ``inner``) batches when the VM below it does; a VM at the bottom with the methods
    batches.
    """
    for layer in iter_layers(vm):
        if not has_batched_methods(layer):
            return False
        declared = getattr(layer, "batching", None)
        if declared is not None:
            return bool(declared)
    return True


def fixed_capability(callback: Callable[[bool], None]) -> bool:
    """The ``watch_batching`` of a VM whose ``batching`` never changes (a VM at the bottom,
    a layer that answers batched calls itself): nothing will be announced, and a layer
    above may keep the answer it read. Such a VM says
    ``watch_batching = staticmethod(fixed_capability)``."""
    return True


class BatchingWatch:
    """Whether the VM ``below`` a layer batches now, kept current for the layer.

    Built once with the layer. A VM below without the batched methods never batches. One
    that offers ``watch_batching`` is asked once, here, and then tells the watch of every
    change. Any other VM below is asked at each call (:func:`supports_batching`), so a
    user's layer or double whose live ``batching`` property offers no subscription is still
    answered right. :meth:`watch` lets the layer offer ``watch_batching`` itself: the
    watch re-announces every change to the layers above.
    """

    __slots__ = ("_batched", "_known", "_subscribers")

    def __init__(self, below: object) -> None:
        self._batched = below if has_batched_methods(below) else None
        self._subscribers: list[Callable[[bool], None]] = []
        #: The answer while it is kept current; ``None`` when the VM below is asked live.
        self._known: bool | None = False
        if self._batched is not None:
            subscribe = getattr(self._batched, "watch_batching", None)
            announces = callable(subscribe) and bool(subscribe(self._changed))
            self._known = supports_batching(self._batched) if announces else None

    @property
    def now(self) -> bool:
        """Whether the VM below answers batched calls now."""
        known = self._known
        if known is None:
            return supports_batching(self._batched)
        return known

    def ready(self) -> BatchedChainVM | None:
        """The VM below, to forward a batched call to, if it batches now; else ``None``
        (the layer then refuses the call at once, calling nothing below)."""
        return self._batched if self.now else None

    def watch(self, callback: Callable[[bool], None]) -> bool:
        """Call ``callback(batching)`` whenever the answer changes, and return True; or
        return False, subscribing nothing, when the VM below is asked live (then so must
        the caller be). The ``watch_batching`` of a layer that keeps this watch."""
        if self._known is None:
            return False
        self._subscribers.append(callback)
        return True

    def _changed(self, batching: bool) -> None:
        if batching != self._known:
            self._known = batching
            for callback in tuple(self._subscribers):
                callback(batching)
