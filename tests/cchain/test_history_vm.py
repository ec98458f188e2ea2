"""The C-chain VM over a key-value store with an era1 archive beneath it (``history=``):
reads fall through by height, the fast walk crosses from the store into the archive and
across its files, the slow path restores archived blocks, and an empty store's chain is the
archive's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from tests.cchain.chains import START, build_chain, new_vm
from tests.conftest import ERA1_FIRST as FIRST
from tests.conftest import ERA1_SECOND as SECOND
from tests.conftest import load_vectors
from vmstack.cchain import ETHEREUM, CChainVM, block_bytes, keccak256, rawdb
from vmstack.cchain.era1 import export_history, import_history, verify_archive
from vmstack.clock import SimClock
from vmstack.errors import BlockNotFound, StoreCorrupted, StoreError
from vmstack.stack import build_stack
from vmstack.store import LMDBStore, MemoryStore
from vmstack.store.history import EraArchive, EraRecord, write_era1

#: Seconds each (VMs over the real era1 files): the quick loop leaves them out.
pytestmark = pytest.mark.slow

SEPOLIA_GENESIS = bytes.fromhex("25a5cc106eea7138acab33231d7160d69cb777ee0c2c553fcddf5138993e6dd9")
SEPOLIA_CHAIN_ID = 11155111
BIG = 2**40


@pytest.fixture(scope="module")
def archive(era_dir: Path) -> Iterator[EraArchive]:
    """Both shared files (epochs 0 and 21), sparse."""
    with EraArchive(era_dir, sparse=True) as opened:
        yield opened


def linked(tmp_path: Path, era_dir: Path, *names: str) -> Path:
    """A folder of symbolic links to some of the shared files."""
    folder = tmp_path / "era"
    folder.mkdir()
    for name in names:
        (folder / name).symlink_to(era_dir / name)
    return folder


def sepolia_vm(store: MemoryStore | LMDBStore, history: EraArchive) -> CChainVM:
    return CChainVM(store, flavour=ETHEREUM, chain_id=SEPOLIA_CHAIN_ID, history=history)


def fallback_walk(vm: CChainVM, block_id: bytes, count: int) -> list[bytes]:
    """The serial path: get_block, then its parent, ``count`` times (or to a missing one)."""
    out = []
    for _ in range(count):
        try:
            block = vm.get_block(block_id)
        except BlockNotFound:
            break
        out.append(bytes(block))
        block_id = block.parent_id
    return out


def test_empty_store_chain_is_the_archives(archive: EraArchive) -> None:
    """Genesis is the archive's block 0 and the last accepted block its last, at once; nothing
    is written to the store; archived heights go through the canonical hash cache."""
    store = MemoryStore()
    vm = sepolia_vm(store, archive)
    assert vm.get_block_id_at_height(0) == SEPOLIA_GENESIS
    assert vm.last_accepted() == archive.hash(180223) == vm.last_settled()
    assert vm.get_block_id_at_height(175881) == archive.hash(175881)
    assert 175881 in vm.cache and vm.cache.settled_height == 180223
    assert not rawdb.has_chain_data(store, vm.schema)
    with pytest.raises(BlockNotFound, match="neither in the store nor in the archive"):
        vm.get_block_id_at_height(100_000)
    with pytest.raises(BlockNotFound):
        vm.get_block_id_at_height(180224)


def test_get_block_restores_an_archived_block(archive: EraArchive) -> None:
    """The slow path over an archived block: decoded, senders recovered, receipts from the
    archive with their derived fields, re-encoded to the archive's very bytes."""
    vm = sepolia_vm(MemoryStore(), archive)
    block = vm.get_block(archive.hash(175881))
    assert block.height == 175881 and len(block.transactions) == 3
    assert bytes(block) == block_bytes(archive.header_rlp(175881), archive.body_rlp(175881))
    receipts = block._receipts
    assert receipts is not None and len(receipts) == 3
    assert [r.tx_hash for r in receipts] == [tx.hash for tx in block.transactions]
    assert all(r.block_number == 175881 for r in receipts)
    assert block._senders is not None and len(block._senders) == 3


def test_get_ancestors_from_archive_equals_the_fallback_walk(archive: EraArchive) -> None:
    """2,000 archived blocks in one answer, byte for byte the slow path's, within budget."""
    vm = sepolia_vm(MemoryStore(), archive)
    last = vm.last_accepted()
    answer = vm.get_ancestors(last, 2000, BIG, 60.0)
    assert len(answer) == 2000
    assert answer == fallback_walk(vm, last, 2000)
    capped = vm.get_ancestors(last, 2000, sum(len(b) + 4 for b in answer[:10]), 60.0)
    assert capped == answer[:10]
    # Block 172032 starts its file and the archive lacks 172031: the walk stops there.
    assert len(vm.get_ancestors(archive.hash(172033), 10, BIG, 60.0)) == 2


