"""Ethereum and Avalanche C-chain records: headers, transactions, withdrawals, receipts, blocks.

Every record is a frozen, slotted attrs class whose fields carry their RLP kind (hash,
address, uint64, ...) in one declaration, so a record's field list is written once and both
its encoder and its strict decoder come from it. Records convert to and from *raw RLP items*
(``bytes`` or nested lists of them, what ``rlp.decode`` returns with no sedes); the codec in
:mod:`vmstack.cchain.codec` turns those into bytes with the ``rlp`` package.

Decoding is strict, as geth's is: a field of the wrong shape (a list where a string belongs),
the wrong width (a hash that is not 32 bytes, an address that is not 20, a bloom that is not
256, a nonce that is not 8), an integer with leading zero bytes or wider than its type, or a
wrong field count raises :class:`~vmstack.errors.InvalidBlock` naming the field. Encoding
checks the values it is given and raises ``ValueError`` for a record that cannot be encoded
(a negative integer, a 19-byte address): a bad record is a caller's mistake, not bad data.

Header optional fields follow the geth rule: trailing absent (``None``) fields are not
written, and an absent field followed by a present one is written as the empty string (so an
absent integer reads back as 0).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Self, TypeAlias, TypeVar

import attrs
import rlp

from vmstack.cchain.crypto import keccak256, recover_address, sign_hash
from vmstack.cchain.rlpbytes import check_rlp
from vmstack.errors import InvalidBlock

__all__ = [
    "EMPTY_BLOOM",
    "EMPTY_EXT_DATA_HASH",
    "EMPTY_ROOT",
    "EMPTY_UNCLE_HASH",
    "ZERO_ADDRESS",
    "ZERO_HASH",
    "AccessListTx",
    "AccessTuple",
    "AnyHeader",
    "AvalancheHeader",
    "Authorization",
    "BlobTx",
    "Block",
    "Body",
    "DynamicFeeTx",
    "Header",
    "LegacyTx",
    "Log",
    "RLPItem",
    "Receipt",
    "SetCodeTx",
    "Transaction",
    "Withdrawal",
    "decode_rlp",
    "decode_transaction",
    "logs_bloom",
    "recover_sender",
    "sign_transaction",
    "transaction_from_item",
]

RLPItem: TypeAlias = bytes | list["RLPItem"]
"""A raw RLP item: a byte string or a list of raw items (``rlp.decode`` with no sedes)."""

ZERO_HASH = bytes(32)
ZERO_ADDRESS = bytes(20)
EMPTY_BLOOM = bytes(256)
EMPTY_ROOT = keccak256(b"\x80")
"""Root of an empty hexary trie: keccak256(rlp(b""))."""
EMPTY_UNCLE_HASH = keccak256(b"\xc0")
"""Uncle hash of a block without uncles: keccak256(rlp([]))."""
EMPTY_EXT_DATA_HASH = keccak256(b"\x80")
"""coreth's ExtDataHash of empty extData: keccak256(rlp(b"")) (it equals EMPTY_ROOT)."""


# --- field kinds: one decoder and one encoder per RLP shape ------------------------------

Decoder = Callable[[RLPItem, str], Any]
Encoder = Callable[[Any, str], RLPItem]


def _string(item: RLPItem, what: str) -> bytes:
    if type(item) is not bytes:
        raise InvalidBlock(f"{what} must be an RLP string, found a list")
    return item


def _items(item: RLPItem, what: str) -> list[RLPItem]:
    if type(item) is not list:
        raise InvalidBlock(f"{what} must be an RLP list, found a string")
    return item


def _fixed_decoder(width: int) -> Decoder:
    def decode(item: RLPItem, what: str) -> bytes:
        if type(item) is not bytes or len(item) != width:
            shape = f"{len(item)} bytes" if type(item) is bytes else "a list"
            raise InvalidBlock(f"{what} must be {width} bytes, found {shape}")
        return item

    return decode


def _fixed_encoder(width: int) -> Encoder:
    def encode(value: Any, what: str) -> RLPItem:
        if type(value) is not bytes or len(value) != width:
            raise ValueError(f"{what} must be {width} bytes")
        return value

    return encode


def _uint_decoder(bits: int) -> Decoder:
    max_bytes = bits // 8

    def decode(item: RLPItem, what: str) -> int:
        if type(item) is not bytes:
            raise InvalidBlock(f"{what} must be an integer string, found a list")
        if not item:
            return 0
        if len(item) > max_bytes:
            raise InvalidBlock(f"{what} is {len(item)} bytes, wider than uint{bits}")
        if item[0] == 0:
            raise InvalidBlock(f"{what} is a non-canonical integer (leading zero bytes)")
        return int.from_bytes(item, "big")

    return decode


