"""The one schema module: every store key of the C-chain VM, in go-ethereum's rawdb layout.

Keys (``num`` is the block number as 8 big-endian bytes, ``hash`` the 32-byte block hash)::

    h + num + hash     header RLP            b + num + hash   body RLP
    r + num + hash     receipts RLP          h + num + n      canonical hash at num
    H + hash           block number (8 B)    LastBlock        last accepted block hash
    LastHeader         head header hash      LastFast         head fast-sync block hash
    LastFinalized      last settled block hash

and keys of vmstack's own, outside geth's layout (geth never reads them)::

    vmstack-sum + num + hash   integrity entry: crc32 of this key and the block RLP (4 B,
                               big-endian), then crc32 of this key and the receipts RLP
                               once they are written (4 B)
    vmstack-sum-from           crc32 of the key and the number (4 B, big-endian), then the
                               first block number that has an integrity entry (8 B)
    vmstack-acct + address     an account of the accepted state (see
                               :mod:`vmstack.cchain.state`), framed with its checksum
    vmstack-state              the block the accepted state is after and its state root

The integrity entry lets a reader reject a damaged header or body (:class:`StoreCorrupted`)
with one CRC-32 (:func:`vmstack.checksum.keyed_checksum`) over the block bytes it is about
to serve, far cheaper than hashing the header; as the checksum covers the block's number
and hash (in the integrity key), a block's header and body copied under another block's
keys fail it too. Its values are
:mod:`vmstack.cchain.integrity`'s. Blocks written by other software (a coreth database)
have none; ``vmstack-sum-from`` tells a reader from which height on an entry must exist,
and a store with entries but no marker is damaged.

Every key may carry a prefix: coreth nests its chain database in the VM's database with
avalanchego's ``prefixdb.NewNested("ethdb", ...)``, which puts ``sha256(b"ethdb")``
(:data:`CORETH_KEY_PREFIX`) in front of each geth key, so ``Schema(CORETH_KEY_PREFIX)`` reads
a coreth database as it is. Nothing else in the package spells a key; the prefixes and key
shapes themselves are lines of the store's map of keyspaces (:mod:`vmstack.store.keyspaces`),
which shows they meet no other part's keys.

Values that the schema itself defines are checked when read: a block number must be 8 bytes
and a hash 32, otherwise :class:`~vmstack.errors.StoreCorrupted` — never a wrong answer.
The read helpers take any :class:`~vmstack.store.KeyReader` (a store or a snapshot) and the
write helpers any :class:`~vmstack.store.KeyWriter` (a store or a write batch), so writing a
whole block is one atomic batch::

    with store.write_batch() as batch:
        write_block(batch, schema, number, block_hash, header_rlp, body_rlp, receipts_rlp)
        write_canonical_hash(batch, schema, number, block_hash)
        write_last_accepted_hash(batch, schema, block_hash)
"""

from __future__ import annotations

import enum
from itertools import islice
from typing import Final

import attrs

from vmstack.cchain.integrity import (
    Integrity,
    decode_integrity,
    decode_integrity_start,
    encode_integrity,
    encode_integrity_start,
)
from vmstack.errors import StoreCorrupted
from vmstack.store import keyspaces
from vmstack.store.base import (
    MAX_KEY_LEN,
    BytesLike,
    KeyReader,
    KeyValueStore,
    KeyWriter,
    ReadSnapshot,
)

__all__ = [
    "ACCOUNT_PREFIX",
    "ADDRESS_LENGTH",
    "BLOCK_BODY_PREFIX",
    "BLOCK_RECEIPTS_PREFIX",
    "CORETH_KEY_PREFIX",
    "HASH_LENGTH",
    "HEADER_HASH_SUFFIX",
    "HEADER_NUMBER_PREFIX",
    "HEADER_PREFIX",
    "HEAD_BLOCK_KEY",
    "HEAD_FAST_BLOCK_KEY",
    "HEAD_FINALIZED_BLOCK_KEY",
    "HEAD_HEADER_KEY",
    "INTEGRITY_PREFIX",
    "INTEGRITY_START_KEY",
    "KeyKind",
    "NUMBER_LENGTH",
    "ParsedKey",
    "STATE_HEAD_KEY",
    "Schema",
    "decode_block_hash",
    "decode_block_number",
    "delete_block",
    "encode_block_number",
    "has_chain_data",
    "has_integrity_entries",
    "has_vmstack_records",
    "read_body_rlp",
    "read_canonical_hash",
    "read_head_header_hash",
    "read_header_number",
    "read_header_rlp",
    "read_integrity",
    "read_integrity_start",
    "read_last_accepted_hash",
    "read_last_settled_hash",
    "read_receipts_rlp",
    "write_block",
    "write_canonical_hash",
    "write_head_fast_block_hash",
    "write_head_header_hash",
    "write_integrity",
    "write_integrity_start",
    "write_last_accepted_hash",
    "write_last_settled_hash",
    "write_receipts",
]

