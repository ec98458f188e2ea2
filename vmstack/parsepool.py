"""ParsePool: worker processes for the CPU-bound, independent checks of a large parse batch.

A batched parse (ARCHITECTURE.md, section 3, rule 7) does some work per element that
depends on nothing else in the batch and costs far more than it takes to send: the staking
signature of every post-fork envelope (a P-256 or RSA verify, about 0.3 ms in
pycryptodome, which holds the GIL, so threads do not help). A layer hands such work to a
pool with :meth:`ParsePool.submit` and keeps doing its cheap serial work meanwhile; it then
reads the results with :meth:`PendingResults.results` and walks the batch in its own serial
order, consulting them, so answers and errors are the serial parse's, element for element.
Every worker gets the whole batch and claims items one at a time from a counter in shared
memory; ``results`` makes the caller claim and run the items still unclaimed (it would
otherwise sit waiting), so a worker whose core is busy with other processes takes fewer, and
one that never ran is not waited for.

The rules the pool keeps:

- It is an optimisation only: every way it can fail (below the threshold, closed, busy with
  another thread's batch, a worker that died, no answer within ``timeout``) makes
  :meth:`ParsePool.submit` or :meth:`PendingResults.results` answer ``None``, and the caller
  does the work serially. Nothing it does can change an answer.
- It starts lazily (the first batch at or over ``threshold`` starts the workers and is
  left serial meanwhile) and is reused; the start method is ``forkserver`` (``spawn`` where
  there is none), never a plain ``fork`` of a process that runs grpc, LMDB or
  OpenTelemetry threads. A worker imports the module of the function it runs (with the
  packages above it) and, as multiprocessing does for these start methods, the main module
  of the program, whose entry point must therefore be guarded (``if __name__ ==
  "__main__":``). multiprocessing's forkserver, one per process and shared, stays until the
  process exits; it is not a worker. Each worker has its own pipe, written and read by the
  calling thread itself: no helper thread has to win the GIL from a busy caller before the
  work reaches the workers.
- It never leaks a process: :meth:`ParsePool.close` (also the context manager's exit, and a
  ``weakref.finalize`` when a forgotten pool is collected or the interpreter exits) stops
  and reaps every worker within a bounded wait (killed if need be); the workers are
  daemonic, so they also die with this process. A pool whose worker died, or that did not
  answer in time, is torn down with one log line and started afresh for the next batch;
  after :data:`MAX_FAILURES` such failures it stays serial for good. A closed pool answers
  every batch ``None`` (the caller's serial path): using one after ``close`` is not an
  error.

The pool knows nothing about blocks: the layers decide what to send (ARCHITECTURE.md,
section 5: it is injected, keyword-only, never a module global). Only the proposer layer
sends anything, as profiling found: its signature checks are about three quarters of a
signed block's parse through the full stack. The C-chain VM's lazy parse is not worth
sending: per block of 10 transactions it hashes the header slice (about 40 µs), decodes the
header (about 45 µs) and checks the body's framing, and a decoded header costs about 30 µs
to pickle back, so a worker could take only the hash, at the price of a round trip, while
the caller's core is already shared with the signature workers.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, wait
from multiprocessing.context import ForkServerContext, SpawnContext
from multiprocessing.process import BaseProcess
from typing import Any, Generic, TypeVar

from vmstack.errors import VMStackError

__all__ = ["DEFAULT_TIMEOUT", "MAX_FAILURES", "PARALLEL_THRESHOLD", "ParsePool",
           "PendingResults", "available_cores"]

logger = logging.getLogger(__name__)

ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")

#: The fewest items a batch must hand over before it goes to the workers; smaller batches
#: stay serial. Measured on 2 idle cores (signed P-256 envelopes through the full stack,
#: one worker beside the caller, batched against serial parse, several runs): 0.8x at 1
#: envelope, 1.0-1.2x at 2, 1.1-1.5x at 4, 1.0-1.6x at 10, 1.6-2.0x at 100. A check costs
#: about 300 µs here and a round trip through a worker's pipe about 150-200 µs, so 4 is
#: where the pool is ahead run after run. With another program busy on a core there is
#: no core to gain, and the pool is about at par at any size.
PARALLEL_THRESHOLD = 4
#: The longest wait (seconds) for the workers' results of one batch before the batch is
#: done serially and the pool torn down.
DEFAULT_TIMEOUT = 30.0
#: Failures (a worker that died, or no answer in time) after which a pool stays serial.
MAX_FAILURES = 3
# How long close() waits for a worker to exit before it is killed.
_EXIT_WAIT = 2.0


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS tells it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not every OS has sched_getaffinity
        return os.cpu_count() or 1


def _context() -> ForkServerContext | SpawnContext:
    """``forkserver`` where the OS has it, else ``spawn``: never a plain ``fork``."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("forkserver")
    return multiprocessing.get_context("spawn")