def _uint_encoder(bits: int) -> Encoder:
    def encode(value: Any, what: str) -> RLPItem:
        if type(value) is not int or value < 0 or value >> bits:
            raise ValueError(f"{what} must be an int in [0, 2**{bits})")
        return value.to_bytes((value.bit_length() + 7) // 8, "big")

    return encode


def _bytes_encoder(value: Any, what: str) -> RLPItem:
    if type(value) is not bytes:
        raise ValueError(f"{what} must be bytes")
    return value


def _to_decoder(item: RLPItem, what: str) -> bytes | None:
    if type(item) is not bytes or len(item) not in (0, 20):
        shape = f"{len(item)} bytes" if type(item) is bytes else "a list"
        raise InvalidBlock(f"{what} must be empty (contract creation) or 20 bytes, found {shape}")
    return item or None


def _to_encoder(value: Any, what: str) -> RLPItem:
    if value is None:
        return b""
    if type(value) is not bytes or len(value) != 20:
        raise ValueError(f"{what} must be None or 20 bytes")
    return value


_decode_hash = _fixed_decoder(32)
_encode_hash = _fixed_encoder(32)


@attrs.frozen
class Kind:
    """How one field is written in RLP: its decoder, its encoder, and a name for messages."""

    name: str
    decode: Decoder
    encode: Encoder


HASH = Kind("hash", _decode_hash, _encode_hash)
ADDRESS = Kind("address", _fixed_decoder(20), _fixed_encoder(20))
BLOOM = Kind("bloom", _fixed_decoder(256), _fixed_encoder(256))
NONCE = Kind("nonce", _fixed_decoder(8), _fixed_encoder(8))
UINT8 = Kind("uint8", _uint_decoder(8), _uint_encoder(8))
UINT32 = Kind("uint32", _uint_decoder(32), _uint_encoder(32))
UINT64 = Kind("uint64", _uint_decoder(64), _uint_encoder(64))
UINT256 = Kind("uint256", _uint_decoder(256), _uint_encoder(256))
BYTES = Kind("bytes", _string, _bytes_encoder)
TO = Kind("to", _to_decoder, _to_encoder)


def _field(kind: Kind, default: Any, *, optional: bool = False) -> Any:
    return attrs.field(default=default, metadata={"rlp": kind, "optional": optional})


_Spec = tuple[tuple[str, Decoder, Encoder, bool, str], ...]
"""Per field: name, decoder, encoder, optional, and its label for messages."""


def _record_kind(cls: Any) -> Kind:
    """A :class:`Kind` for a nested record declared with ``_field``."""

    def decode(item: RLPItem, what: str) -> Any:
        return cls.from_items(item)

    def encode(value: Any, what: str) -> RLPItem:
        if not isinstance(value, cls):
            raise ValueError(f"{what} must be a {cls.__name__}")
        return value.to_items()  # type: ignore[no-any-return]

    return Kind(cls.__name__, decode, encode)


def _list_kind(inner: Kind) -> Kind:
    """A :class:`Kind` for an RLP list of ``inner`` values, read into a tuple."""

    def decode(item: RLPItem, what: str) -> tuple[Any, ...]:
        values: list[Any] = []
        try:
            for element in _items(item, what):
                values.append(inner.decode(element, what))
        except InvalidBlock as exc:
            raise InvalidBlock(f"{what}[{len(values)}]: {exc.reason}") from None
        return tuple(values)

    def encode(value: Any, what: str) -> RLPItem:
        return [inner.encode(element, what) for element in value]

    return Kind(f"list of {inner.name}", decode, encode)


HASHES = _list_kind(HASH)


class _Record:
    """Shared RLP plumbing of the records: fields come from the attrs declaration.

    Field labels for messages are built once per class (not per call), and an error in a
    nested record is re-raised with the caller's context in front.
    """

    __slots__ = ()
    _SPEC: ClassVar[_Spec]
    _REQUIRED: ClassVar[int]
    _LABEL: ClassVar[str]
    _VALUES: ClassVar[operator.attrgetter[tuple[Any, ...]]]

    def to_items(self) -> list[RLPItem]:
        """The record as a raw RLP list (trailing absent optional fields left out)."""
        spec = self._SPEC
        values = self._VALUES(self)
        last = len(values)
        while last > self._REQUIRED and values[last - 1] is None:
            last -= 1
        items: list[RLPItem] = []
        for (_, decode, encode, optional, label), value in zip(spec[:last], values,
                                                               strict=False):
            if value is None and optional:
                # geth writes an absent optional field before a present one as empty; only
                # a field that reads an empty value back may be absent there.
                try:
                    decode(b"", label)
                except InvalidBlock:
                    raise ValueError(f"{label} is absent but a later optional field is "
                                     "present: set it too") from None
                items.append(b"")
            else:
                items.append(encode(value, label))
        return items

    @classmethod
    def from_items(cls, item: RLPItem, what: str | None = None) -> Self:
        """The record from a raw RLP list; ``InvalidBlock`` for a wrong shape, count or width.

        ``what`` (e.g. ``"transaction 3"``) is put in front of any error message.
        """
        spec = cls._SPEC
        if type(item) is not list or not cls._REQUIRED <= len(item) <= len(spec):
            raise cls._shape_error(item, what)
        try:
            return cls(
                *[
                    decode(value, label)
                    for (_, decode, _, _, label), value in zip(spec, item, strict=False)
                ]
            )
        except InvalidBlock as exc:
            if what is None:
                raise
            raise InvalidBlock(f"{what}: {exc.reason}") from None

    @classmethod
    def _shape_error(cls, item: RLPItem, what: str | None) -> InvalidBlock:
        label = cls._LABEL if what is None else f"{what}: {cls._LABEL}"
        if type(item) is not list:
            return InvalidBlock(f"{label} must be an RLP list, found a string")
        total = len(cls._SPEC)
        expected = str(total) if total == cls._REQUIRED else f"{cls._REQUIRED} to {total}"
        return InvalidBlock(f"{label} has {len(item)} fields, expected {expected}")

    def encode(self) -> bytes:
        """The record's RLP bytes."""
        return rlp.encode(self.to_items(), infer_serializer=False)  # type: ignore[no-any-return]

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview) -> Self:
        """The record from its RLP bytes (strict: trailing bytes are an error)."""
        return cls.from_items(decode_rlp(data, cls._LABEL))