#: ``sha256(b"ethdb")``: the prefix of every key of coreth's chain database.
CORETH_KEY_PREFIX: Final = keyspaces.CORETH_KEY_PREFIX

# The keys' parts, as the store's map of keyspaces (vmstack.store.keyspaces) declares them.
HASH_LENGTH: Final = keyspaces.HASH.length
NUMBER_LENGTH: Final = keyspaces.NUMBER.length

HEADER_PREFIX: Final = keyspaces.CHAIN_HEADER.prefix
HEADER_HASH_SUFFIX: Final = keyspaces.CHAIN_CANONICAL_HASH.suffix
HEADER_NUMBER_PREFIX: Final = keyspaces.CHAIN_HEADER_NUMBER.prefix
BLOCK_BODY_PREFIX: Final = keyspaces.CHAIN_BODY.prefix
BLOCK_RECEIPTS_PREFIX: Final = keyspaces.CHAIN_RECEIPTS.prefix
HEAD_HEADER_KEY: Final = keyspaces.CHAIN_HEAD_HEADER.prefix
HEAD_BLOCK_KEY: Final = keyspaces.CHAIN_HEAD_BLOCK.prefix
HEAD_FAST_BLOCK_KEY: Final = keyspaces.CHAIN_HEAD_FAST_BLOCK.prefix
HEAD_FINALIZED_BLOCK_KEY: Final = keyspaces.CHAIN_HEAD_FINALIZED_BLOCK.prefix
INTEGRITY_PREFIX: Final = keyspaces.CHAIN_INTEGRITY.prefix
INTEGRITY_START_KEY: Final = keyspaces.CHAIN_INTEGRITY_START.prefix
ACCOUNT_PREFIX: Final = keyspaces.CHAIN_ACCOUNT.prefix
STATE_HEAD_KEY: Final = keyspaces.CHAIN_STATE_HEAD.prefix
ADDRESS_LENGTH: Final = keyspaces.ADDRESS.length

_MAX_PREFIX_LEN: Final = MAX_KEY_LEN - (len(INTEGRITY_PREFIX) + NUMBER_LENGTH + HASH_LENGTH)


def encode_block_number(number: int) -> bytes:
    """``number`` as 8 big-endian bytes; ``ValueError`` outside ``0 .. 2**64 - 1``."""
    if isinstance(number, bool) or not isinstance(number, int):
        raise TypeError(f"a block number is an int, not {type(number).__name__}")
    try:
        return number.to_bytes(NUMBER_LENGTH, "big")
    except OverflowError:
        raise ValueError(f"block number {number} is outside 0 .. 2**64 - 1") from None


def decode_block_number(data: bytes | memoryview) -> int:
    """The block number stored as 8 big-endian bytes; :class:`StoreCorrupted` otherwise."""
    if len(data) != NUMBER_LENGTH:
        raise StoreCorrupted(f"a stored block number is {len(data)} bytes, not {NUMBER_LENGTH}")
    return int.from_bytes(data, "big")


def decode_block_hash(data: bytes | memoryview) -> bytes:
    """A stored 32-byte block hash as ``bytes``; :class:`StoreCorrupted` otherwise."""
    if len(data) != HASH_LENGTH:
        raise StoreCorrupted(f"a stored block hash is {len(data)} bytes, not {HASH_LENGTH}")
    return bytes(data)


def _check_hash(block_hash: bytes) -> bytes:
    if not isinstance(block_hash, bytes):
        raise TypeError(f"a block hash is bytes, not {type(block_hash).__name__}")
    if len(block_hash) != HASH_LENGTH:
        raise ValueError(f"a block hash is {HASH_LENGTH} bytes, got {len(block_hash)}")
    return block_hash


