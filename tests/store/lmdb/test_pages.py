"""A damaged page the C-chain VM reads when it opens (under the account state it scans, or
holding its format record, head pointers, canonical entries and other bookkeeping) is
StoreCorrupted naming the data file and the page, never liblmdb's SIGABRT."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest

from tests.support.processes import python_child_output
from vmstack.cchain import CChainVM, generate_chain, rawdb
from vmstack.clock import SimClock
from vmstack.store import LMDBStore
from vmstack.store.lmdb.files import DATA_FILE

#: Seconds a child opening a damaged store may take before the test fails.
DEADLINE = 60.0
PAGE = 4096
#: Overwrites of a page header: the flags made a branch's with no node (what made liblmdb
#: abort in mdb_page_search_root); flags, lower and upper zeroed; the page number.
DAMAGES = ((8, b"\x00\x00\x01\x00\x10\x00\x00\x0f"), (8, bytes(8)), (0, b"\xff" * 8))

_OPEN_VM_IN_CHILD = """
import sys
from vmstack.cchain import CChainVM
from vmstack.errors import StoreCorrupted
from vmstack.store import LMDBStore
if len(sys.argv) > 2:  # a bound on the whole-tree check, to take the big store's path
    import vmstack.cchain.opening
    vmstack.cchain.opening.WHOLE_TREE_CHECK_BOUND = int(sys.argv[2])
try:
    CChainVM(LMDBStore(sys.argv[1], readonly=True))
    print("opened")
except StoreCorrupted as error:
    print("StoreCorrupted:", error)
"""


@pytest.fixture(scope="module")
def chain_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An LMDB store of a C-chain of 40 blocks of 40 transfers (a few hundred accounts)."""
    path = tmp_path_factory.mktemp("vm") / "db"
    clock = SimClock()
    with LMDBStore(path) as store:
        generate_chain(
            CChainVM(store, clock=clock), blocks=40, txs_per_block=40, seed=1, clock=clock
        )
    return path