def test_get_ancestors_across_the_store_archive_boundary(era_dir: Path, tmp_path: Path) -> None:
    """A store holding the last 100 blocks (imported) over the archive: one answer walks from
    LMDB into the archive, and equals the fallback walk byte for byte."""
    with (
        EraArchive(linked(tmp_path, era_dir, SECOND)) as history,
        LMDBStore(tmp_path / "db", sync=False, map_size=1 << 27) as store,
    ):
        result = import_history(history, store, recent=100, chain_id=SEPOLIA_CHAIN_ID)
        assert result.written == (180124, 180223) and result.verified == 8192
        vm = sepolia_vm(store, history)
        last = vm.last_accepted()
        assert last == history.hash(180223)
        assert rawdb.read_canonical_hash(store, vm.schema, 180124) == history.hash(180124)
        assert rawdb.read_canonical_hash(store, vm.schema, 180123) is None
        answer = vm.get_ancestors(last, 300, BIG, 60.0)
        assert len(answer) == 300
        assert answer == fallback_walk(vm, last, 300)
        assert vm.get_block(history.hash(180000)).height == 180000


def test_get_ancestors_across_archive_files(era_dir: Path, tmp_path: Path) -> None:
    """Epoch 0 (the real file) and an epoch 1 continuing it: one answer crosses the files."""
    folder = linked(tmp_path, era_dir, FIRST)
    with EraArchive(folder) as first:
        header = ETHEREUM.decode_header(first.header_rlp(8191))
        parent = first.hash(8191)
        total_difficulty = first.total_difficulty(8191)
    records = []
    for number in range(8192, 8192 + 50):
        encoded = ETHEREUM.encode_header(
            attrs.evolve(header, number=number, parent_hash=parent, gas_used=0)
        )
        total_difficulty += header.difficulty
        records.append(EraRecord(encoded, bytes.fromhex("c2c0c0"), b"\xc0", total_difficulty))
        parent = keccak256(encoded)
    write_era1(folder, "sepolia", 8192, records)
    with EraArchive(folder) as history:
        vm = sepolia_vm(MemoryStore(), history)
        last = vm.last_accepted()
        assert vm.get_block(last).height == 8241
        answer = vm.get_ancestors(last, 1000, BIG, 60.0)
        assert len(answer) == 1000
        assert answer == fallback_walk(vm, last, 1000)


def test_verifies_and_accepts_a_real_child_but_cannot_build(era_dir: Path, tmp_path: Path) -> None:
    """A VM over an archive of blocks 0-99 verifies and accepts real block 100 (as a
    replaying VM verifies), refuses to build without state, and reopens over the archive."""
    with EraArchive(era_dir, sparse=True) as full:
        records = [
            EraRecord(
                full.header_rlp(n), full.body_rlp(n), full.receipts(n), full.total_difficulty(n)
            )
            for n in range(100)
        ]
        child = block_bytes(full.header_rlp(100), full.body_rlp(100))
    folder = tmp_path / "short"
    folder.mkdir()
    write_era1(folder, "sepolia", 0, records)
    with (
        EraArchive(folder) as history,
        LMDBStore(tmp_path / "db", sync=False, map_size=1 << 26) as store,
    ):
        vm = sepolia_vm(store, history)
        with pytest.raises(StoreError, match="cannot build"):
            vm.build_block()
        block = vm.parse_block(child)
        block.verify()
        block.accept()
        assert vm.last_accepted() == block.id
        reopened = sepolia_vm(store, history)
        assert reopened.get_ancestors(block.id, 3, BIG, 60.0) == [
            child,
            *fallback_walk(reopened, block.parent_id, 2),
        ]
        with pytest.raises(StoreCorrupted, match="no block 0"):
            CChainVM(store, flavour=ETHEREUM, chain_id=SEPOLIA_CHAIN_ID)


def test_store_that_does_not_continue_the_archive_is_refused(era_dir: Path, tmp_path: Path) -> None:
    """Imported blocks above epoch 21 over an archive of epoch 0 alone: StoreCorrupted."""
    with (
        EraArchive(linked(tmp_path, era_dir, SECOND)) as history,
        LMDBStore(tmp_path / "db", sync=False, map_size=1 << 27) as store,
    ):
        import_history(history, store, recent=10, chain_id=SEPOLIA_CHAIN_ID)
        other = tmp_path / "other"
        other.mkdir()
        (other / FIRST).symlink_to(era_dir / FIRST)
        with (
            EraArchive(other) as wrong,
            pytest.raises(StoreCorrupted, match="does not hold height 180213"),
        ):
            sepolia_vm(store, wrong)


def test_import_into_a_store_with_a_chain_is_refused(archive: EraArchive) -> None:
    """Importing over an existing chain is ValueError, and nothing is written."""
    store = MemoryStore()
    new_vm(store)
    with pytest.raises(ValueError, match="already holds a chain"):
        import_history(archive, store, recent=1, chain_id=SEPOLIA_CHAIN_ID)


