"""One era1 file: :class:`EraFile`, its tail checked when it is found, its index read and its
accumulator recomputed when it is opened, its records read with ``os.pread``.

The checks a file's headers get here read three header fields in place (the parent hash,
the difficulty and the number, the same places in both block formats) with the strict RLP
reader beneath the store (:mod:`vmstack.rlpreader`); nothing here decodes a block.
"""

from __future__ import annotations

import os
import stat
import struct
from pathlib import Path
from typing import Final

from vmstack.errors import InvalidBlock, StoreCorrupted
from vmstack.keccak import keccak256
from vmstack.rlpreader import iter_list_items, read_prefix
from vmstack.store.history.records import (
    ERA1_BLOCKS,
    MAX_RECORD_VALUE,
    RECORD_HEAD,
    TYPE_ACCUMULATOR,
    TYPE_BLOCK_INDEX,
    TYPE_BODY,
    TYPE_ERE_INDEX,
    TYPE_HEADER,
    TYPE_RECEIPTS,
    TYPE_TOTAL_DIFFICULTY,
    TYPE_VERSION,
    U64,
    accumulator_root,
    e2store_record,
    snappy_unframe,
)

__all__ = ["EraFile"]

#: The most bytes one block's four records may span (three record limits and a 32-byte
#: total difficulty, each with its 8-byte record head).
_MAX_BLOCK_SPAN: Final = 3 * (8 + MAX_RECORD_VALUE) + 8 + 32
#: The bytes of whole blocks' records read at once while verifying a file.
_WINDOW: Final = 1 << 20
#: The most records :meth:`EraFile._not_era1` walks (more than a file of 8,192 blocks has).
_MAX_WALKED_RECORDS: Final = 6 * ERA1_BLOCKS + 16
#: A header's parent hash, difficulty and number fields (both flavours: 1st, 8th and 9th).
_HEADER_PARENT_HASH: Final = 0
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


class EraFile:
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
        if self._pread(fd, 0, 8) != e2store_record(TYPE_VERSION, b""):
            raise self.damaged("no era1 version record at its start")
        count: int = U64.unpack(self._pread(fd, self.size - 8, 8))[0]
        index_at = self.size - 24 - 8 * count
        if not 0 < count <= ERA1_BLOCKS or index_at < 48:
            raise self.damaged(
                self._not_era1(fd) or f"block count {count} in its index is impossible (truncated?)"
            )
        tail = self._pread(fd, index_at - 40, 40 + 16)
        kind, length, reserved = RECORD_HEAD.unpack_from(tail, 40)
        if (kind, length, reserved) != (TYPE_BLOCK_INDEX, 16 + 8 * count, 0):
            raise self.damaged(
                self._not_era1(fd) or "no block index record at its end (truncated or damaged)"
            )
        if RECORD_HEAD.unpack_from(tail, 0) != (TYPE_ACCUMULATOR, 32, 0):
            raise self.damaged("no accumulator record before its block index")
        self.root: bytes = tail[8:40]
        if self.root[:4].hex() != name_root:
            raise self.damaged(f"its accumulator root {self.root.hex()} does not match its name")
        self.start: int = U64.unpack_from(tail, 48)[0]
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
            kind, length, _ = RECORD_HEAD.unpack(self._pread(fd, offset, 8))
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
            if hashes and self.parent_hash(header, number) != hashes[-1]:
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

    def parent_hash(self, header: bytes, number: int) -> bytes:
        """The parent hash field of block ``number``'s header (a 32-byte string)."""
        try:
            for item in iter_list_items(header):
                is_list, payload, length = read_prefix(item)
                if not is_list and length == 32:
                    return bytes(item[payload : payload + length])
                break
        except InvalidBlock as error:
            raise self.damaged(f"block {number} header: {error}") from None
        raise self.damaged(f"block {number} header: its parent hash is not a 32-byte string")

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
        found, length, reserved = RECORD_HEAD.unpack_from(data, offset)
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
            length = RECORD_HEAD.unpack(self._pread(self.fd, offset, 8))[1]
            offset += 8 + length
        head = self._pread(self.fd, offset, 8)
        kind = (TYPE_HEADER, TYPE_BODY, TYPE_RECEIPTS)[slot]
        value, _ = self._record_in(
            head
            + self._pread(
                self.fd, offset + 8, min(RECORD_HEAD.unpack(head)[1], MAX_RECORD_VALUE + 1)
            ),
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
            offset += 8 + RECORD_HEAD.unpack(self._pread(self.fd, offset, 8))[1]
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
        length = min(RECORD_HEAD.unpack(head)[1], MAX_RECORD_VALUE + 1)
        joined = head + self._pread(self.fd, offset + 8, length + 8)
        header_value, body_at = self._record_in(joined, 0, TYPE_HEADER, number)
        body_head = joined[body_at : body_at + 8]
        body_length = min(RECORD_HEAD.unpack(body_head)[1], MAX_RECORD_VALUE + 1)
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
