"""The transition layer: a serial-only ``pre`` VM hands the chain to a batched ``post`` VM."""

from vmstack.transition.rules import (
    builds_on_transition,
    is_transition_block,
    transition_accepted,
)
from vmstack.transition.serial import SerialChainVM
from vmstack.transition.vm import TransitionBlock, TransitionVM

__all__ = [
    "SerialChainVM",
    "TransitionBlock",
    "TransitionVM",
    "builds_on_transition",
    "is_transition_block",
    "transition_accepted",
]
