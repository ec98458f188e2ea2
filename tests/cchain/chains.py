"""Test helpers for the C-chain VM: stores, small generated chains, the coreth fixture store.

Not a test module: the VM test files import from it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs

from tests.conftest import load_vectors
from vmstack.cchain import (
    AVALANCHE,
    Block,
    CChainBlock,
    CChainVM,
    encode_receipts,
    execute_transactions,
    generate_chain,
    rawdb,
    split_block,
)
from vmstack.clock import SimClock
from vmstack.store import KeyValueStore, LMDBStore, MemoryStore

START = 1_700_000_000.0
FIXTURE_CHAIN_ID = 43110
STORE_KINDS = ("memory", "lmdb")


@contextmanager
def open_store(kind: str, directory: Path) -> Iterator[KeyValueStore]:
    """A fresh store of ``kind`` ("memory" or "lmdb" under ``directory``), closed after."""
    store: KeyValueStore
    if kind == "memory":
        store = MemoryStore()
    else:
        store = LMDBStore(directory / "db", sync=False, map_size=1 << 26)
    try:
        yield store
    finally:
        store.close()


def new_vm(store: KeyValueStore, clock: SimClock | None = None, **options: Any) -> CChainVM:
    """A VM over ``store`` on a simulated clock (``START`` unless one is given)."""
    return CChainVM(store, clock=clock if clock is not None else SimClock(START), **options)


def build_chain(vm: CChainVM, blocks: int, txs: int = 3, seed: int = 7) -> list[bytes]:
    """``blocks`` generated blocks on ``vm``, advancing its clock; their IDs, oldest first."""
    clock = vm.clock
    assert isinstance(clock, SimClock)
    return generate_chain(vm, blocks=blocks, txs_per_block=txs, seed=seed, clock=clock)


def tampered(vm: CChainVM, block: CChainBlock, **changes: Any) -> bytes:
    """The bytes of ``block`` with header fields changed (the body kept)."""
    header = attrs.evolve(block.header, **changes)
    return vm.flavour.encode_block(Block(header, block.body))


def fixture_blocks() -> list[bytes]:
    """The 22 real C-chain blocks of the fixture, block 0 first."""
    vectors = load_vectors("cchain_blocks.json")["blocks"]
    return [bytes.fromhex(v["rlp"][2:]) for v in vectors if v["name"].startswith("cchain-fixture/")]


def fixture_receipts() -> dict[bytes, bytes]:
    """The receipts RLP the fixture database holds, by block hash (three blocks)."""
    layout = load_vectors("cchain_blocks.json")["db_layout_examples"]
    found: dict[bytes, bytes] = {}
    for example in layout["examples"]:
        for entry in example.get("entries", ()):
            if entry["what"].startswith("receipts"):
                found[bytes.fromhex(example["block_hash"][2:])] = bytes.fromhex(entry["value"][2:])
    return found


def write_coreth_store(store: KeyValueStore, blocks: list[bytes]) -> None:
    """Lay ``blocks`` out as coreth does: geth rawdb keys under ``sha256("ethdb")``, one
    batch per block (header, body, receipts, number, canonical hash, head pointers). The
    fixture's own receipts are used where it has them, modelled ones elsewhere."""
    schema = rawdb.Schema(rawdb.CORETH_KEY_PREFIX)
    real = fixture_receipts()
    for raw in blocks:
        header_rlp, body_rlp = split_block(raw)
        block = AVALANCHE.decode_block(raw)
        receipts = real.get(block.hash)
        if receipts is None:
            receipts = encode_receipts(execute_transactions(block.transactions))
        with store.write_batch() as batch:
            rawdb.write_block(
                batch, schema, block.number, block.hash, header_rlp, body_rlp, receipts
            )
            rawdb.write_canonical_hash(batch, schema, block.number, block.hash)
            rawdb.write_last_accepted_hash(batch, schema, block.hash)
            rawdb.write_head_header_hash(batch, schema, block.hash)
            rawdb.write_head_fast_block_hash(batch, schema, block.hash)
