"""Era1 files into a store and out of a chain: :func:`import_history`, :func:`export_history`.

Importing verifies the whole archive first (:func:`~vmstack.cchain.era1.verify_archive`),
then writes its last blocks into an empty store as accepted and settled blocks, the rest
served from the archive beneath (:class:`~vmstack.cchain.era1.HistoryTier`). Exporting
writes a chain's settled blocks as era1 files whose roots are the archive's for a chain
imported from one.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final

import attrs

from vmstack.cchain import rawdb
from vmstack.cchain.codec import Flavour
from vmstack.cchain.era1.tier import HistoryTier
from vmstack.cchain.era1.verify import verify_archive
from vmstack.cchain.rlpbytes import block_bytes, encode_item, list_prefix, split_block
from vmstack.errors import StoreCorrupted
from vmstack.keccak import keccak256
from vmstack.store.history import ERA1_BLOCKS, EraArchive, EraRecord, write_era1

if TYPE_CHECKING:
    from vmstack.cchain.vm import CChainVM
    from vmstack.store.base import KeyValueStore

__all__ = [
    "ArchivedBlock",
    "ImportResult",
    "NETWORK_CHAIN_IDS",
    "export_history",
    "import_history",
]

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
    every block of the archive is verified first (:func:`~vmstack.cchain.era1.verify_archive`:
    each file's accumulator, parent hashes
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

    size = verify_archive(archive, on_block=verified_one)
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
    source = vm.source
    settled = vm.get_block(vm.last_settled()).height
    lowest = 0
    if history is not None and source.canonical(vm.store, 0) is None:
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
            if history is not None and source.archived(vm.store, number):
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