def test_wrong_configurations_are_value_errors(archive: EraArchive, tmp_path: Path) -> None:
    """An Avalanche VM over Ethereum history, and a folder without era1 files."""
    with pytest.raises(ValueError, match="does not hold avalanche blocks"):
        CChainVM(MemoryStore(), history=archive)
    with pytest.raises(ValueError, match="no era1 file"):
        CChainVM(MemoryStore(), flavour=ETHEREUM, history=EraArchive(tmp_path))


def test_build_stack_over_an_archive(archive: EraArchive) -> None:
    """build_stack(history=...) serves the archive's chain through every layer."""
    stack = build_stack(MemoryStore(), flavour=ETHEREUM, chain_id=SEPOLIA_CHAIN_ID, history=archive)
    assert stack.last_accepted() == archive.hash(180223)
    assert stack.get_block_id_at_height(1) == archive.hash(1)


def test_export_then_verify_round_trips_a_generated_chain(tmp_path: Path) -> None:
    """A generated Ethereum chain exported as era1 verifies, and a VM over the export alone
    serves the same blocks."""
    vm = new_vm(MemoryStore(), flavour=ETHEREUM)
    build_chain(vm, 40, txs=3)
    out = tmp_path / "out"
    out.mkdir()
    paths = export_history(vm, out, network="vmstack")
    assert [p.name[:14] for p in paths] == ["vmstack-00000-"]
    with EraArchive(out) as exported:
        assert verify_archive(exported) == paths[0].stat().st_size
        assert (exported.first, exported.last) == (0, 40)
        assert exported.hash(40) == vm.last_accepted()
        served = CChainVM(MemoryStore(), flavour=ETHEREUM, clock=SimClock(START), history=exported)
        assert served.get_ancestors(served.last_accepted(), 100, BIG, 60.0) == vm.get_ancestors(
            vm.last_accepted(), 100, BIG, 60.0
        )
    with pytest.raises(ValueError, match="already holds era1 files"):
        export_history(vm, out)


def test_export_refuses_an_avalanche_chain(tmp_path: Path) -> None:
    """era1 holds Ethereum blocks: an Avalanche chain is ValueError."""
    with pytest.raises(ValueError, match="Ethereum blocks"):
        export_history(new_vm(MemoryStore()), tmp_path)


def test_damaged_archived_body_is_refused_on_both_paths(era_dir: Path, tmp_path: Path) -> None:
    """A flipped byte in block 0's body record is never served: a walk that reaches it stops
    before it (the batched rule for a failing parent), and asked for first on either path it
    is StoreCorrupted naming the file."""
    folder = tmp_path / "era"
    folder.mkdir()
    path = folder / FIRST
    data = bytearray((era_dir / FIRST).read_bytes())
    header_len = int.from_bytes(data[10:14], "little")
    body = 8 + 8 + header_len
    data[body + 8 + 16] ^= 0x40
    path.write_bytes(bytes(data))
    with EraArchive(folder) as history:
        vm = sepolia_vm(MemoryStore(), history)
        assert vm.get_ancestors(history.hash(5), 10, BIG, 60.0) == fallback_walk(
            vm, history.hash(5), 5
        )
        with pytest.raises(StoreCorrupted, match=FIRST):
            vm.get_ancestors(history.hash(0), 10, BIG, 60.0)
        with pytest.raises(StoreCorrupted, match=FIRST):
            vm.get_block(history.hash(0))


def test_an_archive_starting_later_is_served_from_its_first_block(
    era_dir: Path, tmp_path: Path
) -> None:
    """Epoch 21 alone over an empty store: the chain starts at its first block (a
    checkpoint), nothing below it is served, and a genesis cannot be given."""
    with EraArchive(linked(tmp_path, era_dir, SECOND)) as history:
        vm = sepolia_vm(MemoryStore(), history)
        assert vm.last_accepted() == history.hash(180223)
        assert vm.get_block(history.hash(172032)).height == 172032
        with pytest.raises(BlockNotFound):
            vm.get_block_id_at_height(0)
        assert len(vm.get_ancestors(history.hash(172040), 100, BIG, 60.0)) == 9
        with pytest.raises(ValueError, match="another genesis block"):
            CChainVM(
                MemoryStore(),
                flavour=ETHEREUM,
                chain_id=SEPOLIA_CHAIN_ID,
                genesis=block_bytes(history.header_rlp(172032), history.body_rlp(172032)),
                history=history,
            )


def test_blocks_json_vectors_equal_what_the_vm_serves(archive: EraArchive) -> None:
    """The sepolia-era1 vectors are what the VM over the archive serves on both paths."""
    vm = sepolia_vm(MemoryStore(), archive)
    vectors = [v for v in load_vectors("blocks.json") if v["name"].startswith("sepolia-era1/")]
    assert vectors
    for vector in vectors:
        block_id = bytes.fromhex(vector["hash"][2:])
        raw = bytes.fromhex(vector["rlp"][2:])
        assert vm.get_block_id_at_height(int(vector["number"])) == block_id
        assert bytes(vm.get_block(block_id)) == raw
        assert vm.get_ancestors(block_id, 1, BIG, 60.0) == [raw]
