"""A batched call through the full stack that succeeds raises nothing anywhere below it
and formats no traceback: BatchedParseBlock of pre-fork blocks under the proposer layer and
of signed post-fork envelopes with and without the parse pool, and GetAncestors of the
signed chain. (GetAncestors of pre-fork blocks ends the proposer layer's walk of its own
blocks with the store's ``KeyError`` for the first block it does not hold.)"""

from __future__ import annotations

import functools
import sys
import traceback
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry

from vmstack.batching import MAX_CONTAINERS_LEN, batched_parse_block, get_ancestors
from vmstack.cchain.generate import generate_chain
from vmstack.clock import SimClock
from vmstack.closing import close_stack
from vmstack.interfaces import ChainVM
from vmstack.stack import build_stack
from vmstack.store import MemoryStore
from vmstack.wrappers.proposer import StakingKey

START = 1_700_000_000.0
KEY = StakingKey.generate(seed=b"quiet batched path")


def _stack(store: MemoryStore, clock: SimClock, *, signed: bool, workers: int = 0) -> ChainVM:
    return build_stack(
        store,
        clock=clock,
        transition_time=START + 2.0 if signed else START + 20.0,
        fork_time=0 if signed else START + 40.0,
        staking_key=KEY if signed else None,
        tracer=TracerProvider().get_tracer("quiet test"),
        registry=CollectorRegistry(),
        parse_workers=workers,
    )


def _raised_during(call: Callable[[], object]) -> list[str]:
    """Every exception raised (caught or not) while ``call`` runs in this thread, but
    ``GeneratorExit``: how Python closes a generator left before its end, not an error."""
    raised: list[str] = []

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "exception" and arg[0] is not GeneratorExit:
            raised.append(f"{arg[0].__name__} in {frame.f_code.co_filename}:{frame.f_lineno}")
        return trace

    sys.settrace(trace)
    try:
        call()
    finally:
        sys.settrace(None)
    return raised


@pytest.fixture
def no_formatting(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    formatted: list[str] = []
    original = traceback.TracebackException.__init__

    def spy(self: traceback.TracebackException, *args: Any, **kwargs: Any) -> None:
        formatted.append("TracebackException")
        original(self, *args, **kwargs)

    monkeypatch.setattr(traceback.TracebackException, "__init__", spy)
    yield formatted


@pytest.mark.parametrize(
    ("signed", "workers"), [(False, 0), (True, 0), (True, 1)], ids=["pre-fork", "signed", "pool"]
)
def test_a_batched_call_that_succeeds_raises_nothing(
    signed: bool, workers: int, no_formatting: list[str]
) -> None:
    clock = SimClock(START)
    store = MemoryStore()
    builder = _stack(store, clock, signed=signed)
    ids = generate_chain(builder, blocks=30, txs_per_block=2, seed=3, clock=clock)
    parser = _stack(store, clock, signed=signed, workers=workers)
    try:
        newest = get_ancestors(
            parser,
            ids[-1],
            max_blocks_num=30,
            max_blocks_size=MAX_CONTAINERS_LEN,
            max_retrieval_time=60.0,
        )
        assert len(newest) == 30
        batched_parse_block(parser, newest[:4])  # warm: whatever is done once is done
        for size in (4, 30):
            batch = newest[:size]
            assert _raised_during(functools.partial(batched_parse_block, parser, batch)) == []
        assert not signed or (
            _raised_during(
                lambda: get_ancestors(
                    parser,
                    ids[-1],
                    max_blocks_num=30,
                    max_blocks_size=MAX_CONTAINERS_LEN,
                    max_retrieval_time=60.0,
                )
            )
            == []
        )
        assert no_formatting == []
    finally:
        close_stack(parser)
        close_stack(builder)


def test_a_refusal_to_batch_formats_no_traceback(no_formatting: list[str]) -> None:
    """Before its transition the stack cannot batch: the refusal passes up through the
    traced layers, which record it without formatting a traceback, and the engine helper
    parses serially."""
    clock = SimClock(START)
    store = MemoryStore()
    builder = _stack(store, clock, signed=False)
    ids = generate_chain(builder, blocks=5, txs_per_block=2, seed=3, clock=clock)
    parser = _stack(store, clock, signed=False)
    blocks = [bytes(builder.get_block(block_id)) for block_id in ids[1:]]
    assert [block.id for block in batched_parse_block(parser, blocks)] == list(ids[1:])
    assert no_formatting == []
