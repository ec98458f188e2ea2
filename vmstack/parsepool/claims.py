"""The claim words a parse pool's batch is shared out by: workers take items from the front,
the caller from the back, until the two ends meet.

Two words of shared memory (:data:`FRONT`, :data:`BACK`), each carrying its batch number
above :data:`INDEX_BITS`, so a worker still on an old batch never moves a new batch's ends.
The workers take the front under a lock only they hold (:func:`claim_front`); the caller
takes the back without one (:func:`claim_back`): where the ends meet, a worker and the
caller may both run the last item (one result is kept), and no item is ever skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

__all__ = [
    "BACK",
    "FRONT",
    "INDEX_BITS",
    "INDEX_MASK",
    "LAST_BATCH",
    "claim_back",
    "claim_front",
    "word",
]

ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")

# The two claim words in shared memory: the next index the workers take (the front) and
# the lowest index the caller has taken (the back). Each word carries its batch number
# above INDEX_BITS, so a worker still on an old batch never moves a new batch's ends.
FRONT, BACK = 0, 1
INDEX_BITS = 32
INDEX_MASK = (1 << INDEX_BITS) - 1
# Batch numbers run from 1 to this and wrap (0 is no batch; the words stay positive).
LAST_BATCH = (1 << 30) - 1


def word(batch: int, index: int) -> int:
    """A claim word: ``index`` of ``batch``."""
    return (batch << INDEX_BITS) | index


def claim_front(
    claims: Any,
    workers_lock: Any,
    batch: int,
    function: Callable[[ItemT], ResultT],
    items: Sequence[ItemT],
) -> list[tuple[int, ResultT]]:
    """A worker's claims: run ``function`` over the items of ``batch`` it takes from the
    front, one at a time, until the front meets the caller's back or the batch is no longer
    the current one; ``(index, result)`` pairs.

    Workers take the front under ``workers_lock``, a lock only workers hold (the caller
    never takes it, so a worker killed while holding it blocks no one but the pool's other
    workers, which the caller stops when it finds the dead one). The caller's back needs no
    lock: where the ends meet, a worker and the caller may both take the last item (one
    result is kept), and no item is ever skipped.
    """
    done: list[tuple[int, ResultT]] = []
    while True:
        with workers_lock:
            front, back = claims[FRONT], claims[BACK]
            if front >> INDEX_BITS != batch or back >> INDEX_BITS != batch:
                return done
            index = front & INDEX_MASK
            if index >= min(back & INDEX_MASK, len(items)):
                return done
            claims[FRONT] = front + 1
        done.append((index, function(items[index])))


def claim_back(
    claims: Any, batch: int, function: Callable[[ItemT], ResultT], items: Sequence[ItemT]
) -> list[tuple[int, ResultT]]:
    """The caller's claims: run ``function`` over the items of ``batch`` from the back, one
    at a time, until it reaches the workers' front; ``(index, result)`` pairs. When it
    returns, every item is taken: by the caller, or by a worker below the front it read (a
    front of another batch counts as none taken, and the caller runs the whole batch)."""
    done: list[tuple[int, ResultT]] = []
    index = len(items)
    while index > 0:
        front = claims[FRONT]
        taken = front & INDEX_MASK if front >> INDEX_BITS == batch else 0
        if index - 1 < taken:
            break
        index -= 1
        claims[BACK] = word(batch, index)
        done.append((index, function(items[index])))
    return done
