"""Write a layer of your own and prove it with the conformance kit.

``CountingVM`` counts the calls that go through it, per method: a third-party layer of the
kind a simulator adds to see what the engine asks for. It is a pass-through layer, so it
subclasses ``vmstack.wrappers.PassThroughVM``, which does what every vmstack layer must:

- ``inner`` first, everything else keyword-only; ``inner``, ``name`` and ``batching``
  (whether the VM below batches now) for ``describe_stack``;
- every method forwarded as one call below, both batched methods as ONE call when the VM
  below batches, refused with ``BatchingNotImplemented`` at once when it cannot;
- every block it returns wrapped, so ``verify/accept/reject`` pass through it too.

The layer overrides one hook, ``intercept(method, forward, *args)``, through which every
call goes (``method`` is ``"get_block"``, ``"get_ancestors"``, ``"block.verify"``...): it
counts the call, then makes it with ``forward(*args)``, once, and returns its answer.

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
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from vmstack import ChainVM, describe_stack, get_ancestors
from vmstack.conformance import LayerConformance, memory_vm
from vmstack.wrappers import PassThroughVM

T = TypeVar("T")


class CountingVM(PassThroughVM):
    """Counts every call per method in :attr:`counts`, then forwards it unchanged."""

    def __init__(self, inner: ChainVM, *, name: str = "counting") -> None:
        super().__init__(inner, name=name)
        self.counts: Counter[str] = Counter()

    def intercept(self, method: str, forward: Callable[..., T], *args: Any) -> T:
        self.counts[method] += 1
        return forward(*args)


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
    return int(
        pytest.main(
            [
                __file__,
                "-q",
                "-p",
                "no:cacheprovider",
                "-W",
                "ignore::pytest.PytestAssertRewriteWarning",
            ]
        )
    )


if __name__ == "__main__":
    sys.exit(main())
