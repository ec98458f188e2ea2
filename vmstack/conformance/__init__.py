"""The conformance kit: test doubles and the reusable layer tests.

The doubles (:class:`MemoryVM`, :class:`BatchedMemoryVM`, :func:`memory_vm`) are plain code
and import nothing from the test tools. :class:`LayerConformance`, its contract mixins and
:class:`Declaration` live in :mod:`vmstack.conformance.kit`, which needs pytest and
Hypothesis; it is imported on first use, so importing this package does not pull the test
tools into a program that only wants the doubles.
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
    "WrappingContract",
    "memory_vm",
]

_KIT_NAMES = frozenset({
    "BudgetContract", "DecisionContract", "Declaration", "ErrorContract", "ForwardingContract",
    "KitDeclarationError", "KitFault", "KitStack", "LayerConformance", "ParsingContract",
    "WrappingContract"})


def __getattr__(name: str) -> object:
    if name in _KIT_NAMES:
        from vmstack.conformance import kit

        return getattr(kit, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
