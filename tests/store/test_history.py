"""EraArchive over the shared Sepolia era1 files, and every kind of bad archive refused."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import ERA1_FIRST as FIRST
from tests.conftest import ERA1_SECOND as SECOND
from tests.conftest import load_vectors
from vmstack.cchain import block_bytes, header_parent_hash, keccak256
from vmstack.cchain.era1 import verify_archive
from vmstack.cchain.rlpbytes import encode_item
from vmstack.errors import BlockNotFound, StoreCorrupted
from vmstack.store.history import (
    EraArchive,
    EraRecord,
    accumulator_root,
    snappy_frame,
    snappy_unframe,
    write_era1,
)

SEPOLIA_GENESIS = bytes.fromhex("25a5cc106eea7138acab33231d7160d69cb777ee0c2c553fcddf5138993e6dd9")


@pytest.fixture(scope="module")
def archive(era_dir: Path) -> EraArchive:
    """Both shared files, opened with their full checks."""
    return EraArchive(era_dir, sparse=True)


def test_both_roots_verified(archive: EraArchive) -> None:
    """Each file's stored root begins with its name's digits and its accumulator recomputes."""
    roots = {path.name: root.hex() for path, root in archive.roots().items()}
    assert roots[FIRST].startswith("643a00f7") and roots[SECOND].startswith("b8814b14")
    assert archive.hash(0) == SEPOLIA_GENESIS
    assert archive.hash(172032) == keccak256(archive.header_rlp(172032))
    assert (archive.first, archive.last) == (0, 180223)


@pytest.mark.parametrize("number", [0, 1, 8191, 172032, 175881, 180223])
def test_blocks_read_back_with_hashes_and_parent_links(archive: EraArchive, number: int) -> None:
    """A block's hash is keccak of its header, and its parent hash its predecessor's hash."""
    header = archive.header_rlp(number)
    assert archive.hash(number) == keccak256(header)
    if number % 8192:
        assert header_parent_hash(header) == archive.hash(number - 1)
    assert archive.body_rlp(number)[0] >= 0xC0 and archive.receipts(number)[0] >= 0xC0


def test_blocks_json_vectors_equal_what_the_archive_serves(archive: EraArchive) -> None:
    """The sepolia-era1 vectors are the archive's header and body stitched, with its hash."""
    vectors = [v for v in load_vectors("blocks.json") if v["name"].startswith("sepolia-era1/")]
    assert vectors
    for vector in vectors:
        number = int(vector["number"])
        assert block_bytes(archive.header_rlp(number), archive.body_rlp(number)) == bytes.fromhex(
            vector["rlp"][2:]
        )
        assert archive.hash(number) == bytes.fromhex(vector["hash"][2:])


def test_block_outside_the_archive_is_not_found(archive: EraArchive) -> None:
    """A height no file holds is BlockNotFound, not bytes."""
    with pytest.raises(BlockNotFound):
        archive.header_rlp(8192)


def test_default_refuses_the_gap_between_the_shared_files(era_dir: Path) -> None:
    """Epochs 0 and 21 are not contiguous: refused unless sparse, naming the later file."""
    with pytest.raises(StoreCorrupted, match=r"sepolia-00021-b8814b14.era1.*missing"):
        EraArchive(era_dir)


def test_snappy_round_trip_and_crc_checked() -> None:
    """Framing round-trips over several chunks; a damaged chunk is refused."""
    data = os.urandom(70000) + b"a" * 70000
    framed = snappy_frame(data)
    assert snappy_unframe(framed) == data
    damaged = bytearray(framed)
    damaged[14] ^= 1
    with pytest.raises(StoreCorrupted, match="CRC"):
        snappy_unframe(bytes(damaged))


def _copy(era_dir: Path, tmp_path: Path, name: str = FIRST) -> Path:
    target = tmp_path / "era"
    target.mkdir(exist_ok=True)
    shutil.copy(era_dir / name, target / name)
    return target / name


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x40
    path.chmod(0o644)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("where", ["header", "crc", "td", "body"])
def test_flipped_byte_refused_naming_the_file(era_dir: Path, tmp_path: Path, where: str) -> None:
    """A flipped byte in a header, a chunk CRC, a total difficulty or a body is refused."""
    path = _copy(era_dir, tmp_path)
    record = 8  # block 0's header record
    offsets = {"header": record + 8 + 20, "crc": record + 8 + 14}
    data = path.read_bytes()
    header_len = int.from_bytes(data[record + 2 : record + 6], "little")
    body = record + 8 + header_len
    body_len = int.from_bytes(data[body + 2 : body + 6], "little")
    receipts = body + 8 + body_len
    receipts_len = int.from_bytes(data[receipts + 2 : receipts + 6], "little")
    offsets["td"] = receipts + 8 + receipts_len + 8
    offsets["body"] = body + 8 + 16
    _flip(path, offsets[where])
    archive = EraArchive(path.parent)
    with pytest.raises(StoreCorrupted, match=FIRST):
        if where == "body":
            archive.hash(5)  # opens and verifies the file: bodies are not in the accumulator
            archive.body_rlp(0)
        else:
            archive.header_rlp(0)


