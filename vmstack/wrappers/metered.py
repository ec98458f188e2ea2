"""MeteredVM: one prometheus-client histogram observation per call, over any ``ChainVM``.

Each method has a histogram ``{namespace}_{method}_duration_seconds`` with one label,
``outcome``: ``"success"``, ``"error"``, or, for the batched methods,
``"not_implemented"`` (the VM below raised ``BatchingNotImplemented``). The blocks it returns
are :class:`MeteredBlock`\\ s, metered as ``{namespace}_block_verify_duration_seconds`` etc.

Histograms live in the ``registry`` the caller passes, never in prometheus-client's global
one, so two stacks in one process (two nodes of a simulation) keep their figures apart. All
of a layer's histograms are registered when it is built; the batched ones only when the VM
below has the batched methods (the capability is fixed then, as every layer fixes it): a
metric that cannot move is not exported. A batched call is ONE observation, never one per
block.

Errors from below are observed with ``outcome="error"`` and re-raised unchanged, the very
object. When the VM below has no batched methods, the batched methods refuse at once
without an observation; the engine's fallback that follows is metered call by call. A VM
below that has them and cannot batch now (a transition layer before its transition)
refuses the call itself: one ``not_implemented`` observation. The forwarding is
:class:`~vmstack.layers.PassThroughVM`'s; this module adds the timing around
each call (:meth:`MeteredVM.intercept`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from time import perf_counter
from types import TracebackType
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry, Histogram

from vmstack.errors import BatchingNotImplemented
from vmstack.interfaces import ChainVM
from vmstack.layers import PassThroughBlock, PassThroughVM

__all__ = ["DURATION_BUCKETS", "ERROR", "MeteredBlock", "MeteredVM", "NOT_IMPLEMENTED", "SUCCESS"]

ResultT = TypeVar("ResultT")

#: Upper bounds of the duration histograms, in seconds: from 10 µs (one block from the
#: store) to 2.5 s, since a whole batched answer takes milliseconds.
DURATION_BUCKETS: tuple[float, ...] = (
    1e-5,
    2.5e-5,
    5e-5,
    1e-4,
    2.5e-4,
    5e-4,
    1e-3,
    2.5e-3,
    5e-3,
    1e-2,
    2.5e-2,
    5e-2,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
)

#: ``outcome`` of a call that returned.
SUCCESS = "success"
#: ``outcome`` of a call that raised (anything but ``BatchingNotImplemented`` on a batched one).
ERROR = "error"
#: ``outcome`` of a batched call that the VM below answered with ``BatchingNotImplemented``.
NOT_IMPLEMENTED = "not_implemented"

_NAMESPACE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")

#: The metric of each intercepted call (``{namespace}_{metric}_duration_seconds``) and the
#: words of its help text; the batched ones are registered apart, with the methods below.
_ONE_BLOCK = {
    "get_block": ("get_block", "get_block calls"),
    "parse_block": ("parse_block", "parse_block calls"),
    "build_block": ("build_block", "build_block calls"),
    "set_preference": ("set_preference", "set_preference calls"),
    "last_accepted": ("last_accepted", "last_accepted calls"),
    "get_block_id_at_height": ("get_block_id_at_height", "get_block_id_at_height calls"),
    "block.verify": ("block_verify", "block verify calls"),
    "block.accept": ("block_accept", "block accept calls"),
    "block.reject": ("block_reject", "block reject calls"),
}
_BATCHED = {
    "get_ancestors": ("get_ancestors", "batched get_ancestors calls"),
    "batched_parse_block": ("batched_parse_block", "batched_parse_block calls"),
}


class _Timing:
    """The histogram of one method, with its children per outcome bound in advance."""

    __slots__ = ("error", "histogram", "not_implemented", "success")

    def __init__(self, histogram: Histogram, *, batched: bool) -> None:
        self.histogram = histogram
        self.success = histogram.labels(outcome=SUCCESS)
        self.error = histogram.labels(outcome=ERROR)
        self.not_implemented = histogram.labels(outcome=NOT_IMPLEMENTED) if batched else self.error


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

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        elapsed = perf_counter() - self._started
        timing = self._timing
        if exc is None:
            timing.success.observe(elapsed)
        elif isinstance(exc, BatchingNotImplemented):
            timing.not_implemented.observe(elapsed)
        elif isinstance(exc, Exception):
            timing.error.observe(elapsed)


class _Meters:
    """Every histogram of one metered layer, by the name of the call it times, all
    registered as the layer is built."""

    __slots__ = ("buckets", "namespace", "registry", "timings")

    def __init__(
        self,
        registry: CollectorRegistry,
        namespace: str,
        *,
        batched: bool,
        buckets: Sequence[float],
    ) -> None:
        self.registry = registry
        self.namespace = namespace
        self.buckets = buckets
        self.timings: dict[str, _Timing] = {}
        try:
            self._register(_ONE_BLOCK, batched=False)
            if batched:
                self._register(_BATCHED, batched=True)
        except ValueError as error:
            for timing in self.timings.values():
                registry.unregister(timing.histogram)
            raise ValueError(
                f"cannot register the metrics of MeteredVM({namespace}) in this registry: "
                f"{error} (each metered layer of a registry needs its own namespace)"
            ) from error

    def _register(self, metrics: dict[str, tuple[str, str]], *, batched: bool) -> None:
        for method, (metric, what) in metrics.items():
            histogram = Histogram(
                f"{self.namespace}_{metric}_duration_seconds",
                f"Duration of {what} through MeteredVM({self.namespace}), by outcome.",
                labelnames=("outcome",),
                registry=self.registry,
                buckets=self.buckets,
            )
            self.timings[method] = _Timing(histogram, batched=batched)


class MeteredBlock(PassThroughBlock):
    """A block returned by :class:`MeteredVM`; ``verify/accept/reject`` are observed in
    ``{namespace}_block_verify_duration_seconds`` etc. and reach the inner block."""

    __slots__ = ()


class MeteredVM(PassThroughVM):
    """A pass-through layer that times every call of ``inner`` into ``registry``.

    ``namespace`` prefixes the metric names and must be a valid Prometheus name
    (``[a-zA-Z_:][a-zA-Z0-9_:]*``); one registry holds one metered layer per namespace, and
    a second one raises ``ValueError``. ``buckets`` are the histograms' upper bounds in
    seconds. The batched methods exist always: they forward one call when ``inner`` has
    them (observed, a refusal from below as ``not_implemented``) and raise
    ``BatchingNotImplemented`` at once, unobserved, when it has not.
    """

    __slots__ = ("_meters",)

    block_type = MeteredBlock

    def __init__(
        self,
        inner: ChainVM,
        *,
        registry: CollectorRegistry,
        namespace: str,
        buckets: Sequence[float] = DURATION_BUCKETS,
    ) -> None:
        if not isinstance(namespace, str) or not _NAMESPACE.match(namespace):
            raise ValueError(
                f"a MeteredVM namespace must match [a-zA-Z_:][a-zA-Z0-9_:]*, got {namespace!r}"
            )
        if not isinstance(registry, CollectorRegistry):
            raise ValueError(f"a MeteredVM needs an explicit CollectorRegistry, got {registry!r}")
        super().__init__(inner, name=namespace)
        self._meters = _Meters(
            registry, namespace, batched=self._batched is not None, buckets=buckets
        )

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

    def intercept(self, method: str, forward: Callable[..., ResultT], *args: Any) -> ResultT:
        """Make the call inside one observation of its histogram, by outcome. A batched
        call reaches this hook only when the VM below has the batched methods, so its
        histogram exists."""
        with _Observation(self._meters.timings[method]):
            return forward(*args)

    def __repr__(self) -> str:
        return f"MeteredVM({self._inner!r}, namespace={self._meters.namespace!r})"
