"""What a mempool is, declared once in ``vmstack.interfaces`` and used by submission, the
transition's hand-over and ``generate_chain``."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

import vmstack
from vmstack import interfaces
from vmstack.cchain import CChainVM
from vmstack.cchain.generate import dev_transactions, generate_chain
from vmstack.clock import SimClock
from vmstack.interfaces import (
    Mempool,
    SubmitsTransactions,
    TransactionSink,
    TransactionSource,
    find_layer,
)
from vmstack.stack import build_stack
from vmstack.store import MemoryStore
from vmstack.submission import MempoolHandle, find_mempool, submit_transactions
from vmstack.transition import TransitionVM

_MEMPOOL_METHODS = {"add_transactions", "take_transactions", "submit_transactions"}


def test_the_c_chain_vm_is_a_mempool_source_and_sink() -> None:
    """``CChainVM`` satisfies every mempool protocol it is asked for by the stack."""
    vm = CChainVM(MemoryStore())
    assert isinstance(vm, Mempool)
    assert isinstance(vm, TransactionSink)
    assert isinstance(vm, TransactionSource)
    assert not isinstance(vm, SubmitsTransactions)
    assert find_mempool(vm) is vm


def test_a_layer_without_a_mempool_submits_through_submit_transactions() -> None:
    """A stack whose only way in is ``submit_transactions`` (a client of another process)
    is submitted to through it, and its count is returned."""

    class Client:
        def __init__(self) -> None:
            self.received: list[Any] = []

        def submit_transactions(self, transactions: Iterable[Any]) -> int:
            self.received.extend(transactions)
            return len(self.received)

    client = Client()
    assert isinstance(client, SubmitsTransactions)
    submit: Any = submit_transactions
    assert submit(client, ["a", "b"]) == 2
    assert client.received == ["a", "b"]
    with pytest.raises(ValueError, match="no layer has a mempool"):
        submit(object(), [])


class _ShallowPool:
    """A mempool that holds at most ``capacity`` transactions in one block's gas, counting
    what it is given."""

    def __init__(self, vm: CChainVM, gas_limit: int) -> None:
        self.inner = vm
        self._gas_limit = gas_limit
        self.offered: list[int] = []

    @property
    def chain_id(self) -> int:
        return self.inner.chain_id

    @property
    def gas_limit(self) -> int:
        return self._gas_limit

    def pending_transactions(self) -> int:
        return self.inner.pending_transactions()

    def next_nonce(self, address: bytes) -> int:
        return self.inner.next_nonce(address)

    def add_transactions(self, transactions: Iterable[Any]) -> None:
        batch = list(transactions)
        self.offered.append(len(batch))
        self.inner.add_transactions(batch)

    def take_transactions(self) -> list[Any]:
        return self.inner.take_transactions()

    # The ChainVM methods reach the VM below.
    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_generate_tops_up_through_the_protocol_within_the_gas_limit() -> None:
    """``generate_chain`` reads ``gas_limit`` and ``pending_transactions`` of the mempool it
    finds, so a block is offered no more than its gas can hold."""
    clock = SimClock(0.0)
    pool = _ShallowPool(CChainVM(MemoryStore(), clock=clock), gas_limit=3 * 21_000)
    assert isinstance(pool, Mempool)
    generate_chain(pool, blocks=2, txs_per_block=10, seed=3, clock=clock)
    assert pool.offered and max(pool.offered) <= 3
    assert len(dev_transactions(pool, 2, seed=1)) == 2


def test_the_mempool_protocols_are_declared_only_in_interfaces() -> None:
    """No module but ``vmstack.interfaces`` declares a Protocol with a mempool's methods."""
    package = Path(vmstack.__file__).parent
    declaring = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            bases = {ast.unparse(base) for base in node.bases}
            methods = {item.name for item in node.body if isinstance(item, ast.FunctionDef)}
            if "Protocol" in bases and methods & _MEMPOOL_METHODS:
                declaring.append(f"{path.relative_to(package)}:{node.name}")
    assert declaring == [
        "interfaces.py:TransactionSink",
        "interfaces.py:TransactionSource",
        "interfaces.py:SubmitsTransactions",
    ]
    assert {"Mempool", "TransactionSink", "TransactionSource", "SubmitsTransactions"} <= set(
        interfaces.__all__
    )


def test_the_refusal_of_a_stack_without_a_mempool_is_written_once() -> None:
    """``find_mempool`` (vmstack.submission) is the one refusal: ``submit_transactions``
    raises its very message, ``generate_chain``'s module uses the same function, and no
    other module of the package writes the message."""
    with pytest.raises(ValueError) as found:
        find_mempool(object())
    submit: Any = submit_transactions
    with pytest.raises(ValueError) as submitted:
        submit(object(), [])
    assert str(submitted.value) == str(found.value)
    from vmstack.cchain import generate

    assert generate.find_mempool is find_mempool  # type: ignore[attr-defined]  # re-exported
    package = Path(vmstack.__file__).parent
    writing = sorted(
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if "no layer has a mempool" in path.read_text()
    )
    assert writing == ["submission.py"]


def test_the_mempool_handle_of_a_transition_stack_stays_valid_across_the_transition() -> None:
    """A handle taken before the transition reads and feeds the post VM's mempool after
    it; pending() and queued() read without draining."""
    clock = SimClock(1_000.0)
    vm = build_stack(MemoryStore(), transition_time=1_005.0, clock=clock)
    assert vmstack.find_mempool is find_mempool
    handle = find_mempool(vm)
    assert isinstance(handle, MempoolHandle) and isinstance(handle, Mempool)
    transition = find_layer(vm, TransitionVM)
    before = dev_transactions(vm, 2, seed=3)
    handle.add_transactions(before)
    assert handle.pending() == before and handle.queued() == []
    assert find_layer(transition.pre, CChainVM).pending_transactions() == 2
    generate_chain(vm, blocks=4, txs_per_block=0, seed=1, clock=clock)
    assert transition.transitioned
    after = dev_transactions(vm, 2, seed=4)
    handle.add_transactions(after)
    post = find_layer(transition.post, CChainVM)
    assert post.pending_transactions() == 2 and handle.pending() == post.pending()
    assert handle.pending_transactions() == 2 and len(handle.pending()) == 2
