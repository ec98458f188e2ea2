"""MeteredVM: one prometheus-client histogram observation per call, over any ``ChainVM``.

Each method has a histogram ``{namespace}_{method}_duration_seconds`` with one label,
``outcome``: ``"success"``, ``"error"``, or, for the batched methods,
``"not_implemented"`` (the VM below raised ``BatchingNotImplemented``). The blocks it returns
are :class:`MeteredBlock`\\ s, metered as ``{namespace}_block_verify_duration_seconds`` etc.

Histograms live in the ``registry`` the caller passes, never in prometheus-client's global
one, so two stacks in one process (two nodes of a simulation) keep their figures apart. The
batched histograms are registered only when the VM below batches: a metric that cannot move
is not exported. A batched call is ONE observation, never one per block.

Errors from below are observed with ``outcome="error"`` and re-raised unchanged, the very
object. When the VM below cannot batch, the batched methods refuse at once without an
observation; the engine's fallback that follows is metered call by call.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from time import perf_counter
from types import TracebackType

from prometheus_client import CollectorRegistry, Histogram

from vmstack.errors import BatchingNotImplemented
from vmstack.interfaces import Block, ChainVM
from vmstack.wrappers.base import BatchingWatch, WrappedBlock, refusal

__all__ = ["DURATION_BUCKETS", "ERROR", "MeteredBlock", "MeteredVM", "NOT_IMPLEMENTED", "SUCCESS"]

#: Upper bounds of the duration histograms, in seconds: from 10 µs (one block from the
#: store) to 2.5 s, since a whole batched answer takes milliseconds.
DURATION_BUCKETS: tuple[float, ...] = (
    1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3,
    1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1.0, 2.5,
)

#: ``outcome`` of a call that returned.
SUCCESS = "success"
#: ``outcome`` of a call that raised (anything but ``BatchingNotImplemented`` on a batched one).
ERROR = "error"
#: ``outcome`` of a batched call that the VM below answered with ``BatchingNotImplemented``.
NOT_IMPLEMENTED = "not_implemented"

_NAMESPACE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")


class _Timing:
    """The histogram of one method, with its children per outcome bound in advance."""

    __slots__ = ("error", "histogram", "not_implemented", "success")

    def __init__(self, histogram: Histogram, *, batched: bool) -> None:
        self.histogram = histogram
        self.success = histogram.labels(outcome=SUCCESS)
        self.error = histogram.labels(outcome=ERROR)
        self.not_implemented = (histogram.labels(outcome=NOT_IMPLEMENTED) if batched
                                else self.error)

    def timed(self) -> _Observation:
        """A context that observes the call it surrounds once, by its outcome."""
        return _Observation(self)


class _Observation:
    """One call timed into one histogram: ``success`` when it returns, ``not_implemented``
    for ``BatchingNotImplemented``, ``error`` for any other ``Exception``; the exception
    passes on unchanged, the very object. Anything that is not an ``Exception``
    (``KeyboardInterrupt``) passes on unobserved."""

    __slots__ = ("_started", "_timing")

    def __init__(self, timing: _Timing) -> None:
        self._timing = timing

    def __enter__(self) -> None:
        self._started = perf_counter()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        elapsed = perf_counter() - self._started
        timing = self._timing
        if exc is None:
            timing.success.observe(elapsed)
        elif isinstance(exc, BatchingNotImplemented):
            timing.not_implemented.observe(elapsed)
        elif isinstance(exc, Exception):
            timing.error.observe(elapsed)


class _Meters:
    """Every histogram of one metered layer, shared by the layer and its blocks."""

    __slots__ = ("_batched_timing", "accept", "batched_parse_block", "build_block",
                 "get_ancestors", "get_block", "get_block_id_at_height", "last_accepted",
                 "namespace", "parse_block", "registry", "reject", "set_preference", "verify")

    def __init__(self, registry: CollectorRegistry, namespace: str, *, batching: bool,
                 buckets: Sequence[float]) -> None:
        self.registry = registry
        self.namespace = namespace
        created: list[Histogram] = []

        def timing(metric: str, what: str, *, batched: bool = False) -> _Timing:
            histogram = Histogram(
                f"{namespace}_{metric}_duration_seconds",
                f"Duration of {what} through MeteredVM({namespace}), by outcome.",
                labelnames=("outcome",), registry=registry, buckets=buckets)
            created.append(histogram)
            return _Timing(histogram, batched=batched)

        try:
            self.get_block = timing("get_block", "get_block calls")
            self.parse_block = timing("parse_block", "parse_block calls")
            self.build_block = timing("build_block", "build_block calls")
            self.set_preference = timing("set_preference", "set_preference calls")
            self.last_accepted = timing("last_accepted", "last_accepted calls")
            self.get_block_id_at_height = timing("get_block_id_at_height",
                                                 "get_block_id_at_height calls")
            self.verify = timing("block_verify", "block verify calls")
            self.accept = timing("block_accept", "block accept calls")
            self.reject = timing("block_reject", "block reject calls")
            self.get_ancestors: _Timing | None = None
            self.batched_parse_block: _Timing | None = None
            self._batched_timing = timing
            if batching:
                self.batched_timings()
        except ValueError as error:
            for histogram in created:
                registry.unregister(histogram)
            raise ValueError(
                f"cannot register the metrics of MeteredVM({namespace}) in this registry: "
                f"{error} (each metered layer of a registry needs its own namespace)"
            ) from error


    def batched_timings(self) -> tuple[_Timing, _Timing]:
        """The batched histograms, registered the first time the VM below can batch: they
        exist only where the capability does (a VM below a transition gains it later)."""
        if self.get_ancestors is None or self.batched_parse_block is None:
            make = self._batched_timing
            self.get_ancestors = make("get_ancestors", "batched get_ancestors calls",
                                      batched=True)
            self.batched_parse_block = make("batched_parse_block",
                                            "batched_parse_block calls", batched=True)
        return self.get_ancestors, self.batched_parse_block


class MeteredBlock(WrappedBlock):
    """A block returned by :class:`MeteredVM`; ``verify/accept/reject`` are observed in
    ``{namespace}_block_verify_duration_seconds`` etc. and reach the inner block."""

    __slots__ = ("_meters",)

    def __init__(self, inner: Block, meters: _Meters) -> None:
        super().__init__(inner)
        self._meters = meters

    def verify(self) -> None:
        with self._meters.verify.timed():
            self._inner.verify()

    def accept(self) -> None:
        with self._meters.accept.timed():
            self._inner.accept()

    def reject(self) -> None:
        with self._meters.reject.timed():
            self._inner.reject()


class MeteredVM:
    """A pass-through layer that times every call of ``inner`` into ``registry``.

    ``namespace`` prefixes the metric names and must be a valid Prometheus name
    (``[a-zA-Z_:][a-zA-Z0-9_:]*``); one registry holds one metered layer per namespace, and
    a second one raises ``ValueError``. ``buckets`` are the histograms' upper bounds in
    seconds. The batched methods exist always: they forward one call when ``inner``
    batches and raise ``BatchingNotImplemented`` otherwise (see
    :mod:`vmstack.wrappers.base`).
    """

    __slots__ = ("_below", "_inner", "_meters")

    def __init__(self, inner: ChainVM, *, registry: CollectorRegistry, namespace: str,
                 buckets: Sequence[float] = DURATION_BUCKETS) -> None:
        if not isinstance(namespace, str) or not _NAMESPACE.match(namespace):
            raise ValueError(
                f"a MeteredVM namespace must match [a-zA-Z_:][a-zA-Z0-9_:]*, got {namespace!r}")
        if not isinstance(registry, CollectorRegistry):
            raise ValueError(
                f"a MeteredVM needs an explicit CollectorRegistry, got {registry!r}")
        self._inner = inner
        self._below = BatchingWatch(inner)
        self._meters = _Meters(registry, namespace, batching=self.batching, buckets=buckets)

    @property
    def inner(self) -> ChainVM:
        """The VM below this layer."""
        return self._inner

    @property
    def batching(self) -> bool:
        """Whether batched calls are forwarded (the VM below batches) rather than refused."""
        return self._below.now

    def watch_batching(self, callback: Callable[[bool], None]) -> bool:
        """Subscribe ``callback`` to changes of :attr:`batching` (True), or say the layer
        is asked live because the VM below is (False)."""
        return self._below.watch(callback)

    @property
    def name(self) -> str:
        """The layer's name in a stack description: its namespace."""
        return self._meters.namespace

    @property
    def namespace(self) -> str:
        """The prefix of this layer's metric names."""
        return self._meters.namespace

    @property
    def registry(self) -> CollectorRegistry:
        """The registry holding this layer's histograms."""
        return self._meters.registry

    # --- ChainVM -------------------------------------------------------------------------

    def get_block(self, block_id: bytes) -> MeteredBlock:
        with self._meters.get_block.timed():
            block = self._inner.get_block(block_id)
        return MeteredBlock(block, self._meters)

    def parse_block(self, data: bytes) -> MeteredBlock:
        with self._meters.parse_block.timed():
            block = self._inner.parse_block(data)
        return MeteredBlock(block, self._meters)

    def build_block(self) -> MeteredBlock:
        with self._meters.build_block.timed():
            block = self._inner.build_block()
        return MeteredBlock(block, self._meters)

    def set_preference(self, block_id: bytes) -> None:
        with self._meters.set_preference.timed():
            self._inner.set_preference(block_id)

    def last_accepted(self) -> bytes:
        with self._meters.last_accepted.timed():
            return self._inner.last_accepted()

    def get_block_id_at_height(self, height: int) -> bytes:
        with self._meters.get_block_id_at_height.timed():
            return self._inner.get_block_id_at_height(height)

    # --- BatchedChainVM ------------------------------------------------------------------

    def get_ancestors(self, block_id: bytes, max_blocks_num: int, max_blocks_size: int,
                      max_retrieval_time: float) -> list[bytes]:
        batched = self._below.ready()
        if batched is None:
            raise refusal(f"MeteredVM({self._meters.namespace})", self._inner)
        with (self._meters.get_ancestors or self._meters.batched_timings()[0]).timed():
            return batched.get_ancestors(block_id, max_blocks_num, max_blocks_size,
                                         max_retrieval_time)

    def batched_parse_block(self, blocks: Sequence[bytes]) -> list[MeteredBlock]:
        batched = self._below.ready()
        if batched is None:
            raise refusal(f"MeteredVM({self._meters.namespace})", self._inner)
        with (self._meters.batched_parse_block or self._meters.batched_timings()[1]).timed():
            parsed = batched.batched_parse_block(blocks)
        meters = self._meters
        return [MeteredBlock(block, meters) for block in parsed]

    def __repr__(self) -> str:
        return f"MeteredVM({self._inner!r}, namespace={self._meters.namespace!r})"
