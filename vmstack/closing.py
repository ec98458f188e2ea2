"""Closing a built stack: :func:`close_stack` closes every layer that holds something of
its own (worker processes, a connection), from the top of the stack down.

It knows no layer: a layer that has a ``close()`` is closed, so this module imports only
the walk down a stack, and every floor may call it (the process boundary's server closes
the stack it serves with it).
"""

from __future__ import annotations

from vmstack.interfaces import ChainVM, iter_layers

__all__ = ["close_stack"]


def close_stack(vm: ChainVM) -> None:
    """Close the stack whose top is ``vm``: every layer that has a ``close()`` (the
    proposer layer stops its parse pool's worker processes; a
    :class:`~vmstack.wrappers.rpc.VMClient` closes its connection) is closed, top to
    bottom. The store is the caller's to close. Closing twice is harmless; a closed
    stack's layers still answer in this process, parsing serially."""
    for layer in iter_layers(vm):
        close = getattr(layer, "close", None)
        if callable(close):
            close()
