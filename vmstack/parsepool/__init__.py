"""ParsePool: worker processes for the CPU-bound, independent checks of a large parse batch.

A batched parse (ARCHITECTURE.md, section 3, rule 7) does some work per element that
depends on nothing else in the batch and costs far more than it takes to send: the staking
signature of every post-fork envelope (a P-256 or RSA verify, about 0.3 ms in
pycryptodome, which holds the GIL, so threads do not help). A layer hands such work to a
pool with :meth:`ParsePool.submit` and keeps doing its cheap serial work meanwhile; it then
reads the results with :meth:`PendingResults.results` and walks the batch in its own serial
order, consulting them, so answers and errors are the serial parse's, element for element.
Every worker gets the whole batch and claims items one at a time from the front, through a
counter in shared memory; ``results`` makes the caller claim and run items from the back
until the two ends meet (it would otherwise sit waiting), so a worker whose core is busy
with other processes takes fewer, and one that never ran is not waited for.

The rules the pool keeps:

- It is an optimisation only: every way it can fail (below the threshold, closed, busy with
  another thread's batch, no worker ready, a worker that died, is stopped or does not
  answer within ``timeout``) makes :meth:`ParsePool.submit` or
  :meth:`PendingResults.results` answer ``None``, and the caller does the work serially.
  Nothing it does can change an answer.
- The caller never waits without a deadline, and never on anything a worker holds. Its
  writes to a worker's pipe are non-blocking, bounded by ``timeout`` in all (a stopped
  worker that does not read makes the batch serial, it does not hang the caller); every
  wait for an answer is bounded by ``timeout``; the claims are words of shared memory
  that the caller reads and writes without a lock (the workers take the front under a lock
  of their own, which the caller never takes, so a killed worker can leave nothing held
  that the caller waits on; two ends that meet may both run one item, whose result is the
  same). An
  answer is read only once the pipe holds all of it.
- Workers start in the background (:meth:`ParsePool.start`, which the proposer layer calls
  when it is built; else the first batch at or over ``threshold``), and no batch waits for
  one: a worker takes batches once it has answered a warm-up batch that imports what it
  will run, and a batch submitted before any worker is ready stays serial. A worker still
  busy with an earlier batch is not sent a new one; one that owes an answer for longer
  than ``timeout`` counts as stuck. The start method is ``forkserver`` (``spawn`` where
  there is none), never a plain ``fork`` of a process that runs grpc, LMDB or
  OpenTelemetry threads. A worker imports the module of the function it runs (with the
  packages above it) and, as multiprocessing does for these start methods, the main module
  of the program, whose entry point must therefore be guarded (``if __name__ ==
  "__main__":``). multiprocessing's forkserver, one per process and shared, stays until the
  process exits; it is not a worker. The first pool of a process to start it asks it to
  load the worker loop and that module once, so every worker forked later (a stack built
  after another, a pool started afresh) is ready within milliseconds instead of
  importing them beside the caller's first batch. Each worker has its own pipe, written
  and read by the calling thread itself: no helper thread has to win the GIL from a busy
  caller before the work reaches the workers.
- It never leaks a process: :meth:`ParsePool.close` (also the context manager's exit, and a
  ``weakref.finalize`` when a forgotten pool is collected or the interpreter exits) stops
  and reaps every worker within a bounded wait (killed if need be); the workers are
  daemonic, so they also die with this process. A pool whose worker died, was stuck or
  failed is torn down (killed: a stopped worker too) with one log line and started afresh
  in the background; after :data:`MAX_FAILURES` such failures it stays serial for good.
  A closed pool answers every batch ``None`` (the caller's serial path): using one after
  ``close`` is not an error.
- It belongs to the process that made it. In a child made by ``os.fork()`` the pool (a
  copy of the parent's) behaves as closed: every batch is serial, ``close`` is quiet, and
  nothing the child does reaches the parent's workers (nor does multiprocessing's exit
  handler in the child terminate them).

The pool knows nothing about blocks: the layers decide what to send (ARCHITECTURE.md,
section 5: it is injected, keyword-only, never a module global). Only the proposer layer
sends anything, as profiling found: its signature checks are about three quarters of a
signed block's parse through the full stack. The C-chain VM's lazy parse is not worth
sending: per block of 10 transactions it hashes the header slice (about 40 µs), decodes the
header (about 45 µs) and checks the body's framing, and a decoded header costs about 30 µs
to pickle back, so a worker could take only the hash, at the price of a round trip, while
the caller's core is already shared with the signature workers.

The package's modules: :mod:`~vmstack.parsepool.pool` (:class:`ParsePool`,
:class:`PendingResults`), :mod:`~vmstack.parsepool.worker` (the worker processes and
their pipes) and :mod:`~vmstack.parsepool.claims` (how a batch is shared out).
"""

from vmstack.parsepool.pool import (
    DEFAULT_TIMEOUT,
    MAX_FAILURES,
    PARALLEL_THRESHOLD,
    START_TIMEOUT,
    ParsePool,
    PendingResults,
    available_cores,
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
