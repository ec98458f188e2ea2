"""What an era1 file must be beyond its accumulator: its headers' numbers its places in the
index, its total difficulties the sum of its headers' difficulties, a regular file, read only
as far as the records asked for; every refusal names the file (and the height)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import ERA1_FIRST as FIRST
from tests.support.processes import returns_within
from vmstack.cchain import keccak256
from vmstack.cli import main
from vmstack.errors import StoreCorrupted
from vmstack.store import MemoryStore
from vmstack.store.history import ERA1_BLOCKS, EraArchive, EraRecord, write_era1

#: Seconds each (whole real era1 files read and verified): the quick loop leaves them out.
pytestmark = pytest.mark.slow

RENUMBERED_START = 21 * ERA1_BLOCKS  # 172,032


def _renumbered(era_dir: Path, tmp_path: Path) -> Path:
    """Epoch 0's records with the index start set to 172,032, the file named for epoch 21:
    name, stored root and accumulator all agree (the accumulator covers hashes and total
    difficulties, not numbers)."""
    data = bytearray((era_dir / FIRST).read_bytes())
    count = int.from_bytes(data[-8:], "little")
    start_at = len(data) - 16 - 8 * count
    assert int.from_bytes(data[start_at : start_at + 8], "little") == 0
    data[start_at : start_at + 8] = RENUMBERED_START.to_bytes(8, "little")
    folder = tmp_path / "renumbered"
    folder.mkdir()
    path = folder / FIRST.replace("-00000-", "-00021-")
    path.write_bytes(bytes(data))
    return path


def test_renumbered_file_refused_by_verify_and_reads(era_dir: Path, tmp_path: Path) -> None:
    """The renumbered file is refused at its first height, naming the file and the height,
    by the full check, by a verified first read and by a trusted read alike."""
    path = _renumbered(era_dir, tmp_path)
    expected = rf"{path.name}: the header at height {RENUMBERED_START} .* is block 0's"
    with EraArchive(path.parent) as archive:
        assert archive.first == RENUMBERED_START  # its tail alone is consistent
        with pytest.raises(StoreCorrupted, match=expected):
            archive.verify()
    with EraArchive(path.parent) as archive, pytest.raises(StoreCorrupted, match=expected):
        archive.header_rlp(RENUMBERED_START + 5)
    with (
        EraArchive(path.parent, trust=True) as archive,
        pytest.raises(StoreCorrupted, match=rf"{path.name}: the header at height 172037"),
    ):
        archive.block_parts(RENUMBERED_START + 5)


def test_renumbered_file_refused_by_the_cli_and_the_vm(
    era_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`history verify` and `history import` exit 2 naming the file and height; a VM over it
    serves none of its blocks (its first read refuses)."""
    from vmstack.cchain import ETHEREUM, CChainVM

    path = _renumbered(era_dir, tmp_path)
    assert main(["history", "verify", str(path.parent)]) == 2
    assert f"{path.name}: the header at height {RENUMBERED_START}" in capsys.readouterr().err
    assert main(["history", "import", str(path.parent), "--data-dir", str(tmp_path / "db")]) == 2
    assert f"{path.name}: the header at height {RENUMBERED_START}" in capsys.readouterr().err
    with (
        EraArchive(path.parent) as archive,
        pytest.raises(StoreCorrupted, match=path.name),
    ):
        CChainVM(MemoryStore(), flavour=ETHEREUM, chain_id=11155111, history=archive)


def test_total_difficulty_not_the_headers_refused(era_dir: Path, tmp_path: Path) -> None:
    """A file whose accumulator was computed over wrong total difficulties (its root and
    name agree with them) is refused naming the block whose total difficulty is off."""
    with EraArchive(era_dir, sparse=True) as real:
        records = [
            EraRecord(
                real.header_rlp(n),
                real.body_rlp(n),
                real.receipts(n),
                real.total_difficulty(n) + (n >= 3),
            )
            for n in range(10)
        ]
    folder = tmp_path / "td"
    folder.mkdir()
    path = write_era1(folder, "sepolia", 0, records)
    with (
        EraArchive(folder) as archive,
        pytest.raises(StoreCorrupted, match=rf"{path.name}: block 3: its total difficulty"),
    ):
        archive.verify()


