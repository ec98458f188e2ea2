"""The C-chain over era1 history: the archive as a VM's lower tier (:class:`HistoryTier`,
:mod:`~vmstack.cchain.era1.tier`), the check of each archived block against its header's
commitments (:func:`check_archived_block`, :func:`verify_archive`,
:mod:`~vmstack.cchain.era1.verify`), importing and exporting era1 files
(:func:`import_history`, :func:`export_history`, :mod:`~vmstack.cchain.era1.transfer`) and
real history's state roots recomputed from a geth genesis (:func:`recompute_state_roots`,
:mod:`~vmstack.cchain.era1.state_roots`). The files themselves are read at the byte level
beneath the C-chain, by :class:`vmstack.store.history.EraArchive`.
"""

from __future__ import annotations

from vmstack.cchain.era1.state_roots import StateNotModelled, genesis_header, recompute_state_roots
from vmstack.cchain.era1.tier import HistoryTier, decode_consensus_receipts
from vmstack.cchain.era1.transfer import (
    NETWORK_CHAIN_IDS,
    ArchivedBlock,
    ImportResult,
    export_history,
    import_history,
)
from vmstack.cchain.era1.verify import check_archived_block, verify_archive

__all__ = [
    "ArchivedBlock",
    "HistoryTier",
    "ImportResult",
    "NETWORK_CHAIN_IDS",
    "StateNotModelled",
    "check_archived_block",
    "decode_consensus_receipts",
    "export_history",
    "genesis_header",
    "import_history",
    "recompute_state_roots",
    "verify_archive",
]
