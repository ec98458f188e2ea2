"""The map of the store's keyspaces: every kind of key any part of vmstack keeps in the one
store a stack shares, one line each, and the proof that no two can meet.

A stack keeps all its records in one key-value store: the C-chain's blocks and bookkeeping
in go-ethereum's rawdb layout (:mod:`vmstack.cchain.rawdb`, behind an optional prefix:
``b""``, or :data:`CORETH_KEY_PREFIX` to read coreth's database as it is), the C-chain's
own records beside them (integrity entries, accounts, state head), the proposer layer's
records (:mod:`vmstack.wrappers.proposer.state`), the configuration a store was written
with (:mod:`vmstack.store.configuration`) and the format version of vmstack's
records (:mod:`vmstack.store.format`). Each line of :data:`KEYSPACES` says who owns a kind
of key, its prefix and its shape; the modules above build their keys from these lines.

A key's shape is its prefix, then fields of arbitrary bytes of fixed lengths (a block
number is 8 bytes, a hash 32), then an optional literal suffix; a few keyspaces of
go-ethereum's end in a path of variable length. Two keyspaces *overlap* when one byte
string fits both shapes (:func:`overlaps`). Several are not prefix-free and need not be:
go-ethereum's ``h + num + n`` lies under ``h`` beside ``h + num + hash``, told apart by
length, as ``vmstack-sum-from`` is from ``vmstack-sum + num + hash``; what matters is that
no key fits two lines, which :func:`overlaps` decides exactly.

The keyspaces of coreth's database that vmstack never writes (:data:`FOREIGN_KEYSPACES`,
from coreth's ``core/rawdb/schema.go``) are declared too, so a store that holds a coreth
database is proved not to meet vmstack's keys either; the one overlap is the hash-scheme
trie nodes, whose 32-byte key is the keccak256 of their value: one that fits an account
key of vmstack's would need a hash starting with 12 chosen bytes.
"""

from __future__ import annotations

import functools
import hashlib
from itertools import combinations
from typing import Final

import attrs

__all__ = [
    "ADDRESS",
    "BLOCK_ID",
    "CHAIN_ACCOUNT",
    "CHAIN_BODY",
    "CHAIN_CANONICAL_HASH",
    "CHAIN_HEADER",
    "CHAIN_HEADER_NUMBER",
    "CHAIN_HEAD_BLOCK",
    "CHAIN_HEAD_FAST_BLOCK",
    "CHAIN_HEAD_FINALIZED_BLOCK",
    "CHAIN_HEAD_HEADER",
    "CHAIN_INTEGRITY",
    "CHAIN_INTEGRITY_START",
    "CHAIN_PREFIXES",
    "CHAIN_RECEIPTS",
    "CHAIN_STATE_HEAD",
    "CONFIG_CHAIN",
    "CONFIG_PREFIX",
    "CONFIG_PROPOSER",
    "CORETH_KEY_PREFIX",
    "FOREIGN_KEYSPACES",
    "FORMAT",
    "Field",
    "HASH",
    "KEYSPACES",
    "Keyspace",
    "NUMBER",
    "PROPOSER_FIRST",
    "PROPOSER_INDEX",
    "PROPOSER_LAST",
    "PROPOSER_PREFIX",
    "PROPOSER_RECORD",
    "check_chain_prefix",
    "config_key",
    "overlapping_pairs",
    "overlaps",
]

#: ``sha256(b"ethdb")``: coreth nests its chain database in the VM's database with
#: avalanchego's ``prefixdb.NewNested("ethdb", ...)``, which puts this in front of each key.
CORETH_KEY_PREFIX: Final = hashlib.sha256(b"ethdb").digest()
#: The prefixes the C-chain's keys are declared under: none, or coreth's.
CHAIN_PREFIXES: Final = (b"", CORETH_KEY_PREFIX)
#: The proposer layer's keyspace (a prefixed view of the store).
PROPOSER_PREFIX: Final = b"proposervm/"
#: The configuration records' keyspace: one record per part of a stack.
CONFIG_PREFIX: Final = b"vmstack/config/"


@attrs.frozen
class Field:
    """A part of a key holding arbitrary bytes: ``length`` of them, or from ``length`` up to
    ``max_length`` (a path of variable length, last in its key)."""

    name: str
    length: int
    max_length: int | None = None


NUMBER: Final = Field("num", 8)
HASH: Final = Field("hash", 32)
ADDRESS: Final = Field("address", 20)
BLOCK_ID: Final = Field("id", 32)


