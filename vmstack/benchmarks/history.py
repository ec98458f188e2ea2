"""Benchmark case: ``vmstack history verify`` throughput over real era1 files.

The files are the era1 files in ``$VMSTACK_VECTORS/era1`` (by default ``../shared/vectors/era1``
beside the repository, the folder the tests read); without them the case has no row. Per
megabyte of file:

- fast: :meth:`~vmstack.store.history.EraArchive.verify` on a freshly opened archive (every
  accumulator recomputed, every CRC, frame and commitment checked over the stored bytes);
- baseline: the bodies alone checked through the decoders: each block decoded from its header
  and body (``ETHEREUM.block_from_parts``) and its body commitments recomputed from the
  decoded records (:func:`~vmstack.cchain.tries.check_body`); less work than verify (no
  accumulator, no receipts, no CRCs), shown for scale;
- floor: the bare sha256 of the files' bytes, the least a reader that checks every byte pays.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from vmstack.benchmarks import Comparison, median_seconds
from vmstack.cchain.codec import ETHEREUM
from vmstack.cchain.tries import check_body
from vmstack.store.history import EraArchive

__all__ = ["run", "vectors_era1"]

GROUP = "history verify"
GOAL = "<= 300x sha256 of the file, MB/s noted"


def vectors_era1() -> Path:
    """The folder of era1 files the case reads."""
    default = Path(__file__).resolve().parents[3] / "shared" / "vectors"
    return Path(os.environ.get("VMSTACK_VECTORS", default)) / "era1"


def run(quick: bool) -> list[Comparison]:
    """One row, when the era1 files are present: verify against decoding, per MB."""
    directory = vectors_era1()
    if not directory.is_dir() or not any(directory.glob("*.era1")):
        return []
    repeat = 1 if quick else 3
    archive = EraArchive(directory, sparse=True)
    size = sum(path.stat().st_size for path in archive.files)
    contents = [path.read_bytes() for path in archive.files]
    numbers = [n for n in range(archive.first, archive.last + 1) if archive.holds(n)]

    def verify() -> object:
        with EraArchive(directory, sparse=True) as fresh:
            return fresh.verify()

    def decode() -> object:
        for number in numbers:
            check_body(ETHEREUM.block_from_parts(archive.header_rlp(number),
                                                 archive.body_rlp(number)))
        return None

    def floor() -> object:
        return [hashlib.sha256(data).digest() for data in contents]

    fast, baseline, cheapest = (median_seconds(operation, repeat=repeat) / (size / 1e6)
                                for operation in (verify, decode, floor))
    return [Comparison(
        group=GROUP,
        case=f"{len(archive.files)} Sepolia era1 files, {size / 1e6:.1f} MB, per MB",
        fast_seconds=fast,
        baseline_seconds=baseline,
        floor_seconds=cheapest,
        fast_label="EraArchive.verify",
        baseline_label="decode + check_body",
        floor_label="sha256 of the file",
        goal=GOAL,
        notes={"verify_mb_per_s": round(1 / fast, 2),
               "sha256_mb_per_s": round(1 / cheapest, 1)},
    ).judged(max_over_floor=300.0)]

