"""Where a chain build's time goes: one build timed step by step, for the chain-build row of
:mod:`vmstack.benchmarks.state` to say so, measured, when it misses its goal.

:func:`timed_phases` runs a build with a timer around each coarse step the generator drives
(the :class:`~vmstack.cchain.vm.CChainVM` methods it reaches through the stack, the
transaction sequence's signing, and the functions a block's assembly calls), put in place
for that one run and taken away after it, even when the build raises. Each step's time is
its own: a step timed inside another (the state root inside the building of a block) is
taken out of the outer one, so the phases add up to the build, the rest (the generator's
loop, the layers above the VM) being the build's time less them all. A timer costs two
clock reads and a few list operations around a call of tens of microseconds or more.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from vmstack.cchain import block as block_module
from vmstack.cchain import building as building_module
from vmstack.cchain.generate import TransactionSequence
from vmstack.cchain.state import AccountTrie
from vmstack.cchain.vm import CChainVM

__all__ = ["PHASES", "REST", "timed_phases"]

#: The steps timed, as ``(owner, attribute, phase)``: a method of a class or a function of
#: a module that the build calls through that name, and the phase its time counts to.
_STEPS: tuple[tuple[Any, str, str], ...] = (
    (TransactionSequence, "slice", "drawing and signing"),
    (CChainVM, "add_transactions", "mempool checks"),
    (CChainVM, "build_block", "assembling (header, body, block)"),
    (block_module, "execute_transactions", "execution"),
    (block_module, "encode_receipt_forms", "commitments (body, receipts)"),
    (block_module, "_commit", "commitments (body, receipts)"),
    (building_module, "apply_block", "state transition"),
    (CChainVM, "_verify", "verification"),
    (CChainVM, "set_preference", "preference"),
    (CChainVM, "_accept", "accept and its write"),
)
#: The property timed as the account trie's root (computed once per block, then cached).
_ROOT_PHASE = "account trie root"

#: Every phase, in the order a block goes through them.
PHASES: tuple[str, ...] = tuple(dict.fromkeys([phase for _, _, phase in _STEPS] + [_ROOT_PHASE]))
#: What the build spends outside every timed step.
REST = "generator and layers above the VM"


class _Clock:
    """Exclusive time per phase: a step's time less that of the steps it called."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = dict.fromkeys(PHASES, 0.0)
        self._inner: list[float] = []

    def timed(self, function: Callable[..., Any], phase: str) -> Callable[..., Any]:
        spent, inner = self.spent, self._inner
        clock = time.perf_counter

        def step(*args: Any, **kwargs: Any) -> Any:
            inner.append(0.0)
            start = clock()
            try:
                return function(*args, **kwargs)
            finally:
                elapsed = clock() - start
                nested = inner.pop()
                spent[phase] += elapsed - nested
                if inner:
                    inner[-1] += elapsed

        return step


@contextmanager
def _patched(clock: _Clock) -> Iterator[None]:
    originals: list[tuple[Any, str, Any]] = []
    try:
        for owner, name, phase in _STEPS:
            original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
            originals.append((owner, name, original))
            setattr(owner, name, clock.timed(original, phase))
        root = AccountTrie.__dict__["root_hash"]
        originals.append((AccountTrie, "root_hash", root))
        AccountTrie.root_hash = property(clock.timed(root.fget, _ROOT_PHASE))  # type: ignore[method-assign,assignment]
        yield
    finally:
        for owner, name, original in reversed(originals):
            setattr(owner, name, original)


def timed_phases(build: Callable[[], object]) -> tuple[float, dict[str, float]]:
    """Run ``build`` once with every step timed: ``(its seconds, seconds by phase)``, the
    phases of :data:`PHASES` and :data:`REST` (the build's time less all of them)."""
    clock = _Clock()
    with _patched(clock):
        start = time.perf_counter()
        build()
        total = time.perf_counter() - start
    spent = dict(clock.spent)
    spent[REST] = total - sum(spent.values())
    return total, spent
