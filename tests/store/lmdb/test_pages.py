"""A damaged page under the account state the C-chain VM scans when it opens is
StoreCorrupted naming the data file and the page, never liblmdb's SIGABRT."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from vmstack.cchain import CChainVM, generate_chain, rawdb
from vmstack.clock import SimClock
from vmstack.store import LMDBStore
from vmstack.store.lmdb.files import DATA_FILE

#: Seconds a child opening a damaged store may take before the test fails.
DEADLINE = 60.0
PAGE = 4096

_OPEN_VM_IN_CHILD = """
import sys
from vmstack.cchain import CChainVM
from vmstack.errors import StoreCorrupted
from vmstack.store import LMDBStore
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


def account_leaves(data: bytes) -> list[int]:
    """The live leaf pages holding account keys (a page naming itself, leaf flags)."""
    prefix = rawdb.Schema(b"").account_prefix()
    found = []
    for number in range(2, len(data) // PAGE):
        page = data[number * PAGE : (number + 1) * PAGE]
        pgno, _, flags, lower, _ = struct.unpack_from("@NHHHH", page)
        if pgno != number or flags != 0x02:
            continue
        for index in range((lower - 16) // 2):
            (at,) = struct.unpack_from("@H", page, 16 + 2 * index)
            (size,) = struct.unpack_from("@H", page, at + 6)
            if page[at + 8 : at + 8 + size].startswith(prefix):
                found.append(number)
                break
    return found


def open_in_child(path: Path) -> str:
    child = subprocess.run(
        [sys.executable, "-c", _OPEN_VM_IN_CHILD, str(path)],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    assert child.returncode == 0, f"the opener died (rc {child.returncode}): {child.stderr}"
    return child.stdout.strip()


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
        for at, blob in ((8, bytes(8)), (8, b"\x00\x00\x01\x00\x10\x00\x00\x0f"), (0, b"\xff" * 8)):
            path = tmp_path / f"p{number}-{at}-{blob[2]}"
            shutil.copytree(chain_store, path)
            with (path / DATA_FILE).open("r+b") as out:
                out.seek(number * PAGE + at)
                out.write(blob)
            said = open_in_child(path)
            assert said.startswith("StoreCorrupted: "), said
            assert f"{path / DATA_FILE}: page {number} " in said
