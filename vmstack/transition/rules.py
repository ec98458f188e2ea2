"""The transition rules, as pure functions of timestamps.

A chain switches from a ``pre`` VM to a ``post`` VM at ``transition_time`` (unix seconds):

1. The transition block is the first block whose timestamp is at or after
   ``transition_time``: its parent's timestamp is before it, its own is not.
2. Timestamps never go down along a chain, so every descendant of the transition block is
   at or after ``transition_time`` too: the transition is accepted exactly when the last
   accepted block's timestamp is at or after ``transition_time``. The state is derived from
   the accepted chain itself, so it is persisted atomically with the acceptance of the
   transition block and a restarted node derives the same state.
3. Until the transition is accepted, ``pre`` builds, parses and verifies every block, the
   transition block included; from then on ``post`` does.
4. A block whose parent's timestamp is already at or after ``transition_time`` builds on the
   transition. It verifies and builds as any child of a processing block, whether or not
   this node has accepted the transition block: ``pre`` judges it until then, and when the
   transition block is accepted ``post`` verifies every processing descendant again,
   parents first, and decides them from then on. A verdict never depends on local
   acceptance (both VMs judge by the same chain rules). Parsing records nothing, so a
   batch parses the same in any order, any number of times (a bootstrapping node parses
   the whole chain before it executes any of it).
5. Batched calls go to the VM of the moment: ``post`` serves every block, those before the
   transition included, because both VMs keep their blocks in one store.
"""

from __future__ import annotations

__all__ = [
    "builds_on_transition",
    "is_transition_block",
    "transition_accepted",
]


def is_transition_block(parent_timestamp: int, timestamp: int, transition_time: float) -> bool:
    """Rule 1: the first block at or after ``transition_time``."""
    return parent_timestamp < transition_time <= timestamp


def transition_accepted(last_accepted_timestamp: int, transition_time: float) -> bool:
    """Rule 2: whether the node has accepted the transition block."""
    return last_accepted_timestamp >= transition_time


def builds_on_transition(parent_timestamp: int, transition_time: float) -> bool:
    """Rule 4: whether a block's parent is the transition block or one of its descendants."""
    return parent_timestamp >= transition_time
