"""Settled history read from era1 archives: :class:`EraArchive`.

An era1 file is an e2store file (records of ``type u16 LE | length u32 LE | reserved u16 = 0 |
value``) holding up to 8,192 consecutive blocks::

    era1        := version | block-tuple* | accumulator | block-index
    block-tuple := header | body | receipts | total-difficulty

The header, body and receipts values are snappy-framed RLP (the receipts in their consensus
form); the total difficulty is a 32-byte little-endian integer; the accumulator is the SSZ hash
tree root of the list of ``(block hash, total difficulty)`` header records (limit 8,192, length
mixed in); the block index is ``start | offset* | count`` (u64 LE each), every offset relative
to the start of the index record. A file is named ``network-EEEEE-RRRRRRRR.era1``: its epoch
(``start // 8192``) and the first four bytes of its accumulator root.

Every check fails with :class:`~vmstack.errors.StoreCorrupted` naming the file and what was
wrong; damaged bytes are never returned as data. Only regular files are opened (a FIFO or a
directory named like an era1 file is refused, never waited on), and every read is bounded by
the records it asks for: no file is read whole. Opening an archive reads each file's tail
only (its block index and stored root, checked against its name); the first read from a file
also recomputes its accumulator from every header and total difficulty, checks each
header's number against its place in the index and each total difficulty against the
headers' difficulties (``trust=True`` skips that), after which each header served is checked
against the hash the accumulator covers (in a trusted file, its number against its height).
Reads use ``os.pread`` on a bounded LRU of open files, so they are thread-safe and read only
the records asked for.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import struct
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Final, Self

import attrs
import cramjam
import google_crc32c

from vmstack.cchain.crypto import keccak256
from vmstack.cchain.rlpbytes import header_parent_hash, iter_list_items, read_prefix
from vmstack.errors import BlockNotFound, InvalidBlock, StoreCorrupted

__all__ = [
    "ERA1_BLOCKS",
    "EraArchive",
    "EraRecord",
    "accumulator_root",
    "snappy_frame",
    "snappy_unframe",
    "write_era1",
]

#: Blocks per era1 file (the accumulator's list limit).
ERA1_BLOCKS: Final = 8192

TYPE_VERSION: Final = 0x3265
TYPE_HEADER: Final = 0x03
TYPE_BODY: Final = 0x04
TYPE_RECEIPTS: Final = 0x05
TYPE_TOTAL_DIFFICULTY: Final = 0x06
TYPE_ACCUMULATOR: Final = 0x07
TYPE_BLOCK_INDEX: Final = 0x3266
TYPE_ERE_INDEX: Final = 0x3267

#: The largest record value read (go-ethereum's e2store limit).
MAX_RECORD_VALUE: Final = 50 * 1024 * 1024
_RECORD = struct.Struct("<HIH")
_U64 = struct.Struct("<Q")
_NAME = re.compile(r"^(?P<network>[A-Za-z0-9_]+)-(?P<epoch>\d{5,})-(?P<root>[0-9a-f]{8})\.era1$")
_STREAM_ID: Final = b"\xff\x06\x00\x00sNaPpY"
_MAX_CHUNK: Final = 65536
_DEFAULT_OPEN_FILES: Final = 64
#: The most bytes one block's four records may span (three record limits and a 32-byte
#: total difficulty, each with its 8-byte record head).
_MAX_BLOCK_SPAN: Final = 3 * (8 + MAX_RECORD_VALUE) + 8 + 32
#: The bytes of whole blocks' records read at once while verifying a file.
_WINDOW: Final = 1 << 20
#: The most records :meth:`_EraFile._not_era1` walks (more than a file of 8,192 blocks has).
_MAX_WALKED_RECORDS: Final = 6 * ERA1_BLOCKS + 16
#: A header's difficulty and number fields (both flavours: 8th and 9th).
_HEADER_DIFFICULTY: Final = 7
_HEADER_NUMBER: Final = 8


def _file_kind(mode: int) -> str:
    for test, kind in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return kind
    return "not a regular file"


# --- snappy framing ------------------------------------------------------------------------


def _masked_crc32c(data: bytes) -> int:
    crc: int = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def snappy_frame(data: bytes) -> bytes:
    """``data`` in the snappy framing format: the stream identifier, then one compressed
    chunk (masked CRC-32C of its uncompressed bytes) per 64 KiB."""
    parts = [_STREAM_ID]
    for start in range(0, len(data), _MAX_CHUNK):
        chunk = data[start : start + _MAX_CHUNK]
        body = struct.pack("<I", _masked_crc32c(chunk)) + bytes(cramjam.snappy.compress_raw(chunk))
        parts.append(bytes((0x00,)) + len(body).to_bytes(3, "little") + body)
    return b"".join(parts)


def snappy_unframe(framed: bytes | memoryview) -> bytes:
    """The bytes of a snappy-framed stream, every chunk's masked CRC-32C checked.

    Raises :class:`StoreCorrupted` (naming the file too, in an archive) for a
    missing stream identifier, an unskippable reserved chunk, a chunk over 64 KiB
    uncompressed, bytes that do not decompress, or a CRC that does not match.
    """
    view = memoryview(framed)
    if bytes(view[:10]) != _STREAM_ID:
        raise StoreCorrupted("snappy stream does not start with the stream identifier")
    out: list[bytes] = []
    offset, end = 10, len(view)
    while offset < end:
        if offset + 4 > end:
            raise StoreCorrupted("snappy chunk header is truncated")
        kind = view[offset]
        length = int.from_bytes(view[offset + 1 : offset + 4], "little")
        start = offset + 4
        offset = start + length
        if offset > end:
            raise StoreCorrupted("snappy chunk runs past the end of its record")
        if kind == 0xFF:
            if bytes(view[start - 4 : offset]) != _STREAM_ID:
                raise StoreCorrupted("malformed snappy stream identifier")
            continue
        if kind in (0x00, 0x01):
            if length < 4:
                raise StoreCorrupted("snappy chunk too short for its CRC")
            expected = int.from_bytes(view[start : start + 4], "little")
            payload = bytes(view[start + 4 : offset])
            if kind == 0x00:
                try:
                    if cramjam.snappy.decompress_raw_len(payload) > _MAX_CHUNK:
                        raise StoreCorrupted("snappy chunk decompresses to more than 64 KiB")
                    chunk = bytes(cramjam.snappy.decompress_raw(payload))
                except cramjam.DecompressionError as error:
                    raise StoreCorrupted(f"snappy chunk does not decompress ({error})") from None
            else:
                if len(payload) > _MAX_CHUNK:
                    raise StoreCorrupted("uncompressed snappy chunk over 64 KiB")
                chunk = payload
            if _masked_crc32c(chunk) != expected:
                raise StoreCorrupted("snappy chunk CRC-32C does not match its bytes")
            out.append(chunk)
        elif 0x02 <= kind <= 0x7F:
            raise StoreCorrupted(f"reserved unskippable snappy chunk type 0x{kind:02x}")
    return b"".join(out)


# --- the accumulator -----------------------------------------------------------------------


def _sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


_ZERO_HASHES = [bytes(32)]
for _ in range(13):
    _ZERO_HASHES.append(_sha256(_ZERO_HASHES[-1] * 2))


def accumulator_root(hashes: Sequence[bytes], total_difficulties: Sequence[int]) -> bytes:
    """The era1 accumulator: the SSZ hash tree root of the list of header records
    ``(block hash, total difficulty as uint256 LE)``, limit 8,192, its length mixed in."""
    if len(hashes) != len(total_difficulties) or len(hashes) > ERA1_BLOCKS:
        raise ValueError(
            f"an accumulator takes as many hashes as total difficulties, at most {ERA1_BLOCKS}"
        )
    layer = [
        _sha256(h + td.to_bytes(32, "little"))
        for h, td in zip(hashes, total_difficulties, strict=True)
    ]
    for depth in range(13):
        if len(layer) % 2:
            layer.append(_ZERO_HASHES[depth])
        layer = [_sha256(layer[i] + layer[i + 1]) for i in range(0, len(layer), 2)]
    root = layer[0] if layer else _ZERO_HASHES[13]
    return _sha256(root + len(hashes).to_bytes(32, "little"))


# --- writing -------------------------------------------------------------------------------


@attrs.frozen(slots=True)
class EraRecord:
    """One block of an era1 file: its header, body and receipts RLP and total difficulty."""

    header_rlp: bytes
    body_rlp: bytes
    receipts_rlp: bytes
    total_difficulty: int


def _record(kind: int, value: bytes) -> bytes:
    return _RECORD.pack(kind, len(value), 0) + value


def write_era1(
    directory: Path | str, network: str, start: int, records: Sequence[EraRecord]
) -> Path:
    """Write ``records`` (blocks ``start``, ``start + 1``, ...) as one era1 file in
    ``directory`` and return its path, named by its epoch and accumulator root. ``start`` is
    a multiple of 8,192 and there are 1 to 8,192 records."""
    if start % ERA1_BLOCKS or not 0 < len(records) <= ERA1_BLOCKS:
        raise ValueError("an era1 file starts at a multiple of 8192 and holds 1 to 8192 blocks")
    parts = [_record(TYPE_VERSION, b"")]
    written = 8
    offsets: list[int] = []
    for record in records:
        offsets.append(written)
        td = record.total_difficulty.to_bytes(32, "little")
        for kind, value in (
            (TYPE_HEADER, snappy_frame(record.header_rlp)),
            (TYPE_BODY, snappy_frame(record.body_rlp)),
            (TYPE_RECEIPTS, snappy_frame(record.receipts_rlp)),
            (TYPE_TOTAL_DIFFICULTY, td),
        ):
            parts.append(_record(kind, value))
            written += 8 + len(value)
    root = accumulator_root(
        [keccak256(r.header_rlp) for r in records], [r.total_difficulty for r in records]
    )
    parts.append(_record(TYPE_ACCUMULATOR, root))
    base = written + 40
    index = [_U64.pack(start)]
    index.extend(struct.pack("<q", offset - base) for offset in offsets)
    index.append(_U64.pack(len(records)))
    parts.append(_record(TYPE_BLOCK_INDEX, b"".join(index)))
    path = Path(directory) / f"{network}-{start // ERA1_BLOCKS:05d}-{root[:4].hex()}.era1"
    path.write_bytes(b"".join(parts))
    return path


# --- one file --------------------------------------------------------------------------------


class _EraFile:
    """One era1 file: its tail checked on construction, opened (index read, accumulator
    recomputed unless trusted) by :meth:`open`. Reads are ``os.pread`` calls."""

    def __init__(self, path: Path, network: str, epoch: int, name_root: str) -> None:
        self.path = path
        self.network = network
        self.epoch = epoch
        fd = self._open_regular()
        try:
            self.size = os.fstat(fd).st_size
            self._check_tail(fd, name_root)
        finally:
            os.close(fd)
        self.fd = -1
        self.users = 0
        self.evicted = False
        self.offsets: list[int] = []
        #: The block hashes the accumulator covers, kept once computed (a file reopened
        #: unchanged after leaving the LRU is not verified again).
        self.hashes: list[bytes] | None = None
        self.verified: tuple[int, int, int] | None = None

    def damaged(self, what: str) -> StoreCorrupted:
        return StoreCorrupted(f"era1 file {self.path}: {what}")

    def _open_regular(self) -> int:
        """A descriptor of the file, opened without blocking (a FIFO would block an
        ordinary open until a writer came) and refused unless it is a regular file."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as error:
            raise self.damaged(f"cannot be opened ({error.strerror})") from None
        try:
            mode = os.fstat(fd).st_mode
        except OSError as error:
            os.close(fd)
            raise self.damaged(f"cannot be read ({error.strerror})") from None
        if not stat.S_ISREG(mode):
            os.close(fd)
            raise self.damaged(f"not a regular file (it is {_file_kind(mode)})")
        return fd

    def _pread(self, fd: int, offset: int, length: int) -> bytes:
        try:
            data = os.pread(fd, length, offset)
        except OSError as error:
            raise self.damaged(f"cannot be read ({error.strerror})") from None
        if len(data) != length:
            raise self.damaged(f"truncated: {length} bytes expected at offset {offset}")
        return data

    def _check_tail(self, fd: int, name_root: str) -> None:
        if self.size < 8 + 40 + 32:
            raise self.damaged(f"truncated: {self.size} bytes")
        if self._pread(fd, 0, 8) != _record(TYPE_VERSION, b""):
            raise self.damaged("no era1 version record at its start")
        count: int = _U64.unpack(self._pread(fd, self.size - 8, 8))[0]
        index_at = self.size - 24 - 8 * count
        if not 0 < count <= ERA1_BLOCKS or index_at < 48:
            raise self.damaged(
                self._not_era1(fd) or f"block count {count} in its index is impossible (truncated?)"
            )
        tail = self._pread(fd, index_at - 40, 40 + 16)
        kind, length, reserved = _RECORD.unpack_from(tail, 40)
        if (kind, length, reserved) != (TYPE_BLOCK_INDEX, 16 + 8 * count, 0):
            raise self.damaged(
                self._not_era1(fd) or "no block index record at its end (truncated or damaged)"
            )
        if _RECORD.unpack_from(tail, 0) != (TYPE_ACCUMULATOR, 32, 0):
            raise self.damaged("no accumulator record before its block index")
        self.root: bytes = tail[8:40]
        if self.root[:4].hex() != name_root:
            raise self.damaged(f"its accumulator root {self.root.hex()} does not match its name")
        self.start: int = _U64.unpack_from(tail, 48)[0]
        self.count = count
        self.index_at = index_at
        if self.start != self.epoch * ERA1_BLOCKS:
            raise self.damaged(
                f"it starts at block {self.start}, not at its epoch's {self.epoch * ERA1_BLOCKS}"
            )

    def _not_era1(self, fd: int) -> str | None:
        """Why the file is not era1 when its records end in another kind of index. The walk
        is bounded: at most as many records as an 8,192-block file holds, none of them over
        the record limit (a file of zeros or of one huge record is not walked to its end)."""
        offset = 0
        last = None
        for _ in range(_MAX_WALKED_RECORDS):
            if offset + 8 > self.size:
                break
            kind, length, _ = _RECORD.unpack(self._pread(fd, offset, 8))
            if length > MAX_RECORD_VALUE:
                return None
            last = kind
            offset += 8 + length
        else:
            return None
        if last == TYPE_ERE_INDEX:
            return "not an era1 file: it ends in an ere index record (type 0x3267)"
        return None

    @property
    def last(self) -> int:
        return self.start + self.count - 1

    def open(self, trust: bool) -> None:
        """Open the file, read its block index and, unless ``trust``, recompute its
        accumulator and parent links from every header and total difficulty."""
        fd = self._open_regular()
        try:
            status = os.fstat(fd)
            identity = (status.st_ino, status.st_size, status.st_mtime_ns)
            if status.st_size != self.size:
                raise self.damaged("its size changed since the archive was opened")
            raw = self._pread(fd, self.index_at + 16, 8 * self.count)
            offsets = [self.index_at + rel for (rel,) in struct.iter_unpack("<q", raw)]
            previous = 7
            for offset in offsets:
                if not previous < offset < self.index_at - 40:
                    raise self.damaged("its block index points outside its block records")
                previous = offset
            self.offsets = offsets
            if not trust and (self.hashes is None or identity != self.verified):
                self.hashes = self._verify_accumulator(fd)
                self.verified = identity
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd

    def _verify_accumulator(self, fd: int) -> list[bytes]:
        """Every block's records, read in windows of whole blocks (a block's records may
        span at most four record limits, so a file whose index points across a hole is refused
        before anything that large is read): the header's number is the block's place in
        the index, each total difficulty is the previous one plus the header's difficulty
        (from 0 below block 0, as go-ethereum's verify recomputes them), each parent hash
        the previous block's hash, and the accumulator root the stored one."""
        hashes: list[bytes] = []
        tds: list[int] = []
        window, window_at = b"", 0
        for position, offset in enumerate(self.offsets):
            number = self.start + position
            end = self.offsets[position + 1] if position + 1 < self.count else self.index_at - 40
            if end - offset > _MAX_BLOCK_SPAN:
                raise self.damaged(
                    f"block {number}'s records span {end - offset} bytes, more than four "
                    f"records of at most {MAX_RECORD_VALUE} bytes"
                )
            if end > window_at + len(window):
                # Read whole blocks in windows of about 1 MiB (or the one block, if larger).
                stop = self.index_at - 40
                window_at = offset
                window = self._pread(fd, offset, max(end, min(offset + _WINDOW, stop)) - offset)
            data = memoryview(window)[offset - window_at : end - window_at]
            at = 0
            values = []
            for kind in (TYPE_HEADER, TYPE_BODY, TYPE_RECEIPTS, TYPE_TOTAL_DIFFICULTY):
                value, at = self._record_in(data, at, kind, number)
                values.append(value)
            if at != len(data):
                raise self.damaged(f"block {number}'s records do not end where the next begin")
            header = self._header(values[0], number)
            difficulty, found = self._difficulty_and_number(header, number)
            if found != number:
                raise self._misnumbered(number, found)
            if hashes and header_parent_hash(header) != hashes[-1]:
                raise self.damaged(f"block {number}'s parent hash is not block {number - 1}'s hash")
            hashes.append(keccak256(header))
            td = self._total_difficulty(values[3], number)
            if tds or number == 0:
                below = tds[-1] if tds else 0
                if td != below + difficulty:
                    raise self.damaged(
                        f"block {number}: its total difficulty {td} is not "
                        f"{below} + its header's difficulty {difficulty}"
                    )
            tds.append(td)
        if accumulator_root(hashes, tds) != self.root:
            raise self.damaged(
                "its accumulator root does not match its headers and total difficulties"
            )
        return hashes

    def _header_field(self, header: bytes, index: int, number: int, what: str) -> int:
        try:
            for position, item in enumerate(iter_list_items(header)):
                if position == index:
                    is_list, payload, length = read_prefix(item)
                    if is_list or length > 32 or (length and item[payload] == 0):
                        break
                    return int.from_bytes(item[payload : payload + length], "big")
        except InvalidBlock as error:
            raise self.damaged(f"block {number} header: {error}") from None
        raise self.damaged(f"block {number} header: no well-formed {what} field")

    def _difficulty_and_number(self, header: bytes, number: int) -> tuple[int, int]:
        """The difficulty and number fields of a header, read in one pass."""
        found: list[int] = []
        try:
            for position, item in enumerate(iter_list_items(header)):
                if position >= _HEADER_DIFFICULTY:
                    is_list, payload, length = read_prefix(item)
                    if is_list or length > 32 or (length and item[payload] == 0):
                        break
                    found.append(int.from_bytes(item[payload : payload + length], "big"))
                    if position == _HEADER_NUMBER:
                        return found[0], found[1]
        except InvalidBlock as error:
            raise self.damaged(f"block {number} header: {error}") from None
        raise self.damaged(f"block {number} header: no well-formed difficulty and number fields")

    def _misnumbered(self, number: int, found: int) -> StoreCorrupted:
        return self.damaged(
            f"the header at height {number} (place {number - self.start} of an index "
            f"starting at {self.start}) is block {found}'s"
        )

    def difficulty(self, header: bytes, number: int) -> int:
        """The difficulty field of block ``number``'s header."""
        return self._header_field(header, _HEADER_DIFFICULTY, number, "difficulty")

    def _check_number(self, header: bytes, number: int) -> None:
        """The header at index place ``number`` must say ``number``."""
        found = self._header_field(header, _HEADER_NUMBER, number, "number")
        if found != number:
            raise self._misnumbered(number, found)

    def _record_in(
        self, data: bytes | memoryview, offset: int, kind: int, number: int
    ) -> tuple[memoryview, int]:
        if offset + 8 > len(data):
            raise self.damaged(f"block {number}: record runs past the end")
        found, length, reserved = _RECORD.unpack_from(data, offset)
        if found != kind or reserved:
            raise self.damaged(
                f"block {number}: record of type 0x{found:04x} (reserved "
                f"{reserved}) where type 0x{kind:04x} belongs"
            )
        end = offset + 8 + length
        if length > MAX_RECORD_VALUE or end > len(data):
            raise self.damaged(f"block {number}: record of {length} bytes runs past the end")
        return memoryview(data)[offset + 8 : end], end

    def _total_difficulty(self, value: memoryview, number: int) -> int:
        if len(value) != 32:
            raise self.damaged(f"block {number}: total difficulty record is not 32 bytes")
        return int.from_bytes(value, "little")

    def _unframe(self, value: memoryview, number: int, what: str) -> bytes:
        try:
            return snappy_unframe(value)
        except StoreCorrupted as error:
            raise self.damaged(f"block {number} {what}: {error}") from None

    def _header(self, value: memoryview, number: int) -> bytes:
        header = self._unframe(value, number, "header")
        self._check_list(header, number, "header")
        return header

    def _check_list(self, data: bytes, number: int, what: str) -> None:
        try:
            is_list, payload, length = read_prefix(data)
        except InvalidBlock as error:
            raise self.damaged(f"block {number} {what}: {error}") from None
        if not is_list or payload + length != len(data):
            raise self.damaged(f"block {number} {what}: not exactly one RLP list")

    def read(self, number: int, slot: int) -> bytes:
        """The unframed value of record ``slot`` (0 header, 1 body, 2 receipts) of block
        ``number``, checked: its CRCs, its RLP framing, a header against its hash."""
        offset = self.offsets[number - self.start]
        for _ in range(slot):
            length = _RECORD.unpack(self._pread(self.fd, offset, 8))[1]
            offset += 8 + length
        head = self._pread(self.fd, offset, 8)
        kind = (TYPE_HEADER, TYPE_BODY, TYPE_RECEIPTS)[slot]
        value, _ = self._record_in(
            head
            + self._pread(self.fd, offset + 8, min(_RECORD.unpack(head)[1], MAX_RECORD_VALUE + 1)),
            0,
            kind,
            number,
        )
        what = ("header", "body", "receipts")[slot]
        data = self._unframe(value, number, what)
        self._check_list(data, number, what)
        if slot == 0:
            self._check_header(data, number)
        return data

    def _check_header(self, header: bytes, number: int) -> None:
        """A header served: its hash the one the verified accumulator covers (whose
        headers' numbers were checked), or, in a trusted file, its number its height."""
        if self.hashes is None:
            self._check_number(header, number)
        elif keccak256(header) != self.hashes[number - self.start]:
            raise self.damaged(
                f"block {number} header: its hash is not the one its accumulator covers"
            )

    def read_total_difficulty(self, number: int) -> int:
        """The total difficulty record of block ``number``."""
        offset = self.offsets[number - self.start]
        for _ in range(3):
            offset += 8 + _RECORD.unpack(self._pread(self.fd, offset, 8))[1]
        value, _ = self._record_in(
            self._pread(self.fd, offset, 8 + 32), 0, TYPE_TOTAL_DIFFICULTY, number
        )
        return self._total_difficulty(value, number)

    def read_parts(self, number: int) -> tuple[bytes, bytes]:
        """The header and body of block ``number``, checked as :meth:`read` checks them, in
        three reads: the header record's head, its value with the body record's head, and
        the body's value."""
        offset = self.offsets[number - self.start]
        head = self._pread(self.fd, offset, 8)
        length = min(_RECORD.unpack(head)[1], MAX_RECORD_VALUE + 1)
        joined = head + self._pread(self.fd, offset + 8, length + 8)
        header_value, body_at = self._record_in(joined, 0, TYPE_HEADER, number)
        body_head = joined[body_at : body_at + 8]
        body_length = min(_RECORD.unpack(body_head)[1], MAX_RECORD_VALUE + 1)
        body_value, _ = self._record_in(
            body_head + self._pread(self.fd, offset + body_at + 8, body_length),
            0,
            TYPE_BODY,
            number,
        )
        header = self._unframe(header_value, number, "header")
        self._check_list(header, number, "header")
        self._check_header(header, number)
        body = self._unframe(body_value, number, "body")
        self._check_list(body, number, "body")
        return header, body

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