def _seal(cls: Any, label: str) -> None:
    """Derive a record class's RLP spec from its attrs fields (done once, at import)."""
    fields = attrs.fields(cls)
    spec: _Spec = tuple(
        (
            a.name,
            a.metadata["rlp"].decode,
            a.metadata["rlp"].encode,
            a.metadata["optional"],
            f"{label} field {a.name}",
        )
        for a in fields
    )
    cls._SPEC = spec
    cls._REQUIRED = sum(1 for field in spec if not field[3])
    cls._LABEL = label
    cls._VALUES = operator.attrgetter(*(a.name for a in fields))
    if any(field[3] for field in spec[: cls._REQUIRED]):
        raise TypeError(f"{cls.__name__}: optional fields must come last")


def require_pyrlp_backend(codec: object) -> None:
    """Refuse to run on an ``rlp`` package whose codec module (``rlp.codec``) switched to the
    rusty-rlp backend: it does so silently when that package is installed, and vmstack's
    strictness (canonical prefixes, the errors it turns into ``InvalidBlock``) is checked
    against pyrlp's own decoder only."""
    if hasattr(codec, "rusty_rlp"):
        raise ImportError(
            "the rlp package is using the rusty-rlp backend, which vmstack does not support: "
            "uninstall rusty-rlp (pip uninstall rusty-rlp)")


require_pyrlp_backend(rlp.codec)


#: Items larger than this are checked for their nesting depth before the ``rlp`` package
#: decodes them: it copies a nested list's bytes once per level, so bytes nested n deep cost
#: n times their size (n is bounded by the recursion limit, about 1000, so below this size
#: an item costs at most ~16 MB).
DEPTH_CHECK_FROM = 16 * 1024


def decode_rlp(data: bytes | bytearray | memoryview, what: str, *,
               max_depth: int | None = None) -> RLPItem:
    """Strictly decode one RLP item to raw items with the ``rlp`` package.

    Non-canonical encodings, truncation and trailing bytes raise ``InvalidBlock`` naming
    ``what``; the ``rlp`` package's own errors never escape. ``max_depth`` is the deepest
    list nesting the structure allows; an item over :data:`DEPTH_CHECK_FROM` bytes nested
    deeper is refused before anything is decoded, so its memory stays proportional to it.
    """
    raw = data if type(data) is bytes else bytes(data)
    if max_depth is not None and len(raw) > DEPTH_CHECK_FROM:
        try:
            check_rlp(raw, max_depth=max_depth)
        except InvalidBlock as framing:
            raise InvalidBlock(f"{what}: malformed RLP: {framing.reason}") from None
    try:
        return rlp.decode(raw, strict=True)  # type: ignore[no-any-return]
    except RecursionError:
        # The rlp package decodes nested lists recursively; bytes from a peer can nest
        # them thousands deep, which is valid RLP but never a block, receipt or transaction.
        raise InvalidBlock(f"{what}: RLP lists nested too deeply to decode") from None
    except rlp.exceptions.RLPException as exc:
        # Only on failure: the framing walk names the offset and the rule that was broken,
        # which the rlp package's messages do not always do.
        try:
            check_rlp(raw)
        except InvalidBlock as framing:
            raise InvalidBlock(f"{what}: malformed RLP: {framing.reason}") from None
        raise InvalidBlock(f"{what}: malformed RLP ({exc})") from None


def _rlp_encode(items: RLPItem) -> bytes:
    return rlp.encode(items, infer_serializer=False)  # type: ignore[no-any-return]


# --- headers ----------------------------------------------------------------------------