def leaf_keys(data: bytes) -> dict[int, list[bytes]]:
    """The keys of each leaf page in ``data`` (a page naming itself, leaf flags; a page
    no longer in the tree may be among them)."""
    found = {}
    for number in range(2, len(data) // PAGE):
        page = data[number * PAGE : (number + 1) * PAGE]
        pgno, _, flags, lower, _ = struct.unpack_from("@NHHHH", page)
        if pgno != number or flags != 0x02:
            continue
        keys = []
        for index in range((lower - 16) // 2):
            (at,) = struct.unpack_from("@H", page, 16 + 2 * index)
            (size,) = struct.unpack_from("@H", page, at + 6)
            keys.append(page[at + 8 : at + 8 + size])
        found[number] = keys
    return found


def live_leaves(data: bytes) -> set[int]:
    """The leaf pages the main tree of the newer meta page reaches (LMDB 0.9's meta: the
    main database's depth and root at fields 14 and 19, the transaction id last)."""
    meta = struct.Struct("@IIPN" + "IHHNNNNN" * 2 + "NN")
    metas = [meta.unpack_from(data, number * PAGE + 16) for number in (0, 1)]
    newest = max(metas, key=lambda fields: fields[-1])
    found: set[int] = set()

    def walk(number: int, depth: int) -> None:
        if depth == 1:
            found.add(number)
            return
        _, _, _, lower, _ = struct.unpack_from("@NHHHH", data, number * PAGE)
        for index in range((lower - 16) // 2):
            (at,) = struct.unpack_from("@H", data, number * PAGE + 16 + 2 * index)
            lo, hi, flags = struct.unpack_from("@HHH", data, number * PAGE + at)
            walk(lo | hi << 16 | flags << 32, depth - 1)

    walk(newest[19], newest[14])
    return found


def account_leaves(data: bytes) -> list[int]:
    """The leaf pages holding account keys."""
    prefix = rawdb.Schema(b"").account_prefix()
    return [
        number
        for number, keys in leaf_keys(data).items()
        if any(key.startswith(prefix) for key in keys)
    ]


def damaged_copy(store: Path, to: Path, number: int, at: int, blob: bytes) -> Path:
    """A copy of ``store`` with ``blob`` written at byte ``at`` of page ``number``."""
    shutil.copytree(store, to)
    with (to / DATA_FILE).open("r+b") as out:
        out.seek(number * PAGE + at)
        out.write(blob)
    return to


def open_in_child(path: Path, whole_tree_bound: int | None = None) -> str:
    """What a read-only VM opening ``path`` in a child says (with ``whole_tree_bound`` in
    place of the VM's bound on the data file whose whole tree it checks, when given)."""
    bound = [] if whole_tree_bound is None else [str(whole_tree_bound)]
    return python_child_output(_OPEN_VM_IN_CHILD, str(path), *bound, seconds=DEADLINE)


@pytest.mark.slow
def test_a_damaged_account_page_header_is_store_corrupted_never_sigabrt(
    chain_store: Path, tmp_path: Path
) -> None:
    """An 8-byte overwrite of the flags, lower and upper of an account leaf (what made
    liblmdb abort in mdb_cursor_next) or of its page number: the read-only VM's open refuses
    it naming the file and the page, and the process lives; the undamaged store opens."""
    assert open_in_child(chain_store) == "opened"
    data = (chain_store / DATA_FILE).read_bytes()
    leaves = account_leaves(data)
    assert len(leaves) >= 3
    picked = [leaves[1], leaves[len(leaves) // 2]]  # leaves of account keys only
    for number in picked:
        for at, blob in DAMAGES:
            path = damaged_copy(
                chain_store, tmp_path / f"p{number}-{at}-{blob[2]}", number, at, blob
            )
            said = open_in_child(path)
            assert said.startswith("StoreCorrupted: "), said
            assert f"{path / DATA_FILE}: page {number} " in said


@pytest.mark.slow
def test_a_damaged_bookkeeping_page_header_is_store_corrupted_never_sigabrt(
    chain_store: Path, tmp_path: Path
) -> None:
    """The leaf holding the last accepted pointer, damaged each way, is refused naming
    the file and that page; every other leaf holding a key that is not an account's (the
    format record, canonical entries, headers, bodies, receipts...: what the open reads
    before it scans the accounts, or after; each leaf of the tree, not a freed copy)
    made a branch's with no node is refused naming that page too, never a signal."""
    data = (chain_store / DATA_FILE).read_bytes()
    schema = rawdb.Schema(b"")
    live = live_leaves(data)
    leaves = {number: keys for number, keys in leaf_keys(data).items() if number in live}
    pointer_leaves = [n for n, keys in leaves.items() if schema.last_accepted_key() in keys]
    others = [
        number
        for number, keys in leaves.items()
        if number not in pointer_leaves
        and not all(key.startswith(schema.account_prefix()) for key in keys)
    ]
    assert len(pointer_leaves) == 1 and len(others) >= 5
    for number in pointer_leaves:
        for at, blob in DAMAGES:
            path = damaged_copy(
                chain_store, tmp_path / f"h{number}-{at}-{blob[2]}", number, at, blob
            )
            said = open_in_child(path)
            assert said.startswith("StoreCorrupted: "), said
            assert f"{path / DATA_FILE}: page {number} " in said
    for number in others:
        at, blob = DAMAGES[0]
        path = damaged_copy(chain_store, tmp_path / f"o{number}", number, at, blob)
        said = open_in_child(path)
        assert said.startswith("StoreCorrupted: "), said
        assert f"{path / DATA_FILE}: page {number} " in said
        shutil.rmtree(path)


@pytest.mark.slow
def test_over_the_whole_tree_bound_the_pointer_leaf_is_still_checked(
    chain_store: Path, tmp_path: Path
) -> None:
    """With the bound on the whole-tree check below the data file's size (the path a big
    store takes), the leaf holding the last accepted pointer made a branch's with no node
    is still refused naming the page, before liblmdb reads it; the sound store opens."""
    assert open_in_child(chain_store, whole_tree_bound=0) == "opened"
    data = (chain_store / DATA_FILE).read_bytes()
    pointer = rawdb.Schema(b"").last_accepted_key()
    live = live_leaves(data)
    (number,) = [n for n, keys in leaf_keys(data).items() if n in live and pointer in keys]
    at, blob = DAMAGES[0]
    path = damaged_copy(chain_store, tmp_path / "big", number, at, blob)
    said = open_in_child(path, whole_tree_bound=0)
    assert said.startswith("StoreCorrupted: "), said
    assert f"{path / DATA_FILE}: page {number} " in said
