"""The archive tier beneath a C-chain VM's key-value store: :class:`HistoryTier`.

A :class:`~vmstack.cchain.vm.CChainVM` given ``history=EraArchive(...)`` reads a height from
the archive where its :class:`~vmstack.cchain.source.ChainSource` says (the store first).
Archived heights are settled and cannot reorg; their canonical hashes go through the VM's
canonical hash cache like any settled height's.

What is checked on an archived block is what the archive checks (see
:mod:`vmstack.store.history`): the snappy CRCs and RLP framing of every record read, each
header against the hash its file's accumulator covers (unless the archive was opened with
``trust=True``, when the hash asked for is the header's keccak), and the parent links inside
each file. The slow path also decodes the block strictly, recovers every sender and checks the
receipts' blooms against their logs. Real history is served, not re-executed: the VM has no
state for it, so no state root of an archived block is checked.
"""

from __future__ import annotations

import attrs

from vmstack.cchain.codec import Flavour
from vmstack.cchain.types import Receipt
from vmstack.cchain.types.fields import decode_rlp
from vmstack.cchain.types.receipts import logs_bloom
from vmstack.errors import InvalidBlock, StoreCorrupted
from vmstack.store.history import EraArchive

__all__ = ["HistoryTier", "decode_consensus_receipts"]


def decode_consensus_receipts(data: bytes) -> tuple[Receipt, ...]:
    """Receipts from their consensus form (what an era1 file and a receipts root hold): a
    list whose items are ``[outcome, cumulative_gas, bloom, logs]``, a typed receipt as the
    string ``type || rlp(...)``. Each bloom must be its logs' bloom. ``InvalidBlock`` for
    anything else. The derived fields are left for
    :func:`~vmstack.cchain.codec.derive_receipts`."""
    items = decode_rlp(data, "receipts", max_depth=5)
    if type(items) is not list:
        raise InvalidBlock("receipts: expected an RLP list, found a string")
    receipts = []
    for index, item in enumerate(items):
        what = f"receipt {index}"
        tx_type = 0
        if type(item) is bytes:
            if not item or item[0] >= 0x7F:
                raise InvalidBlock(f"{what}: a typed receipt starts with a type byte below 0x7f")
            tx_type = item[0]
            item = decode_rlp(item[1:], what, max_depth=4)
        if type(item) is not list or len(item) != 4:
            raise InvalidBlock(f"{what}: expected [outcome, cumulative gas, bloom, logs]")
        outcome, gas, bloom, logs = item
        receipt = attrs.evolve(
            Receipt.from_storage_items([outcome, gas, logs], what), tx_type=tx_type
        )
        if bloom != logs_bloom(receipt.logs):
            raise InvalidBlock(f"{what}: its bloom is not its logs' bloom")
        receipts.append(receipt)
    return tuple(receipts)


class HistoryTier:
    """An :class:`EraArchive` as a VM's lower tier: its heights, hashes, block parts and
    receipts, with every failure of the archive a ``StoreCorrupted`` naming the file.
    ``flavour`` must decode the archive's first header (``ValueError`` otherwise: an archive
    of Ethereum blocks under an Avalanche VM is a wrong configuration, not damage)."""

    __slots__ = ("archive", "first", "last")

    def __init__(self, archive: EraArchive, flavour: Flavour) -> None:
        if not isinstance(archive, EraArchive):
            raise ValueError(f"history must be an EraArchive, got {type(archive).__name__}")
        self.archive = archive
        self.first = archive.first
        self.last = archive.last
        try:
            flavour.decode_header(archive.header_rlp(archive.first))
        except InvalidBlock as error:
            raise ValueError(
                f"the archive {archive.directory} does not hold {flavour.name} "
                f"blocks: its first header does not decode ({error.reason})"
            ) from None

    def holds(self, number: int) -> bool:
        """Whether the archive holds height ``number``."""
        return self.archive.holds(number)

    def hash(self, number: int) -> bytes:
        """The hash of the archived block at ``number`` (held: see :meth:`holds`)."""
        return self.archive.hash(number)

    def number_of(self, block_hash: bytes) -> int | None:
        """The height of the archived block ``block_hash``, or ``None``."""
        return self.archive.number_of(block_hash)

    def parts(self, number: int) -> tuple[bytes, bytes]:
        """The header and body RLP of the archived block at ``number``."""
        return self.archive.header_rlp(number), self.archive.body_rlp(number)

    def block_parts(self, number: int) -> tuple[bytes, bytes, bytes]:
        """The hash, header RLP and body RLP of the archived block at ``number``, read in
        one visit to its file."""
        return self.archive.block_parts(number)

    def receipts(self, number: int) -> tuple[Receipt, ...]:
        """The receipts of the archived block at ``number``, decoded from consensus form."""
        try:
            return decode_consensus_receipts(self.archive.receipts(number))
        except InvalidBlock as error:
            raise StoreCorrupted(
                f"era1 archive {self.archive.directory}: block {number} receipts: {error.reason}"
            ) from None
