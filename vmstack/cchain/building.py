"""Building on a :class:`~vmstack.cchain.vm.CChainVM`: the preference and the mempool that
follows it (:func:`move_preference`, transactions of an abandoned branch put back), and a new
block on the preferred one (:func:`build_new_block`), remembered as this VM's own until it
is verified (:func:`own_build`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from vmstack.batching import (
    check_block_id,
)
from vmstack.cchain.block import CChainBlock, assemble_block
from vmstack.cchain.genesis import (
    BLACKHOLE_ADDRESS,
)
from vmstack.cchain.rules import (
    base_fee_rule,
)
from vmstack.cchain.state import (
    AcceptedState,
    State,
    apply_block,
)
from vmstack.cchain.types import (
    AnyHeader,
    Receipt,
    Transaction,
)
from vmstack.errors import (
    BlockNotFound,
    InvalidBlock,
    InvalidTransaction,
    StoreError,
)

if TYPE_CHECKING:
    from vmstack.cchain.vm import CChainVM
from vmstack.cchain.accounts import build_on, reader_of, state_of

__all__ = [
    "REINJECT_DEPTH",
    "build_new_block",
    "build_parent",
    "move_preference",
    "own_build",
    "processing_branch",
    "put_back",
]

#: How many blocks of an abandoned branch give their transactions back to the pool when
#: the preference moves to another branch (coreth's reorg reinjection depth).
REINJECT_DEPTH = 64

#: How many blocks built by :func:`build_new_block` and not yet verified are remembered as
#: a VM's own (beyond that, the oldest is verified as a peer's would be).
_BUILT_RECORD_SIZE = 256


def build_new_block(vm: CChainVM) -> CChainBlock:
    """What :meth:`CChainVM.build_block <vmstack.cchain.vm.CChainVM.build_block>` does (see
    there)."""
    mempool = vm._mempool
    if vm._stateless and vm._history is not None:
        raise StoreError(
            "cannot build a block: this VM serves real history from an era1 "
            "archive and has none of its state (the accounts its blocks "
            "changed), so it cannot execute a new block on it"
        )
    with vm._lock:
        parent_id, parent = build_parent(vm)
        timestamp = max(int(vm._clock()), parent.time)
        parent_state: State | None = None
        base: AcceptedState | None = None
        if vm._stateless:
            txs: list[Transaction] = []
        else:
            found = state_of(vm, parent_id)
            if isinstance(found, AcceptedState):
                base = found
                txs = mempool.executable(found.get)
            else:
                parent_state = found
                base = vm._base
                txs = mempool.executable(found.account)
        ext_data, withdrawals = mempool.take_extras()
    encodings = [mempool.encoding(tx) for tx in txs]

    def post_state(receipts: Sequence[Receipt]) -> State | None:
        if base is None:
            return None
        senders = [
            mempool.sender(tx, encoding) for tx, encoding in zip(txs, encodings, strict=True)
        ]
        return apply_block(
            parent_state,
            base,
            txs,
            senders,
            receipts,
            coinbase=BLACKHOLE_ADDRESS,
            base_fee=base_fee_rule(parent),
            withdrawals=withdrawals,
        )

    block = assemble_block(
        vm, parent_id, parent, timestamp, txs, ext_data, withdrawals, encodings, post_state
    )
    vm._chain.remember_header(block.id, block.header)
    with vm._lock:
        built = vm._built_here
        built[block.id] = (block, block._raw, tuple(encodings))
        if len(built) > _BUILT_RECORD_SIZE:
            del built[next(iter(built))]
    return block


def own_build(vm: CChainVM, block: CChainBlock) -> tuple[bytes, ...] | None:
    """The transactions' encodings of ``block`` if it is a block :meth:`build_block` of
    this VM assembled (the very object, holding the very bytes it was built with, under
    its ID), which is then forgotten; ``None`` for any other block, whatever it claims.
    Such a block's header was computed from its body and its receipts a moment ago, so
    verify does not compute its body and receipts commitments again."""
    record = vm._built_here.pop(block.id, None)
    if record is None:
        return None
    built, raw, encodings = record
    if built is not block or raw is not block._raw or not block._built:
        return None
    return encodings


def build_parent(vm: CChainVM) -> tuple[bytes, AnyHeader]:
    preferred = vm._preferred
    if preferred is not None:
        block = vm._processing.get(preferred)
        if block is not None:
            return preferred, block.header
    with vm._store.snapshot() as snap:
        last = vm._chain.last_accepted(snap)
        return last, vm._chain.stored_header(snap, vm._chain.number_of(snap, last), last)


def move_preference(vm: CChainVM, block_id: bytes) -> None:
    """What :meth:`CChainVM.set_preference <vmstack.cchain.vm.CChainVM.set_preference>` does
    (see there)."""
    block_id = check_block_id(block_id)
    with vm._lock:
        with vm._store.snapshot() as snap:
            last = vm._chain.last_accepted(snap)
            if block_id != last and block_id not in vm._processing:
                if vm._chain.accepted_number(snap, block_id) is None:
                    raise BlockNotFound(
                        f"block {block_id.hex()} is neither processing nor accepted"
                    )
                raise InvalidBlock(
                    f"cannot orphan finalized block: block {block_id.hex()} is an "
                    f"accepted block below the last accepted {last.hex()}"
                )
        new_branch = processing_branch(vm, block_id)
        if new_branch and new_branch[-1].parent_id != last:
            raise InvalidBlock(
                f"cannot orphan finalized block: block {block_id.hex()} does not "
                f"descend from the last accepted block {last.hex()}"
            )
        old_head = build_on(vm)
        old_branch = [] if old_head is None else processing_branch(vm, old_head)
        vm._preferred = block_id
        if vm._stateless or (old_head is not None and old_head == block_id):
            return
        on_new = {block.id for block in new_branch}
        if old_head is not None and old_head not in on_new:
            kept = {tx for block in new_branch for tx in block.transactions}
            abandoned = [b for b in old_branch if b.id not in on_new][:REINJECT_DEPTH]
            put_back(
                vm,
                (
                    tx
                    for block in reversed(abandoned)
                    for tx in block.transactions
                    if tx not in kept
                ),
            )
        vm._mempool.reset(reader_of(vm, build_on(vm)))


def processing_branch(vm: CChainVM, block_id: bytes) -> list[CChainBlock]:
    """The processing blocks from ``block_id`` down to the first whose parent is not
    processing, nearest first (``[]`` for a block that is not processing)."""
    branch: list[CChainBlock] = []
    current = vm._processing.get(block_id)
    while current is not None:
        branch.append(current)
        current = vm._processing.get(current.parent_id)
    return branch


def put_back(vm: CChainVM, transactions: Iterable[Transaction]) -> None:
    """Pool again, one by one against the build head's state, what a rejected or
    abandoned block carried; what no block on the preferred chain could carry now
    (held by it already, or by the accepted chain) is left out."""
    reader = reader_of(vm, build_on(vm))
    for tx in transactions:
        with contextlib.suppress(InvalidTransaction):
            vm._mempool.add_transactions([tx], reader)
