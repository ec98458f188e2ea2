"""A parse pool's worker processes: their loop, the frames on their pipes, the pool's end of
each pipe, and stopping them.

A worker (:func:`serve`) reads ``(batch, function, items)`` frames, claims items from the
front (:mod:`~vmstack.parsepool.claims`) and answers the ``(index, result)`` pairs it ran.
A frame is its length (:data:`FRAME_HEADER`), then a pickle. The pool's end of a pipe is
non-blocking (:class:`Worker`): an answer is read only once the pipe holds all of it.
:func:`stop` stops and reaps workers within a bounded wait, killing what is left.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.forkserver
import os
import pickle
import select
import struct
import time
from collections.abc import Sequence
from multiprocessing.connection import Connection
from multiprocessing.context import ForkServerContext, SpawnContext
from multiprocessing.process import BaseProcess
from typing import Any

from vmstack.errors import VMStackError
from vmstack.parsepool.claims import claim_front

__all__ = [
    "EXIT_WAIT",
    "FRAME_HEADER",
    "PoolFailure",
    "Worker",
    "frame",
    "serve",
    "start_context",
    "stop",
]

#: How long close() waits for a worker to exit before it is killed.
EXIT_WAIT = 2.0
#: A frame on a worker's pipe: its length, then a pickle.
FRAME_HEADER = struct.Struct("!Q")
READ_SIZE = 1 << 16


def start_context(preload: Sequence[str] = ()) -> ForkServerContext | SpawnContext:
    """``forkserver`` where the OS has it, else ``spawn``: never a plain ``fork``.

    ``preload`` names modules a worker runs (the worker loop's and its function's): if this
    process's fork server has not started yet, it will import them once when it starts,
    beside what it preloads already, so every worker forked from it later starts with
    them loaded instead of importing them while a batch runs (a server already running
    keeps what it has; the workers then import them themselves, as with ``spawn``)."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    server = multiprocessing.forkserver._forkserver
    if preload and getattr(server, "_forkserver_pid", None) is None:
        loaded: list[str] = list(getattr(server, "_preload_modules", ["__main__"]))
        context.set_forkserver_preload(
            loaded + [name for name in (__name__, *preload) if name not in loaded]
        )
    return context


def frame(message: object) -> bytes:
    """``message`` pickled, behind its length."""
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return FRAME_HEADER.pack(len(payload)) + payload


def read_exactly(fd: int, count: int) -> bytes:
    """``count`` bytes from the blocking ``fd`` (a worker's end); ``EOFError`` at its end."""
    parts: list[bytes] = []
    while count:
        chunk = os.read(fd, min(count, READ_SIZE))
        if not chunk:
            raise EOFError
        parts.append(chunk)
        count -= len(chunk)
    return b"".join(parts)


def write_all(fd: int, data: bytes) -> None:
    """All of ``data`` to the blocking ``fd`` (a worker's end)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def serve(connection: Connection, claims: Any, workers_lock: Any) -> None:
    """A worker's loop: read ``(batch, function, items)``, answer the ``(index, result)``
    pairs of the items it claimed (or the failure, as text); stop at ``None`` or when the
    pool's end closes."""
    fd = connection.fileno()
    while True:
        try:
            (length,) = FRAME_HEADER.unpack(read_exactly(fd, FRAME_HEADER.size))
            payload = read_exactly(fd, length)
        except (EOFError, OSError):
            return
        try:
            message = pickle.loads(payload)
            if message is None:
                return
            batch, function, items = message
            answer: tuple[bool, Any] = (
                True,
                claim_front(claims, workers_lock, batch, function, items),
            )
        except Exception as error:  # reported to the pool, which goes serial
            answer = (False, f"{type(error).__name__}: {error}")
        try:
            write_all(fd, frame(answer))
        except OSError:
            return


class PoolFailure(VMStackError):
    """Why a batch could not go to or come back from the workers (internal: the caller
    goes serial)."""


class Worker:
    """One worker process and the pool's end of its pipe (non-blocking). A worker owes at
    most one answer (it is sent a batch only when it owes none): ``owed_batch`` is the
    batch it is for (0: the warm-up) and ``owed_since`` when it was sent (``None``: owes
    nothing); ``ready`` once the warm-up was answered; ``inbox`` holds an answer's bytes
    read so far; ``ended`` once its pipe reached its end."""

    __slots__ = (
        "_readable",
        "connection",
        "ended",
        "inbox",
        "owed_batch",
        "owed_since",
        "process",
        "ready",
    )

    def __init__(self, process: BaseProcess, connection: Connection) -> None:
        self.process = process
        self.connection = connection
        self._readable = select.poll()
        self._readable.register(connection.fileno(), select.POLLIN)
        self.ready = False
        self.owed_batch = 0
        self.owed_since: float | None = None
        self.inbox = bytearray()
        self.ended = False

    def owe(self, batch: int) -> None:
        self.owed_batch = batch
        self.owed_since = time.monotonic()

    def read_answer(self) -> tuple[bool, Any] | None:
        """The answer owed, if the pipe holds all of it now (never waits); ``PoolFailure``
        if the worker is gone without one, or sent something that is no answer."""
        fd = self.connection.fileno()
        while not self.ended and self._readable.poll(0):
            # Read only what the pipe holds (or its end): nothing is raised on the way of
            # an answer that has not all come yet.
            try:
                chunk = os.read(fd, READ_SIZE)
            except BlockingIOError:
                break
            except OSError:
                self.ended = True
                break
            if not chunk:
                self.ended = True
                break
            self.inbox += chunk
        answer = self._take_frame()
        if answer is None and self.ended:
            raise PoolFailure("a worker process died")
        return answer

    def _take_frame(self) -> tuple[bool, Any] | None:
        header = FRAME_HEADER.size
        if len(self.inbox) < header:
            return None
        (length,) = FRAME_HEADER.unpack_from(self.inbox)
        if len(self.inbox) < header + length:
            return None
        payload = bytes(self.inbox[header : header + length])
        del self.inbox[: header + length]
        try:
            answer = pickle.loads(payload)
            ok, _ = answer
        except Exception:
            raise PoolFailure("a worker sent something that is not an answer") from None
        self.owed_since = None
        self.ready = True
        return (bool(ok), answer[1])


def stop(workers: list[Worker], owner: int, grace: float = EXIT_WAIT) -> None:
    """Stop and reap ``workers`` (emptying the list): ask each to exit, give them
    ``grace`` seconds, kill what is left (a stopped worker too). In a process other than
    ``owner`` (a child of ``os.fork()``) it only closes that process's copies of the
    pipes: the workers are the owner's. Holds no reference to the pool, so it can be its
    finalizer."""
    if os.getpid() != owner:
        for worker in workers:
            worker.connection.close()
        workers.clear()
        return
    for worker in workers:
        with contextlib.suppress(OSError, ValueError):  # full, or already gone: killed below
            os.write(worker.connection.fileno(), frame(None))
    deadline = time.monotonic() + grace
    for worker in workers:
        worker.process.join(max(deadline - time.monotonic(), 0.0))
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join(EXIT_WAIT)
        worker.connection.close()
    workers.clear()