class KeyKind(enum.Enum):
    """What a schema key addresses."""

    HEADER = "header"
    BODY = "body"
    RECEIPTS = "receipts"
    CANONICAL_HASH = "canonical hash"
    HEADER_NUMBER = "header number"
    HEAD_HEADER = "head header"
    HEAD_BLOCK = "last accepted"
    HEAD_FAST_BLOCK = "head fast block"
    HEAD_FINALIZED_BLOCK = "last settled"
    INTEGRITY = "integrity"
    INTEGRITY_START = "integrity start"
    ACCOUNT = "account"
    STATE_HEAD = "state head"


@attrs.frozen(slots=True)
class ParsedKey:
    """A schema key taken apart: its kind and, where the key holds them, number and hash."""

    kind: KeyKind
    number: int | None = None
    block_hash: bytes | None = None


_HEAD_KINDS: Final = {
    HEAD_HEADER_KEY: KeyKind.HEAD_HEADER,
    HEAD_BLOCK_KEY: KeyKind.HEAD_BLOCK,
    HEAD_FAST_BLOCK_KEY: KeyKind.HEAD_FAST_BLOCK,
    HEAD_FINALIZED_BLOCK_KEY: KeyKind.HEAD_FINALIZED_BLOCK,
    INTEGRITY_START_KEY: KeyKind.INTEGRITY_START,
    STATE_HEAD_KEY: KeyKind.STATE_HEAD,
}
_HASHED_KINDS: Final = {
    HEADER_PREFIX: KeyKind.HEADER,
    BLOCK_BODY_PREFIX: KeyKind.BODY,
    BLOCK_RECEIPTS_PREFIX: KeyKind.RECEIPTS,
}


def _prefix_field(value: object) -> bytes:
    if not isinstance(value, bytes):
        raise TypeError(f"a schema key prefix is bytes, not {type(value).__name__}")
    if len(value) > _MAX_PREFIX_LEN:
        raise ValueError(f"a schema key prefix is at most {_MAX_PREFIX_LEN} bytes")
    keyspaces.check_chain_prefix(value)
    return value


