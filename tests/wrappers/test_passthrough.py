"""Tests for PassThroughVM (vmstack.layers): one hook sees every call, once, and changes
nothing; a third-party counting layer on it is short and passes the kit."""

from __future__ import annotations

import importlib.util
import inspect
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import pytest

from vmstack import BatchingNotImplemented, BlockNotFound, ChainVM, get_ancestors
from vmstack.conformance import LayerConformance, memory_vm
from vmstack.layers import METHODS
from vmstack.wrappers import PassThroughBlock, PassThroughVM

T = TypeVar("T")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "write_a_layer.py"


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("write_a_layer_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # so that inspect finds the source of its classes
    spec.loader.exec_module(module)
    return module


CountingVM = _example().CountingVM


class RecordingVM(PassThroughVM):
    """Records what its hook is given."""

    def __init__(self, inner: ChainVM) -> None:
        super().__init__(inner)
        self.seen: list[tuple[str, tuple[Any, ...]]] = []

    def intercept(self, method: str, forward: Callable[..., T], *args: Any) -> T:
        self.seen.append((method, args))
        return forward(*args)


# The whole kit; TracedVM and MeteredVM run it on the same base in the quick loop.
@pytest.mark.thorough
class TestExampleCountingVM(LayerConformance):
    """The example's CountingVM, a third party's pass-through layer, passes the kit."""

    def wrap(self, inner: ChainVM) -> ChainVM:
        return CountingVM(inner)


def test_the_example_counting_layer_is_at_most_30_lines() -> None:
    """A pass-through layer that counts calls takes at most 30 lines on the base."""
    lines = inspect.getsource(CountingVM).splitlines()
    assert len(lines) <= 30, len(lines)
    assert issubclass(CountingVM, PassThroughVM)


def test_every_call_goes_through_the_hook_once() -> None:
    """Each method, the batched ones and the blocks' decisions reach the hook once, named,
    with the caller's arguments (a decision's argument is the block below)."""
    inner = memory_vm(batching=True, blocks=4)
    layer = RecordingVM(inner)
    tip = inner.last_accepted()
    block = layer.get_block(tip)
    layer.parse_block(bytes(block))
    built = layer.build_block()
    layer.set_preference(tip)
    layer.last_accepted()
    layer.get_block_id_at_height(2)
    layer.get_ancestors(tip, 3, 10_000, 1.0)
    (parsed,) = layer.batched_parse_block([bytes(block)])
    built.verify()
    built.accept()
    layer.build_block().reject()
    assert [method for method, _ in layer.seen] == [
        "get_block",
        "parse_block",
        "build_block",
        "set_preference",
        "last_accepted",
        "get_block_id_at_height",
        "get_ancestors",
        "batched_parse_block",
        "block.verify",
        "block.accept",
        "build_block",
        "block.reject",
    ]
    assert set(METHODS) == {method for method, _ in layer.seen}
    assert layer.seen[0] == ("get_block", (tip,))
    assert layer.seen[6] == ("get_ancestors", (tip, 3, 10_000, 1.0))
    assert layer.seen[8][1] == (built.inner,)
    assert all(
        isinstance(b, PassThroughBlock) and b.inner.id == b.id for b in (block, built, parsed)
    )
    assert inner.calls_to("block.accept") and inner.last_accepted() == built.id


def test_refusal_calls_no_hook_and_nothing_below() -> None:
    """Over a VM without the batched methods both refuse at once, naming the layer."""
    inner = memory_vm(batching=False, blocks=3)
    tip = inner.last_accepted()
    inner.forget_records()
    layer = RecordingVM(inner)
    assert not layer.batching
    with pytest.raises(BatchingNotImplemented, match="RecordingVM cannot batch"):
        layer.get_ancestors(tip, 3, 10_000, 1.0)
    with pytest.raises(BatchingNotImplemented):
        layer.batched_parse_block([])
    assert layer.seen == [] and inner.calls == []


def test_errors_pass_through_the_hook_unchanged() -> None:
    """An error from below reaches the caller as the very object."""
    inner = memory_vm(batching=True)
    error = BlockNotFound("injected")
    inner.fail_next("get_block", error)
    with pytest.raises(BlockNotFound) as raised:
        RecordingVM(inner).get_block(bytes(32))
    assert raised.value is error


def test_the_counting_layer_counts_a_batched_request_once() -> None:
    """One batched request is one count; the fallback counts each block."""
    batching = CountingVM(memory_vm(batching=True, blocks=50))
    get_ancestors(batching, batching.inner.last_accepted(), max_blocks_num=20)
    assert batching.counts == Counter({"get_ancestors": 1})
    serial = CountingVM(memory_vm(batching=False, blocks=50))
    get_ancestors(serial, serial.inner.last_accepted(), max_blocks_num=20)
    assert serial.counts == Counter({"get_block": 20})


class _OwnID(PassThroughBlock):
    """A layer's block that answers an ID of its own: not a mere forwarder."""

    __slots__ = ()

    @property
    def id(self) -> bytes:
        return b"own" * 8


def test_fact_holders_read_through_forwarding_layers_only() -> None:
    """fact_holders unwraps every block of a layer that forwards its facts and bytes, as
    deep as such layers go, mixed kinds included; a block answering a fact of its own
    stays, and each holder answers its block's facts and bytes."""
    from vmstack.layers import fact_holders

    base = memory_vm()
    wrapped = RecordingVM(RecordingVM(base)).build_block()
    block = wrapped.inner.inner  # type: ignore[attr-defined]
    own = _OwnID(wrapped, RecordingVM(base))
    holders = fact_holders([wrapped, block, own, wrapped])
    assert holders[0] is holders[3] and holders[1] is block
    assert holders[0] is wrapped.inner.inner  # type: ignore[attr-defined]
    assert holders[2] is own
    for original, holder in zip([wrapped, block, own], holders, strict=False):
        for fact in ("id", "parent_id", "height", "timestamp"):
            assert getattr(holder, fact) == getattr(original, fact)
        assert bytes(holder) == bytes(original)
    assert fact_holders([wrapped, wrapped]) == [wrapped.inner.inner] * 2  # type: ignore[attr-defined]
    assert fact_holders([]) == []
