"""Submitting transactions to a stack: :func:`submit_transactions`, the one entry point.

It speaks only the mempool's protocols (:class:`~vmstack.interfaces.Mempool`,
:class:`~vmstack.interfaces.SubmitsTransactions`) and the walk down a stack, so every floor
may call it: the stack's user, and the process boundary's server submitting for a client.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from vmstack.interfaces import ChainVM, Mempool, SubmitsTransactions, find_layer, iter_layers

__all__ = ["find_mempool", "submit_transactions"]


def find_mempool(vm: object) -> Mempool:
    """The first layer that is a :class:`~vmstack.interfaces.Mempool`, from ``vm`` down;
    ``ValueError`` if no layer is one (the one refusal of a stack without a mempool)."""
    try:
        return find_layer(vm, Mempool)  # type: ignore[type-abstract]
    except LookupError as error:
        raise ValueError(f"no layer has a mempool (add_transactions): {error}") from None


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
