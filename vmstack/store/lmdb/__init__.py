"""The LMDB store, one module per concern: the store itself (:mod:`.store`: opening, reads,
atomic batches, the growing map), the writer lock and read gate (:mod:`.locks`), snapshots
and the key scan (:mod:`.snapshot`), the mapping of LMDB's errors (:mod:`.errors`) and the
checks of the data file before LMDB maps it (:mod:`.files`)."""

from vmstack.store.lmdb.locks import WRITER_LOCK_FILE
from vmstack.store.lmdb.store import DEFAULT_MAP_SIZE, DEFAULT_MAX_READERS, LMDBStore

__all__ = ["DEFAULT_MAP_SIZE", "DEFAULT_MAX_READERS", "LMDBStore", "WRITER_LOCK_FILE"]
