"""Benchmark case: the canonical hash cache, a hit against a store read.

An :class:`~vmstack.store.LMDBStore` holds 10,000 canonical entries (``h + num + n`` ->
hash, the rawdb layout); a :class:`~vmstack.cchain.CanonicalHashCache` of the default
capacity holds them all, settled. Per lookup of a settled height:

- fast: ``CanonicalHashCache.lookup`` (a hit);
- baseline: ``rawdb.read_canonical_hash`` on the store, what ``get_block_id_at_height``
  pays without the cache (its own read transaction, the key built, the value checked);
- floor: a plain ``dict`` lookup of the same heights.

Notes: the cache's memory per entry (measured with ``sys.getsizeof``: goal under 200
bytes) and the cost of one ``get`` inside an already open snapshot, which is what the
ancestors walk pays for an uncached height: there, an LMDB read costs about what a cache hit
does, so the cache's gain is on stand-alone lookups and on stores slower than LMDB.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from vmstack.benchmarks import Comparison, alternated_medians
from vmstack.cchain import rawdb
from vmstack.cchain.cache import DEFAULT_CAPACITY, CanonicalHashCache
from vmstack.keccak import keccak256
from vmstack.store import LMDBStore

__all__ = ["ENTRIES", "run"]

#: Canonical entries in the store and the cache.
ENTRIES = DEFAULT_CAPACITY

GROUP = "canonical hash cache"
GOAL = ">= 5x store read, < 200 B per entry"
_LOOKUPS = 1000


def run(quick: bool) -> list[Comparison]:
    """One row: a cache hit against a store read of a settled height, per lookup."""
    repeat = 5 if quick else 9
    number = 3 if quick else 10
    schema = rawdb.Schema()
    hashes = [keccak256(height.to_bytes(8, "big")) for height in range(ENTRIES)]
    heights = [(height * 7919) % ENTRIES for height in range(_LOOKUPS)]
    with (
        tempfile.TemporaryDirectory(prefix="vmstack-bench-") as directory,
        LMDBStore(Path(directory) / "db", sync=False) as store,
    ):
        with store.write_batch() as batch:
            for height, block_hash in enumerate(hashes):
                rawdb.write_canonical_hash(batch, schema, height, block_hash)
        cache = CanonicalHashCache(settled_height=ENTRIES - 1)
        for height, block_hash in enumerate(hashes):
            cache.remember(height, block_hash)
        plain = dict(enumerate(hashes))

        def hits() -> object:
            lookup = cache.lookup
            return [lookup(height) for height in heights]

        def reads() -> object:
            return [rawdb.read_canonical_hash(store, schema, height) for height in heights]

        def floor() -> object:
            get = plain.get
            return [get(height) for height in heights]

        keys = [schema.canonical_hash_key(height) for height in heights]

        def snapshot_gets() -> object:
            with store.snapshot() as snap:
                get = snap.get
                return [get(key) for key in keys]

        if hits() != reads() or hits() != floor():
            raise ValueError("the cache and the store disagree")
        fast, baseline, cheapest, in_snapshot = (
            seconds / _LOOKUPS
            for seconds in alternated_medians(
                (hits, reads, floor, snapshot_gets), repeat=repeat, number=number
            )
        )
        per_entry = cache.bytes_per_entry()
    return [
        Comparison(
            group=GROUP,
            case=f"settled height, {ENTRIES} entries, LMDB",
            fast_seconds=fast,
            baseline_seconds=baseline,
            floor_seconds=cheapest,
            fast_label="cache hit",
            baseline_label="read_canonical_hash",
            floor_label="dict get",
            goal=GOAL,
            notes={
                "bytes_per_entry": round(per_entry, 1),
                "entries": len(cache),
                "snapshot_get_us": round(in_snapshot * 1e6, 3),
            },
        ).judged(min_speedup=5.0, also=per_entry < 200)
    ]