# --- the archive -----------------------------------------------------------------------------


class EraArchive:
    """Read-only settled history from a directory of era1 files (see the module docstring).

    ``EraArchive(directory, *, trust=False, sparse=False, network=None, max_open_files=64)``:
    the ``.era1`` files of one network, one per epoch, contiguous unless ``sparse`` (which
    serves whichever epochs are present, as go-ethereum's ``eradb`` does); every file but
    the last holds 8,192 blocks. ``ValueError`` for a path that is not a directory or holds
    no era1 file; :class:`StoreCorrupted` naming the file for two files of one epoch, a gap,
    a file of another network, a malformed name, or a file whose tail or root is damaged.
    ``trust=True`` skips recomputing each file's accumulator on its first read.

    :meth:`header_rlp`, :meth:`body_rlp`, :meth:`receipts` and :meth:`hash` take a block
    number from :attr:`first` to :attr:`last` (:class:`BlockNotFound` for one not held).
    Thread-safe; at most ``max_open_files`` files are open at once.
    """

    def __init__(
        self,
        directory: Path | str,
        *,
        trust: bool = False,
        sparse: bool = False,
        network: str | None = None,
        max_open_files: int = _DEFAULT_OPEN_FILES,
    ) -> None:
        self.directory = Path(directory)
        if not self.directory.is_dir():
            raise ValueError(f"{self.directory} is not a directory of era1 files")
        if max_open_files < 1:
            raise ValueError("max_open_files must be at least 1")
        self._trust = trust
        self._max_open = max_open_files
        self._lock = threading.Lock()
        self._open: OrderedDict[int, _EraFile] = OrderedDict()
        self._closed = False
        self._index_lock = threading.Lock()
        self._numbers: dict[bytes, int] | None = None
        names = sorted(p.name for p in self.directory.iterdir() if p.name.endswith(".era1"))
        if not names:
            others = sorted(p.name for p in self.directory.iterdir() if p.suffix == ".ere")
            hint = f" ({', '.join(others)}: ere files, not era1)" if others else ""
            raise ValueError(f"no era1 file in {self.directory}{hint}")
        parsed: list[tuple[int, str, str, Path]] = []
        for name in names:
            match = _NAME.match(name)
            path = self.directory / name
            if match is None:
                raise StoreCorrupted(
                    f"era1 file {path}: its name is not network-EEEEE-RRRRRRRR.era1"
                )
            parsed.append((int(match["epoch"]), match["network"], match["root"], path))
        parsed.sort()
        self.network = network if network is not None else parsed[0][1]
        self._files: dict[int, _EraFile] = {}
        for epoch, file_network, root, path in parsed:
            if file_network != self.network:
                raise StoreCorrupted(
                    f"era1 file {path}: of network {file_network}, the archive is {self.network}"
                )
            if epoch in self._files:
                raise StoreCorrupted(
                    f"era1 file {path}: a second file for epoch {epoch} "
                    f"(the other is {self._files[epoch].path.name})"
                )
            if self._files and not sparse and epoch != max(self._files) + 1:
                raise StoreCorrupted(
                    f"era1 file {path}: epoch {epoch} follows epoch "
                    f"{max(self._files)}, the epochs between are missing"
                )
            self._files[epoch] = _EraFile(path, file_network, epoch, root)
        epochs = sorted(self._files)
        for epoch in epochs[:-1]:
            if self._files[epoch].count != ERA1_BLOCKS:
                raise StoreCorrupted(
                    f"era1 file {self._files[epoch].path}: holds "
                    f"{self._files[epoch].count} blocks, only the last file "
                    f"may hold fewer than {ERA1_BLOCKS}"
                )
        self.first: int = self._files[epochs[0]].start
        self.last: int = self._files[epochs[-1]].last

    @property
    def files(self) -> list[Path]:
        """The archive's files, by epoch."""
        return [self._files[epoch].path for epoch in sorted(self._files)]

    def roots(self) -> dict[Path, bytes]:
        """Each file's stored accumulator root (checked against its name)."""
        return {self._files[e].path: self._files[e].root for e in sorted(self._files)}

    def holds(self, number: int) -> bool:
        """Whether block ``number`` is in the archive."""
        file = self._files.get(number // ERA1_BLOCKS) if number >= 0 else None
        return file is not None and number <= file.last

    def __contains__(self, number: object) -> bool:
        return isinstance(number, int) and self.holds(number)

    def _acquire(self, number: int) -> _EraFile:
        if not self.holds(number):
            raise BlockNotFound(f"block {number} is not in the era1 archive {self.directory}")
        epoch = number // ERA1_BLOCKS
        with self._lock:
            if self._closed:
                raise ValueError(f"the era1 archive {self.directory} is closed")
            file = self._open.get(epoch)
            if file is None:
                file = self._files[epoch]
                file.open(self._trust)
                file.evicted = False
                self._open[epoch] = file
                while len(self._open) > self._max_open:
                    _, old = self._open.popitem(last=False)
                    old.evicted = True
                    if old.users == 0:
                        old.close()
            else:
                self._open.move_to_end(epoch)
            file.users += 1
            return file

    def _release(self, file: _EraFile) -> None:
        with self._lock:
            file.users -= 1
            if file.evicted and file.users == 0:
                file.close()

    def _read(self, number: int, slot: int) -> bytes:
        file = self._acquire(number)
        try:
            return file.read(number, slot)
        finally:
            self._release(file)

    def header_rlp(self, number: int) -> bytes:
        """The header RLP of block ``number``."""
        return self._read(number, 0)

    def body_rlp(self, number: int) -> bytes:
        """The body RLP of block ``number`` (``[transactions, uncles, withdrawals?]``)."""
        return self._read(number, 1)

    def receipts(self, number: int) -> bytes:
        """The receipts RLP of block ``number``: the list of its receipts in consensus form
        (a typed receipt as a string ``type || rlp``), what its receipts root commits to."""
        return self._read(number, 2)

    def block_parts(self, number: int) -> tuple[bytes, bytes, bytes]:
        """The hash, header RLP and body RLP of block ``number`` in one visit to its file
        (what a walk over archived blocks reads): each checked as :meth:`hash`,
        :meth:`header_rlp` and :meth:`body_rlp` check them."""
        file = self._acquire(number)
        try:
            header, body = file.read_parts(number)
            block_hash = (
                file.hashes[number - file.start] if file.hashes is not None else keccak256(header)
            )
            return block_hash, header, body
        finally:
            self._release(file)

    def total_difficulty(self, number: int) -> int:
        """The total difficulty the archive records for block ``number``."""
        file = self._acquire(number)
        try:
            return file.read_total_difficulty(number)
        finally:
            self._release(file)

    def hash(self, number: int) -> bytes:
        """The hash of block ``number`` (from the verified accumulator, or its header)."""
        file = self._acquire(number)
        try:
            if file.hashes is not None:
                return file.hashes[number - file.start]
            return keccak256(file.read(number, 0))
        finally:
            self._release(file)

    def number_of(self, block_hash: bytes) -> int | None:
        """The number of the archived block whose hash is ``block_hash``, or ``None``. The
        first call indexes every file by hash (from its verified accumulator's hashes, or by
        hashing its headers when trusted), which reads each file once; the index (8,192
        entries a file) is kept while the archive is open."""
        with self._index_lock:
            numbers = self._numbers
            if numbers is None:
                numbers = {}
                for epoch in sorted(self._files):
                    file = self._acquire(self._files[epoch].start)
                    try:
                        hashes = (
                            file.hashes
                            if file.hashes is not None
                            else [
                                keccak256(file.read(n, 0)) for n in range(file.start, file.last + 1)
                            ]
                        )
                    finally:
                        self._release(file)
                    numbers.update(zip(hashes, range(file.start, file.last + 1), strict=True))
                self._numbers = numbers
        return numbers.get(bytes(block_hash))

    def verify(self, *, on_block: Callable[[int], None] | None = None) -> int:
        """Read and check every record of every file, as go-ethereum's ``era verify`` does:
        each file's accumulator, header numbers (each its place in the index), total
        difficulties (recomputed from the headers' difficulties) and parent links (also across
        contiguous files), every snappy
        CRC and RLP frame, each body against its header's transactions root, uncle hash and
        withdrawals root, each receipts list against the receipts root and the header's logs
        bloom against the receipts' blooms. ``on_block(number)``
        is called after each block. Returns the bytes of the files read; raises
        :class:`StoreCorrupted` naming the file and block at the first failure."""
        total = 0
        previous: tuple[int, bytes, int] | None = None
        for epoch in sorted(self._files):
            file = self._acquire(self._files[epoch].start)
            try:
                for number in range(file.start, file.last + 1):
                    header = file.read(number, 0)
                    if (
                        number == file.start
                        and previous is not None
                        and previous[0] == number - 1
                        and header_parent_hash(header) != previous[1]
                    ):
                        raise file.damaged(
                            f"block {number}'s parent hash is not the hash of "
                            f"block {number - 1} in the previous file"
                        )
                    if number == file.start and previous is not None and previous[0] == number - 1:
                        expected = previous[2] + file.difficulty(header, number)
                        if file.read_total_difficulty(number) != expected:
                            raise file.damaged(
                                f"block {number}: its total difficulty is not block "
                                f"{number - 1}'s in the previous file plus its difficulty"
                            )
                    try:
                        _check_commitments(header, file.read(number, 1), file.read(number, 2))
                    except InvalidBlock as error:
                        raise file.damaged(f"block {number}: {error}") from None
                    if on_block is not None:
                        on_block(number)
                previous = (
                    file.last,
                    keccak256(file.read(file.last, 0)),
                    file.read_total_difficulty(file.last),
                )
            finally:
                self._release(file)
            total += file.size
        return total

    def __len__(self) -> int:
        """The number of blocks the archive holds."""
        return sum(file.count for file in self._files.values())

    def close(self) -> None:
        """Close the open files; later reads raise ``ValueError``."""
        with self._lock:
            self._closed = True
            for file in self._open.values():
                file.evicted = True
                if file.users == 0:
                    file.close()
            self._open.clear()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


# --- verifying everything --------------------------------------------------------------------


def _trie_encodings(list_rlp: bytes | memoryview) -> list[bytes]:
    """A list's items as a trie stores them: a list item as it stands, a string item (a typed
    transaction or receipt) as its payload."""
    encodings = []
    for item in iter_list_items(list_rlp):
        is_list, payload, length = read_prefix(item)
        encodings.append(bytes(item) if is_list else bytes(item[payload : payload + length]))
    return encodings


def _check_commitments(header_rlp: bytes, body_rlp: bytes, receipts_rlp: bytes) -> None:
    from vmstack.cchain.codec import ETHEREUM
    from vmstack.cchain.tries import check_body_commitments, derive_root, encoded_body_commitments

    header = ETHEREUM.decode_header(header_rlp)
    fields = list(iter_list_items(body_rlp))
    if len(fields) not in (2, 3):
        raise InvalidBlock(f"body has {len(fields)} fields, expected 2 or 3")
    check_body_commitments(
        header,
        encoded_body_commitments(
            _trie_encodings(fields[0]),
            bytes(fields[1]),
            None if len(fields) == 2 else _trie_encodings(fields[2]),
            None,
        ),
    )
    receipts = _trie_encodings(receipts_rlp)
    if derive_root(receipts) != header.receipt_root:
        raise InvalidBlock("receipts root does not match the header")
    if _receipts_bloom(receipts) != header.bloom:
        raise InvalidBlock("logs bloom does not match the receipts' blooms")


def _receipts_bloom(encodings: Sequence[bytes]) -> bytes:
    """The OR of the blooms of receipts in consensus form (a typed one after its type
    byte): what a header's logs bloom states."""
    combined = 0
    for index, encoding in enumerate(encodings):
        fields = list(iter_list_items(encoding if encoding[:1] >= b"\xc0" else encoding[1:]))
        if len(fields) != 4:
            raise InvalidBlock(f"receipt {index} has {len(fields)} fields, expected 4")
        is_list, offset, length = read_prefix(fields[2])
        if is_list or length != 256:
            raise InvalidBlock(f"receipt {index}: its bloom is not 256 bytes")
        combined |= int.from_bytes(fields[2][offset : offset + length], "big")
    return combined.to_bytes(256, "big")
