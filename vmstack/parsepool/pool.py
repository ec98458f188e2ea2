"""ParsePool and PendingResults: the pool a layer hands a batch's independent checks to, and
one batch's results (the rules they keep: :mod:`vmstack.parsepool`).

The pool sends a batch to its ready workers (:mod:`~vmstack.parsepool.worker`), which claim
items from the front while the caller claims them from the back
(:mod:`~vmstack.parsepool.claims`); it starts its workers in the background, tears them
down after a failure and starts new ones, and belongs to the process that made it.
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.process
import os
import select
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from multiprocessing.connection import wait
from typing import Any, Generic, TypeVar

from vmstack.parsepool.claims import BACK, FRONT, LAST_BATCH, claim_back, word
from vmstack.parsepool.worker import (
    PoolFailure,
    Worker,
    frame,
    serve,
    start_context,
    stop,
)

__all__ = [
    "DEFAULT_TIMEOUT",
    "MAX_FAILURES",
    "PARALLEL_THRESHOLD",
    "ParsePool",
    "PendingResults",
    "START_TIMEOUT",
    "available_cores",
]

#: The pool's log lines go to ``vmstack.parsepool``, the package's logger.
logger = logging.getLogger("vmstack.parsepool")

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
#: The longest time (seconds) one batch may take to reach the workers, and then the
#: longest wait for their results, before the batch is done serially and the pool torn
#: down; also how long a worker may owe an answer before it counts as stuck.
DEFAULT_TIMEOUT = 30.0
#: The longest time (seconds) a new worker may take to answer its warm-up batch (start
#: its interpreter, import what it will run) before it counts as stuck, when the pool's
#: timeout is shorter. Batches never wait for it meanwhile.
START_TIMEOUT = 60.0
#: Failures (a worker that died, was stuck or failed) after which a pool stays serial.
MAX_FAILURES = 3


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS tells it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not every OS has sched_getaffinity
        return os.cpu_count() or 1


class PendingResults(Generic[ResultT]):
    """The results of one :meth:`ParsePool.submit`, in item order, once the workers have
    them. :meth:`results` waits (at most the pool's timeout) and gives ``None`` when the
    pool failed, in which case the caller does the work serially; :meth:`cancel` gives the
    batch up. Either one ends the batch (the pool then takes the next one)."""

    __slots__ = ("_batch", "_function", "_items", "_pool", "_results", "_settled", "_workers")

    def __init__(
        self,
        pool: ParsePool,
        workers: list[Worker],
        batch: int,
        function: Callable[[ItemT], ResultT],
        items: list[ItemT],
    ) -> None:
        self._pool = pool
        self._workers = workers
        self._batch = batch
        self._function: Callable[[Any], ResultT] = function
        self._items: list[Any] = items
        self._results: list[ResultT] | None = None
        self._settled = False

    def results(self) -> list[ResultT] | None:
        """Every item's result in order, or ``None`` if the pool could not give them: the
        caller first claims and runs the items no worker has taken yet, from the back,
        then reads the answers of the workers that took the others (at most the pool's
        timeout). ``None`` in a process other than the pool's."""
        if self._pool._foreign():
            return None
        if not self._settled and self._pool.closed:
            self.cancel()
        if not self._settled:
            claims = self._pool._claims
            try:
                own = claim_back(claims, self._batch, self._function, self._items)
            except Exception:  # the caller's serial path meets it again, in its place
                self.cancel()
                return None
            self._settled = True
            self._results = self._pool._collect(self._workers, self._batch, own, len(self._items))
        return self._results

    def cancel(self) -> None:
        """Give the batch up (the caller no longer needs it): the workers stop claiming,
        and their answers are dropped when they come. No effect once :meth:`results` has
        answered."""
        if not self._settled and not self._pool._foreign():
            self._settled = True
            self._pool._abandon(self._batch)


class ParsePool:
    """A pool of ``workers`` worker processes for the batches of at least ``threshold``
    items (default :data:`PARALLEL_THRESHOLD`). The caller works on every batch too, so
    the default is one worker fewer than the available cores (at least one): on 2 cores one
    worker beside the caller measured 1.6-2.0x at 100 signed envelopes, two workers
    1.4-1.8x.

    ``workers`` must be at least 1 and ``threshold`` at least 0 (``ValueError``
    otherwise); ``timeout`` bounds the sending of one batch and the wait for its results.
    :meth:`start` starts the workers in the background (else the first batch at or over
    the threshold does); a batch submitted before a worker is ready stays serial, so no
    batch waits for one. The pool takes one batch at a time: a batch submitted while
    another is out (from another thread) stays serial. Close the pool with :meth:`close`
    or a ``with`` block; one never closed is closed when it is collected or at exit.
    """

    def __init__(
        self,
        workers: int | None = None,
        *,
        threshold: int = PARALLEL_THRESHOLD,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
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
        self._pid = os.getpid()  # the pool belongs to this process only
        self._lock = threading.Lock()
        self._busy = False
        self._batch = 0  # batches are numbered from 1; 0 is none
        self._claims: Any = None  # shared with the workers: the claim words
        self._workers_lock: Any = None  # kept while the workers it was made for run
        self._failures = 0
        self._closed = False
        self._warm_up: Callable[[Any], Any] | None = None  # what a new worker imports
        self._generation = 0  # moves at every teardown: a start of an older one gives up
        self._starter: threading.Thread | None = None
        # Shared with the finalizer, which must not hold the pool itself.
        self._workers: list[Worker] = []
        self._finalizer = weakref.finalize(self, stop, self._workers, self._pid)
        _POOLS.add(self)

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
        """Whether :meth:`close` has run, or the pool is used in a process other than the
        one that made it (every batch is then left to the serial path)."""
        return self._closed or self._foreign()

    @property
    def disabled(self) -> bool:
        """Whether the pool gave up after :data:`MAX_FAILURES` failures (or is closed)."""
        return self.closed or self._failures >= MAX_FAILURES

    @property
    def worker_pids(self) -> tuple[int, ...]:
        """The process IDs of the started workers (ready or not; none before
        :meth:`start` or the first batch, and none in another process)."""
        if self._foreign():
            return ()
        with self._lock:
            return tuple(
                worker.process.pid for worker in self._workers if worker.process.pid is not None
            )

    def accepts(self, count: int) -> bool:
        """Whether a batch of ``count`` items would go to the workers (if ready and not
        busy)."""
        return count >= max(self._threshold, 1) and not self.disabled

    def takes_now(self, count: int) -> bool:
        """Whether a batch of ``count`` items submitted now would go to the workers: at or
        over the threshold, the pool open and not busy, and a worker ready (answers that
        came are read; nothing is waited for). A caller asks before it prepares the items,
        so a batch the pool would leave serial (the first ones, while the workers start)
        costs nothing beyond the serial parse. Workers that are neither running nor
        starting are started in the background, as :meth:`submit` does."""
        if not self.accepts(count):
            return False
        with self._lock:
            if self._busy or self.disabled:
                return False
            try:
                ready = self._ready_workers()
            except PoolFailure as failure:
                self._fail_locked(str(failure))
                return False
            if not ready and not self._workers:
                self._start_in_background()
            return bool(ready)

    def start(self, function: Callable[[ItemT], ResultT]) -> None:
        """Start the workers in the background, if they are not running or starting: each
        imports what ``function`` needs (a module-level function, pickled by name) with a
        warm-up batch, and takes batches once it has answered it. Returns at once; no
        effect on a closed or disabled pool."""
        if self.disabled:
            return
        with self._lock:
            if self._warm_up is None:
                self._warm_up = function
            self._start_in_background()

    def wait_ready(self, timeout: float) -> bool:
        """Whether every worker is running and has answered its warm-up batch within
        ``timeout`` seconds (starting them if need be). Batches never wait for this: it is
        for measurements and tests that want the warm pool."""
        deadline = time.monotonic() + timeout
        while not self.disabled:
            with self._lock:
                if not self._busy:
                    try:
                        ready = self._ready_workers()
                    except PoolFailure as failure:
                        ready = []
                        self._fail_locked(str(failure))
                    if len(ready) == self._size:
                        return True
                    if not self._workers:
                        self._start_in_background()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            time.sleep(min(0.01, remaining))
        return False

    def submit(
        self, function: Callable[[ItemT], ResultT], items: Sequence[ItemT]
    ) -> PendingResults[ResultT] | None:
        """Send ``function`` and ``items`` to the ready workers, which claim the items one
        at a time from a shared counter (as the caller does in
        :meth:`PendingResults.results`, so a worker slowed down by other processes takes
        fewer), and return; ``None`` when the batch stays serial (fewer items than the
        threshold, pool closed, disabled or busy, no worker ready yet, a worker that died
        or did not take the batch within the timeout). ``function`` must be a module-level
        function (it is pickled by name) that depends on nothing but its item."""
        if not self.accepts(len(items)):
            return None
        with self._lock:
            if self._busy or self.disabled:
                return None
            if self._warm_up is None:
                self._warm_up = function
            try:
                workers = self._ready_workers()
            except PoolFailure as failure:
                self._fail_locked(str(failure))
                return None
            if not workers:
                if not self._workers:
                    self._start_in_background()
                return None
            self._busy = True
            self._batch = self._batch % LAST_BATCH + 1
            batch = self._batch
            claims = self._claims
        batch_items = list(items)
        try:
            message = frame((batch, function, batch_items))
        except Exception as error:  # an item that cannot be pickled: the serial path
            self._release()
            logger.warning("parse pool: a batch cannot be sent (%s); parsing it serially", error)
            return None
        claims[BACK] = word(batch, len(batch_items))
        claims[FRONT] = word(batch, 0)
        try:
            self._send(workers, message, batch)
        except PoolFailure as failure:
            self._abandon(batch)
            self._fail(str(failure))
            return None
        return PendingResults(self, workers, batch, function, batch_items)

    def close(self) -> None:
        """Stop and reap every worker (killed if it does not exit within a few seconds).
        Idempotent; afterwards every batch is left to the serial path. In a process other
        than the pool's it only lets go of this process's copies of the pipes."""
        if self._foreign():
            self._closed = True
            self._finalizer()
            return
        with self._lock:
            self._closed = True
            self._generation += 1
            starter = self._starter
        if starter is not None and starter is not threading.current_thread():
            starter.join(START_TIMEOUT)  # a worker being started is stopped by it
        with self._lock:
            self._finalizer()

    def __enter__(self) -> ParsePool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else ("disabled" if self.disabled else "open")
        return f"ParsePool(workers={self._size}, threshold={self._threshold}, {state})"

    # --- internals -----------------------------------------------------------------------

    def _foreign(self) -> bool:
        """Whether this is not the process that made the pool (a child of ``os.fork()``)."""
        return os.getpid() != self._pid

    def _start_in_background(self) -> None:
        """Start the workers on a thread of their own (called with the lock held), unless
        they are running or starting."""
        if (
            self._workers
            or self._warm_up is None
            or self.disabled
            or (self._starter is not None and self._starter.is_alive())
        ):
            return
        self._starter = threading.Thread(
            target=_start_workers,
            args=(self, self._generation, self._warm_up),
            name="vmstack-parse-pool-start",
            daemon=True,
        )
        self._starter.start()

    def _ready_workers(self) -> list[Worker]:
        """The workers that owe no answer and have answered their warm-up (called with the
        lock held): answers that came are read and dropped; ``PoolFailure`` for a worker
        that died or owes an answer for too long (stuck)."""
        now = time.monotonic()
        ready: list[Worker] = []
        for worker in self._workers:
            if worker.owed_since is not None:
                worker.read_answer()
            if worker.owed_since is None:
                if worker.ended:
                    raise PoolFailure("a worker process died")
                if worker.ready:
                    ready.append(worker)
                continue
            limit = self._timeout if worker.ready else max(self._timeout, START_TIMEOUT)
            if now - worker.owed_since > limit:
                raise PoolFailure(f"a worker owes an answer for over {limit:g} s (stuck)")
        return ready

    def _send(self, workers: list[Worker], message: bytes, batch: int) -> None:
        """Write the framed ``message`` to every worker's pipe, all at once, without
        blocking, within the timeout; ``PoolFailure`` if a worker is gone or does not read
        it in time."""
        deadline = time.monotonic() + self._timeout
        left = {worker.connection.fileno(): memoryview(message) for worker in workers}
        for worker in workers:
            worker.owe(batch)
        while True:
            for fd, view in list(left.items()):
                try:
                    left[fd] = view[os.write(fd, view) :]
                except BlockingIOError:
                    continue
                except OSError as error:
                    raise PoolFailure(f"could not reach a worker ({error})") from None
                if not left[fd]:
                    del left[fd]
            if not left:
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise PoolFailure(
                    f"a worker took no batch within {self._timeout:g} s (stopped or stuck)"
                )
            poller = select.poll()
            for fd in left:
                poller.register(fd, select.POLLOUT)
            poller.poll(max(remaining * 1000, 1))

    def _collect(
        self, workers: list[Worker], batch: int, own: list[tuple[int, ResultT]], count: int
    ) -> list[ResultT] | None:
        """The ``count`` results in item order, from the caller's ``own`` pairs and the
        answers of ``workers``, read until they cover the batch (a worker that took nothing
        is not waited for), or ``None`` (and the pool torn down) if a worker died, failed,
        or the batch took longer than the timeout."""
        deadline = time.monotonic() + self._timeout
        found: dict[int, ResultT] = dict(own)
        waiting = list(workers)
        try:
            while len(found) < count:
                for worker in list(waiting):
                    answer = worker.read_answer()
                    if answer is None:
                        continue
                    waiting.remove(worker)
                    ok, pairs = answer
                    if not ok:
                        raise PoolFailure(f"a worker failed ({pairs})")
                    for index, result in pairs:
                        found.setdefault(index, result)
                if len(found) >= count:
                    break
                if not waiting:
                    raise PoolFailure("the answers do not cover the batch")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise PoolFailure(f"no answer within {self._timeout:g} s")
                wait(
                    [
                        handle
                        for worker in waiting
                        for handle in (worker.connection, worker.process.sentinel)
                    ],
                    remaining,
                )
        except PoolFailure as failure:
            self._abandon(batch)
            self._fail(str(failure))
            return None
        except (OSError, ValueError):  # the pool was closed meanwhile
            self._abandon(batch)
            return None
        self._release()
        if sorted(found) != list(range(count)):
            self._fail("the answers name items the batch does not have")
            return None
        return [found[index] for index in range(count)]

    def _release(self) -> None:
        with self._lock:
            self._busy = False

    def _abandon(self, batch: int) -> None:
        """Give up ``batch``: the workers stop claiming its items (no lock: the caller's
        word), and their answers are dropped when read."""
        with self._lock:
            if self._claims is not None and self._batch == batch:
                self._claims[BACK] = word(batch, 0)
            self._busy = False

    def _fail(self, what: str) -> None:
        with self._lock:
            self._fail_locked(what)

    def _fail_locked(self, what: str) -> None:
        """Tear the workers down after a failure (called with the lock held), with one log
        line, and start new ones in the background unless the pool gave up."""
        if self.closed:
            return
        self._failures += 1
        self._generation += 1
        stop(self._workers, self._pid, grace=0.0)  # a worker's state is not worth waiting for
        if self.disabled:
            then = "parsing serially from now on"
        else:
            then = "this batch is parsed serially while new workers start"
            self._start_in_background()
        logger.warning("parse pool: %s; %s", what, then)


def _start_workers(pool: ParsePool, generation: int, function: Callable[[Any], Any]) -> None:
    """Start ``pool``'s workers (on the starting thread, without the pool's lock) and send
    each a warm-up batch that imports what ``function`` needs; a worker is handed to the
    pool as soon as it runs, unless the pool was torn down or closed meanwhile (then it is
    stopped here). If workers cannot start, the pool is disabled."""
    context = start_context(preload=(function.__module__,))
    try:
        claims = context.Array("q", 2, lock=False)
        workers_lock = context.Lock()  # the workers' alone: see claim_front
        warm_up = frame((0, function, []))
        for _ in range(pool._size):
            ours, theirs = context.Pipe()
            process = context.Process(
                target=serve,
                args=(theirs, claims, workers_lock),
                daemon=True,
                name="vmstack-parse-worker",
            )
            process.start()
            theirs.close()
            os.set_blocking(ours.fileno(), False)
            worker = Worker(process, ours)
            os.write(ours.fileno(), warm_up)  # a fresh pipe holds a warm-up whole
            worker.owe(0)
            with pool._lock:
                if pool._generation != generation or pool.closed:
                    stop([worker], pool._pid, grace=0.0)
                    return
                pool._claims, pool._workers_lock = claims, workers_lock
                pool._workers.append(worker)
    except Exception as error:  # whatever stops a start leaves the pool serial
        with pool._lock:
            if pool._generation == generation:
                pool._failures = MAX_FAILURES
                stop(pool._workers, pool._pid)
        logger.warning("parse pool: workers cannot start (%s); parsing serially", error)


#: Every pool of this process, for the fork handler below.
_POOLS: weakref.WeakSet[ParsePool] = weakref.WeakSet()


def _forget_workers_in_child() -> None:
    """In a child of ``os.fork()``: take the parent's workers out of multiprocessing's
    list of this process's children, whose exit handler would otherwise terminate them
    (and fail to join them) when the child exits."""
    children = getattr(multiprocessing.process, "_children", None)
    if not isinstance(children, set):
        return
    for pool in list(_POOLS):
        for worker in pool._workers:
            children.discard(worker.process)


os.register_at_fork(after_in_child=_forget_workers_in_child)