@attrs.frozen(slots=True)
class Schema:
    """Builds (and parses) every key, under an optional ``prefix`` (``CORETH_KEY_PREFIX`` for
    a coreth database). Key builders check their arguments: a hash must be 32 bytes and a
    number within 8 bytes (``TypeError`` / ``ValueError`` otherwise)."""

    prefix: bytes = attrs.field(default=b"", converter=_prefix_field)
    _header: bytes = attrs.field(init=False, repr=False, eq=False)
    _body: bytes = attrs.field(init=False, repr=False, eq=False)
    _receipts: bytes = attrs.field(init=False, repr=False, eq=False)
    _number: bytes = attrs.field(init=False, repr=False, eq=False)
    _integrity: bytes = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_header", self.prefix + HEADER_PREFIX)
        object.__setattr__(self, "_body", self.prefix + BLOCK_BODY_PREFIX)
        object.__setattr__(self, "_receipts", self.prefix + BLOCK_RECEIPTS_PREFIX)
        object.__setattr__(self, "_number", self.prefix + HEADER_NUMBER_PREFIX)
        object.__setattr__(self, "_integrity", self.prefix + INTEGRITY_PREFIX)

    def header_key(self, number: int, block_hash: bytes) -> bytes:
        """``h + num + hash``: the header RLP of block ``block_hash`` at ``number``."""
        return self._header + encode_block_number(number) + _check_hash(block_hash)

    def body_key(self, number: int, block_hash: bytes) -> bytes:
        """``b + num + hash``: the body RLP."""
        return self._body + encode_block_number(number) + _check_hash(block_hash)

    def receipts_key(self, number: int, block_hash: bytes) -> bytes:
        """``r + num + hash``: the receipts RLP."""
        return self._receipts + encode_block_number(number) + _check_hash(block_hash)

    def canonical_hash_key(self, number: int) -> bytes:
        """``h + num + n``: the hash of the canonical block at ``number``."""
        return self._header + encode_block_number(number) + HEADER_HASH_SUFFIX

    def header_number_key(self, block_hash: bytes) -> bytes:
        """``H + hash``: the number of block ``block_hash``."""
        return self._number + _check_hash(block_hash)

    def integrity_key(self, number: int, block_hash: bytes) -> bytes:
        """``vmstack-sum + num + hash``: the integrity entry (see :func:`encode_integrity`)."""
        return self._integrity + encode_block_number(number) + _check_hash(block_hash)

    def integrity_start_key(self) -> bytes:
        """``vmstack-sum-from``: the first block number written with an integrity entry."""
        return self.prefix + INTEGRITY_START_KEY

    def block_data_keys(self, number: int, block_hash: bytes) -> tuple[bytes, bytes, bytes]:
        """``(header key, body key, integrity key)`` of a block, built without checking the
        arguments: for a hot path whose ``number`` (``0 .. 2**64 - 1``) and 32-byte
        ``block_hash`` are already known good (read from the store or from a parent link).
        Equal to the checked builders' keys; ``num + hash`` is built once and shared."""
        tail = number.to_bytes(NUMBER_LENGTH, "big") + block_hash
        return self._header + tail, self._body + tail, self._integrity + tail

    def header_prefix(self, number: int) -> bytes:
        """``h + num``: the prefix shared by the headers and the canonical hash at ``number``."""
        return self._header + encode_block_number(number)

    def last_accepted_key(self) -> bytes:
        """geth's ``LastBlock``: the hash of the last accepted block."""
        return self.prefix + HEAD_BLOCK_KEY

    def head_header_key(self) -> bytes:
        """geth's ``LastHeader``: the hash of the head header."""
        return self.prefix + HEAD_HEADER_KEY

    def head_fast_block_key(self) -> bytes:
        """geth's ``LastFast``: the hash of the head fast-sync block (coreth writes it)."""
        return self.prefix + HEAD_FAST_BLOCK_KEY

    def account_key(self, address: bytes) -> bytes:
        """``vmstack-acct + address``: an account of the accepted state."""
        if len(address) != ADDRESS_LENGTH:
            raise ValueError(f"an address is 20 bytes, not {len(address)}")
        return self.prefix + ACCOUNT_PREFIX + address

    def account_prefix(self) -> bytes:
        """The prefix of every account key."""
        return self.prefix + ACCOUNT_PREFIX

    def state_head_key(self) -> bytes:
        """``vmstack-state``: the block the accepted state is after, and its root."""
        return self.prefix + STATE_HEAD_KEY

    def last_settled_key(self) -> bytes:
        """geth's ``LastFinalized``: the hash of the last settled block (receipts written)."""
        return self.prefix + HEAD_FINALIZED_BLOCK_KEY

    def parse_key(self, key: bytes) -> ParsedKey | None:
        """Take a key of this schema apart; ``None`` for a key the schema does not define."""
        if not key.startswith(self.prefix):
            return None
        rest = key[len(self.prefix) :]
        head = _HEAD_KINDS.get(rest)
        if head is not None:
            return ParsedKey(head)
        tag = rest[:1]
        if len(rest) == 1 + NUMBER_LENGTH + HASH_LENGTH and tag in _HASHED_KINDS:
            number = int.from_bytes(rest[1 : 1 + NUMBER_LENGTH], "big")
            return ParsedKey(_HASHED_KINDS[tag], number, rest[1 + NUMBER_LENGTH :])
        if (
            len(rest) == 1 + NUMBER_LENGTH + 1
            and tag == HEADER_PREFIX
            and rest[-1:] == HEADER_HASH_SUFFIX
        ):
            return ParsedKey(KeyKind.CANONICAL_HASH, int.from_bytes(rest[1:-1], "big"))
        if len(rest) == 1 + HASH_LENGTH and tag == HEADER_NUMBER_PREFIX:
            return ParsedKey(KeyKind.HEADER_NUMBER, block_hash=rest[1:])
        tag_len = len(INTEGRITY_PREFIX)
        if (
            len(rest) == tag_len + NUMBER_LENGTH + HASH_LENGTH
            and rest[:tag_len] == INTEGRITY_PREFIX
        ):
            number = int.from_bytes(rest[tag_len : tag_len + NUMBER_LENGTH], "big")
            return ParsedKey(KeyKind.INTEGRITY, number, rest[tag_len + NUMBER_LENGTH :])
        if len(rest) == len(ACCOUNT_PREFIX) + ADDRESS_LENGTH and rest.startswith(ACCOUNT_PREFIX):
            return ParsedKey(KeyKind.ACCOUNT)
        return None