def test_truncated_file_refused(era_dir: Path, tmp_path: Path) -> None:
    """A file cut short is refused when the archive opens."""
    path = _copy(era_dir, tmp_path)
    data = path.read_bytes()
    path.chmod(0o644)
    path.write_bytes(data[:-100])
    with pytest.raises(StoreCorrupted, match=FIRST):
        EraArchive(path.parent)


def test_root_not_matching_name_refused(era_dir: Path, tmp_path: Path) -> None:
    """A file renamed to another root is refused."""
    path = _copy(era_dir, tmp_path)
    wrong = path.with_name("sepolia-00000-00000000.era1")
    path.rename(wrong)
    with pytest.raises(StoreCorrupted, match=r"00000000.era1.*does not match its name"):
        EraArchive(wrong.parent)


def _minimal(value: int) -> bytes:
    return value.to_bytes((value.bit_length() + 7) // 8, "big")


def _chain(count: int, start: int = 0, parent: bytes = bytes(32)) -> list[EraRecord]:
    """A run of small linked fake blocks: a header is a list of a header's 15 fields, its
    parent first, difficulty 1 and its number in their places (so block n's total difficulty
    is n + 1), the rest empty."""
    records = []
    for number in range(start, start + count):
        header = encode_item([parent, *[b""] * 6, b"\x01", _minimal(number), *[b""] * 6])
        records.append(EraRecord(header, encode_item([[], []]), encode_item([]), number + 1))
        parent = keccak256(header)
    return records


def test_written_archive_round_trips(tmp_path: Path) -> None:
    """write_era1 writes files the archive accepts, a partial last file included."""
    first = _chain(8192)
    write_era1(tmp_path, "devnet", 0, first)
    last = _chain(10, 8192, keccak256(first[-1].header_rlp))
    path = write_era1(tmp_path, "devnet", 8192, last)
    archive = EraArchive(tmp_path)
    assert (archive.first, archive.last) == (0, 8201)
    assert archive.header_rlp(8200) == last[8].header_rlp
    assert archive.roots()[path] == accumulator_root(
        [keccak256(r.header_rlp) for r in last], [r.total_difficulty for r in last]
    )


def test_two_files_for_one_epoch_refused(tmp_path: Path) -> None:
    """Two files of epoch 0 are refused, naming one."""
    write_era1(tmp_path, "devnet", 0, _chain(3))
    write_era1(tmp_path, "devnet", 0, _chain(4))
    with pytest.raises(StoreCorrupted, match="second file for epoch 0"):
        EraArchive(tmp_path)


def test_gap_between_files_refused(tmp_path: Path) -> None:
    """Epoch 2 after epoch 0 is a gap."""
    write_era1(tmp_path, "devnet", 0, _chain(8192))
    write_era1(tmp_path, "devnet", 2 * 8192, _chain(3, 2 * 8192))
    with pytest.raises(StoreCorrupted, match=r"devnet-00002.*missing"):
        EraArchive(tmp_path)


def test_file_of_another_network_refused(tmp_path: Path) -> None:
    """A mainnet file among devnet files is refused, naming it."""
    write_era1(tmp_path, "devnet", 0, _chain(8192))
    write_era1(tmp_path, "mainnet", 8192, _chain(3, 8192))
    with pytest.raises(StoreCorrupted, match=r"mainnet-00001.*network mainnet"):
        EraArchive(tmp_path)


def test_ere_file_refused_as_not_era1(era_dir: Path, tmp_path: Path) -> None:
    """A directory holding only the .ere file has no era1 file; renamed .era1 it is refused."""
    ere = "sepolia-00000-deadbeef-noreceipts.ere"
    path = _copy(era_dir, tmp_path, ere)
    with pytest.raises(ValueError, match=r"no era1 file.*ere files, not era1"):
        EraArchive(path.parent)
    path.rename(path.with_name("sepolia-00000-deadbeef.era1"))
    with pytest.raises(StoreCorrupted, match="not an era1 file"):
        EraArchive(path.parent)


def test_wrong_directory_is_value_error(tmp_path: Path) -> None:
    """A missing path or an empty directory is a ValueError."""
    with pytest.raises(ValueError, match="not a directory"):
        EraArchive(tmp_path / "missing")
    with pytest.raises(ValueError, match="no era1 file"):
        EraArchive(tmp_path)


def _rewrite(era_dir: Path, tmp_path: Path, number: int, **change: bytes) -> Path:
    """A copy of the first shared file with block ``number``'s records changed, re-framed
    (CRCs valid, accumulator and name unchanged: only what verify reads can tell)."""
    source = EraArchive(era_dir, sparse=True)
    records = []
    for n in range(8192):
        records.append(EraRecord(source.header_rlp(n), source.body_rlp(n), source.receipts(n), 0))
    target = tmp_path / "era"
    target.mkdir()
    original = source.files[0].read_bytes()
    # Keep the total difficulties: read them from the original's records.
    offset, position = 8, 0
    with_td = []
    while position < 8192:
        lengths = []
        for _ in range(4):
            lengths.append(int.from_bytes(original[offset + 2 : offset + 6], "little"))
            offset += 8 + lengths[-1]
        td = int.from_bytes(original[offset - 32 : offset], "little")
        with_td.append(
            EraRecord(
                records[position].header_rlp,
                records[position].body_rlp,
                records[position].receipts_rlp,
                td,
            )
        )
        position += 1
    with_td[number] = EraRecord(
        with_td[number].header_rlp,
        change.get("body", with_td[number].body_rlp),
        change.get("receipts", with_td[number].receipts_rlp),
        with_td[number].total_difficulty,
    )
    path = write_era1(target, "sepolia", 0, with_td)
    assert path.name == FIRST
    return target


def test_verify_accepts_the_shared_files(archive: EraArchive) -> None:
    """Every record of both shared files passes verify, bodies and receipts included."""
    seen: list[int] = []
    size = verify_archive(archive, on_block=seen.append)
    assert size == sum(p.stat().st_size for p in archive.files)
    assert len(seen) == len(archive) == 16384


@pytest.mark.parametrize(
    ("field", "message"),
    [("body", "uncle hash does not match"), ("receipts", "receipts root does not match")],
)
def test_verify_refuses_a_body_or_receipts_the_header_does_not_commit_to(
    era_dir: Path, tmp_path: Path, field: str, message: str
) -> None:
    """A well-framed body or receipts list of another block is refused by the C-chain's
    verify only: the archive's own checks (what the file states) pass it."""
    replacement = {
        "body": encode_item([[], [[b"\x01"]]]),
        "receipts": encode_item([[b"\x01", b"", bytes(256), []]]),
    }
    directory = _rewrite(era_dir, tmp_path, 7, **{field: replacement[field]})
    archive = EraArchive(directory)
    assert archive.header_rlp(7)  # opens: the accumulator covers headers only
    assert archive.verify() == archive.files[0].stat().st_size
    with pytest.raises(StoreCorrupted, match=f"{FIRST}: block 7: {message}"):
        verify_archive(archive)


@pytest.mark.slow
def test_cli_history_verify(
    era_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """verify prints one line and exits 0 on good files, 2 with one line on a bad archive."""
    from vmstack.cli import main

    assert main(["history", "verify", str(era_dir), "--sparse"]) == 0
    assert "16384 blocks" in capsys.readouterr().out
    path = _copy(era_dir, tmp_path)
    _flip(path, 40)
    assert main(["history", "verify", str(path.parent)]) == 2
    error = capsys.readouterr().err.strip()
    assert FIRST in error and len(error.splitlines()) == 1


def test_reads_are_thread_safe_with_one_open_file(era_dir: Path) -> None:
    """Threads reading both files through an LRU of one open file get the right bytes."""
    import threading

    archive = EraArchive(era_dir, sparse=True, max_open_files=1)
    expected = {n: keccak256(archive.header_rlp(n)) for n in (3, 8000, 172040, 180000)}
    failures: list[BaseException] = []

    def reader() -> None:
        try:
            for _ in range(50):
                for number, digest in expected.items():
                    assert archive.hash(number) == digest
                    assert keccak256(archive.header_rlp(number)) == digest
        except BaseException as error:  # reported by the main thread
            failures.append(error)

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    assert not failures
    archive.close()
    with pytest.raises(ValueError, match="closed"):
        archive.header_rlp(3)


@pytest.mark.slow
def test_bench_rows_over_the_shared_files(era_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bench case gives its four rows over the shared files: verify against sha256,
    get_ancestors over the archive against the slow path, the cursor walk against gets, the
    state roots of epoch 0 against the trie package's."""
    from vmstack.benchmarks import history

    monkeypatch.setenv("VMSTACK_VECTORS", str(era_dir.parent))
    verify, ancestors, walk, roots = history.run(quick=True)
    assert roots.group == "state roots" and roots.baseline_label.startswith("trie.HexaryTrie")
    assert float(roots.notes["recompute_state_roots_us_per_block"]) > 0
    assert verify.floor_label == "sha256 of the file" and verify.goal_met is not None
    assert verify.fast_seconds > 0 and float(verify.notes["verify_mb_per_s"]) > 0
    assert ancestors.group == "history get_ancestors" and ancestors.notes["blocks"] == 500
    assert ancestors.floor_label == "unframe (CRC) + join"
    assert walk.group == "settled walk, LMDB" and walk.fast_label == "get_ancestors (gets)"
    assert walk.baseline_label == "cursor walk" and walk.goal_met is not None
    assert float(walk.notes["cursor_over_same_loop_gets"]) > 0
