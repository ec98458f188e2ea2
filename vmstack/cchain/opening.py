"""Opening a :class:`~vmstack.cchain.vm.CChainVM` over its store: the page check before
anything is read (:func:`check_open_pages`), the record format, adopting the chain in the
store or writing the genesis block into an empty one (:func:`open_chain`), and a store over
an era1 archive checked to continue it (:func:`check_history_beneath`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vmstack.cchain import rawdb
from vmstack.cchain.chain import write_accepted
from vmstack.cchain.codec import encode_receipts
from vmstack.cchain.execution import execute_transactions
from vmstack.cchain.genesis import (
    Genesis,
    default_genesis,
    genesis_block,
)
from vmstack.cchain.state import (
    AcceptedState,
    Account,
    account_record,
    state_head_record,
)
from vmstack.errors import (
    StoreCorrupted,
)
from vmstack.store.base import ReadSnapshot
from vmstack.store.format import FORMAT_KEY, check_format

if TYPE_CHECKING:
    from vmstack.cchain.vm import CChainVM

__all__ = [
    "WHOLE_TREE_CHECK_BOUND",
    "check_history_beneath",
    "check_open_pages",
    "check_pages",
    "genesis_bytes",
    "open_chain",
    "write_genesis",
]

#: The largest data file whose whole main tree :func:`check_open_pages` checks at open
#: (every page, by ``check_pages(b"")``). Measured (blocks of 40 transfers, warm page
#: cache): a 600-block store's 15 MB data file is walked in 0.05 s, where the whole open
#: takes 0.9 to 1.3 s; a 2,000-block store's 49 MB in 0.15 s of a 2.1 s open. About 3 ms a
#: megabyte, so at the bound about 0.8 s; bigger stores check the pages of a few keys.
WHOLE_TREE_CHECK_BOUND = 256 * 1024 * 1024


def check_pages(snap: ReadSnapshot, prefixes: tuple[bytes, ...]) -> None:
    """Check, where ``snap``'s store library trusts its pages (one with ``check_pages``,
    LMDB's), every page a scan of each of ``prefixes`` walks: a damaged page is
    ``StoreCorrupted`` naming the data file and the page. Nothing for other stores."""
    check_pages = getattr(snap, "check_pages", None)
    if check_pages is not None:
        for prefix in prefixes:
            check_pages(prefix)


def check_open_pages(snap: ReadSnapshot, schema: rawdb.Schema) -> None:
    """The page check at open: the whole main tree when the data file is at most
    :data:`WHOLE_TREE_CHECK_BOUND` (every read the open and later reads make then walks
    checked pages); for a bigger one, the pages holding the records the open reads by key
    (the format record, the head pointers, the integrity-start marker, the canonical entry
    at height 0). The probes of the first integrity and number entries and the canonical,
    header and settled-block reads further down a big store's open reach the library
    unchecked there."""
    data_size = getattr(snap, "data_size", None)
    if data_size is None:
        return
    if data_size() <= WHOLE_TREE_CHECK_BOUND:
        check_pages(snap, (b"",))
        return
    check_pages(
        snap,
        (
            FORMAT_KEY,
            schema.last_accepted_key(),
            schema.head_header_key(),
            schema.head_fast_block_key(),
            schema.last_settled_key(),
            schema.integrity_start_key(),
            schema.canonical_hash_key(0),
        ),
    )


def open_chain(vm: CChainVM, genesis: Genesis | bytes | None, genesis_timestamp: int) -> None:
    """Adopt the chain in the store, or write the genesis block into an empty one. A
    store that holds chain data but no last accepted pointer is damaged
    (``StoreCorrupted``): it is never given a genesis block over its blocks; nor is a
    store of another record format (:func:`vmstack.store.format.check_format`).

    Before any of that reads the store, the pages its reads walk are checked
    (:func:`_check_open_pages`), so that a damaged page header is ``StoreCorrupted``
    rather than the store library aborting the process."""
    with vm._store.snapshot() as snap:
        check_open_pages(snap, vm._schema)
    check_format(vm._store, holds_records=rawdb.has_vmstack_records(vm._store, vm._schema))
    with vm._store.snapshot() as snap:
        last = rawdb.read_last_accepted_hash(snap, vm._schema)
        existing = None if last is None else vm._chain.canonical_at(snap, 0)
        if last is None and rawdb.has_chain_data(snap, vm._schema):
            raise StoreCorrupted("the store holds chain data but no last accepted block pointer")
        if last is not None:
            vm._chain.last_accepted(snap)
            check_history_beneath(vm, snap)
    if last is None and vm._history is not None:
        # An empty store over an archive: the chain is the archive's, as it stands (from
        # its block 0, or from its first block as a checkpoint when it starts later).
        if genesis is not None and (
            not vm._history.holds(0)
            or vm.parse_block(genesis_bytes(vm, genesis, genesis_timestamp)).id
            != vm._history.hash(0)
        ):
            raise ValueError("the archive's chain has another genesis block")
    elif last is None:
        write_genesis(vm, genesis_bytes(vm, genesis, genesis_timestamp), genesis)
    elif (
        genesis is not None
        and existing != vm.parse_block(genesis_bytes(vm, genesis, genesis_timestamp)).id
    ):
        raise ValueError("the store holds a chain with another genesis block")
    with vm._store.snapshot() as snap:
        vm._chain.settle_cache(vm._chain.settled_number(snap))


def check_history_beneath(vm: CChainVM, snap: ReadSnapshot) -> None:
    """A store's chain and the archive beneath it are one chain: the store's block 0,
    if it has one, is the archive's; the store's lowest written block (its
    integrity-start height) continues the archive. A store without block 0 needs its
    archive."""
    history = vm._history
    stored_genesis = rawdb.read_canonical_hash(snap, vm._schema, 0)
    if history is None:
        if stored_genesis is None:
            raise StoreCorrupted(
                "the store has no block 0: its settled history lives in "
                "an era1 archive (open it with history=)"
            )
        return
    if stored_genesis is not None and history.holds(0) and (stored_genesis != history.hash(0)):
        raise ValueError("the archive beneath the store is of another chain: their block 0 differ")
    start = vm._chain.integrity_start(snap)
    if (
        start is None
        or start == 0
        or rawdb.read_canonical_hash(snap, vm._schema, start - 1) is not None
    ):
        return
    lowest = rawdb.read_canonical_hash(snap, vm._schema, start)
    if not history.holds(start - 1) or lowest is None:
        raise StoreCorrupted(
            f"the store's blocks start at height {start}, and the "
            f"archive does not hold height {start - 1}"
        )
    header = vm._chain.stored_header(snap, start, lowest)
    if header.parent_hash != history.hash(start - 1):
        raise StoreCorrupted(
            f"the store's lowest block, at {start}, does not continue "
            f"the archive: its parent is not the archived block "
            f"{start - 1}"
        )


def genesis_bytes(vm: CChainVM, genesis: Genesis | bytes | None, timestamp: int) -> bytes:
    if isinstance(genesis, bytes | bytearray):
        return bytes(genesis)
    if genesis is None:
        genesis = default_genesis(timestamp=timestamp)
    block = genesis_block(vm._flavour, chain_id=vm._chain_id, genesis=genesis)
    return vm._flavour.encode_block(block)


def write_genesis(vm: CChainVM, data: bytes, genesis: Genesis | bytes | None) -> None:
    """Write the genesis block with its accounts and state head: those of ``genesis``
    (the default genesis when ``None``), none for a genesis given as block bytes,
    whose header must then state the empty trie's root."""
    block = vm.parse_block(data)
    if block.height != 0:
        raise ValueError(f"a genesis block has number 0, not {block.height}")
    accounts: dict[bytes, Account] = {}
    if isinstance(genesis, Genesis):
        accounts = genesis.accounts()
    elif genesis is None:
        accounts = default_genesis().accounts()
    receipts_rlp = encode_receipts(execute_transactions(block.transactions))
    with vm._store.write_batch() as batch:
        write_accepted(batch, vm._schema, block, receipts_rlp, None, ())
        if not vm._replay:
            base = AcceptedState(block.id, accounts)
            if base.trie.root_hash != block.header.state_root:
                raise ValueError("the genesis block's state root is not its allocation's")
            for address, account in accounts.items():
                key = vm._schema.account_key(address)
                batch.put(key, account_record(key, account))
            head_key = vm._schema.state_head_key()
            batch.put(head_key, state_head_record(head_key, block.id, base.trie.root_hash))
