"""Deciding a :class:`~vmstack.cchain.vm.CChainVM`'s blocks: verifying (:func:`verify_block`:
the header rules, the body as received, the receipts' and the state's commitments, cheapest
first; :func:`check_body`), accepting in one atomic write batch (:func:`accept_block`) and
rejecting (:func:`reject_block`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vmstack.cchain.block import BlockStatus, CChainBlock
from vmstack.cchain.chain import write_accepted
from vmstack.cchain.codec import encode_receipts
from vmstack.cchain.execution import execute_transactions
from vmstack.cchain.rlpbytes import block_bytes
from vmstack.cchain.rules import (
    base_fee_rule,
    check_fee_rules,
    check_header_rules,
    check_receipts_commitments,
    check_received_body,
)
from vmstack.cchain.state import (
    AcceptedState,
    State,
    account_record,
    apply_block,
    state_head_record,
)
from vmstack.cchain.types import (
    AnyHeader,
)
from vmstack.errors import (
    InvalidBlock,
)
from vmstack.store.base import ReadSnapshot

if TYPE_CHECKING:
    from vmstack.cchain.vm import CChainVM
from vmstack.cchain.accounts import accepted_base, build_on, reader_of
from vmstack.cchain.building import own_build, processing_branch, put_back

__all__ = ["accept_block", "check_body", "is_accepted_copy", "reject_block", "verify_block"]


def verify_block(vm: CChainVM, block: CChainBlock) -> None:
    with vm._lock:
        if block._status in (BlockStatus.PROCESSING, BlockStatus.ACCEPTED):
            return
        if block._status is BlockStatus.REJECTED:
            raise InvalidBlock(f"block {block.id.hex()} was rejected")
        with vm._store.snapshot() as snap:
            if is_accepted_copy(vm, snap, block):
                block._status = BlockStatus.ACCEPTED
                return
            # Read once in this snapshot (what it holds cannot change while it is open).
            last = vm._chain.last_accepted(snap)
            last_height = vm._chain.number_of(snap, last)
            if block.height <= last_height:
                raise InvalidBlock(
                    f"block {block.id.hex()} at height {block.height} is not accepted "
                    f"and the last accepted block is at {last_height}: it can never be"
                )
            parent = vm._processing.get(block.parent_id)
            base = None if vm._stateless else accepted_base(vm, snap, last)
            parent_header: AnyHeader
            if parent is not None:
                parent_header = parent.header
            else:
                if block.parent_id != last:
                    raise InvalidBlock(
                        f"block {block.id.hex()}: parent "
                        f"{block.parent_id.hex()} is neither processing "
                        "nor the last accepted block"
                    )
                parent_header = vm._chain.stored_header(snap, last_height, last)
        check_header_rules(
            block.header,
            parent_number=parent_header.number,
            parent_time=parent_header.time,
            now=vm._clock(),
            gas_limit=None if vm._replay else vm._gas_limit,
        )
        check_body(
            vm,
            block,
            None if parent is None else parent._state,
            base,
            None if vm._replay else base_fee_rule(parent_header),
        )
        block._status = BlockStatus.PROCESSING
        vm._processing[block.id] = block
        vm._chain.remember_header(block.id, block.header)


def is_accepted_copy(vm: CChainVM, snap: ReadSnapshot, block: CChainBlock) -> bool:
    """Whether ``block`` is an accepted block (same ID, same bytes); ``InvalidBlock`` for
    other bytes under an accepted block's ID."""
    number = vm._chain.accepted_number(snap, block.id)
    if number is None:
        return False
    parts = vm._chain.block_parts(snap, number, block.id)
    if parts is not None and block_bytes(*parts) == block._raw:
        return True
    raise InvalidBlock(f"block {block.id.hex()}: bytes differ from the accepted block with this ID")


def check_body(
    vm: CChainVM,
    block: CChainBlock,
    parent_state: State | None,
    base: AcceptedState | None,
    base_fee: int | None,
) -> None:
    """The body rules, cheapest first, so that hostile bytes cost little to refuse: the
    rules of the body as received (:func:`~vmstack.cchain.rules.check_received_body`:
    sizes, decode, transaction rules, the header's commitments to the body); the fee
    rules (:func:`~vmstack.cchain.rules.check_fee_rules` against ``base_fee``, the
    chain's fee rule's; not when replaying: real history follows coreth's dynamic fee
    rule, which is not modelled); then that
    the header commits to what executing the block produces: gas used, receipts root
    and bloom (:func:`check_receipts_commitments`; not when replaying); and last, that
    every sender recovers (:meth:`Mempool.check_senders
    <vmstack.cchain.mempool.Mempool.check_senders>`), the costly part; and then (not when
    replaying) the state transition over the parent's state (``parent_state``, or the
    accepted ``base``): each transaction's nonce and balance
    (:func:`~vmstack.cchain.state.apply_block`) and the header's state root. A block
    this VM built keeps the post-state it was built with, from the same function over
    the same parent state. A block :meth:`build_block` of this VM just assembled (this
    very object, with its very bytes: :meth:`_own_build`) skips the body's and the
    receipts' commitments, which were computed from its body and receipts when it was
    built; any other block, a peer's with the same ID included, has them checked."""
    spans = dict(zip((f.name for f in vm._flavour.body_fields), block._body_spans(), strict=False))
    where = f"block {block.id.hex()}"
    own_encodings = own_build(vm, block)
    own = own_encodings is not None
    receipts = block._receipts
    try:
        if own_encodings is not None:
            body, encodings = block.body, list(own_encodings)
        else:
            body, encodings = check_received_body(
                block.header, block._raw, spans, lambda: block.body, chain_id=vm._chain_id
            )
        if base_fee is not None:
            check_fee_rules(block.header, body.transactions, base_fee=base_fee)
        if not vm._replay and (not own or receipts is None):
            receipts = execute_transactions(body.transactions)
            check_receipts_commitments(block.header, receipts)
    except InvalidBlock as error:
        raise InvalidBlock(f"{where}: {error.reason}") from None
    senders = vm._mempool.check_senders(body.transactions, encodings, where)
    block._senders = tuple(senders)
    if base is None or receipts is None:
        return
    state = block._state if own else None
    if state is None:
        header = block.header
        try:
            state = apply_block(
                parent_state,
                base,
                body.transactions,
                senders,
                receipts,
                coinbase=header.coinbase,
                base_fee=header.base_fee or 0,
                withdrawals=body.withdrawals or (),
            )
        except InvalidBlock as error:
            raise InvalidBlock(f"{where}: {error.reason}") from None
    if state.root != block.header.state_root:
        raise InvalidBlock(
            f"{where}: state root {block.header.state_root.hex()} is not "
            f"the post-state's {state.root.hex()}"
        )
    block._state = state


