"""Benchmark case: what the pass-through layers cost on a batched request.

A batched ``get_ancestors`` of 2000 blocks through ``TracedVM`` (an OpenTelemetry SDK tracer
exporting to memory) over ``MeteredVM`` (a prometheus-client registry), against the same
request to the bare VM. The layers add one span and one observation per call, whatever the
number of blocks, so the goal is to stay within 2% of the bare call. The baseline beside it
is the serial fallback through the same layers, one span and one observation per block: what
the layers would cost if they did not forward the batch.

The inner VM is a parameter (any VM that batches, with ``block_id`` the newest block of a
chain of at least 2000 blocks); by default a :class:`~vmstack.conformance.BatchedMemoryVM`.

The two batched paths are timed in interleaved rounds (bare, layered, layered, bare, …) and
the overhead is the median of the per-round ratios, so that drift of the machine's speed
during the run cancels out.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable

from opentelemetry.trace import NoOpTracer, Tracer

from vmstack.batching import MAX_CONTAINERS_LEN, AncestorBudget, get_ancestors, walk_ancestors
from vmstack.benchmarks import Comparison, alternated_medians
from vmstack.interfaces import ChainVM
from vmstack.layers import supports_batching

__all__ = ["BLOCKS", "run"]

#: Blocks per request: the engine's default ``max_blocks_num``.
BLOCKS = 2000
#: A time budget no run reaches, so every path returns all the blocks.
_TIME_BUDGET = 60.0


def _sdk_tracer() -> tuple[Tracer, str]:
    """An SDK tracer exporting to memory, or the API's no-op tracer without the SDK."""
    try:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter,
        )
    except ImportError:
        return NoOpTracer(), "no-op (opentelemetry-sdk is not installed)"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    return provider.get_tracer("vmstack.bench"), "sdk, in-memory exporter"


def _interleaved(
    bare: Callable[[], object], layered: Callable[[], object], *, rounds: int, number: int
) -> tuple[float, float, float]:
    """Median seconds per call of ``bare`` and ``layered``, and the median ratio
    layered / bare over rounds that time both back to back (order alternating)."""
    bare()
    layered()
    bare_times: list[float] = []
    layered_times: list[float] = []
    ratios: list[float] = []
    enabled = gc.isenabled()
    gc.disable()
    try:
        for index in range(rounds):
            pair: dict[str, float] = {}
            order = (("bare", bare), ("layered", layered))
            for name, operation in order if index % 2 == 0 else order[::-1]:
                start = time.perf_counter()
                for _ in range(number):
                    operation()
                pair[name] = (time.perf_counter() - start) / number
            bare_times.append(pair["bare"])
            layered_times.append(pair["layered"])
            ratios.append(pair["layered"] / pair["bare"])
    finally:
        if enabled:
            gc.enable()
    return (
        statistics.median(bare_times),
        statistics.median(layered_times),
        statistics.median(ratios),
    )