def _read(reader: KeyReader, key: bytes) -> bytes | memoryview | None:
    try:
        return reader.get(key)
    except KeyError:
        return None


def _read_hash(reader: KeyReader, key: bytes) -> bytes | None:
    value = _read(reader, key)
    return None if value is None else decode_block_hash(value)


def read_header_rlp(
    reader: KeyReader, schema: Schema, number: int, block_hash: bytes
) -> bytes | memoryview | None:
    """The stored header RLP of ``block_hash`` at ``number``, or ``None``."""
    return _read(reader, schema.header_key(number, block_hash))


def read_body_rlp(
    reader: KeyReader, schema: Schema, number: int, block_hash: bytes
) -> bytes | memoryview | None:
    """The stored body RLP, or ``None``."""
    return _read(reader, schema.body_key(number, block_hash))


def read_receipts_rlp(
    reader: KeyReader, schema: Schema, number: int, block_hash: bytes
) -> bytes | memoryview | None:
    """The stored receipts RLP, or ``None``."""
    return _read(reader, schema.receipts_key(number, block_hash))


def read_canonical_hash(reader: KeyReader, schema: Schema, number: int) -> bytes | None:
    """The canonical block hash at ``number``, or ``None``; a bad length is corruption."""
    return _read_hash(reader, schema.canonical_hash_key(number))


def read_header_number(reader: KeyReader, schema: Schema, block_hash: bytes) -> int | None:
    """The number of block ``block_hash``, or ``None``; a bad length is corruption."""
    value = _read(reader, schema.header_number_key(block_hash))
    return None if value is None else decode_block_number(value)


def read_last_accepted_hash(reader: KeyReader, schema: Schema) -> bytes | None:
    """The last accepted block hash (``LastBlock``), or ``None``."""
    return _read_hash(reader, schema.last_accepted_key())


def read_head_header_hash(reader: KeyReader, schema: Schema) -> bytes | None:
    """The head header hash (``LastHeader``), or ``None``."""
    return _read_hash(reader, schema.head_header_key())


def read_last_settled_hash(reader: KeyReader, schema: Schema) -> bytes | None:
    """The last settled block hash (``LastFinalized``), or ``None``."""
    return _read_hash(reader, schema.last_settled_key())


def read_integrity(
    reader: KeyReader, schema: Schema, number: int, block_hash: bytes
) -> Integrity | None:
    """The integrity entry of a block, or ``None``; a bad length is corruption."""
    value = _read(reader, schema.integrity_key(number, block_hash))
    return None if value is None else decode_integrity(value)


_PROBE_KEYS: Final = 8


def read_integrity_start(reader: KeyReader, schema: Schema) -> int | None:
    """The first block number written with an integrity entry, or ``None`` (no block was);
    :class:`StoreCorrupted` unless the value is a number with its valid checksum."""
    key = schema.integrity_start_key()
    value = _read(reader, key)
    return None if value is None else decode_integrity_start(key, value)


def _has_key_under(
    reader: ReadSnapshot | KeyValueStore, prefix: bytes, *, key_len: int | None = None
) -> bool:
    """Whether ``reader`` has a key that starts with ``prefix`` (of length ``key_len``,
    when given) among the first few keys under ``prefix``."""
    return any(
        key_len is None or len(key) == key_len
        for key, _ in islice(reader.iterate(prefix), _PROBE_KEYS)
    )


def has_integrity_entries(reader: ReadSnapshot | KeyValueStore, schema: Schema) -> bool:
    """Whether the store holds any integrity entry (the marker itself aside)."""
    prefix = schema.prefix + INTEGRITY_PREFIX
    return _has_key_under(reader, prefix, key_len=len(prefix) + NUMBER_LENGTH + HASH_LENGTH)


def has_vmstack_records(reader: ReadSnapshot | KeyValueStore, schema: Schema) -> bool:
    """Whether the store holds any record of vmstack's own under ``schema`` (the
    integrity-start marker or an integrity entry), whose format
    :func:`vmstack.store.format.check_format` holds it to."""
    return reader.has(schema.integrity_start_key()) or has_integrity_entries(reader, schema)


