"""Who may use an LMDB store, and when: the writer lock between handles and the read gate
between threads of one handle.

The writer lock is an exclusive OS lock (``flock``) on :data:`WRITER_LOCK_FILE` in the
environment directory, held through one open descriptor by the handle that writes the store
until it closes (the OS releases it when the process dies, however it dies); a second
writer is refused with :class:`~vmstack.errors.StoreError`. :class:`ReadGate` lets any
number of threads read while holding back the rare moments that need the environment to
themselves (remapping, closing, aborting a failed write). :mod:`vmstack.store.lmdb.store`
says why each is needed.
"""

from __future__ import annotations

import fcntl
import os
import threading

from vmstack.errors import StoreError

__all__ = ["ReadGate", "WRITER_LOCK_FILE", "release_writer_lock", "take_writer_lock"]

#: The file in the environment directory whose exclusive lock the writing handle holds.
WRITER_LOCK_FILE = "writer.lock"


def take_writer_lock(path: str) -> int:
    """Open and exclusively lock the writer lock file of the store at ``path``; the open
    descriptor holds the lock. :class:`StoreError` if another handle holds it."""
    lock_path = os.path.join(path, WRITER_LOCK_FILE)
    try:
        os.makedirs(path, exist_ok=True)
        descriptor = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise StoreError(f"cannot open the writer lock {lock_path}: {exc}") from exc
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        raise StoreError(
            f"the LMDB store at {path} is open for writing by another handle "
            "(it holds the writer lock); open it with readonly=True to read "
            "it"
        ) from None
    except OSError as exc:
        os.close(descriptor)
        raise StoreError(f"cannot lock {lock_path}: {exc}") from exc
    return descriptor


def release_writer_lock(descriptor: int) -> None:
    """Drop the writer lock (closing its descriptor releases it)."""
    os.close(descriptor)


class ReadGate:
    """Readers (shared, re-entrant per thread) versus remapping or closing the map (exclusive).

    A pending exclusive request stops new readers, so a remap waits only for the snapshots
    already open. Re-entry by a thread that already reads never waits, so nested snapshots
    cannot deadlock against a pending remap. The uncontended path is one lock round trip.
    """

    __slots__ = ("_blocked", "_cond", "_local", "_lock", "_readers")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._readers = 0
        self._blocked = False
        self._local = threading.local()

    def depth(self) -> int:
        """How many reads the current thread holds open."""
        depth: int = getattr(self._local, "depth", 0)
        return depth

    def enter_shared(self) -> None:
        depth: int = getattr(self._local, "depth", 0)
        if depth:
            self._local.depth = depth + 1
            return
        with self._lock:
            while self._blocked:
                self._cond.wait()
            # The count and the thread's depth change together under the lock: an interrupt
            # (Ctrl-C) between them would leave a reader counted that no thread holds, and a
            # later close would wait for it forever.
            self._readers += 1
            self._local.depth = 1

    def exit_shared(self) -> None:
        depth: int = self._local.depth - 1
        if depth:
            self._local.depth = depth
            return
        with self._lock:
            self._readers -= 1
            self._local.depth = 0
            if self._blocked and self._readers <= 1:
                self._cond.notify_all()

    def enter_exclusive(self) -> None:
        """Stop new readers and wait until no other thread reads; callers hold the store's
        write lock, so at most one exclusive holder exists. Reads the calling thread itself
        holds are not waited for (the caller decides what is safe with them open)."""
        own = 1 if self.depth() else 0
        with self._cond:
            self._blocked = True
            try:
                while self._readers > own:
                    self._cond.wait()
            except BaseException:
                self._blocked = False
                self._cond.notify_all()
                raise

    def exit_exclusive(self) -> None:
        with self._cond:
            self._blocked = False
            self._cond.notify_all()