def run(
    quick: bool, *, inner: ChainVM | None = None, block_id: bytes | None = None
) -> list[Comparison]:
    """Time a batched ``get_ancestors`` of 2000 blocks through TracedVM + MeteredVM against
    the bare ``inner`` VM (default: a memory VM of 2100 blocks, asked from its tip): once
    with an SDK tracer, once with the API's no-op tracer.

    ``inner`` must batch; ``block_id`` (default: ``inner.last_accepted()``) must have at
    least 1999 ancestors. Raises ``ValueError`` otherwise, or if a layered answer differs
    from the bare one.

    Notes of each row: ``overhead_percent`` (median paired ratio, minus one),
    ``per_call_overhead_us`` (the layers' cost on a one-block request, repeated with warm
    caches), and for the SDK row ``sdk_span_alone_percent``: what one bare SDK span (no
    attributes, no layer) around the same bare call costs, the floor any traced layer pays.
    """
    from prometheus_client import CollectorRegistry

    from vmstack.conformance.doubles import memory_vm
    from vmstack.stack import wrap_layers

    if inner is None:
        inner = memory_vm(batching=True, blocks=BLOCKS + 100)
    if not supports_batching(inner):
        raise ValueError(
            f"the layers benchmark needs a VM that batches, got {type(inner).__name__}"
        )
    bare_vm = inner
    tip = inner.last_accepted() if block_id is None else block_id
    rounds, number = (15, 3) if quick else (41, 5)

    def ask(vm: ChainVM, blocks: int = BLOCKS) -> Callable[[], list[bytes]]:
        def operation() -> list[bytes]:
            return get_ancestors(
                vm,
                tip,
                max_blocks_num=blocks,
                max_blocks_size=MAX_CONTAINERS_LEN * 64,
                max_retrieval_time=_TIME_BUDGET,
            )

        return operation

    def serially(vm: ChainVM) -> Callable[[], list[bytes]]:
        def operation() -> list[bytes]:
            def fetch(wanted: bytes) -> tuple[bytes, bytes]:
                block = vm.get_block(wanted)
                return bytes(block), block.parent_id

            budget = AncestorBudget(BLOCKS, MAX_CONTAINERS_LEN * 64, _TIME_BUDGET)
            return walk_ancestors(fetch, tip, budget).blocks

        return operation

    expected = ask(bare_vm)()
    if len(expected) != BLOCKS:
        raise ValueError(
            f"block {tip.hex()} has {len(expected) - 1} ancestors; the layers "
            f"benchmark asks for {BLOCKS} blocks"
        )

    sdk_tracer, sdk_kind = _sdk_tracer()
    bare_call = ask(bare_vm)

    def in_bare_span() -> list[bytes]:
        span = sdk_tracer.start_span("bench.get_ancestors")
        answer = bare_call()
        span.end()
        return answer

    _, _, span_alone = _interleaved(bare_call, in_bare_span, rounds=rounds, number=number)
    comparisons: list[Comparison] = []
    for tracer, tracer_kind in (
        (sdk_tracer, sdk_kind),
        (NoOpTracer(), "no-op (OpenTelemetry API only)"),
    ):
        layered = wrap_layers(bare_vm, name="C", tracer=tracer, registry=CollectorRegistry())
        if ask(layered)() != expected or serially(layered)() != expected:
            raise ValueError("the layered stack answers differently from the bare VM")
        bare_seconds, layered_seconds, ratio = _interleaved(
            ask(bare_vm), ask(layered), rounds=rounds, number=number
        )
        one_bare, one_layered, _ = _interleaved(
            ask(bare_vm, 1), ask(layered, 1), rounds=rounds, number=100
        )
        notes: dict[str, float | int | str] = {
            "overhead_percent": round((ratio - 1.0) * 100.0, 2),
            "per_call_overhead_us": round((one_layered - one_bare) * 1e6, 1),
            "inner": type(bare_vm).__name__,
            "tracer": tracer_kind,
            "blocks": BLOCKS,
        }
        if tracer is sdk_tracer and not isinstance(tracer, NoOpTracer):
            notes["sdk_span_alone_percent"] = round((span_alone - 1.0) * 100.0, 2)
        comparisons.append(
            Comparison(
                group="layers",
                case=f"get_ancestors {BLOCKS} blocks, TracedVM + MeteredVM, "
                f"{'sdk' if tracer is sdk_tracer else 'no-op'} tracer",
                fast_seconds=layered_seconds,
                baseline_seconds=alternated_medians(
                    (ask(layered), serially(layered)), repeat=3 if quick else 5
                )[1],
                floor_seconds=bare_seconds,
                fast_label="batched through the layers",
                baseline_label="serial through the layers",
                floor_label="bare VM, batched",
                goal="<= 1.02x floor",
                notes=notes,
            ).judged(max_over_floor=1.02)
        )
    return comparisons
