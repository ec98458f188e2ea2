"""Submitting transactions to a stack: :func:`submit_transactions`, the one entry point.

It speaks only the mempool's protocols (:class:`~vmstack.interfaces.Mempool`,
:class:`~vmstack.interfaces.SubmitsTransactions`) and the walk down a stack, so every floor
may call it: the stack's user, and the process boundary's server submitting for a client.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from vmstack.interfaces import ChainVM, Mempool, SubmitsTransactions, find_layer, iter_layers

__all__ = ["MempoolHandle", "find_mempool", "submit_transactions"]


def find_mempool(vm: object) -> Mempool:
    """The stack's mempool, from ``vm`` down: the first layer that is a
    :class:`~vmstack.interfaces.Mempool`; ``ValueError`` if no layer is one (the one refusal
    of a stack without a mempool).

    Below a layer that hands the chain from one VM to another (a transition layer: it has
    ``pre`` and ``post`` and its ``inner`` is the one in charge), the answer is a
    :class:`MempoolHandle` over that layer, which finds the mempool of the VM in charge at
    each call, so a handle taken before the transition stays valid after it. Otherwise it
    is the layer itself."""
    for layer in iter_layers(vm):
        if isinstance(layer, Mempool):
            return layer
        if hasattr(layer, "pre") and hasattr(layer, "post"):
            handle = MempoolHandle(layer)
            handle.current()  # refused here, at once, if neither side has one
            return handle
    try:
        return find_layer(vm, Mempool)  # type: ignore[type-abstract]
    except LookupError as error:
        raise ValueError(f"no layer has a mempool (add_transactions): {error}") from None


class MempoolHandle:
    """The mempool of whichever VM is in charge below ``switch`` (a layer whose ``inner``
    changes, as a transition layer's does), found again at every call: a
    :class:`~vmstack.interfaces.Mempool` that stays valid across the transition. Besides
    the protocol it offers what the C-chain VM's mempool does (``pending()``,
    ``queued()``, ``flavour``, ``add_ext_data``, ``add_withdrawals``), each
    ``AttributeError`` where the VM in charge lacks it."""

    def __init__(self, switch: object) -> None:
        self._switch = switch

    def current(self) -> Mempool:
        """The mempool of the VM in charge now."""
        try:
            return find_layer(getattr(self._switch, "inner"), Mempool)  # type: ignore[type-abstract]  # noqa: B009
        except LookupError as error:
            raise ValueError(f"no layer has a mempool (add_transactions): {error}") from None

    @property
    def chain_id(self) -> int:
        return self.current().chain_id

    @property
    def gas_limit(self) -> int:
        return self.current().gas_limit

    @property
    def flavour(self) -> Any:
        return getattr(self.current(), "flavour")  # noqa: B009

    def pending_transactions(self) -> int:
        return self.current().pending_transactions()

    def next_nonce(self, address: bytes) -> int:
        return self.current().next_nonce(address)

    def add_transactions(self, transactions: Iterable[Any]) -> None:
        self.current().add_transactions(transactions)

    def take_transactions(self) -> list[Any]:
        return self.current().take_transactions()

    def pending(self) -> list[Any]:
        """The pending transactions of the mempool in charge, read without draining."""
        return list(getattr(self.current(), "pending")())  # noqa: B009

    def queued(self) -> list[Any]:
        """The queued transactions of the mempool in charge, read without draining."""
        return list(getattr(self.current(), "queued")())  # noqa: B009

    def add_ext_data(self, ext_data: bytes) -> None:
        getattr(self.current(), "add_ext_data")(ext_data)  # noqa: B009

    def add_withdrawals(self, withdrawals: Iterable[Any]) -> None:
        getattr(self.current(), "add_withdrawals")(withdrawals)  # noqa: B009

    def __repr__(self) -> str:
        return f"MempoolHandle(over {type(self._switch).__name__})"


def submit_transactions(vm: ChainVM, transactions: Iterable[Any]) -> int:
    """Queue signed ``transactions`` for the blocks ``vm``'s stack builds; the number queued.

    They go to the mempool of the VM in charge now (the topmost layer that is a
    :class:`~vmstack.interfaces.Mempool`; across a transition layer, the pre VM's until the
    transition block is accepted, when the pending ones move to the post VM's). A
    transaction no block could carry now (a missing or bad signature, another chain, gas
    below intrinsic, a nonce below the sender's, a balance too low, a duplicate of a pending
    one) is :class:`~vmstack.errors.InvalidTransaction` (a ``ValueError``) naming the reason,
    and nothing of the call is queued; a nonce above the sender's next one waits. A stack
    whose C-chain part is served in another process submits them there, through the layer
    that has ``submit_transactions`` (a :class:`~vmstack.wrappers.rpc.VMClient`: one round
    trip, the same refusals); a stack with neither is ``ValueError``.
    """
    batch = list(transactions)
    try:
        mempool = find_mempool(vm)
    except ValueError:
        for layer in iter_layers(vm):
            if isinstance(layer, SubmitsTransactions):
                return int(layer.submit_transactions(batch))
        raise
    mempool.add_transactions(batch)
    return len(batch)
