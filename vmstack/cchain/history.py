"""The archive tier beneath a C-chain VM's key-value store: :class:`HistoryTier`.

A :class:`~vmstack.cchain.vm.CChainVM` given ``history=EraArchive(...)`` reads a height from
its key-value store first and, where the store has no canonical entry there, from the archive
when the archive holds that height (go-ethereum reads its immutable history the same way: the
archive holds canonical blocks only, so a read by hash compares the archive's hash at that
height). Archived heights are settled and cannot reorg; their canonical hashes go through the
VM's canonical hash cache like any settled height's.

What is checked on an archived block is what the archive checks (see
:mod:`vmstack.store.history`): the snappy CRCs and RLP framing of every record read, each
header against the hash its file's accumulator covers (unless the archive was opened with
``trust=True``, when the hash asked for is the header's keccak), and the parent links inside
each file. The slow path also decodes the block strictly, recovers every sender and checks the
receipts' blooms against their logs. Real history is served, not re-executed: the VM has no
state for it, so no state root of an archived block is checked.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final

import attrs

from vmstack.cchain import rawdb
from vmstack.cchain.codec import Flavour
from vmstack.cchain.crypto import keccak256
from vmstack.cchain.rlpbytes import block_bytes, encode_item, list_prefix, split_block
from vmstack.cchain.types import Receipt
from vmstack.cchain.types.fields import decode_rlp
from vmstack.cchain.types.receipts import logs_bloom
from vmstack.errors import InvalidBlock, StoreCorrupted

if TYPE_CHECKING:
    from vmstack.cchain.vm import CChainVM
    from vmstack.store.base import KeyValueStore
    from vmstack.store.history import EraArchive

__all__ = [
    "ArchivedBlock",
    "HistoryTier",
    "ImportResult",
    "NETWORK_CHAIN_IDS",
    "decode_consensus_receipts",
    "export_history",
    "import_history",
]


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
        from vmstack.store.history import EraArchive  # the store module imports cchain

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


# --- import and export ----------------------------------------------------------------------

#: The EVM chain IDs of the networks whose era1 files are published.
NETWORK_CHAIN_IDS: Final = {"mainnet": 1, "sepolia": 11155111, "holesky": 17000}


@attrs.frozen(slots=True)
class ArchivedBlock:
    """A block taken from an archive as :func:`~vmstack.cchain.chain.write_accepted` writes
    it: its height, ID, header and body RLP."""

    height: int
    id: bytes
    header: bytes
    body: bytes

    def header_rlp(self) -> bytes:
        return self.header

    def body_rlp(self) -> bytes:
        return self.body

    def __bytes__(self) -> bytes:
        return block_bytes(self.header, self.body)


@attrs.frozen(slots=True)
class ImportResult:
    """What :func:`import_history` did: the blocks verified, the heights written to the
    store (``None`` when none), and the archive's bytes read."""

    verified: int
    written: tuple[int, int] | None
    archive_bytes: int


def import_history(
    archive: EraArchive,
    store: KeyValueStore,
    *,
    recent: int,
    chain_id: int,
    key_prefix: bytes = b"",
    on_verified: Callable[[int], None] | None = None,
    on_written: Callable[[int], None] | None = None,
    batch_blocks: int = 512,
) -> ImportResult:
    """Make ``store`` (empty) the key-value tier of a chain whose history is ``archive``:
    every block of the archive is verified first (:meth:`EraArchive.verify
    <vmstack.store.history.EraArchive.verify>`: each file's accumulator, parent hashes
    within and across files, every body against its header's transactions root, uncles
    hash and withdrawals root, every receipts list against the receipts root and the logs
    bloom), then the last ``recent`` blocks are written to the store as accepted and
    settled blocks (receipts in storage form, each receipt's bloom checked against its
    logs, integrity entries, head pointers), ``batch_blocks`` to an atomic write batch, and
    the chain's configuration is recorded (Ethereum flavour, ``chain_id``). The rest is
    served from the archive by a :class:`~vmstack.cchain.vm.CChainVM` given it as
    ``history``. ``on_verified(n)`` and ``on_written(n)`` are called per block.

    ``ValueError`` for a store that already holds a chain, a negative ``recent``, or
    ``recent`` blocks the archive does not hold contiguously up to its last;
    :class:`~vmstack.errors.StoreCorrupted` naming the file for an archive that fails a
    check (nothing is written then).
    """
    from vmstack.cchain.chain import write_accepted
    from vmstack.cchain.codec import ETHEREUM, encode_receipts
    from vmstack.store.configuration import check_configuration

    if isinstance(recent, bool) or not isinstance(recent, int) or recent < 0:
        raise ValueError(f"recent must be a non-negative int, got {recent!r}")
    schema = rawdb.Schema(key_prefix)
    if (
        rawdb.has_chain_data(store, schema)
        or rawdb.read_last_accepted_hash(store, schema) is not None
    ):
        raise ValueError("the store already holds a chain: import into an empty one")
    first = archive.last - recent + 1
    if recent and not all(archive.holds(n) for n in range(first, archive.last + 1)):
        raise ValueError(
            f"the archive does not hold the last {recent} blocks contiguously "
            f"(heights {first} to {archive.last})"
        )
    tier = HistoryTier(archive, ETHEREUM)
    verified = 0

    def verified_one(number: int) -> None:
        nonlocal verified
        verified += 1
        if on_verified is not None:
            on_verified(number)

    size = archive.verify(on_block=verified_one)
    check_configuration(
        store,
        "chain",
        {
            "flavour": ETHEREUM.name,
            "chain_id": chain_id,
            "transition_time": None,
            "settle_lag": 0,
            "key_prefix": key_prefix.hex(),
        },
    )
    integrity_start: int | None = None
    for start in range(first, archive.last + 1, batch_blocks):
        with store.write_batch() as batch:
            for number in range(start, min(start + batch_blocks, archive.last + 1)):
                header, body = tier.parts(number)
                block = ArchivedBlock(number, tier.hash(number), header, body)
                write_accepted(
                    batch,
                    schema,
                    block,
                    encode_receipts(tier.receipts(number)),
                    integrity_start,
                    (),
                )
                integrity_start = first
                if on_written is not None:
                    on_written(number)
    return ImportResult(verified, (first, archive.last) if recent else None, size)


