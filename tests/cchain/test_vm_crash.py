"""A CChainVM writer killed mid-write (SIGKILL) leaves an LMDB store that opens cleanly and
never shows a half-written block, nor a block without its account state or state without
its block."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vmstack.batching import MAX_CONTAINERS_LEN, serial_get_ancestors
from vmstack.cchain import CChainVM, keccak256, rawdb
from vmstack.store import LMDBStore

#: These tests kill writer processes.
pytestmark = pytest.mark.processes

WRITER = """
import sys
from vmstack.cchain import CChainVM, generate_chain
from vmstack.clock import SimClock
from vmstack.store import LMDBStore

store = LMDBStore(sys.argv[1])
clock = SimClock(1_700_000_000.0)
vm = CChainVM(store, clock=clock, settle_lag=int(sys.argv[2]))


def progress(count):
    if count == 1:
        print("ready", flush=True)


generate_chain(vm, blocks=100_000, txs_per_block=3, seed=int(sys.argv[3]), clock=clock,
               progress=progress)
"""


def _complete(vm: CChainVM, store: LMDBStore) -> int:
    """Check every accepted block is whole; return the last accepted height."""
    schema = vm.schema
    tip = vm.last_accepted()
    tip_height = rawdb.read_header_number(store, schema, tip)
    assert tip_height is not None
    settled = vm.get_block(vm.last_settled()).height
    assert settled <= tip_height
    for height in range(tip_height + 1):
        block_id = vm.get_block_id_at_height(height)
        assert rawdb.read_header_number(store, schema, block_id) == height
        header = rawdb.read_header_rlp(store, schema, height, block_id)
        assert header is not None and keccak256(header) == block_id
        assert rawdb.read_body_rlp(store, schema, height, block_id) is not None
        has_receipts = rawdb.read_receipts_rlp(store, schema, height, block_id) is not None
        assert has_receipts == (height <= settled)
        assert rawdb.read_integrity(store, schema, height, block_id) is not None
    assert rawdb.read_canonical_hash(store, schema, tip_height + 1) is None
    return tip_height


@pytest.mark.slow
@pytest.mark.parametrize(("seed", "settle_lag"), [(1, 0), (2, 3)])
def test_a_killed_writer_never_leaves_a_half_written_block(
    tmp_path: Path, seed: int, settle_lag: int
) -> None:
    """Kill the writer at a random moment; the reopened store's chain is whole and both
    paths serve the same answer from its head."""
    path = tmp_path / "db"
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), str(settle_lag), str(seed)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == "ready"
        time.sleep(random.Random(seed).uniform(0.2, 1.0))
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=30)
    with LMDBStore(path) as store:
        vm = CChainVM(store, settle_lag=settle_lag)
        height = _complete(vm, store)
        assert height > 0
        tip = vm.last_accepted()
        answer = vm.get_ancestors(tip, 10_000, MAX_CONTAINERS_LEN * 64, 60.0)
        assert len(answer) == height + 1
        assert answer[:20] == serial_get_ancestors(
            vm, tip, max_blocks_num=20, max_retrieval_time=60.0
        )
        _state_is_the_tip_s(store, vm)


def _state_is_the_tip_s(store: LMDBStore, vm: CChainVM) -> None:
    """The stored accounts are the last accepted block's post-state: the state head names
    that block, and the trie package's root over the accounts is its header's state root."""
    from trie.hexary import HexaryTrie

    from vmstack.cchain.state import read_account_record, read_state_head_record

    tip = vm.last_accepted()
    head_key = vm.schema.state_head_key()
    head_block, head_root = read_state_head_record(head_key, store.get(head_key))
    reference = HexaryTrie({})
    prefix = vm.schema.account_prefix()
    with store.snapshot() as snap:
        for key, value in snap.iterate(prefix):
            account = read_account_record(key, value)
            reference[keccak256(bytes(key[len(prefix) :]))] = account.encode()
    assert head_block == tip
    assert head_root == reference.root_hash == vm.get_block(tip).header.state_root