def has_chain_data(reader: ReadSnapshot | KeyValueStore, schema: Schema) -> bool:
    """Whether the store holds any of a chain's bookkeeping: a head pointer, the
    integrity-start marker, a canonical entry at height 0, a number entry or an
    integrity entry. A store that does has a chain, whatever else it lost."""
    singles = (
        schema.last_accepted_key(),
        schema.head_header_key(),
        schema.head_fast_block_key(),
        schema.last_settled_key(),
        schema.integrity_start_key(),
        schema.canonical_hash_key(0),
    )
    if any(reader.has(key) for key in singles):
        return True
    number_prefix = schema.prefix + HEADER_NUMBER_PREFIX
    return _has_key_under(
        reader, number_prefix, key_len=len(number_prefix) + HASH_LENGTH
    ) or has_integrity_entries(reader, schema)


def write_block(
    writer: KeyWriter,
    schema: Schema,
    number: int,
    block_hash: bytes,
    header_rlp: BytesLike,
    body_rlp: BytesLike,
    receipts_rlp: BytesLike | None = None,
) -> None:
    """Write a block's header, body, number entry and (if given) receipts.

    The canonical hash and the head pointers are separate calls, so the caller decides what
    becomes canonical; pass a write batch to make the whole block one atomic write.
    """
    writer.put(schema.header_key(number, block_hash), header_rlp)
    writer.put(schema.body_key(number, block_hash), body_rlp)
    writer.put(schema.header_number_key(block_hash), encode_block_number(number))
    if receipts_rlp is not None:
        writer.put(schema.receipts_key(number, block_hash), receipts_rlp)


def write_receipts(
    writer: KeyWriter, schema: Schema, number: int, block_hash: bytes, receipts_rlp: BytesLike
) -> None:
    """Write the receipts RLP of a block."""
    writer.put(schema.receipts_key(number, block_hash), receipts_rlp)


def delete_block(writer: KeyWriter, schema: Schema, number: int, block_hash: bytes) -> None:
    """Delete a block's header, body, receipts, number and integrity entries (not its
    canonical entry)."""
    writer.delete(schema.header_key(number, block_hash))
    writer.delete(schema.body_key(number, block_hash))
    writer.delete(schema.receipts_key(number, block_hash))
    writer.delete(schema.header_number_key(block_hash))
    writer.delete(schema.integrity_key(number, block_hash))


def write_canonical_hash(writer: KeyWriter, schema: Schema, number: int, block_hash: bytes) -> None:
    """Make ``block_hash`` the canonical block at ``number``."""
    writer.put(schema.canonical_hash_key(number), _check_hash(block_hash))


def write_last_accepted_hash(writer: KeyWriter, schema: Schema, block_hash: bytes) -> None:
    """Point ``LastBlock`` at ``block_hash``."""
    writer.put(schema.last_accepted_key(), _check_hash(block_hash))


def write_head_header_hash(writer: KeyWriter, schema: Schema, block_hash: bytes) -> None:
    """Point ``LastHeader`` at ``block_hash``."""
    writer.put(schema.head_header_key(), _check_hash(block_hash))


def write_last_settled_hash(writer: KeyWriter, schema: Schema, block_hash: bytes) -> None:
    """Point ``LastFinalized`` at ``block_hash``."""
    writer.put(schema.last_settled_key(), _check_hash(block_hash))


def write_head_fast_block_hash(writer: KeyWriter, schema: Schema, block_hash: bytes) -> None:
    """Point ``LastFast`` at ``block_hash`` (coreth moves it with ``LastBlock``)."""
    writer.put(schema.head_fast_block_key(), _check_hash(block_hash))


def write_integrity(
    writer: KeyWriter,
    schema: Schema,
    number: int,
    block_hash: bytes,
    block_checksum: int,
    receipts_checksum: int | None = None,
) -> None:
    """Write a block's integrity entry (see :func:`encode_integrity`)."""
    writer.put(
        schema.integrity_key(number, block_hash),
        encode_integrity(block_checksum, receipts_checksum),
    )


def write_integrity_start(writer: KeyWriter, schema: Schema, number: int) -> None:
    """Record ``number`` as the first block number written with an integrity entry, with
    the marker's own checksum (over its key and the number)."""
    key = schema.integrity_start_key()
    writer.put(key, encode_integrity_start(key, encode_block_number(number)))
