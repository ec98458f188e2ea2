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

import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Final, Self

from vmstack.errors import BlockNotFound, InvalidBlock, StoreCorrupted
from vmstack.keccak import keccak256
from vmstack.store.history.era_file import EraFile
from vmstack.store.history.records import ERA1_BLOCKS

__all__ = ["BlockCheck", "EraArchive"]

_NAME = re.compile(r"^(?P<network>[A-Za-z0-9_]+)-(?P<epoch>\d{5,})-(?P<root>[0-9a-f]{8})\.era1$")
_DEFAULT_OPEN_FILES: Final = 64

BlockCheck = Callable[[bytes, bytes, bytes], None]
"""A check of one archived block's header, body and receipts RLP that :meth:`EraArchive.verify`
runs per block: it raises :class:`~vmstack.errors.InvalidBlock` saying what is wrong."""


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
        self._open: OrderedDict[int, EraFile] = OrderedDict()
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
        self._files: dict[int, EraFile] = {}
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
            self._files[epoch] = EraFile(path, file_network, epoch, root)
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

    def _acquire(self, number: int) -> EraFile:
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

    def _release(self, file: EraFile) -> None:
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

    def verify(
        self,
        *,
        on_block: Callable[[int], None] | None = None,
        check_block: BlockCheck | None = None,
    ) -> int:
        """Read and check every record of every file, as go-ethereum's ``era verify`` does
        for the parts an era1 file itself states: each file's accumulator, header numbers
        (each its place in the index), total difficulties (recomputed from the headers'
        difficulties) and parent links (also across contiguous files), every snappy CRC and
        RLP frame. ``check_block(header, body, receipts)`` (``InvalidBlock`` for a block it
        refuses) is run on each block's records: the C-chain's
        :func:`~vmstack.cchain.era1.verify_archive` passes the check of each body against
        its header's commitments and of each receipts list against the receipts root and
        the logs bloom. ``on_block(number)`` is called after each block. Returns the bytes
        of the files read; raises :class:`StoreCorrupted` naming the file and block at the
        first failure."""
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
                        and file.parent_hash(header, number) != previous[1]
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
                    if check_block is not None:
                        try:
                            check_block(header, file.read(number, 1), file.read(number, 2))
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
