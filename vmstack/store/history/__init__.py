"""Settled history read from era1 archives: :class:`EraArchive` (see
:mod:`vmstack.store.history.archive` for the format and the checks).

The byte level of era1, beneath the C-chain: the e2store records, their snappy framing, the
accumulator and the block index (:mod:`~vmstack.store.history.records`), one file
(:mod:`~vmstack.store.history.era_file`) and a directory of them
(:mod:`~vmstack.store.history.archive`). Decoding the blocks and checking them against
their headers' commitments is the C-chain's (:mod:`vmstack.cchain.era1`).
"""

from __future__ import annotations

from vmstack.store.history.archive import BlockCheck, EraArchive
from vmstack.store.history.records import (
    ERA1_BLOCKS,
    EraRecord,
    accumulator_root,
    snappy_frame,
    snappy_unframe,
    write_era1,
)

__all__ = [
    "BlockCheck",
    "ERA1_BLOCKS",
    "EraArchive",
    "EraRecord",
    "accumulator_root",
    "snappy_frame",
    "snappy_unframe",
    "write_era1",
]