class _HeaderBase(_Record):
    """What both header flavours share: the 15 fields of the original Ethereum header."""

    __slots__ = ()
    parent_hash: bytes
    number: int
    time: int

    @property
    def hash(self) -> bytes:
        """keccak256 of this header's RLP (computed on each access)."""
        return keccak256(self.encode())

    @property
    def timestamp(self) -> int:
        """The header time in unix seconds (an alias of ``time``)."""
        return self.time


@attrs.frozen
class Header(_HeaderBase):
    """An Ethereum header, Frontier through Prague (15 to 21 fields).

    Fields 15 onwards are optional and appear by fork: ``base_fee`` (London),
    ``withdrawals_hash`` (Shanghai), ``blob_gas_used``, ``excess_blob_gas``,
    ``parent_beacon_root`` (Cancun), ``requests_hash`` (Prague).
    """

    parent_hash: bytes = _field(HASH, ZERO_HASH)
    uncle_hash: bytes = _field(HASH, EMPTY_UNCLE_HASH)
    coinbase: bytes = _field(ADDRESS, ZERO_ADDRESS)
    state_root: bytes = _field(HASH, EMPTY_ROOT)
    tx_root: bytes = _field(HASH, EMPTY_ROOT)
    receipt_root: bytes = _field(HASH, EMPTY_ROOT)
    bloom: bytes = _field(BLOOM, EMPTY_BLOOM)
    difficulty: int = _field(UINT256, 0)
    number: int = _field(UINT256, 0)
    gas_limit: int = _field(UINT64, 0)
    gas_used: int = _field(UINT64, 0)
    time: int = _field(UINT64, 0)
    extra: bytes = _field(BYTES, b"")
    mix_digest: bytes = _field(HASH, ZERO_HASH)
    nonce: bytes = _field(NONCE, bytes(8))
    base_fee: int | None = _field(UINT256, None, optional=True)
    withdrawals_hash: bytes | None = _field(HASH, None, optional=True)
    blob_gas_used: int | None = _field(UINT64, None, optional=True)
    excess_blob_gas: int | None = _field(UINT64, None, optional=True)
    parent_beacon_root: bytes | None = _field(HASH, None, optional=True)
    requests_hash: bytes | None = _field(HASH, None, optional=True)


@attrs.frozen
class AvalancheHeader(_HeaderBase):
    """An Avalanche C-chain (coreth) header: 16 to 24 fields.

    The 15 Ethereum fields, then ``ext_data_hash`` (always present: the hash of the block's
    atomic extData), then the optional tail by network upgrade: ``base_fee`` (Apricot 3),
    ``ext_data_gas_used`` and ``block_gas_cost`` (Apricot 4), ``blob_gas_used``,
    ``excess_blob_gas`` and ``parent_beacon_root`` (Etna), ``time_milliseconds`` and
    ``min_delay_excess`` (Granite).
    """

    parent_hash: bytes = _field(HASH, ZERO_HASH)
    uncle_hash: bytes = _field(HASH, EMPTY_UNCLE_HASH)
    coinbase: bytes = _field(ADDRESS, ZERO_ADDRESS)
    state_root: bytes = _field(HASH, EMPTY_ROOT)
    tx_root: bytes = _field(HASH, EMPTY_ROOT)
    receipt_root: bytes = _field(HASH, EMPTY_ROOT)
    bloom: bytes = _field(BLOOM, EMPTY_BLOOM)
    difficulty: int = _field(UINT256, 0)
    number: int = _field(UINT256, 0)
    gas_limit: int = _field(UINT64, 0)
    gas_used: int = _field(UINT64, 0)
    time: int = _field(UINT64, 0)
    extra: bytes = _field(BYTES, b"")
    mix_digest: bytes = _field(HASH, ZERO_HASH)
    nonce: bytes = _field(NONCE, bytes(8))
    ext_data_hash: bytes = _field(HASH, EMPTY_EXT_DATA_HASH)
    base_fee: int | None = _field(UINT256, None, optional=True)
    ext_data_gas_used: int | None = _field(UINT256, None, optional=True)
    block_gas_cost: int | None = _field(UINT256, None, optional=True)
    blob_gas_used: int | None = _field(UINT64, None, optional=True)
    excess_blob_gas: int | None = _field(UINT64, None, optional=True)
    parent_beacon_root: bytes | None = _field(HASH, None, optional=True)
    time_milliseconds: int | None = _field(UINT64, None, optional=True)
    min_delay_excess: int | None = _field(UINT64, None, optional=True)


_seal(Header, "header")
_seal(AvalancheHeader, "header")

AnyHeader: TypeAlias = Header | AvalancheHeader


# --- withdrawals, access lists, authorizations -------------------------------------------


@attrs.frozen
class Withdrawal(_Record):
    """An EIP-4895 withdrawal: ``[index, validator_index, address, amount]`` (amount in gwei)."""

    index: int = _field(UINT64, 0)
    validator_index: int = _field(UINT64, 0)
    address: bytes = _field(ADDRESS, ZERO_ADDRESS)
    amount: int = _field(UINT64, 0)


