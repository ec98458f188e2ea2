"""Benchmark case: GetAncestors through the full stack.

The same case as :mod:`vmstack.benchmarks.ancestors`, with the VM under test built by
:func:`vmstack.stack.build_stack`: the C-chain VM with its transition early in the chain,
the pass-through layers named ``C``, the proposer layer with its fork early in the chain
too, and the layers named ``proposervm`` (OpenTelemetry's API tracer, which records nothing
unless an SDK is configured, and a Prometheus registry). The serial baseline goes through
every layer once per block, as an engine's fallback does. BatchedParseBlock through the
full stack, on signed envelopes, is in :mod:`vmstack.benchmarks.parse`.
"""

from __future__ import annotations

import attrs
from opentelemetry import trace
from prometheus_client import CollectorRegistry

from vmstack.benchmarks import Comparison, ancestors
from vmstack.clock import Clock
from vmstack.interfaces import ChainVM
from vmstack.stack import build_stack
from vmstack.store import KeyValueStore

__all__ = ["full_stack", "run"]

#: Where the cases' clocks start; the transition and the fork come 10 and 20 blocks later.
_START = 1_700_000_000.0


def full_stack(store: KeyValueStore, clock: Clock) -> ChainVM:
    """The full stack over ``store``: transition at block 10, proposer fork at block 20."""
    return build_stack(
        store,
        clock=clock,
        transition_time=_START + 20.0,
        fork_time=_START + 40.0,
        tracer=trace.get_tracer("vmstack.bench"),
        registry=CollectorRegistry(),
    )


def run(quick: bool) -> list[Comparison]:
    """The ancestors case through :func:`full_stack`."""
    rows = ancestors.run(quick, make_vm=full_stack)
    return [attrs.evolve(row, case=f"{row.case}, full stack") for row in rows]
