"""WaitForEvent on a server: :class:`Waiters`, the calls waiting for something to build.

avalanchego's node holds WaitForEvent calls open until the VM has something to build. Each
waits on a thread of its own: the server's pool has :data:`MAX_WAITERS` threads beside its
workers, and one call more than that is refused at once, so waiting calls never take the
threads Health, Shutdown and the rest are answered on. A wait looks at the served mempool
every :data:`WAIT_FOR_EVENT_POLL` seconds (under the VM's lock, briefly) and ends on a
cancelled call, a Shutdown or a closing server.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import grpc

from vmstack.errors import VMStackError
from vmstack.interfaces import ChainVM
from vmstack.wrappers.rpc import vm_pb2

__all__ = ["MAX_WAITERS", "WAIT_FOR_EVENT_POLL", "Waiters", "pending_transactions"]

#: How often a waiting WaitForEvent looks at the mempool, in seconds.
WAIT_FOR_EVENT_POLL = 0.05
#: The WaitForEvent calls that may wait at once; each holds a thread of its own, beside the
#: server's workers, and one more is refused (``RESOURCE_EXHAUSTED``) at once.
MAX_WAITERS = 32


def pending_transactions(vm: ChainVM) -> int:
    """How many transactions the served stack's mempool holds (``ValueError`` without one)."""
    from vmstack.submission import find_mempool

    pending = getattr(find_mempool(vm), "pending_transactions", None)
    if not callable(pending):
        raise ValueError("the served stack's mempool does not say how many are pending")
    count: int = pending()
    return count


class Waiters:
    """The WaitForEvent calls of one server: ``served`` gives the VM under the server's
    ``lock`` (``None``: nothing served, or shut down), ``stopped`` whether waits must end,
    ``stop_event`` is set when they must (a wait sleeps on it), ``on_refusal`` hears of a
    call refused for the bound."""

    def __init__(
        self,
        lock: threading.Lock,
        served: Callable[[], ChainVM | None],
        stopped: Callable[[], bool],
        stop_event: threading.Event,
        on_refusal: Callable[[str, BaseException], None] | None,
    ) -> None:
        self._lock = lock
        self._served = served
        self._stopped = stopped
        self._stop_event = stop_event
        self._on_refusal = on_refusal
        self._count = 0
        self._count_lock = threading.Lock()

    def wait(self, context: grpc.ServicerContext) -> vm_pb2.WaitForEventResponse:
        """Answer ``MESSAGE_BUILD_BLOCK`` once the served mempool holds a transaction, or
        nothing once the wait ends; a call past :data:`MAX_WAITERS` is refused."""
        with self._count_lock:
            if self._count >= MAX_WAITERS:
                refused = f"WaitForEvent: {MAX_WAITERS} calls are waiting already"
                if self._on_refusal is not None:
                    self._on_refusal("WaitForEvent", VMStackError(refused))
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, refused)
            self._count += 1
        try:
            while context.is_active() and not self._stopped():
                with self._lock:
                    vm = self._served()
                    try:
                        pending = pending_transactions(vm) if vm is not None else 0
                    except ValueError:
                        pending = 0
                if pending:
                    return vm_pb2.WaitForEventResponse(message=vm_pb2.MESSAGE_BUILD_BLOCK)
                self._stop_event.wait(WAIT_FOR_EVENT_POLL)
            return vm_pb2.WaitForEventResponse()
        finally:
            with self._count_lock:
                self._count -= 1
