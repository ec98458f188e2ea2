"""The conformance kit: test doubles and the reusable layer tests (DESIGN section 8)."""

from vmstack.conformance.doubles import (
    GENESIS_PARENT,
    BatchedMemoryVM,
    Call,
    MemoryBlock,
    MemoryVM,
    memory_vm,
)

__all__ = ["GENESIS_PARENT", "BatchedMemoryVM", "Call", "MemoryBlock", "MemoryVM", "memory_vm"]