@attrs.frozen
class Keyspace:
    """One kind of key: ``owner`` (who writes it), what it holds, its ``prefix``, the
    ``fields`` after it and a literal ``suffix``. ``chain_prefixed`` keys carry the
    C-chain's optional prefix in front of ``prefix``."""

    owner: str
    holds: str
    prefix: bytes
    fields: tuple[Field, ...] = ()
    suffix: bytes = b""
    chain_prefixed: bool = False

    def head(self, chain_prefix: bytes = b"") -> bytes:
        """The literal bytes every key of this keyspace starts with, under
        ``chain_prefix``."""
        return (chain_prefix if self.chain_prefixed else b"") + self.prefix

    def key_lengths(self, chain_prefix: bytes = b"") -> range:
        """The lengths a key of this keyspace may have, under ``chain_prefix``."""
        fixed = (
            len(self.head(chain_prefix))
            + len(self.suffix)
            + sum(field.length for field in self.fields)
        )
        extra = sum((field.max_length or field.length) - field.length for field in self.fields)
        return range(fixed, fixed + extra + 1)

    def tag(self, namespace: bytes) -> bytes:
        """The prefix within ``namespace`` (a prefixed view of the store);
        ``ValueError`` if the keyspace is not under it."""
        if not self.prefix.startswith(namespace):
            raise ValueError(f"keyspace {self.holds!r} is not under {namespace!r}")
        return self.prefix[len(namespace) :]

    def pattern(self, length: int, chain_prefix: bytes = b"") -> list[int | None]:
        """The byte each position of a key of ``length`` must hold (``None``: any)."""
        head = self.head(chain_prefix)
        body_end = length - len(self.suffix)
        return [
            head[i] if i < len(head) else self.suffix[i - body_end] if i >= body_end else None
            for i in range(length)
        ]


def _chain(holds: str, prefix: bytes, *fields: Field, suffix: bytes = b"") -> Keyspace:
    return Keyspace("cchain", holds, prefix, fields, suffix, chain_prefixed=True)


# --- the C-chain: go-ethereum's rawdb layout, then vmstack's own records ------------------
CHAIN_HEADER: Final = _chain("header RLP", b"h", NUMBER, HASH)
CHAIN_CANONICAL_HASH: Final = _chain("canonical hash at num", b"h", NUMBER, suffix=b"n")
CHAIN_HEADER_NUMBER: Final = _chain("block number of hash", b"H", HASH)
CHAIN_BODY: Final = _chain("body RLP", b"b", NUMBER, HASH)
CHAIN_RECEIPTS: Final = _chain("receipts RLP", b"r", NUMBER, HASH)
CHAIN_HEAD_HEADER: Final = _chain("head header hash", b"LastHeader")
CHAIN_HEAD_BLOCK: Final = _chain("last accepted block hash", b"LastBlock")
CHAIN_HEAD_FAST_BLOCK: Final = _chain("head fast-sync block hash", b"LastFast")
CHAIN_HEAD_FINALIZED_BLOCK: Final = _chain("last settled block hash", b"LastFinalized")
CHAIN_INTEGRITY: Final = _chain("integrity entry of a block", b"vmstack-sum", NUMBER, HASH)
CHAIN_INTEGRITY_START: Final = _chain("first number with an integrity entry", b"vmstack-sum-from")
CHAIN_ACCOUNT: Final = _chain("account of the accepted state", b"vmstack-acct", ADDRESS)
CHAIN_STATE_HEAD: Final = _chain("block and root of the accepted state", b"vmstack-state")
# --- the proposer layer, under PROPOSER_PREFIX --------------------------------------------
PROPOSER_RECORD: Final = Keyspace(
    "proposer", "accepted post-fork block record", PROPOSER_PREFIX + b"b", (BLOCK_ID,)
)
PROPOSER_INDEX: Final = Keyspace(
    "proposer", "envelope of an inner block", PROPOSER_PREFIX + b"i", (BLOCK_ID,)
)
PROPOSER_LAST: Final = Keyspace(
    "proposer", "newest post-fork block written", PROPOSER_PREFIX + b"last"
)
PROPOSER_FIRST: Final = Keyspace("proposer", "first post-fork height", PROPOSER_PREFIX + b"first")
# --- the stack's configuration and the records' format ------------------------------------
CONFIG_CHAIN: Final = Keyspace("stack", "C-chain part's configuration", CONFIG_PREFIX + b"chain")
CONFIG_PROPOSER: Final = Keyspace(
    "stack", "proposer layer's configuration", CONFIG_PREFIX + b"proposer"
)
FORMAT: Final = Keyspace("store", "format version of vmstack's records", b"vmstack/format")

_CONFIG_KEYS: Final = {"chain": CONFIG_CHAIN, "proposer": CONFIG_PROPOSER}


def config_key(part: str) -> bytes:
    """The key of the configuration record of ``part`` of a stack (``"chain"`` or
    ``"proposer"``); ``ValueError`` for another part."""
    try:
        return _CONFIG_KEYS[part].prefix
    except KeyError:
        raise ValueError(f"a stack's parts are {sorted(_CONFIG_KEYS)}, not {part!r}") from None


