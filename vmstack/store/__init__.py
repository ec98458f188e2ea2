"""Key-value stores: the :class:`KeyValueStore` contract, :class:`MemoryStore` for tests and
:class:`LMDBStore`, the embedded default (zero-copy snapshot reads, atomic batches, a map that
grows, safe to reopen after a crash). :class:`PrefixedStore` nests one keyspace in another."""

from vmstack.errors import StoreClosed, StoreError
from vmstack.store.base import (
    MAX_KEY_LEN,
    BufferedWriteBatch,
    BytesLike,
    KeyReader,
    KeyValueStore,
    KeyWriter,
    PrefixedStore,
    ReadSnapshot,
    WriteBatch,
    is_writer,
)
from vmstack.store.lmdb import DEFAULT_MAP_SIZE, LMDBStore
from vmstack.store.memory import MemoryStore

__all__ = [
    "BufferedWriteBatch",
    "BytesLike",
    "DEFAULT_MAP_SIZE",
    "KeyReader",
    "KeyValueStore",
    "KeyWriter",
    "LMDBStore",
    "MAX_KEY_LEN",
    "MemoryStore",
    "PrefixedStore",
    "ReadSnapshot",
    "StoreClosed",
    "StoreError",
    "WriteBatch",
    "is_writer",
]
