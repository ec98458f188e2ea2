"""Benchmark cases over real era1 files: ``vmstack history verify`` throughput, the fast
path over archived blocks, and the ancestors walk over settled LMDB heights by cursor.

The files are the era1 files in ``$VMSTACK_VECTORS/era1`` (by default ``../shared/vectors/era1``
beside the repository, the folder the tests read); without them the case has no rows.

``history verify``, per megabyte of file:

- fast: :meth:`~vmstack.store.history.EraArchive.verify` on a freshly opened archive (every
  accumulator recomputed, every CRC, frame and commitment checked over the stored bytes);
- baseline: the bodies alone checked through the decoders: each block decoded from its header
  and body (``ETHEREUM.block_from_parts``) and its body commitments recomputed from the
  decoded records (:func:`~vmstack.cchain.tries.check_body`); less work than verify (no
  accumulator, no receipts, no CRCs), shown for scale;
- floor: the bare sha256 of the files' bytes, the least a reader that checks every byte pays.

``history get_ancestors``: the newest 2,000 blocks of the last file (500 in quick mode), asked
of a ``CChainVM`` over an empty store with the archive beneath it:

- fast: one ``get_ancestors`` (per block the canonical check against the archive's hash, the
  header and body records read, unframed with their CRCs checked, and stitched);
- baseline: the serial slow path, ``get_block`` per block (decode, receipts from the
  archive, sender recovery, re-encode);
- floor: the same header and body bytes, snappy-framed in memory, unframed (CRCs checked) and
  joined: the least a reader of compressed, checksummed records does.

``settled walk, LMDB``: the last 2,000 blocks of the last file imported into an LMDB store
(:func:`~vmstack.cchain.era1.import_history`, integrity entries written), walked from the
tip:

- fast: the VM's walk, ``get_ancestors`` (separate gets per block, through the VM's walk
  and budget machinery);
- baseline: the walk by cursor (:func:`cursor_walk`): three cursors stepping back through the
  header, body and integrity key ranges in key order, with the same checks;
- floor: two gets and a join per block in the same read transaction, no checks.

The notes give :func:`gets_walk`, the cursor walk's own loop and checks with a get per value.
All four are timed in alternating rounds.

``state roots``: Sepolia's epoch 0 (8,192 blocks; 1,024 in quick mode) from its genesis,
per block, the headers decoded beforehand:

- fast: the rewards credited (:func:`~vmstack.cchain.rewards.apply_rewards`) and the root of
  the persistent :class:`~vmstack.cchain.state.AccountTrie` updated with the changed
  accounts, each root checked against its header's;
- baseline: the same with the ``trie`` package's ``HexaryTrie`` updated in place;
- floor: one keccak256 of each changed account's encoding.

The notes give :func:`~vmstack.cchain.era1.state_roots.recompute_state_roots` whole (the
records read and decoded too), per block.

"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from vmstack.benchmarks import Comparison, alternated_medians
from vmstack.cchain import CChainVM, rawdb
from vmstack.cchain.codec import ETHEREUM
from vmstack.cchain.era1 import import_history, verify_archive
from vmstack.cchain.integrity import checksum, integrity_block_checksum
from vmstack.cchain.rlpbytes import block_bytes, stitched_parent_hash
from vmstack.cchain.tries import check_body
from vmstack.errors import StoreCorrupted
from vmstack.store import LMDBStore, MemoryStore
from vmstack.store.history import EraArchive, snappy_frame, snappy_unframe
from vmstack.store.lmdb.snapshot import LMDBSnapshot

__all__ = ["cursor_walk", "gets_walk", "run", "vectors_era1"]

#: Blocks asked for in the get_ancestors and settled-walk rows (quick mode: QUICK_BLOCKS).
BLOCKS = 2000
QUICK_BLOCKS = 500
SEPOLIA_CHAIN_ID = 11155111

GROUP = "history verify"
GOAL = "<= 300x sha256 of the file, MB/s noted"


def vectors_era1() -> Path:
    """The folder of era1 files the case reads."""
    default = Path(__file__).resolve().parents[3] / "shared" / "vectors"
    return Path(os.environ.get("VMSTACK_VECTORS", default)) / "era1"


def run(quick: bool) -> list[Comparison]:
    """The rows, when the era1 files are present (see the module docstring)."""
    directory = vectors_era1()
    if not directory.is_dir() or not any(directory.glob("*.era1")):
        return []
    return [
        _verify_row(directory, quick),
        _archived_ancestors_row(directory, quick),
        _settled_walk_row(directory, quick),
        *_state_roots_rows(directory, quick),
    ]


def _state_roots_rows(directory: Path, quick: bool) -> list[Comparison]:
    from trie.hexary import HexaryTrie

    from vmstack.cchain.era1.state_roots import recompute_state_roots
    from vmstack.cchain.genesis import Genesis
    from vmstack.cchain.rewards import Forks, apply_rewards
    from vmstack.cchain.state import AccountTrie
    from vmstack.keccak import keccak256

    genesis_path = directory / "sepolia-genesis.json"
    epoch0 = directory / "sepolia-00000-643a00f7.era1"
    if not genesis_path.is_file() or not epoch0.is_file():
        return []
    text = genesis_path.read_bytes()
    genesis, forks = Genesis.from_json(text), Forks.from_json(text)
    count = 1024 if quick else 8192
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / epoch0.name).symlink_to(epoch0)
        with EraArchive(folder) as archive:
            blocks = [
                (
                    ETHEREUM.decode_header(archive.header_rlp(n)),
                    ETHEREUM.decode_body(archive.body_rlp(n)),
                )
                for n in range(1, count)
            ]
            (whole,) = alternated_medians((lambda: recompute_state_roots(archive, text),), repeat=1)
            whole /= len(archive)

    def ours() -> object:
        accounts = dict(genesis.accounts())
        trie = AccountTrie().updated((keccak256(a), acct) for a, acct in accounts.items())
        for header, body in blocks:
            changed = apply_rewards(accounts, header, body, forks)
            trie = trie.updated((keccak256(a), acct) for a, acct in changed.items())
            if trie.root_hash != header.state_root:
                raise ValueError(f"block {header.number}: the account trie's root differs")
        return trie

    def theirs() -> object:
        accounts = dict(genesis.accounts())
        reference = HexaryTrie({})
        for address, account in accounts.items():
            reference[keccak256(address)] = account.encode()
        for header, body in blocks:
            for address, account in apply_rewards(accounts, header, body, forks).items():
                reference[keccak256(address)] = account.encode()
            if reference.root_hash != header.state_root:
                raise ValueError(f"block {header.number}: the trie package's root differs")
        return reference

    def floor() -> object:
        accounts = dict(genesis.accounts())
        return [
            keccak256(account.encode())
            for header, body in blocks
            for account in apply_rewards(accounts, header, body, forks).values()
        ]

    repeat = 1 if quick else 3
    fast, baseline, cheapest = (
        seconds / len(blocks)
        for seconds in alternated_medians((ours, theirs, floor), repeat=repeat)
    )
    return [
        Comparison(
            group="state roots",
            case=f"Sepolia epoch 0 from its genesis, {len(blocks) + 1:,} blocks, per block",
            fast_seconds=fast,
            baseline_seconds=baseline,
            floor_seconds=cheapest,
            fast_label="AccountTrie + apply_rewards",
            baseline_label="trie.HexaryTrie + apply_rewards",
            floor_label="keccak per changed account",
            goal=">= 1x trie package",
            notes={"recompute_state_roots_us_per_block": round(whole * 1e6, 1)},
        ).judged(min_speedup=1.0)
    ]


def _verify_row(directory: Path, quick: bool) -> Comparison:
    repeat = 1 if quick else 3
    archive = EraArchive(directory, sparse=True)
    size = sum(path.stat().st_size for path in archive.files)
    contents = [path.read_bytes() for path in archive.files]
    numbers = [n for n in range(archive.first, archive.last + 1) if archive.holds(n)]

    def verify() -> object:
        with EraArchive(directory, sparse=True) as fresh:
            return verify_archive(fresh)

    def decode() -> object:
        for number in numbers:
            check_body(
                ETHEREUM.block_from_parts(archive.header_rlp(number), archive.body_rlp(number))
            )
        return None

    def floor() -> object:
        return [hashlib.sha256(data).digest() for data in contents]

    fast, baseline, cheapest = (
        seconds / (size / 1e6)
        for seconds in alternated_medians((verify, decode, floor), repeat=repeat)
    )
    return Comparison(
        group=GROUP,
        case=f"{len(archive.files)} Sepolia era1 files, {size / 1e6:.1f} MB, per MB",
        fast_seconds=fast,
        baseline_seconds=baseline,
        floor_seconds=cheapest,
        fast_label="EraArchive.verify",
        baseline_label="decode + check_body",
        floor_label="sha256 of the file",
        goal=GOAL,
        notes={"verify_mb_per_s": round(1 / fast, 2), "sha256_mb_per_s": round(1 / cheapest, 1)},
    ).judged(
        max_over_floor=300.0,
        unmet_reason=(
            f"{fast * size / len(numbers):.0f} us a block ({len(numbers):,} blocks): "
            "each of its records unframed and CRC-checked, its header decoded and hashed, "
            "its transactions and receipts roots recomputed and its accumulator entry "
            "hashed, record by record in Python, where the floor is one pass of sha256 in C"
        ),
    )


def _archived_ancestors_row(directory: Path, quick: bool) -> Comparison:
    count = QUICK_BLOCKS if quick else BLOCKS
    repeat = 1 if quick else 3
    with EraArchive(directory, sparse=True) as archive:
        vm = CChainVM(MemoryStore(), flavour=ETHEREUM, chain_id=SEPOLIA_CHAIN_ID, history=archive)
        tip = archive.hash(archive.last)
        heights = range(archive.last, archive.last - count, -1)
        framed = [
            (snappy_frame(archive.header_rlp(n)), snappy_frame(archive.body_rlp(n)))
            for n in heights
        ]
        answer = vm.get_ancestors(tip, count, 2**40, 600.0)
        if len(answer) != count:
            raise RuntimeError(f"the archive served {len(answer)} of {count} blocks")

        def fast() -> object:
            return vm.get_ancestors(tip, count, 2**40, 600.0)

        def serial() -> object:
            out = []
            block_id = tip
            for _ in range(count):
                block = vm.get_block(block_id)
                out.append(bytes(block))
                block_id = block.parent_id
            return out

        def floor() -> object:
            return [
                block_bytes(snappy_unframe(header), snappy_unframe(body)) for header, body in framed
            ]

        fast_s, serial_s, floor_s = (
            seconds / count for seconds in alternated_medians((fast, serial, floor), repeat=repeat)
        )
    return Comparison(
        group="history get_ancestors",
        case=f"{count:,} archived Sepolia blocks, per block",
        fast_seconds=fast_s,
        baseline_seconds=serial_s,
        floor_seconds=floor_s,
        fast_label="get_ancestors over the archive",
        baseline_label="get_block walk",
        floor_label="unframe (CRC) + join",
        goal=">= 3x serial walk, <= 3x floor",
        notes={"blocks": count, "mb": round(sum(map(len, answer)) / 1e6, 2)},
    ).judged(min_speedup=3.0, max_over_floor=3.0)


def cursor_walk(
    snap: LMDBSnapshot, schema: rawdb.Schema, top: int, tip: bytes, count: int
) -> list[bytes]:
    """The bytes of block ``tip`` (accepted, at height ``top``, in the store with integrity
    entries) and its ``count - 1`` ancestors, read with three cursors stepping back through
    the header, body and integrity key ranges in key order instead of separate gets. The
    checks are the fast walk's: each block is the canonical one at its height, its header
    and body are there, they stitch, the parent hash is read in place, and the integrity
    checksum holds (``StoreCorrupted`` otherwise). Heights must be stored (not archived).

    The C-chain VM reads with separate gets; this walk is the ``settled walk`` bench row's
    baseline beside it."""
    if count < 1 or top - count + 1 < 0:
        raise ValueError("count must be 1 to top + 1")
    headers_at = schema.header_prefix(0)[:-8]
    bodies_at = schema.body_key(0, bytes(32))[:-40]
    integrity_at = schema.integrity_key(0, bytes(32))[:-40]
    above = (top + 1).to_bytes(8, "big")
    cursors = [
        snap.iterate_back(prefix, start=prefix + above)
        for prefix in (headers_at, bodies_at, integrity_at)
    ]
    pending: list[tuple[bytes, memoryview] | None] = [next(c, None) for c in cursors]
    out: list[bytes] = []
    block_id = tip
    for number in range(top, top - count, -1):
        tail = number.to_bytes(8, "big")
        found: list[memoryview | None] = [None, None, None]
        canonical: memoryview | None = None
        for table, prefix in enumerate((headers_at, bodies_at, integrity_at)):
            here = prefix + tail
            wanted = here + block_id
            item = pending[table]
            while item is not None and item[0].startswith(here):
                key, value = item
                if key == wanted:
                    found[table] = value
                elif table == 0 and key == here + b"n":
                    canonical = value
                item = next(cursors[table], None)
            pending[table] = item
        header, body, entry = found
        if (
            canonical is None
            or bytes(canonical) != block_id
            or header is None
            or body is None
            or entry is None
        ):
            raise StoreCorrupted(
                f"block {block_id.hex()} at {number} is not stored whole and canonical"
            )
        data = block_bytes(header, body)
        rawdb_key = integrity_at + tail + block_id
        if integrity_block_checksum(entry) != checksum(rawdb_key, data):
            raise StoreCorrupted(
                f"the stored block {block_id.hex()} at {number} fails its checksum"
            )
        out.append(data)
        block_id = stitched_parent_hash(data, header)
    return out


def gets_walk(
    snap: LMDBSnapshot, schema: rawdb.Schema, top: int, tip: bytes, count: int
) -> list[bytes]:
    """:func:`cursor_walk`'s loop and checks with separate gets (canonical entry, header,
    body, integrity entry) instead of cursors."""
    get = snap.get
    keys = schema.block_data_keys
    out: list[bytes] = []
    block_id = tip
    for number in range(top, top - count, -1):
        header_key, body_key, integrity_key = keys(number, block_id)
        try:
            canonical = get(schema.canonical_hash_key(number))
            header, body, entry = get(header_key), get(body_key), get(integrity_key)
        except KeyError:
            raise StoreCorrupted(
                f"block {block_id.hex()} at {number} is not stored whole"
            ) from None
        if canonical != block_id:
            raise StoreCorrupted(f"block {block_id.hex()} at {number} is not canonical")
        data = block_bytes(header, body)
        if integrity_block_checksum(entry) != checksum(integrity_key, data):
            raise StoreCorrupted(
                f"the stored block {block_id.hex()} at {number} fails its checksum"
            )
        out.append(data)
        block_id = stitched_parent_hash(data, header)
    return out


def _settled_walk_row(directory: Path, quick: bool) -> Comparison:
    count = QUICK_BLOCKS if quick else BLOCKS
    repeat = 3 if quick else 7
    with (
        EraArchive(directory, sparse=True) as archive,
        tempfile.TemporaryDirectory(prefix="vmstack-bench-") as temporary,
        LMDBStore(Path(temporary) / "db", sync=False) as store,
    ):
        import_history(archive, store, recent=count, chain_id=SEPOLIA_CHAIN_ID)
        vm = CChainVM(store, flavour=ETHEREUM, chain_id=SEPOLIA_CHAIN_ID, history=archive)
        tip, top = vm.last_accepted(), archive.last
        schema = vm.schema
        keys = []
        block_id = tip
        for number in range(top, top - count, -1):
            keys.append((schema.header_key(number, block_id), schema.body_key(number, block_id)))
            block_id = archive.hash(number - 1)
        expected = vm.get_ancestors(tip, count, 2**40, 600.0)

        def walked(
            walk: Callable[[LMDBSnapshot, rawdb.Schema, int, bytes, int], list[bytes]],
        ) -> list[bytes]:
            with store.snapshot() as snap:
                if not isinstance(snap, LMDBSnapshot):
                    raise TypeError("the settled walk row needs an LMDB snapshot")
                return walk(snap, schema, top, tip, count)

        def by_cursor() -> object:
            return walked(cursor_walk)

        def by_same_loop_gets() -> object:
            return walked(gets_walk)

        def by_gets() -> object:
            return vm.get_ancestors(tip, count, 2**40, 600.0)

        def floor() -> object:
            with store.snapshot() as snap:
                get = snap.get
                return [block_bytes(get(header), get(body)) for header, body in keys]

        if by_cursor() != expected or by_same_loop_gets() != expected:
            raise RuntimeError("the walks and get_ancestors disagree")
        cursor_s, gets_s, loop_s, floor_s = (
            seconds / count
            for seconds in alternated_medians(
                (by_cursor, by_gets, by_same_loop_gets, floor), repeat=repeat
            )
        )
    return Comparison(
        group="settled walk, LMDB",
        case=f"{count:,} imported Sepolia blocks, per block",
        fast_seconds=gets_s,
        baseline_seconds=cursor_s,
        floor_seconds=floor_s,
        fast_label="get_ancestors (gets)",
        baseline_label="cursor walk",
        floor_label="2 gets + join",
        goal=">= 1x the cursor walk, <= 3x floor",
        notes={
            "blocks": count,
            "same_loop_gets_us_per_block": round(loop_s * 1e6, 2),
            "cursor_over_same_loop_gets": round(cursor_s / loop_s, 2),
        },
    ).judged(min_speedup=1.0, max_over_floor=3.0)
