"""The conformance kits: test doubles, the reusable layer tests and the store tests.

The doubles (:class:`MemoryVM`, :class:`BatchedMemoryVM`, :func:`memory_vm`) are plain code
and import nothing from the test tools. :class:`LayerConformance`, its contract mixins and
:class:`Declaration` live in :mod:`vmstack.conformance.kit`, :class:`StoreConformance` in
:mod:`vmstack.conformance.stores`; both need pytest and Hypothesis (the ``kit`` extra) and
are imported on first use, so importing this package does not pull the test tools into a
program that only wants the doubles.
"""

from typing import TYPE_CHECKING

from vmstack.conformance.doubles import (
    GENESIS_PARENT,
    BatchedMemoryVM,
    Call,
    Fetch,
    MemoryBlock,
    MemoryVM,
    memory_vm,
)

if TYPE_CHECKING:
    from vmstack.conformance.kit import (
        BudgetContract,
        DecisionContract,
        Declaration,
        ErrorContract,
        ForwardingContract,
        KitDeclarationError,
        KitFault,
        KitStack,
        LayerConformance,
        ParsingContract,
        WrappingContract,
    )
    from vmstack.conformance.stores import StoreConformance

__all__ = [
    "BatchedMemoryVM",
    "BudgetContract",
    "Call",
    "DecisionContract",
    "Declaration",
    "ErrorContract",
    "Fetch",
    "ForwardingContract",
    "GENESIS_PARENT",
    "KitDeclarationError",
    "KitFault",
    "KitStack",
    "LayerConformance",
    "MemoryBlock",
    "MemoryVM",
    "ParsingContract",
    "StoreConformance",
    "WrappingContract",
    "memory_vm",
]

_KIT_NAMES = frozenset({
    "BudgetContract", "DecisionContract", "Declaration", "ErrorContract", "ForwardingContract",
    "KitDeclarationError", "KitFault", "KitStack", "LayerConformance", "ParsingContract",
    "WrappingContract"})


def __getattr__(name: str) -> object:
    if name == "StoreConformance":
        from vmstack.conformance import stores

        return stores.StoreConformance
    if name in _KIT_NAMES:
        from vmstack.conformance import kit

        return getattr(kit, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
