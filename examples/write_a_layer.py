"""Write a layer of your own and prove it with the conformance kit.

``CountingVM`` counts the calls that go through it, per method: a third-party layer of the
kind a simulator adds to see what the engine asks for. It follows the shape of every vmstack
layer:

- ``inner`` first, everything else keyword-only;
- whether the VM below batches kept by a ``BatchingWatch``, made once: its answer exposed
  as ``batching`` and its changes offered as ``watch_batching``; both batched methods
  always present, forwarding ONE call when the VM below batches (``watch.ready()``) and
  raising ``BatchingNotImplemented`` (``refusal``) when it does not;
- every block it returns wrapped in its own ``CountingBlock``, so ``verify/accept/reject``
  pass through it too;
- every forwarded method written out.

``TestCountingVM`` below is all it takes to run the kit on it: a pass-through layer
declares nothing. A layer that is more (a cache, a layer that answers batched calls itself)
says so in ``declarations`` (see ``vmstack.conformance.Declaration``), and the kit checks
what such a layer must guarantee instead. Run this file::

    python examples/write_a_layer.py

It shows the layer at work, then runs the conformance tests with pytest and exits non-zero
if any fails.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Sequence

import pytest

from vmstack import ChainVM, describe_stack, get_ancestors
from vmstack.conformance import LayerConformance, memory_vm
from vmstack.interfaces import Block
from vmstack.wrappers.base import BatchingWatch, WrappedBlock, refusal


class CountingBlock(WrappedBlock):
    """A block returned by :class:`CountingVM`; its decisions are counted too."""

    __slots__ = ("_counts",)

    def __init__(self, inner: Block, counts: Counter[str]) -> None:
        super().__init__(inner)
        self._counts = counts

    def verify(self) -> None:
        self._counts["block.verify"] += 1
        self._inner.verify()

    def accept(self) -> None:
        self._counts["block.accept"] += 1
        self._inner.accept()

    def reject(self) -> None:
        self._counts["block.reject"] += 1
        self._inner.reject()


class CountingVM:
    """Counts every call per method in :attr:`counts`, then forwards it unchanged."""

    def __init__(self, inner: ChainVM, *, name: str = "counting") -> None:
        self._inner = inner
        self._below = BatchingWatch(inner)
        self.name = name
        self.counts: Counter[str] = Counter()

    @property
    def inner(self) -> ChainVM:
        return self._inner

    @property
    def batching(self) -> bool:
        return self._below.now

    def watch_batching(self, callback: Callable[[bool], None]) -> bool:
        return self._below.watch(callback)

    def get_block(self, block_id: bytes) -> CountingBlock:
        self.counts["get_block"] += 1
        return CountingBlock(self._inner.get_block(block_id), self.counts)

    def parse_block(self, data: bytes) -> CountingBlock:
        self.counts["parse_block"] += 1
        return CountingBlock(self._inner.parse_block(data), self.counts)

    def build_block(self) -> CountingBlock:
        self.counts["build_block"] += 1
        return CountingBlock(self._inner.build_block(), self.counts)

    def set_preference(self, block_id: bytes) -> None:
        self.counts["set_preference"] += 1
        self._inner.set_preference(block_id)

    def last_accepted(self) -> bytes:
        self.counts["last_accepted"] += 1
        return self._inner.last_accepted()

    def get_block_id_at_height(self, height: int) -> bytes:
        self.counts["get_block_id_at_height"] += 1
        return self._inner.get_block_id_at_height(height)

    def get_ancestors(self, block_id: bytes, max_blocks_num: int, max_blocks_size: int,
                      max_retrieval_time: float) -> list[bytes]:
        batched = self._below.ready()
        if batched is None:
            raise refusal(f"CountingVM({self.name})", self._inner)
        self.counts["get_ancestors"] += 1
        return batched.get_ancestors(block_id, max_blocks_num, max_blocks_size,
                                     max_retrieval_time)

    def batched_parse_block(self, blocks: Sequence[bytes]) -> list[CountingBlock]:
        batched = self._below.ready()
        if batched is None:
            raise refusal(f"CountingVM({self.name})", self._inner)
        self.counts["batched_parse_block"] += 1
        return [CountingBlock(block, self.counts)
                for block in batched.batched_parse_block(blocks)]


class TestCountingVM(LayerConformance):
    """CountingVM passes the vmstack layer conformance kit."""

    def wrap(self, inner: ChainVM) -> ChainVM:
        return CountingVM(inner)


def test_a_batched_request_counts_once() -> None:
    """A batched request of 100 blocks is one counted call; the fallback counts each block."""
    batching = CountingVM(memory_vm(batching=True, blocks=150))
    get_ancestors(batching, batching.inner.last_accepted(), max_blocks_num=100)
    assert batching.counts == Counter({"get_ancestors": 1})
    serial = CountingVM(memory_vm(batching=False, blocks=150))
    get_ancestors(serial, serial.inner.last_accepted(), max_blocks_num=100)
    assert serial.counts == Counter({"get_block": 100})


def main() -> int:
    """Show the layer at work, then run its conformance tests; return pytest's exit code."""
    vm = CountingVM(memory_vm(batching=True, blocks=500))
    answer = get_ancestors(vm, vm.inner.last_accepted())
    print(describe_stack(vm))
    print(f"get_ancestors returned {len(answer)} blocks; calls seen: {dict(vm.counts)}")
    # This file is the script and the test module at once: vmstack and Hypothesis are
    # imported before pytest starts, so pytest cannot rewrite their asserts (and says so).
    return int(pytest.main([__file__, "-q", "-p", "no:cacheprovider",
                            "-W", "ignore::pytest.PytestAssertRewriteWarning"]))


if __name__ == "__main__":
    sys.exit(main())
