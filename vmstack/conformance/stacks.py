"""The kit's stacks under test: :class:`KitStack`, the simulated time they run on, the
fault the kit injects below a layer, and the parametrizations over the inner VM's
capability.

Every stack runs on a :class:`~vmstack.clock.SimClock` that starts at
:data:`KIT_START_TIME` and moves by :data:`KIT_FETCH_COST` with every block read below the
layer, so a time budget is observable and a run never depends on the machine's speed.

This module imports pytest: it is for test suites.
"""

from __future__ import annotations

import hashlib

import attrs
import pytest

from vmstack.clock import SimClock
from vmstack.conformance.doubles import MemoryVM
from vmstack.interfaces import ChainVM

__all__ = [
    "CAPABILITIES",
    "INNER_BATCHES",
    "INNER_SERIAL",
    "KIT_FETCH_COST",
    "KIT_START_TIME",
    "KIT_TIME_BUDGET",
    "KitFault",
    "KitStack",
    "UNKNOWN_ID",
]

#: Where the kit's simulated clock starts (seconds).
KIT_START_TIME = 1_700_000_000.0
#: What one block read below the layer costs on the kit's clock (seconds): a power of two,
#: so sums of it are exact in floating point.
KIT_FETCH_COST = 2.0**-10
#: The time budget of the kit's requests that are not about time: about a thousand block
#: reads, more than any of those requests needs.
KIT_TIME_BUDGET = 1.0

#: The ID of a block no VM of the kit has.
UNKNOWN_ID = hashlib.sha256(b"vmstack conformance: a block nobody has").digest()

#: Run a kit test over an inner VM that batches and over one that does not (or over only
#: one of them).
CAPABILITIES = pytest.mark.parametrize(
    "inner_batches", [True, False], ids=["inner-batches", "inner-does-not-batch"]
)
INNER_BATCHES = pytest.mark.parametrize("inner_batches", [True], ids=["inner-batches"])
INNER_SERIAL = pytest.mark.parametrize("inner_batches", [False], ids=["inner-does-not-batch"])


class KitFault(RuntimeError):
    """An error the kit injects below the layer; the layer must let the very object up."""


@attrs.frozen
class KitStack:
    """One stack under test: the layer (``layer``) over the recording VM (``inner``).

    ``ids`` is the chain as the layer serves it, genesis first and the tip last, so
    ``ids[h]`` is the block at height ``h``. ``clock`` is the simulated clock of the inner VM;
    every block read below costs :data:`KIT_FETCH_COST` on it.
    """

    layer: ChainVM
    inner: MemoryVM
    ids: tuple[bytes, ...]
    clock: SimClock

    @property
    def tip(self) -> bytes:
        """The newest block of the chain (the last accepted one)."""
        return self.ids[-1]

    @property
    def below(self) -> object:
        """The VM directly below the layer, as the layer exposes it (``inner``, asked now),
        or the recording VM for a layer that exposes none."""
        return getattr(self.layer, "inner", self.inner)

    def settle(self) -> None:
        """Forget the inner VM's records, so a test sees only the calls it causes."""
        self.inner.forget_records()