def _consensus_receipts(storage_rlp: bytes, body_rlp: bytes, flavour: Flavour) -> bytes:
    """A block's receipts from their storage form to the consensus form an era1 file and a
    receipts root hold (a typed receipt as the string ``type || rlp``)."""
    from vmstack.cchain.codec import decode_receipts

    receipts = decode_receipts(storage_rlp)
    transactions = flavour.decode_body(body_rlp).transactions
    if len(receipts) != len(transactions):
        raise StoreCorrupted(
            f"{len(receipts)} receipts stored for {len(transactions)} transactions"
        )
    items = []
    for receipt, tx in zip(receipts, transactions, strict=True):
        encoded = attrs.evolve(receipt, tx_type=tx.TYPE).encode()
        items.append(encoded if tx.TYPE == 0 else encode_item(encoded))
    payload = b"".join(items)
    return list_prefix(len(payload)) + payload


def export_history(
    vm: CChainVM,
    directory: Path | str,
    *,
    network: str = "vmstack",
    on_block: Callable[[int], None] | None = None,
) -> list[Path]:
    """Write the settled blocks of ``vm``'s chain (from its lowest height, 0 or the first
    of the archive beneath it, to its last settled block) as era1 files in ``directory``,
    one per 8,192 blocks, named by ``network``, epoch and accumulator root; returns their
    paths. Each block is read on the fast path (its canonical entry and integrity checksum
    checked, or the archive's checks for an archived block), its receipts against their
    checksum (an archived block's from the archive). The total difficulty is the archive's
    for an archived block, else the previous block's plus the header's difficulty (from 0
    below block 0), so a chain imported from era1 files exports files with their roots.
    ``ValueError`` for a chain that is not Ethereum-flavoured (era1 holds Ethereum blocks),
    an archive beneath with gaps, or a ``directory`` that already holds era1 files;
    ``StoreCorrupted`` for damage met. ``on_block(n)`` is called per block exported."""
    from vmstack.cchain.codec import ETHEREUM
    from vmstack.store.history import ERA1_BLOCKS, EraRecord, write_era1

    if vm.flavour is not ETHEREUM:
        raise ValueError(
            f"era1 files hold Ethereum blocks; this chain's blocks are {vm.flavour.name}"
        )
    out = Path(directory)
    if not out.is_dir():
        raise ValueError(f"{out} is not a directory")
    if any(path.suffix == ".era1" for path in out.iterdir()):
        raise ValueError(f"{out} already holds era1 files")
    if not re.fullmatch(r"[A-Za-z0-9_]+", network):
        raise ValueError(f"a network name is letters, digits and _, not {network!r}")
    history = vm.history
    settled = vm.get_block(vm.last_settled()).height
    lowest = 0
    if (
        history is not None
        and not history.holds(0)
        and rawdb.read_canonical_hash(vm.store, vm.schema, 0) is None
    ):
        lowest = history.first
    if history is not None and not all(
        history.holds(n) for n in range(lowest, min(history.last, settled) + 1)
    ):
        raise ValueError(f"the archive {history.directory} has gaps: export a contiguous chain")
    paths: list[Path] = []
    total_difficulty = 0
    for start in range(lowest, settled + 1, ERA1_BLOCKS):
        top = min(start + ERA1_BLOCKS, settled + 1) - 1
        count = top - start + 1
        blocks = vm.get_ancestors(vm.get_block_id_at_height(top), count, 2**62, 1e9)
        if len(blocks) != count:
            raise StoreCorrupted(
                f"the fast path served {len(blocks)} of the {count} blocks from {start} to {top}"
            )
        records = []
        for offset, data in enumerate(reversed(blocks)):
            number = start + offset
            header, body = split_block(data)
            block_id = keccak256(header)
            if (
                history is not None
                and history.holds(number)
                and rawdb.read_canonical_hash(vm.store, vm.schema, number) is None
            ):
                total_difficulty = history.total_difficulty(number)
                receipts = history.receipts(number)
            else:
                total_difficulty += vm.flavour.decode_header(header).difficulty
                receipts = _consensus_receipts(
                    vm.stored_receipts(number, block_id), body, vm.flavour
                )
            records.append(EraRecord(header, body, receipts, total_difficulty))
            if on_block is not None:
                on_block(number)
        paths.append(write_era1(out, network, start, records))
    return paths
