"""Transactions: the legacy and the four typed kinds, their access lists and authorizations.

Each kind's canonical bytes (what the transactions trie stores and its hash covers), its
signing hash, its signing and the recovery of its sender are defined here, and
:func:`decode_transaction` / :func:`transaction_from_item` are the one way to read a
transaction from bytes or from a block's transaction list.
"""

from __future__ import annotations

from typing import Any, ClassVar, Self, TypeAlias, TypeVar

import attrs

from vmstack.cchain.crypto import recover_address, sign_hash_and_address
from vmstack.cchain.rlpbytes import encode_item, list_prefix
from vmstack.cchain.types.fields import (
    ADDRESS,
    BYTES,
    HASHES,
    TO,
    UINT8,
    UINT64,
    UINT256,
    ZERO_ADDRESS,
    RLPItem,
    _field,
    _list_kind,
    _Record,
    _record_kind,
    _seal,
    _uint_encoder,
    decode_rlp,
)
from vmstack.errors import InvalidBlock
from vmstack.keccak import keccak256
from vmstack.verifycache import VerificationCache

#: Each transaction object this process signed (:meth:`LegacyTx.sign` and the typed kinds'
#: ``sign``), by its identity: ``(the object, its sender, its encoding)``, both known when it
#: was signed, so ``sender`` and ``encode`` of that very object neither recover nor encode
#: again. Identity, not equality: an equal twin (even one whose fields compare equal with
#: other types) is another object, encoded and recovered as any other; the entry holds the
#: object, so its identity cannot be reused while the entry lives.
SIGNED_HERE: VerificationCache[int, tuple[object, bytes, bytes]] = VerificationCache(
    "transactions signed here", 1 << 14
)


def _known(tx: object) -> tuple[object, bytes, bytes] | None:
    """The entry :data:`SIGNED_HERE` holds for this very object, or ``None``."""
    entry = SIGNED_HERE.get(id(tx))
    if entry is not None and entry[0] is tx:
        return entry
    return None