def _claim_and_run(claims: Any, batch: int, function: Callable[[ItemT], ResultT],
                   items: Sequence[ItemT]) -> list[tuple[int, ResultT]]:
    """Run ``function`` over the items of ``batch`` this process claims, one at a time,
    from the shared ``claims`` (``[batch, next index]``), until none is left or the batch
    is no longer the current one; ``(index, result)`` pairs."""
    done: list[tuple[int, ResultT]] = []
    while True:
        with claims.get_lock():
            index = claims[1]
            if claims[0] != batch or index >= len(items):
                return done
            claims[1] = index + 1
        done.append((index, function(items[index])))


def _serve(connection: Connection, claims: Any) -> None:
    """A worker's loop: read ``(batch, function, items)``, answer the ``(index, result)``
    pairs of the items it claimed (or the failure, as text); stop at ``None`` or when the
    pool's end closes."""
    while True:
        try:
            message = connection.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        batch, function, items = message
        try:
            answer: tuple[bool, Any] = (True, _claim_and_run(claims, batch, function, items))
        except Exception as error:  # reported to the pool, which goes serial
            answer = (False, f"{type(error).__name__}: {error}")
        connection.send(answer)


class _Worker:
    """One worker process and the pool's end of its pipe; ``stale`` counts answers to
    batches given up on, which are read and dropped before the next batch's."""

    __slots__ = ("connection", "process", "stale")

    def __init__(self, process: BaseProcess, connection: Connection) -> None:
        self.process = process
        self.connection = connection
        self.stale = 0


class PendingResults(Generic[ResultT]):
    """The results of one :meth:`ParsePool.submit`, in item order, once the workers have
    them. :meth:`results` waits (at most the pool's timeout) and gives ``None`` when the
    pool failed, in which case the caller does the work serially; :meth:`cancel` gives the
    batch up. Either one ends the batch (the pool then takes the next one)."""

    __slots__ = ("_batch", "_function", "_items", "_pool", "_results", "_settled",
                 "_workers")

    def __init__(self, pool: ParsePool, workers: list[_Worker], batch: int,
                 function: Callable[[ItemT], ResultT], items: list[ItemT]) -> None:
        self._pool = pool
        self._workers = workers
        self._batch = batch
        self._function: Callable[[Any], ResultT] = function
        self._items: list[Any] = items
        self._results: list[ResultT] | None = None
        self._settled = False

    def results(self) -> list[ResultT] | None:
        """Every item's result in order, or ``None`` if the pool could not give them: the
        caller first claims and runs the items no worker has taken yet, then reads the
        workers' answers."""
        if not self._settled:
            try:
                own = _claim_and_run(self._pool._claims, self._batch, self._function,
                                     self._items)
            except Exception:  # the caller's serial path meets it again, in its place
                self.cancel()
                return None
            self._settled = True
            if len(own) == len(self._items):
                # No worker got to run (their cores were busy): their empty answers are
                # dropped later instead of being waited for now.
                self._pool._abandon(self._workers)
                self._results = [result for _, result in own]
            else:
                self._results = self._pool._collect(self._workers, own, len(self._items))
        return self._results

    def cancel(self) -> None:
        """Give the batch up (the caller no longer needs it); the workers' answers are
        dropped when they come. No effect once :meth:`results` has answered."""
        if not self._settled:
            self._settled = True
            self._pool._abandon(self._workers)


