"""Where a read of the accepted chain is answered: :class:`ChainSource`.

A C-chain VM's chain lives in its key-value store, and, when the VM is given an era1 archive
(``CChainVM(..., history=EraArchive(...))``), in the archive beneath the store too. The rule
is go-ethereum's: the store first, then the archive, for the heights the archive holds at
which the store has no canonical entry (the archive holds canonical blocks only, so a block
is the archive's at a height when its hash is the archive's hash there). Archived heights
are settled and cannot reorg. :class:`ChainSource` is the one place that rule is decided;
every read of :class:`~vmstack.cchain.chain.ChainReader` and of the fast walk
(:class:`~vmstack.cchain.fastwalk.FastAncestorWalk`) asks it, and so does exporting a chain
(:func:`~vmstack.cchain.era1.export_history`).

An archived block has no integrity entry: what is checked on it is what the archive checks
(:mod:`vmstack.store.history`: the CRCs and RLP framing of every record read, each header
against the hash its file's accumulator covers).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vmstack.cchain import rawdb
from vmstack.store.base import KeyReader

if TYPE_CHECKING:
    from vmstack.cchain.era1.tier import HistoryTier

__all__ = ["ChainSource"]


class ChainSource:
    """The store under ``schema``, with ``archive`` (``None``: none) beneath it: which of
    the two answers each read (see the module docstring). Stateless beyond the archive, so
    one object serves every snapshot and thread."""

    __slots__ = ("archive", "archive_last", "schema")

    def __init__(self, schema: rawdb.Schema, archive: HistoryTier | None) -> None:
        self.schema = schema
        #: The archive beneath the store (``None``: the store holds the whole chain).
        self.archive = archive
        #: The highest height the archive may answer for (-1 without an archive): above it
        #: every read is the store's, which the fast walk tells with one comparison.
        self.archive_last = -1 if archive is None else archive.last

    def archived_hash(self, number: int, stored: bytes | memoryview | None) -> bytes | None:
        """The archive's hash at ``number`` when the height is answered from the archive:
        the store's canonical entry there (``stored``, as the caller read it) is missing
        and the archive holds the height. ``None`` otherwise: the store answers."""
        archive = self.archive
        if stored is not None or archive is None or not archive.holds(number):
            return None
        return archive.hash(number)

    def archived(self, reader: KeyReader, number: int) -> bool:
        """Whether height ``number`` is answered from the archive."""
        archive = self.archive
        return (
            archive is not None
            and archive.holds(number)
            and rawdb.read_canonical_hash(reader, self.schema, number) is None
        )

    def canonical(self, reader: KeyReader, number: int) -> bytes | None:
        """The canonical hash at ``number``: the store's entry, else the archive's block
        there (``None`` if neither has one)."""
        stored = rawdb.read_canonical_hash(reader, self.schema, number)
        return stored if stored is not None else self.archived_hash(number, None)

    def number(self, reader: KeyReader, block_hash: bytes) -> int | None:
        """The height of ``block_hash``: its number entry in the store, else its height in
        the archive (``None`` if neither has it)."""
        number = rawdb.read_header_number(reader, self.schema, block_hash)
        if number is None and self.archive is not None:
            number = self.archive.number_of(block_hash)
        return number

    def parts(
        self, reader: KeyReader, number: int, block_id: bytes
    ) -> tuple[bytes | memoryview, bytes | memoryview] | None:
        """The header and body RLP of the block ``block_id`` at ``number``: the store's,
        else the archive's when the height is archived and ``block_id`` is the archive's
        block there; ``None`` if neither has them."""
        header = rawdb.read_header_rlp(reader, self.schema, number, block_id)
        body = rawdb.read_body_rlp(reader, self.schema, number, block_id)
        if header is not None and body is not None:
            return header, body
        if self.archive is not None and self._archive_block_is(reader, number, block_id):
            return self.archive.parts(number)
        return None

    def header(self, reader: KeyReader, number: int, block_id: bytes) -> bytes | memoryview | None:
        """The header RLP of the block ``block_id`` at ``number``, the store's else the
        archive's (as :meth:`parts` chooses); ``None`` if neither has it."""
        header = rawdb.read_header_rlp(reader, self.schema, number, block_id)
        archive = self.archive
        if (
            header is None
            and archive is not None
            and self._archive_block_is(reader, number, block_id)
        ):
            return archive.parts(number)[0]
        return header

    def _archive_block_is(self, reader: KeyReader, number: int, block_id: bytes) -> bool:
        archive = self.archive
        return (
            archive is not None
            and self.archived(reader, number)
            and archive.hash(number) == block_id
        )

    def archived_block(self, number: int) -> tuple[bytes, bytes, bytes] | None:
        """The hash, header and body RLP of the archived block at ``number``, read in one
        visit to its file, for a caller that found no canonical entry at ``number`` in the
        store; ``None`` when the archive does not hold the height (or there is none). The
        fast walk's one call into the archive."""
        archive = self.archive
        if archive is None or not archive.holds(number):
            return None
        return archive.block_parts(number)

    def head(self) -> bytes | None:
        """The last accepted block of a store that has none: the archive's last block, the
        chain being the archive's as it stands (``None`` without an archive)."""
        archive = self.archive
        return None if archive is None else archive.hash(archive.last)

    def unheld(self, number: int) -> str | None:
        """Why height ``number``, without a canonical entry in the store, is not found:
        a height within the archive's span that neither the store nor the archive holds
        (a sparse archive's gap), said here; ``None`` for any other height."""
        archive = self.archive
        if archive is None or number > archive.last or archive.holds(number):
            return None
        return (
            f"height {number} is neither in the store nor in the archive "
            f"{archive.archive.directory}"
        )