@attrs.frozen
class AccessTuple(_Record):
    """One EIP-2930 access-list entry: an address and the storage keys it will touch."""

    address: bytes = _field(ADDRESS, ZERO_ADDRESS)
    storage_keys: tuple[bytes, ...] = _field(HASHES, ())


@attrs.frozen
class Authorization(_Record):
    """An EIP-7702 set-code authorization, signed by the account that delegates."""

    chain_id: int = _field(UINT256, 0)
    address: bytes = _field(ADDRESS, ZERO_ADDRESS)
    nonce: int = _field(UINT64, 0)
    y_parity: int = _field(UINT8, 0)
    r: int = _field(UINT256, 0)
    s: int = _field(UINT256, 0)

    def signing_hash(self) -> bytes:
        """keccak256(0x05 || rlp([chain_id, address, nonce])), what the authority signs."""
        return keccak256(b"\x05" + _rlp_encode(self.to_items()[:3]))

    def authority(self) -> bytes:
        """The address that signed this authorization (``InvalidBlock`` if it cannot be)."""
        return recover_address(self.signing_hash(), self.y_parity, self.r, self.s)


_seal(Withdrawal, "withdrawal")
_seal(AccessTuple, "access list entry")
_seal(Authorization, "authorization")

ACCESS_LIST = _list_kind(_record_kind(AccessTuple))
AUTH_LIST = _list_kind(_record_kind(Authorization))


# --- transactions -----------------------------------------------------------------------


class _TxBase(_Record):
    """What every transaction type shares: canonical bytes, hash, signing and sender."""

    __slots__ = ()
    TYPE: ClassVar[int]
    r: int
    s: int

    def encode(self) -> bytes:
        """The canonical transaction bytes (what the transactions trie stores and the hash
        covers): the RLP list for a legacy transaction, ``type || rlp(fields)`` otherwise."""
        return bytes((self.TYPE,)) + _rlp_encode(self.to_items())

    def block_item(self) -> RLPItem:
        """The transaction as an item of a block's transaction list (typed: an RLP string)."""
        return self.encode()

    @property
    def hash(self) -> bytes:
        """The transaction hash: keccak256 of :meth:`encode` (computed on each access)."""
        return keccak256(self.encode())

    def _check_chain(self, chain_id: int | None) -> int:
        own: int = getattr(self, "chain_id")  # noqa: B009
        if chain_id is not None and chain_id != own:
            raise InvalidBlock(f"transaction chain id {own} does not match chain {chain_id}")
        return own

    def signing_hash(self, chain_id: int | None = None) -> bytes:
        """The hash the sender signs: ``keccak256(type || rlp(fields without signature))``.

        A typed transaction carries its chain id; ``chain_id``, if given, must match it.
        """
        self._check_chain(chain_id)
        return keccak256(bytes((self.TYPE,)) + _rlp_encode(self.to_items()[:-3]))

    def sender(self, chain_id: int | None = None) -> bytes:
        """The 20-byte sender, recovered from the signature (``InvalidBlock`` if invalid).

        With ``chain_id``, a transaction signed for another chain is rejected.
        """
        digest = self.signing_hash(chain_id)
        return recover_address(digest, getattr(self, "y_parity"), self.r, self.s)  # noqa: B009

    def signed(self, y_parity: int, r: int, s: int) -> Self:
        """A copy carrying the signature ``(y_parity, r, s)``."""
        return attrs.evolve(self, y_parity=y_parity, r=r, s=s)  # type: ignore[misc]

    def sign(self, private_key: bytes | int, chain_id: int | None = None) -> Self:
        """A copy signed with ``private_key`` (deterministic, low-s) for its own chain id;
        ``chain_id``, if given, must equal it (else ``ValueError``)."""
        own = getattr(self, "chain_id")  # noqa: B009
        if chain_id is not None and chain_id != own:
            raise ValueError(f"transaction chain id {own} differs from {chain_id}")
        return self.signed(*sign_hash(self.signing_hash(), private_key))