def accept_block(vm: CChainVM, block: CChainBlock) -> None:
    with vm._lock:
        if block._status is BlockStatus.ACCEPTED:
            return
        if block._status is not BlockStatus.PROCESSING:
            raise InvalidBlock(
                f"block {block.id.hex()} is {block._status.value}: only a "
                "verified block can be accepted"
            )
        number = block.height
        with vm._store.snapshot() as snap:
            if block.parent_id != vm._chain.last_accepted(snap):
                raise InvalidBlock(
                    f"block {block.id.hex()}: its parent is not the last accepted block"
                )
            settled_before = vm._chain.settled_number(snap)
            integrity_start = vm._chain.integrity_start(snap)
            # Heights that become settled with this block: those that lag behind it
            # (and, after a restart with a shorter lag, any left unsettled before).
            stop = number if vm._settle_lag == 0 else number - vm._settle_lag + 1
            settling = [
                vm._chain.settlement(snap, height, integrity_start)
                for height in range(settled_before + 1, stop)
            ]
        receipts_rlp = None
        if vm._settle_lag == 0:
            receipts = block._receipts
            if receipts is None:
                receipts = execute_transactions(block.transactions)
                receipts_rlp = encode_receipts(receipts)
            else:
                # A block built here carries the storage form of its receipts, encoded
                # with their consensus form when it was assembled.
                receipts_rlp = block._receipts_rlp or encode_receipts(receipts)
        state = block._state
        with vm._store.write_batch() as batch:
            write_accepted(batch, vm._schema, block, receipts_rlp, integrity_start, settling)
            if state is not None:
                for address, account in state.changed.items():
                    key = vm._schema.account_key(address)
                    if account.empty:
                        batch.delete(key)
                    else:
                        batch.put(key, account_record(key, account))
                head_key = vm._schema.state_head_key()
                batch.put(head_key, state_head_record(head_key, block.id, state.root))
        block._status = BlockStatus.ACCEPTED
        vm._processing.pop(block.id, None)
        base = vm._base
        if state is not None and base is not None and base.block_id == block.parent_id:
            base.advance(block.id, state)
        else:
            vm._base = None
        block._state = None
        if base is not None and block._senders is not None:
            vm._mempool.on_accepted(block._senders, base.get)
        preferred = vm._preferred
        if preferred != block.id and not any(
            ancestor.parent_id == block.id
            for ancestor in processing_branch(vm, preferred or block.id)
        ):
            # A block that was not preferred is accepted: the build head moves to it,
            # and the pool re-reads its senders' nonces there.
            vm._preferred = block.id
            if base is not None and preferred is not None:
                vm._mempool.reset(base.get)
        if receipts_rlp is not None:
            vm._chain.settle_cache(number)
        elif settling:
            vm._chain.settle_cache(settling[-1].number)


def reject_block(vm: CChainVM, block: CChainBlock) -> None:
    with vm._lock:
        if block._status is BlockStatus.ACCEPTED:
            raise InvalidBlock(f"block {block.id.hex()} is accepted and cannot be rejected")
        if block._status is BlockStatus.REJECTED:
            return
        verified = block._status is BlockStatus.PROCESSING
        block._status = BlockStatus.REJECTED
        block._state = None
        vm._processing.pop(block.id, None)
        if vm._built_here.get(block.id, (None,))[0] is block:
            del vm._built_here[block.id]
        was_preferred = vm._preferred == block.id
        if was_preferred:
            vm._preferred = None
        if block._built:
            vm._mempool.give_back(block.body)
        if verified and not vm._stateless:
            # Its transactions (built here or by a peer) that neither the accepted
            # nor the preferred chain holds return to the pool.
            put_back(vm, block.transactions)
            if was_preferred:
                vm._mempool.reset(reader_of(vm, build_on(vm)))