class ParsePool:
    """A pool of ``workers`` worker processes for the batches of at least ``threshold``
    items (default :data:`PARALLEL_THRESHOLD`). The caller works on every batch too, so
    the default is one worker fewer than the available cores (at least one): on 2 cores one
    worker beside the caller measured 1.6-2.0x at 100 signed envelopes, two workers
    1.4-1.8x.

    ``workers`` must be at least 1 and ``threshold`` at least 0 (``ValueError``
    otherwise); ``timeout`` bounds the wait for one batch's results. The workers start with
    the first batch at or over the threshold, which stays serial (the workers import what
    they run meanwhile). The pool takes one batch at a time: a batch submitted while another
    is out (from another thread) stays serial. Close the pool with
    :meth:`close` or a ``with`` block; one never closed is closed when it is collected or
    at exit.
    """

    def __init__(self, workers: int | None = None, *, threshold: int = PARALLEL_THRESHOLD,
                 timeout: float = DEFAULT_TIMEOUT) -> None:
        workers = max(available_cores() - 1, 1) if workers is None else workers
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers must be an int of at least 1, got {workers!r}")
        if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 0:
            raise ValueError(f"threshold must be a non-negative int, got {threshold!r}")
        if not timeout > 0:
            raise ValueError(f"timeout must be positive, got {timeout!r}")
        self._size = workers
        self._threshold = threshold
        self._timeout = timeout
        self._lock = threading.Lock()
        self._busy = False
        self._batch = 0  # batches are numbered from 1; 0 is none
        self._claims: Any = None  # shared with the workers: [current batch, next index]
        self._failures = 0
        self._closed = False
        # Shared with the finalizer, which must not hold the pool itself.
        self._workers: list[_Worker] = []
        self._finalizer = weakref.finalize(self, _stop, self._workers)

    @property
    def workers(self) -> int:
        """How many worker processes the pool runs."""
        return self._size

    @property
    def threshold(self) -> int:
        """The fewest items a batch must have to go to the workers."""
        return self._threshold

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has run (every batch is then left to the serial path)."""
        return self._closed

    @property
    def disabled(self) -> bool:
        """Whether the pool gave up after :data:`MAX_FAILURES` failures (or is closed)."""
        return self._closed or self._failures >= MAX_FAILURES

    @property
    def worker_pids(self) -> tuple[int, ...]:
        """The process IDs of the running workers (none before the first batch)."""
        with self._lock:
            return tuple(worker.process.pid for worker in self._workers
                         if worker.process.pid is not None)

    def accepts(self, count: int) -> bool:
        """Whether a batch of ``count`` items would go to the workers (if not busy)."""
        return count >= max(self._threshold, 1) and not self.disabled

    def submit(self, function: Callable[[ItemT], ResultT],
               items: Sequence[ItemT]) -> PendingResults[ResultT] | None:
        """Send ``function`` and ``items`` to the workers, which claim the items one at a
        time from a shared counter (as the caller does in :meth:`PendingResults.results`,
        so a worker slowed down by other processes takes fewer), and return at once;
        ``None`` when the batch stays serial (fewer items than the
        threshold, pool closed, disabled or busy, workers that cannot start or be reached).
        ``function`` must be a module-level function (it is pickled by name) that depends
        on nothing but its item."""
        if not self.accepts(len(items)):
            return None
        with self._lock:
            if self._busy or self.disabled:
                return None
            if not self._workers:
                self._start_workers(function)
                return None
            workers = list(self._workers)
            self._busy = True
            self._batch += 1
            batch = self._batch
        try:
            self._drop_stale(workers)
        except _PoolFailure as failure:
            self._abandon([])
            self._fail(str(failure))
            return None
        batch_items = list(items)
        with self._claims.get_lock():
            self._claims[0], self._claims[1] = batch, 0
        used: list[_Worker] = []
        try:
            for worker in workers:
                worker.connection.send((batch, function, batch_items))
                used.append(worker)
        except (OSError, ValueError) as error:
            self._abandon(used)
            self._fail(f"could not reach a worker ({error})")
            return None
        return PendingResults(self, used, batch, function, batch_items)

    def close(self) -> None:
        """Stop and reap every worker (killed if it does not exit within a few seconds).
        Idempotent; afterwards every batch is left to the serial path."""
        with self._lock:
            self._closed = True
            self._finalizer()

    def __enter__(self) -> ParsePool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("disabled" if self.disabled else "open")
        return f"ParsePool(workers={self._size}, threshold={self._threshold}, {state})"

    # --- internals -----------------------------------------------------------------------

    def _start_workers(self, function: Callable[[ItemT], ResultT]) -> None:
        """Start the workers (called with the lock held) and have each import what
        ``function`` needs, with an empty batch whose answer the next batch drops; if they
        cannot start, the pool is disabled."""
        context = _context()
        try:
            self._claims = context.Array("q", 2)
            for _ in range(self._size):
                ours, theirs = context.Pipe()
                process = context.Process(target=_serve, args=(theirs, self._claims),
                                          daemon=True, name="vmstack-parse-worker")
                process.start()
                theirs.close()
                worker = _Worker(process, ours)
                self._workers.append(worker)
                ours.send((0, function, []))
                worker.stale = 1
        except (OSError, RuntimeError, ValueError) as error:
            self._failures = MAX_FAILURES
            _stop(self._workers)
            logger.warning("parse pool: workers cannot start (%s); parsing serially", error)

    def _collect(self, workers: list[_Worker], own: list[tuple[int, ResultT]],
                 count: int) -> list[ResultT] | None:
        """The ``count`` results in item order, from the caller's ``own`` pairs and the
        workers' answers, or ``None`` (and the pool torn down) if a worker died, failed,
        or the batch took longer than the timeout."""
        deadline = time.monotonic() + self._timeout
        pairs = list(own)
        try:
            for worker in workers:
                ok, answer = self._answer(worker, deadline)
                if not ok:
                    raise _PoolFailure(f"a worker failed ({answer})")
                pairs.extend(answer)
            if sorted(index for index, _ in pairs) != list(range(count)):
                raise _PoolFailure("the answers do not cover the batch")
        except _PoolFailure as failure:
            self._fail(str(failure))
            return None
        finally:
            with self._lock:
                self._busy = False
        return [result for _, result in sorted(pairs, key=lambda pair: pair[0])]

    def _answer(self, worker: _Worker, deadline: float) -> tuple[bool, Any]:
        """The next answer of ``worker`` to a batch still wanted (stale ones dropped)."""
        while True:
            answer = self._receive(worker, deadline)
            if worker.stale:
                worker.stale -= 1
                continue
            return answer

    def _receive(self, worker: _Worker, deadline: float) -> tuple[bool, Any]:
        """One answer of ``worker``, waiting until ``deadline`` at most."""
        remaining = max(deadline - time.monotonic(), 0.0)
        try:
            if not wait([worker.connection, worker.process.sentinel], remaining):
                raise _PoolFailure(f"no answer within {self._timeout:g} s")
            answer: tuple[bool, Any] = worker.connection.recv()
        except (EOFError, OSError, ValueError):  # ValueError: closed meanwhile
            raise _PoolFailure("a worker process died") from None
        return answer

    def _drop_stale(self, workers: list[_Worker]) -> None:
        """Read and drop the answers ``workers`` owe to batches given up on, so that a new
        batch never waits behind them in a pipe (bounded by the timeout)."""
        deadline = time.monotonic() + self._timeout
        for worker in workers:
            while worker.stale:
                self._receive(worker, deadline)
                worker.stale -= 1

    def _abandon(self, workers: list[_Worker]) -> None:
        """Give up a batch sent to ``workers``: their answers are dropped when read."""
        with self._lock:
            if self._claims is not None:
                with self._claims.get_lock():
                    self._claims[0] = 0  # no batch: the workers stop claiming
            for worker in workers:
                worker.stale += 1
            self._busy = False

    def _fail(self, what: str) -> None:
        """Tear the workers down after a failure, with one log line."""
        with self._lock:
            if self._closed:
                return
            self._failures += 1
            _stop(self._workers, grace=0.0)  # a worker's state is nothing worth waiting for
        then = ("parsing serially from now on" if self.disabled
                else "this batch is parsed serially, the next one starts new workers")
        logger.warning("parse pool: %s; %s", what, then)


class _PoolFailure(VMStackError):
    """Why a batch's results could not be read (internal: the caller goes serial)."""


def _stop(workers: list[_Worker], grace: float = _EXIT_WAIT) -> None:
    """Stop and reap ``workers`` (emptying the list): ask each to exit, give them
    ``grace`` seconds, kill what is left. Holds no reference to the pool, so it can be its
    finalizer."""
    for worker in workers:
        with contextlib.suppress(OSError, ValueError):  # already gone: reaped below
            worker.connection.send(None)
    deadline = time.monotonic() + grace
    for worker in workers:
        worker.process.join(max(deadline - time.monotonic(), 0.0))
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join()
        worker.connection.close()
    workers.clear()
