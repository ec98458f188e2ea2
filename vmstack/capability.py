"""Whether a VM batches: one sentinel carries it, one walk describes it.

The capability travels with the call (ARCHITECTURE.md, section 5, as avalanchego's
``ErrRemoteVMNotImplemented`` does): a layer whose VM below has the batched methods
forwards a batched call as one call, and a VM that cannot batch now raises
:class:`~vmstack.errors.BatchingNotImplemented` at once, which passes up unchanged to the
engine helper, which falls back. Whether the VM below HAS the methods is fixed when a layer
is built (:func:`has_batched_methods`); a layer over one without them refuses at once
itself. Nothing is subscribed to and nothing is cached, so a change below (a transition
layer gains the capability at its transition) is followed at the next call.

:func:`supports_batching` is the description, not a gate: it asks a stack from its top
what it can do now, for :func:`vmstack.describe_stack` and a layer's ``batching``.
"""

from __future__ import annotations

from typing import TypeGuard

from vmstack.interfaces import BatchedChainVM, iter_layers

__all__ = ["has_batched_methods", "supports_batching"]


def has_batched_methods(vm: object) -> TypeGuard[BatchedChainVM]:
    """Whether ``vm`` has both :class:`~vmstack.interfaces.BatchedChainVM` methods.

    The answer ``isinstance(vm, BatchedChainVM)`` gives, instance by instance, without its
    cost: a runtime-checkable protocol check takes tens of microseconds in CPython 3.11.
    """
    return callable(getattr(vm, "get_ancestors", None)) and callable(
        getattr(vm, "batched_parse_block", None)
    )


def supports_batching(vm: object) -> bool:
    """Whether ``vm`` answers batched calls now rather than refusing them.

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