#: Every keyspace vmstack writes.
KEYSPACES: Final = (
    CHAIN_HEADER,
    CHAIN_CANONICAL_HASH,
    CHAIN_HEADER_NUMBER,
    CHAIN_BODY,
    CHAIN_RECEIPTS,
    CHAIN_HEAD_HEADER,
    CHAIN_HEAD_BLOCK,
    CHAIN_HEAD_FAST_BLOCK,
    CHAIN_HEAD_FINALIZED_BLOCK,
    CHAIN_INTEGRITY,
    CHAIN_INTEGRITY_START,
    CHAIN_ACCOUNT,
    CHAIN_STATE_HEAD,
    PROPOSER_RECORD,
    PROPOSER_INDEX,
    PROPOSER_LAST,
    PROPOSER_FIRST,
    CONFIG_CHAIN,
    CONFIG_PROPOSER,
    FORMAT,
)


def _coreth(holds: str, prefix: bytes, *fields: Field) -> Keyspace:
    return Keyspace("coreth", holds, prefix, fields, chain_prefixed=True)


_PATH: Final = Field("path", 0, 63)

#: The keyspaces of coreth's database (go-ethereum's schema as coreth keeps it) that
#: vmstack reads past but never writes: a store holding one keeps them beside vmstack's.
FOREIGN_KEYSPACES: Final = (
    _coreth("transaction lookup", b"l", HASH),
    _coreth("bloom bits", b"B", Field("bit", 2), NUMBER, HASH),
    _coreth("snapshot account", b"a", HASH),
    _coreth("snapshot storage", b"o", HASH, HASH),
    _coreth("contract code", b"c", HASH),
    _coreth("account trie node (path scheme)", b"A", _PATH),
    _coreth("storage trie node (path scheme)", b"O", HASH, _PATH),
    _coreth("trie node (hash scheme): keccak256 of its value", b"", HASH),
    _coreth("preimage", b"secure-key-", HASH),
    _coreth("chain config", b"ethereum-config-", HASH),
    _coreth("bloom bits index", b"iB", Field("rest", 0, 64)),
    _coreth("code to fetch", b"CP", HASH),
    _coreth("sync storage tries", b"sync_storage", HASH, HASH),
    _coreth("sync segments", b"sync_segments", HASH, HASH),
    _coreth("sync performed", b"sync_performed", NUMBER),
    *(
        _coreth("bookkeeping", name)
        for name in (
            b"DatabaseVersion",
            b"SnapshotRoot",
            b"SnapshotBlockHash",
            b"SnapshotGenerator",
            b"TransactionIndexTail",
            b"unclean-shutdown",
            b"OfflinePruning",
            b"PopulateMissingTries",
            b"PruningDisabled",
            b"AcceptorTipKey",
            b"sync_root",
        )
    ),
)


def overlaps(first: Keyspace, second: Keyspace, chain_prefix: bytes = b"") -> bool:
    """Whether one key fits both keyspaces, the chain-prefixed ones under ``chain_prefix``:
    at some length both allow, every position's fixed bytes agree."""
    own = first.key_lengths(chain_prefix)
    other = second.key_lengths(chain_prefix)
    for length in range(max(own.start, other.start), min(own.stop, other.stop)):
        pairs = zip(
            first.pattern(length, chain_prefix), second.pattern(length, chain_prefix), strict=True
        )
        if all(a is None or b is None or a == b for a, b in pairs):
            return True
    return False


@functools.lru_cache(maxsize=64)
def check_chain_prefix(prefix: bytes) -> None:
    """``ValueError`` naming the keyspaces if, under the C-chain prefix ``prefix``, a key of
    the C-chain could be a key of another part (the proposer layer's, the configuration's,
    the format record's): a prefix a user chooses is held to the map as the declared
    ones are."""
    chain = [space for space in KEYSPACES if space.chain_prefixed]
    others = [space for space in KEYSPACES if not space.chain_prefixed]
    for ours in chain:
        for theirs in others:
            if overlaps(ours, theirs, prefix):
                raise ValueError(
                    f"under the key prefix {prefix.hex()}, the C-chain's "
                    f"{ours.holds} keys could be the {theirs.owner}'s "
                    f"{theirs.holds} keys"
                )


def overlapping_pairs(
    keyspaces: tuple[Keyspace, ...], chain_prefix: bytes = b""
) -> list[tuple[Keyspace, Keyspace]]:
    """Every pair of ``keyspaces`` one key could fit, under ``chain_prefix``."""
    return [(a, b) for a, b in combinations(keyspaces, 2) if overlaps(a, b, chain_prefix)]