@attrs.frozen
class LegacyTx(_TxBase):
    """A pre-EIP-2718 transaction: ``[nonce, gas_price, gas, to, value, data, v, r, s]``.

    ``v`` is 27/28 for an unprotected signature and ``chain_id * 2 + 35 + y_parity`` for an
    EIP-155 one; ``to`` is ``None`` for a contract creation.
    """

    TYPE: ClassVar[int] = 0
    nonce: int = _field(UINT64, 0)
    gas_price: int = _field(UINT256, 0)
    gas: int = _field(UINT64, 0)
    to: bytes | None = _field(TO, None)
    value: int = _field(UINT256, 0)
    data: bytes = _field(BYTES, b"")
    v: int = _field(UINT256, 0)
    r: int = _field(UINT256, 0)
    s: int = _field(UINT256, 0)

    def encode(self) -> bytes:
        return _rlp_encode(self.to_items())

    def block_item(self) -> RLPItem:
        return self.to_items()

    @property
    def chain_id(self) -> int | None:
        """The chain id an EIP-155 ``v`` commits to; ``None`` for an unprotected one."""
        if self.v >= 35:
            return (self.v - 35) // 2
        return None

    @property
    def y_parity(self) -> int:
        """The signature's y parity, decoded from ``v`` (``InvalidBlock`` for a bad ``v``)."""
        if self.v in (27, 28):
            return self.v - 27
        if self.v >= 35:
            return (self.v - 35) % 2
        raise InvalidBlock(f"legacy transaction v = {self.v} is neither 27/28 nor EIP-155")

    def signing_hash(self, chain_id: int | None = None) -> bytes:
        """``keccak256(rlp([nonce, gas_price, gas, to, value, data] + [chain_id, 0, 0]))``
        for EIP-155 (``chain_id`` given), without the last three for an unprotected one."""
        items = self.to_items()[:6]
        if chain_id is not None:
            items += [_uint_encoder(256)(chain_id, "chain id"), b"", b""]
        return keccak256(_rlp_encode(items))

    def sender(self, chain_id: int | None = None) -> bytes:
        """The sender, for the chain id ``v`` commits to (EIP-155) or none (27/28).

        With ``chain_id``, a protected transaction for another chain is rejected; an
        unprotected one is accepted, as geth's signers do.
        """
        parity = self.y_parity
        own = self.chain_id
        if own is not None and chain_id is not None and own != chain_id:
            raise InvalidBlock(f"transaction chain id {own} does not match chain {chain_id}")
        return recover_address(self.signing_hash(own), parity, self.r, self.s)

    def signed(self, y_parity: int, r: int, s: int, chain_id: int | None = None) -> Self:
        """A copy signed with ``(y_parity, r, s)``; ``v`` encodes ``chain_id`` if given."""
        v = 27 + y_parity if chain_id is None else chain_id * 2 + 35 + y_parity
        return attrs.evolve(self, v=v, r=r, s=s)

    def sign(self, private_key: bytes | int, chain_id: int | None = None) -> Self:
        """A copy signed with ``private_key``: EIP-155 for ``chain_id``, unprotected (v = 27/28)
        when it is ``None``."""
        parity, r, s = sign_hash(self.signing_hash(chain_id), private_key)
        return self.signed(parity, r, s, chain_id)


@attrs.frozen
class AccessListTx(_TxBase):
    """An EIP-2930 transaction (type 1)."""

    TYPE: ClassVar[int] = 1
    chain_id: int = _field(UINT256, 0)
    nonce: int = _field(UINT64, 0)
    gas_price: int = _field(UINT256, 0)
    gas: int = _field(UINT64, 0)
    to: bytes | None = _field(TO, None)
    value: int = _field(UINT256, 0)
    data: bytes = _field(BYTES, b"")
    access_list: tuple[AccessTuple, ...] = _field(ACCESS_LIST, ())
    y_parity: int = _field(UINT256, 0)
    r: int = _field(UINT256, 0)
    s: int = _field(UINT256, 0)


@attrs.frozen
class DynamicFeeTx(_TxBase):
    """An EIP-1559 transaction (type 2)."""

    TYPE: ClassVar[int] = 2
    chain_id: int = _field(UINT256, 0)
    nonce: int = _field(UINT64, 0)
    max_priority_fee_per_gas: int = _field(UINT256, 0)
    max_fee_per_gas: int = _field(UINT256, 0)
    gas: int = _field(UINT64, 0)
    to: bytes | None = _field(TO, None)
    value: int = _field(UINT256, 0)
    data: bytes = _field(BYTES, b"")
    access_list: tuple[AccessTuple, ...] = _field(ACCESS_LIST, ())
    y_parity: int = _field(UINT256, 0)
    r: int = _field(UINT256, 0)
    s: int = _field(UINT256, 0)


@attrs.frozen
class BlobTx(_TxBase):
    """An EIP-4844 blob transaction (type 3), as a block carries it (no sidecar).

    ``to`` is required: a blob transaction cannot create a contract.
    """

    TYPE: ClassVar[int] = 3
    chain_id: int = _field(UINT256, 0)
    nonce: int = _field(UINT64, 0)
    max_priority_fee_per_gas: int = _field(UINT256, 0)
    max_fee_per_gas: int = _field(UINT256, 0)
    gas: int = _field(UINT64, 0)
    to: bytes = _field(ADDRESS, ZERO_ADDRESS)
    value: int = _field(UINT256, 0)
    data: bytes = _field(BYTES, b"")
    access_list: tuple[AccessTuple, ...] = _field(ACCESS_LIST, ())
    max_fee_per_blob_gas: int = _field(UINT256, 0)
    blob_versioned_hashes: tuple[bytes, ...] = _field(HASHES, ())
    y_parity: int = _field(UINT256, 0)
    r: int = _field(UINT256, 0)
    s: int = _field(UINT256, 0)


