"""The account state a :class:`~vmstack.cchain.vm.CChainVM` keeps: the state after the last
accepted block, read from the store and re-read when another VM over it accepted a block
(:func:`accepted_base`), a processing block's post-state (:func:`state_of`), and the check
that a restored last accepted block's state root is the stored state's
(:func:`check_state_commitment`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from vmstack.cchain.state import (
    AcceptedState,
    Account,
    State,
    read_account_record,
    read_state_head_record,
)
from vmstack.cchain.types import (
    AnyHeader,
)
from vmstack.errors import (
    BlockNotFound,
    StoreCorrupted,
)
from vmstack.store.base import ReadSnapshot

if TYPE_CHECKING:
    from vmstack.cchain.vm import CChainVM
from vmstack.cchain.opening import check_pages

__all__ = ["accepted_base", "build_on", "check_state_commitment", "reader_of", "state_of"]


def accepted_base(vm: CChainVM, snap: ReadSnapshot, last: bytes | None = None) -> AcceptedState:
    """The state after the last accepted block, as this VM holds it, re-read from
    ``snap`` when the store's last accepted block is another (another VM over the same
    store accepted it). ``last`` is that block as ``vm._chain.last_accepted(snap)`` gave
    it in this same snapshot, when the caller read it already (``None``: read here).
    ``StoreCorrupted`` for a store whose state head is missing, damaged or not the last
    accepted block's, or whose accounts do not give the root the head records."""
    if last is None:
        last = vm._chain.last_accepted(snap)
    base = vm._base
    if base is not None and base.block_id == last:
        return base
    check_pages(snap, (vm._schema.state_head_key(), vm._schema.account_prefix()))
    try:
        head = snap.get(vm._schema.state_head_key())
    except KeyError:
        raise StoreCorrupted(
            "the store holds a chain but no account state (a store "
            "of replayed blocks opens with replay=True)"
        ) from None
    block_id, root = read_state_head_record(vm._schema.state_head_key(), head)
    if block_id != last:
        raise StoreCorrupted(
            f"the stored account state is after block {block_id.hex()},"
            f" not the last accepted {last.hex()}"
        )
    prefix = vm._schema.account_prefix()
    accounts = {
        bytes(key[len(prefix) :]): read_account_record(key, value)
        for key, value in snap.iterate(prefix)
    }
    base = AcceptedState(last, accounts)
    if base.trie.root_hash != root:
        raise StoreCorrupted("the stored accounts do not give the state root their head records")
    vm._base = base
    return base


def state_of(vm: CChainVM, block_id: bytes | None) -> State | AcceptedState:
    """The post-state of a processing block, or of the last accepted one (``None``)."""
    with vm._lock:
        if block_id is not None:
            known = vm._processing.get(block_id)
            if known is not None and known._state is not None:
                return known._state
        with vm._store.snapshot() as snap:
            if vm._stateless:
                raise ValueError("a replaying VM keeps no account state")
            base = accepted_base(vm, snap)
        if block_id is not None and block_id != base.block_id:
            raise BlockNotFound(
                f"block {block_id.hex()} is neither processing nor the "
                "last accepted block: only their state is kept"
            )
        return base


def build_on(vm: CChainVM) -> bytes | None:
    """The block the next one builds on, if it is processing (``None``: the last
    accepted block), as :meth:`build_block` chooses it."""
    preferred = vm._preferred
    return preferred if preferred in vm._processing else None


def reader_of(vm: CChainVM, block_id: bytes | None) -> Callable[[bytes], Account]:
    state = state_of(vm, block_id)
    return state.get if isinstance(state, AcceptedState) else state.account


def check_state_commitment(
    vm: CChainVM, snap: ReadSnapshot, block_id: bytes, header: AnyHeader
) -> None:
    """The state a settled block commits to is the one kept, as a VM restoring a
    block's execution results finds its state: for the last accepted block (the one
    whose state is kept), the stored state head names it and its root is the header's
    (``StoreCorrupted`` otherwise)."""
    if vm._chain.last_accepted(snap) != block_id:
        return
    check_pages(snap, (vm._schema.state_head_key(), vm._schema.account_prefix()))
    try:
        head = snap.get(vm._schema.state_head_key())
    except KeyError:
        raise StoreCorrupted("the last accepted block has no account state") from None
    head_block, root = read_state_head_record(vm._schema.state_head_key(), head)
    if head_block != block_id or root != header.state_root:
        raise StoreCorrupted(
            f"the stored account state is not the one block {block_id.hex()} commits to"
        )