def test_total_difficulty_across_files_recomputed(era_dir: Path, tmp_path: Path) -> None:
    """The first total difficulty of a file that continues another must be the previous
    file's last plus its header's difficulty (each file alone is consistent)."""
    import attrs

    from vmstack.cchain import ETHEREUM

    folder = tmp_path / "two"
    folder.mkdir()
    (folder / FIRST).symlink_to(era_dir / FIRST)
    with EraArchive(folder) as first:
        header = ETHEREUM.decode_header(first.header_rlp(8191))
        parent = first.hash(8191)
        total_difficulty = first.total_difficulty(8191) + 7  # 7 more than the headers say
    records = []
    for number in range(ERA1_BLOCKS, ERA1_BLOCKS + 4):
        encoded = ETHEREUM.encode_header(
            attrs.evolve(header, number=number, parent_hash=parent, gas_used=0)
        )
        total_difficulty += header.difficulty
        records.append(EraRecord(encoded, bytes.fromhex("c2c0c0"), b"\xc0", total_difficulty))
        parent = keccak256(encoded)
    path = write_era1(folder, "sepolia", ERA1_BLOCKS, records)
    with (
        EraArchive(folder) as archive,
        pytest.raises(StoreCorrupted, match=rf"{path.name}: block 8192: its total difficulty"),
    ):
        archive.verify()


def test_fifo_named_like_an_era1_file_is_refused_not_waited_on(tmp_path: Path) -> None:
    """A FIFO named like an era1 file is refused at once, naming it; so is a directory."""
    fifo = tmp_path / "fifo" / FIRST
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    try:
        with pytest.raises(StoreCorrupted, match=rf"{fifo}: not a regular file \(it is a FIFO\)"):
            returns_within(10, lambda: EraArchive(fifo.parent))
        done = subprocess.run(
            [sys.executable, "-m", "vmstack", "history", "verify", str(fifo.parent)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2 and f"{fifo}: not a regular file" in done.stderr
    finally:
        # Release a reader the old open would leave blocked.
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    folder = tmp_path / "dir" / FIRST
    folder.mkdir(parents=True)
    with pytest.raises(StoreCorrupted, match=rf"{folder}: not a regular file \(it is a directory"):
        EraArchive(folder.parent)


def test_sparse_gigabyte_file_is_refused_without_reading_it_whole(
    era_dir: Path, tmp_path: Path
) -> None:
    """Epoch 0's 3.2 MB of records, then a 1 GiB hole before the accumulator and index (its
    offsets moved to point back at the records): refused, naming the file, in a process
    whose peak memory stays far below the hole's size."""
    data = (era_dir / FIRST).read_bytes()
    count = int.from_bytes(data[-8:], "little")
    index_at = len(data) - 24 - 8 * count
    records = data[: index_at - 40]
    shift = 1 << 30
    tail = bytearray(data[index_at - 40 :])
    for slot in range(count):
        at = 40 + 16 + 8 * slot
        relative = int.from_bytes(tail[at : at + 8], "little", signed=True)
        tail[at : at + 8] = (relative - shift).to_bytes(8, "little", signed=True)
    folder = tmp_path / "sparse"
    folder.mkdir()
    path = folder / FIRST
    with path.open("wb") as out:
        out.write(records)
        out.seek(len(records) + shift)
        out.write(tail)
    assert path.stat().st_blocks * 512 < 16 << 20  # a sparse file: the hole takes no disk
    child = textwrap.dedent(
        f"""
        import sys
        from vmstack.store.history import EraArchive
        from vmstack.errors import StoreCorrupted
        try:
            EraArchive({str(folder)!r}).verify()
        except StoreCorrupted as error:
            print(error)
        # VmHWM is this process image's own peak (ru_maxrss may carry the forking parent's)
        status = open("/proc/self/status").read().split("VmHWM:")[1]
        print(int(status.split()[0]))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", child], capture_output=True, text=True, timeout=120, check=True
    )
    message, peak_kib = done.stdout.strip().splitlines()
    assert path.name in message and "block 8191's records span" in message
    assert int(peak_kib) < 400 * 1024, f"peak memory {int(peak_kib) // 1024} MiB"