@attrs.frozen
class SetCodeTx(_TxBase):
    """An EIP-7702 set-code transaction (type 4); ``to`` is required."""

    TYPE: ClassVar[int] = 4
    chain_id: int = _field(UINT256, 0)
    nonce: int = _field(UINT64, 0)
    max_priority_fee_per_gas: int = _field(UINT256, 0)
    max_fee_per_gas: int = _field(UINT256, 0)
    gas: int = _field(UINT64, 0)
    to: bytes = _field(ADDRESS, ZERO_ADDRESS)
    value: int = _field(UINT256, 0)
    data: bytes = _field(BYTES, b"")
    access_list: tuple[AccessTuple, ...] = _field(ACCESS_LIST, ())
    authorization_list: tuple[Authorization, ...] = _field(AUTH_LIST, ())
    y_parity: int = _field(UINT256, 0)
    r: int = _field(UINT256, 0)
    s: int = _field(UINT256, 0)


_seal(LegacyTx, "legacy transaction")
_seal(AccessListTx, "access-list transaction")
_seal(DynamicFeeTx, "dynamic-fee transaction")
_seal(BlobTx, "blob transaction")
_seal(SetCodeTx, "set-code transaction")

Transaction: TypeAlias = LegacyTx | AccessListTx | DynamicFeeTx | BlobTx | SetCodeTx
"""Any transaction a block can carry."""

_TYPED: dict[int, Any] = {cls.TYPE: cls for cls in (AccessListTx, DynamicFeeTx, BlobTx, SetCodeTx)}


def _typed_from_bytes(data: bytes, what: str) -> Transaction:
    if len(data) < 2:
        raise InvalidBlock(f"{what}: typed transaction of {len(data)} bytes is too short")
    cls = _TYPED.get(data[0])
    if cls is None:
        raise InvalidBlock(f"{what}: transaction type {data[0]:#04x} is not supported")
    items = decode_rlp(data[1:], f"{what}: typed payload", max_depth=4)
    return cls.from_items(items, what)  # type: ignore[no-any-return]


def transaction_from_item(item: RLPItem, what: str = "transaction") -> Transaction:
    """A transaction from an item of a block's transaction list.

    A list is a legacy transaction; a string is a typed one, ``type || rlp(fields)``.
    """
    if type(item) is list:
        return LegacyTx.from_items(item, what)
    return _typed_from_bytes(item, what)  # type: ignore[arg-type]


def decode_transaction(data: bytes | bytearray | memoryview) -> Transaction:
    """A transaction from its canonical bytes (:meth:`encode`): an RLP list or typed bytes."""
    raw = data if type(data) is bytes else bytes(data)
    if raw and raw[0] >= 0xC0:
        return LegacyTx.from_items(decode_rlp(raw, "transaction", max_depth=1))
    return _typed_from_bytes(raw, "transaction")


def recover_sender(tx: Transaction, chain_id: int | None = None) -> bytes:
    """The 20-byte sender of ``tx`` (see :meth:`LegacyTx.sender`); ``InvalidBlock`` if the
    signature is invalid or made for a chain other than ``chain_id``."""
    return tx.sender(chain_id)


TxT = TypeVar("TxT", bound=_TxBase)


def sign_transaction(tx: TxT, private_key: bytes | int, chain_id: int | None) -> TxT:
    """``tx`` signed with ``private_key`` for ``chain_id`` (deterministic, low-s).

    A legacy transaction is EIP-155 protected when ``chain_id`` is given and unprotected when
    it is ``None``; a typed transaction signs for its own chain id, which ``chain_id`` (if
    given) must equal, else ``ValueError``. Returns a transaction of the same type.
    """
    return tx.sign(private_key, chain_id)


# --- logs and receipts ------------------------------------------------------------------


@attrs.frozen
class Log(_Record):
    """An event log: ``[address, topics, data]``; the rest is derived from its block."""

    address: bytes = _field(ADDRESS, ZERO_ADDRESS)
    topics: tuple[bytes, ...] = _field(HASHES, ())
    data: bytes = _field(BYTES, b"")


_seal(Log, "log")

LOGS = _list_kind(_record_kind(Log))