def _uint_item(value: int) -> bytes:
    return value.to_bytes((value.bit_length() + 7) // 8, "big")


def _payload(encoded_list: bytes) -> bytes:
    """The payload of an RLP list's encoding (its prefix cut off)."""
    first = encoded_list[0]
    return encoded_list[1 + first - 0xF7 if first > 0xF7 else 1 :]


def _with_signature(payload: bytes, v: int, r: int, s: int) -> bytes:
    """The RLP list of the fields whose encoded payload is ``payload`` followed by the
    signature ``(v, r, s)``: the fields are encoded once, for the signing hash and the
    signed bytes alike, and each signature value is one RLP string appended to them."""
    full = payload + b"".join([encode_item(_uint_item(value)) for value in (v, r, s)])
    return list_prefix(len(full)) + full


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
        return keccak256(b"\x05" + encode_item(self.to_items()[:3]))

    def authority(self) -> bytes:
        """The address that signed this authorization (``InvalidBlock`` if it cannot be)."""
        return recover_address(self.signing_hash(), self.y_parity, self.r, self.s)


_seal(AccessTuple, "access list entry")
_seal(Authorization, "authorization")

ACCESS_LIST = _list_kind(_record_kind(AccessTuple))
AUTH_LIST = _list_kind(_record_kind(Authorization))


def _replace_signature(tx: Any, first: int, r: int, s: int) -> Any:
    """A copy of ``tx`` whose last three fields (the signature: ``y_parity`` or ``v``,
    ``r``, ``s``) are ``(first, r, s)``: what ``attrs.evolve`` gives, through the
    constructor with the fields in order (a sealed transaction class's ``_VALUES`` lists
    every field in declaration order). A class not sealed itself (a subclass, which may
    declare more fields) goes through ``attrs.evolve``."""
    cls = type(tx)
    values = cls.__dict__.get("_VALUES")
    if values is None:
        names = [field.name for field in attrs.fields(cls)[-3:]]
        return attrs.evolve(tx, **dict(zip(names, (first, r, s), strict=True)))
    return cls(*values(tx)[:-3], first, r, s)


class _TxBase(_Record):
    """What every transaction type shares: canonical bytes, hash, signing and sender."""

    __slots__ = ()
    TYPE: ClassVar[int]
    r: int
    s: int

    def encode(self) -> bytes:
        """The canonical transaction bytes (what the transactions trie stores and the hash
        covers): the RLP list for a legacy transaction, ``type || rlp(fields)`` otherwise."""
        known = _known(self)
        if known is not None:
            return known[2]
        return bytes((self.TYPE,)) + encode_item(self.to_items())

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
        return keccak256(bytes((self.TYPE,)) + encode_item(self.to_items()[:-3]))

    def sender(self, chain_id: int | None = None) -> bytes:
        """The 20-byte sender, recovered from the signature (``InvalidBlock`` if invalid).

        With ``chain_id``, a transaction signed for another chain is rejected.
        """
        self._check_chain(chain_id)
        known = _known(self)
        if known is not None:
            return known[1]
        digest = self.signing_hash()
        return recover_address(digest, getattr(self, "y_parity"), self.r, self.s)  # noqa: B009

    def signed(self, y_parity: int, r: int, s: int) -> Self:
        """A copy carrying the signature ``(y_parity, r, s)`` (its other fields this one's)."""
        copy: Self = _replace_signature(self, y_parity, r, s)
        return copy

    def sign(self, private_key: bytes | int, chain_id: int | None = None) -> Self:
        """A copy signed with ``private_key`` (deterministic, low-s) for its own chain id;
        ``chain_id``, if given, must equal it (else ``ValueError``)."""
        own = getattr(self, "chain_id")  # noqa: B009
        if chain_id is not None and chain_id != own:
            raise ValueError(f"transaction chain id {own} differs from {chain_id}")
        kind = bytes((self.TYPE,))
        unsigned = kind + encode_item(self.to_items()[:-3])
        parity, r, s, sender = sign_hash_and_address(keccak256(unsigned), private_key)
        signed = self.signed(parity, r, s)
        encoding = kind + _with_signature(_payload(unsigned[1:]), parity, r, s)
        SIGNED_HERE.put(id(signed), (signed, sender, encoding))
        return signed


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
        known = _known(self)
        if known is not None:
            return known[2]
        return encode_item(self.to_items())

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
        return keccak256(encode_item(items))

    def sender(self, chain_id: int | None = None) -> bytes:
        """The sender, for the chain id ``v`` commits to (EIP-155) or none (27/28).

        With ``chain_id``, a protected transaction for another chain is rejected; an
        unprotected one is accepted, as geth's signers do.
        """
        parity = self.y_parity
        own = self.chain_id
        if own is not None and chain_id is not None and own != chain_id:
            raise InvalidBlock(f"transaction chain id {own} does not match chain {chain_id}")
        known = _known(self)
        if known is not None:
            return known[1]
        return recover_address(self.signing_hash(own), parity, self.r, self.s)

    def signed(self, y_parity: int, r: int, s: int, chain_id: int | None = None) -> Self:
        """A copy signed with ``(y_parity, r, s)``; ``v`` encodes ``chain_id`` if given."""
        v = 27 + y_parity if chain_id is None else chain_id * 2 + 35 + y_parity
        copy: Self = _replace_signature(self, v, r, s)
        return copy

    def sign(self, private_key: bytes | int, chain_id: int | None = None) -> Self:
        """A copy signed with ``private_key``: EIP-155 for ``chain_id``, unprotected (v = 27/28)
        when it is ``None``."""
        fields = encode_item(self.to_items()[:6])
        hashed = fields
        if chain_id is not None:
            chain = _uint_encoder(256)(chain_id, "chain id")
            # EIP-155 signs the fields followed by [chain_id, 0, 0].
            body = _payload(fields) + _payload(encode_item([chain, b"", b""]))
            hashed = list_prefix(len(body)) + body
        parity, r, s, sender = sign_hash_and_address(keccak256(hashed), private_key)
        signed = self.signed(parity, r, s, chain_id)
        encoding = _with_signature(_payload(fields), signed.v, r, s)
        SIGNED_HERE.put(id(signed), (signed, sender, encoding))
        return signed


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
