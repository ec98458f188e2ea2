"""The conformance kits: test doubles, the reusable layer tests and the store tests.

The doubles (:class:`MemoryVM`, :class:`BatchedMemoryVM`, :func:`memory_vm`) are plain code
and import nothing from the test tools. :class:`LayerConformance`
(:mod:`vmstack.conformance.kit`), its contract mixins (:mod:`vmstack.conformance.contracts`)
and :class:`Declaration` (:mod:`vmstack.conformance.declarations`), and
:class:`StoreConformance` (:mod:`vmstack.conformance.stores`) need pytest and Hypothesis
(the ``kit`` extra); each is imported on first use, so importing this package does not pull
the test tools into a program that only wants the doubles.
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
from vmstack.lazy import load_lazily

if TYPE_CHECKING:
    from vmstack.conformance.contracts import (
        BudgetContract,
        DecisionContract,
        ErrorContract,
        ForwardingContract,
        ParsingContract,
        WrappingContract,
    )
    from vmstack.conformance.declarations import Declaration
    from vmstack.conformance.kit import LayerConformance
    from vmstack.conformance.stacks import KitFault, KitStack
    from vmstack.conformance.stores import StoreConformance
    from vmstack.errors import KitDeclarationError

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

#: The kit's names, each with the module that defines it, imported on first use.
_KIT_NAMES = {
    "BudgetContract": "vmstack.conformance.contracts",
    "DecisionContract": "vmstack.conformance.contracts",
    "Declaration": "vmstack.conformance.declarations",
    "ErrorContract": "vmstack.conformance.contracts",
    "ForwardingContract": "vmstack.conformance.contracts",
    "KitDeclarationError": "vmstack.errors",
    "KitFault": "vmstack.conformance.stacks",
    "KitStack": "vmstack.conformance.stacks",
    "LayerConformance": "vmstack.conformance.kit",
    "ParsingContract": "vmstack.conformance.contracts",
    "StoreConformance": "vmstack.conformance.stores",
    "WrappingContract": "vmstack.conformance.contracts",
}


def __getattr__(name: str) -> object:
    return load_lazily(__name__, _KIT_NAMES, name)