def _add_to_bloom(bloom: bytearray, value: bytes) -> None:
    digest = keccak256(value)
    for i in (0, 2, 4):
        bit = ((digest[i] << 8) | digest[i + 1]) & 2047
        bloom[255 - bit // 8] |= 1 << (bit % 8)


def logs_bloom(logs: Sequence[Log]) -> bytes:
    """The 256-byte bloom filter of ``logs`` (each address and topic sets three bits)."""
    bloom = bytearray(256)
    for log in logs:
        _add_to_bloom(bloom, log.address)
        for topic in log.topics:
            _add_to_bloom(bloom, topic)
    return bytes(bloom)


_STATUS_FAILED = b""
_STATUS_SUCCESS = b"\x01"


@attrs.frozen
class Receipt:
    """A transaction receipt, with the fields a node derives from its block.

    Consensus fields: ``tx_type``, the outcome (``status`` 1/0 since Byzantium, or a 32-byte
    ``post_state`` root before it; exactly one is set), ``cumulative_gas_used``, ``logs``. The
    storage form (geth's rawdb) is ``[post_state_or_status, cumulative_gas_used, logs]``; the
    consensus form adds the bloom and, for a typed transaction, the type byte in front.
    The derived fields (``None`` until :func:`vmstack.cchain.codec.derive_receipts` fills
    them) are not encoded in either form.
    """

    status: int | None = 1
    cumulative_gas_used: int = 0
    logs: tuple[Log, ...] = ()
    post_state: bytes | None = None
    tx_type: int = 0
    bloom: bytes | None = None
    tx_hash: bytes | None = None
    transaction_index: int | None = None
    block_hash: bytes | None = None
    block_number: int | None = None
    gas_used: int | None = None
    effective_gas_price: int | None = None
    blob_gas_used: int | None = None
    contract_address: bytes | None = None
    first_log_index: int | None = None

    def _outcome_item(self) -> bytes:
        if self.post_state is not None:
            if self.status is not None or len(self.post_state) != 32:
                raise ValueError("a receipt has either a 32-byte post_state or a status")
            return self.post_state
        if self.status == 1:
            return _STATUS_SUCCESS
        if self.status == 0:
            return _STATUS_FAILED
        raise ValueError("receipt status must be 0 or 1")

    def storage_items(self) -> list[RLPItem]:
        """The storage form as raw items: ``[post_state_or_status, cumulative_gas, logs]``."""
        return [
            self._outcome_item(),
            UINT64.encode(self.cumulative_gas_used, "receipt cumulative gas used"),
            LOGS.encode(self.logs, "receipt logs"),
        ]

    def encode(self) -> bytes:
        """The consensus form: ``[outcome, cumulative_gas, bloom, logs]``, with the type byte
        in front for a typed transaction (what the receipts trie stores)."""
        bloom = self.bloom if self.bloom is not None else logs_bloom(self.logs)
        outcome, gas, logs = self.storage_items()
        payload = _rlp_encode([outcome, gas, bloom, logs])
        return payload if self.tx_type == 0 else bytes((self.tx_type,)) + payload

    @classmethod
    def from_storage_items(cls, item: RLPItem, what: str = "receipt") -> Receipt:
        """A receipt from its storage form (no type, no bloom: :func:`derive_receipts` adds
        them)."""
        fields = _items(item, what)
        if len(fields) != 3:
            raise InvalidBlock(f"{what} has {len(fields)} fields, expected 3")
        outcome = _string(fields[0], f"{what} status")
        status: int | None
        post_state: bytes | None = None
        if len(outcome) == 32:
            status, post_state = None, outcome
        elif outcome == _STATUS_SUCCESS:
            status = 1
        elif outcome == _STATUS_FAILED:
            status = 0
        else:
            raise InvalidBlock(f"{what} status must be 0x, 0x01 or a 32-byte state root")
        return cls(
            status=status,
            cumulative_gas_used=UINT64.decode(fields[1], f"{what} cumulative gas used"),
            logs=LOGS.decode(fields[2], f"{what} logs"),
            post_state=post_state,
        )


# --- bodies and blocks ------------------------------------------------------------------


@attrs.frozen
class Body:
    """A block's body. Which fields a flavour writes is declared once by the flavour.

    Ethereum writes ``[transactions, uncles]`` plus ``withdrawals`` from Shanghai on (``None``
    before); Avalanche writes ``[transactions, uncles, version, ext_data]`` and has no
    withdrawals. A field the flavour does not declare must stay ``None``.
    """

    transactions: tuple[Transaction, ...] = ()
    uncles: tuple[AnyHeader, ...] = ()
    withdrawals: tuple[Withdrawal, ...] | None = None
    version: int | None = None
    ext_data: bytes | None = None


def _header_hash(block: Block) -> bytes:
    return block.header.hash


@attrs.frozen
class Block:
    """A block: a header and a body, and its hash.

    ``hash`` is keccak256 of the header's bytes. It is computed from the header unless given;
    the decoders give it from the header bytes as they stand (no re-encoding).
    """

    header: AnyHeader
    body: Body = attrs.field(factory=Body)
    hash: bytes = attrs.field(default=attrs.Factory(_header_hash, takes_self=True), kw_only=True)

    @property
    def transactions(self) -> tuple[Transaction, ...]:
        return self.body.transactions

    @property
    def uncles(self) -> tuple[AnyHeader, ...]:
        return self.body.uncles

    @property
    def withdrawals(self) -> tuple[Withdrawal, ...] | None:
        return self.body.withdrawals

    @property
    def number(self) -> int:
        return self.header.number

    @property
    def parent_hash(self) -> bytes:
        return self.header.parent_hash

    @property
    def timestamp(self) -> int:
        return self.header.time
