"""Post-fork block encodings, byte-compatible with avalanchego's ``vms/proposervm/block``.

avalanchego's linear codec writes, big-endian: a u16 codec version (always 0), a u32 type
ID for the registered interface types, then every field in order — IDs as 32 raw bytes,
integers at their width, byte strings as a u32 length and the bytes. Three block types are
registered::

    0 statelessBlock         parent id | timestamp i64 | P-chain height u64 |
                             certificate | inner block | signature
    1 option                 parent id | inner block
    2 statelessGraniteBlock  parent id | timestamp i64 | P-chain height u64 |
                             certificate | inner block |
                             epoch (P-chain height u64, number u64, start time i64) |
                             signature

A signed block's ID is the sha256 of its bytes without the trailing signature and its
length prefix, so the signature is not part of the ID; an option's ID is the sha256 of all
its bytes. The signature covers the sha256 of a 98-byte :class:`Header`: codec version,
chain ID, parent ID, block ID. A block without a certificate is unsigned (the first
post-fork block, or one that anyone may propose) and must carry no signature.

Decoding is strict, as the codec is: an unknown version or type, a short buffer, trailing
bytes or a bad certificate raise :class:`~vmstack.errors.InvalidBlock` naming the reason.
:func:`decode_block` is avalanchego's ``ParseWithoutVerification``; :func:`parse_block`
is its ``Parse`` (decode, then check the epoch and signature against a chain ID).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable

import attrs

from vmstack.errors import InvalidBlock, InvalidCertificate, InvalidSignature
from vmstack.wrappers.proposer.certificate import (
    MAX_CERTIFICATE_LEN,
    Certificate,
    cb58encode,
    format_node_id,
)
from vmstack.wrappers.proposer.staking import StakingKey

__all__ = [
    "CODEC_VERSION",
    "Epoch",
    "HEADER_LEN",
    "Header",
    "OptionBlock",
    "PostForkBlock",
    "TYPE_GRANITE",
    "TYPE_OPTION",
    "TYPE_POST_FORK",
    "build_option",
    "build_signed",
    "build_unsigned",
    "chain_id_bytes",
    "decode_block",
    "format_id",
    "parse_block",
    "peek_block",
]

#: The only codec version avalanchego registers for proposervm blocks.
CODEC_VERSION = 0
#: Type ID of ``statelessBlock`` (a post-fork block without an epoch).
TYPE_POST_FORK = 0
#: Type ID of ``option`` (a post-fork child of an oracle block).
TYPE_OPTION = 1
#: Type ID of ``statelessGraniteBlock`` (a post-fork block with its epoch).
TYPE_GRANITE = 2
#: Bytes in a signed :class:`Header`.
HEADER_LEN = 98

_ID_LEN = 32
_U32 = struct.Struct(">I")
_PREFIX = struct.Struct(">HI")
_FIXED = struct.Struct(">32sqQ")
_EPOCH = struct.Struct(">QQq")
_OPTION_HEAD = struct.Struct(">HI32s")
_HEADER = struct.Struct(">H32s32s32s")
_INT64 = (-(2**63), 2**63 - 1)
_UINT64_MAX = 2**64 - 1
_UINT32_MAX = 2**32 - 1


def chain_id_bytes(chain_id: bytes | int) -> bytes:
    """The 32-byte chain ID a :class:`Header` carries, from its bytes or from an int taken
    as a 32-byte big-endian number; ``ValueError`` for anything else."""
    if isinstance(chain_id, int) and not isinstance(chain_id, bool):
        if not 0 <= chain_id < 1 << (8 * _ID_LEN):
            raise ValueError(f"an int chain_id must fit in {_ID_LEN} bytes")
        chain_id = chain_id.to_bytes(_ID_LEN, "big")
    if not isinstance(chain_id, bytes) or len(chain_id) != _ID_LEN:
        raise ValueError(f"chain_id must be {_ID_LEN} bytes, got {chain_id!r}")
    return chain_id


def format_id(block_id: bytes) -> str:
    """A 32-byte ID in CB58, as avalanchego prints IDs."""
    if len(block_id) != _ID_LEN:
        raise ValueError(f"an ID is {_ID_LEN} bytes, got {len(block_id)}")
    return cb58encode(block_id)


def _check_id(name: str, value: bytes) -> None:
    if not isinstance(value, bytes) or len(value) != _ID_LEN:
        raise ValueError(f"{name} must be {_ID_LEN} bytes")


def _check_int(name: str, value: int, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name} must be an int in [{low}, {high}], got {value!r}")


def _check_bytes(name: str, value: bytes) -> None:
    if not isinstance(value, bytes) or len(value) > _UINT32_MAX:
        raise ValueError(f"{name} must be bytes of at most {_UINT32_MAX} bytes")


def _packed(data: bytes) -> bytes:
    return _U32.pack(len(data)) + data


@attrs.frozen
class Epoch:
    """The P-chain epoch a Granite block was built in; all zero means "no epoch"."""

    pchain_height: int = 0
    number: int = 0
    start_time: int = 0

    def __attrs_post_init__(self) -> None:
        _check_int("epoch P-chain height", self.pchain_height, 0, _UINT64_MAX)
        _check_int("epoch number", self.number, 0, _UINT64_MAX)
        _check_int("epoch start time", self.start_time, *_INT64)

    @property
    def is_zero(self) -> bool:
        """Whether this is the zero epoch, which a Granite block may not carry."""
        return self.pchain_height == 0 and self.number == 0 and self.start_time == 0


@attrs.frozen
class Header:
    """What a proposer signs: codec version, chain ID, parent ID and block (body) ID."""

    chain_id: bytes
    parent_id: bytes
    body_id: bytes

    def __attrs_post_init__(self) -> None:
        _check_id("chain_id", self.chain_id)
        _check_id("parent_id", self.parent_id)
        _check_id("body_id", self.body_id)

    def __bytes__(self) -> bytes:
        return _HEADER.pack(CODEC_VERSION, self.chain_id, self.parent_id, self.body_id)

    @classmethod
    def decode(cls, data: bytes) -> Header:
        """Decode exactly :data:`HEADER_LEN` bytes; anything else raises ``InvalidBlock``."""
        data = bytes(data)
        if len(data) < 2:
            raise InvalidBlock("too short for a codec version")
        version = int.from_bytes(data[:2], "big")
        if version != CODEC_VERSION:
            raise InvalidBlock(f"unknown codec version {version}")
        if len(data) < HEADER_LEN:
            raise InvalidBlock(
                f"insufficient length: a header is {HEADER_LEN} bytes, got {len(data)}"
            )
        if len(data) > HEADER_LEN:
            raise InvalidBlock(f"trailing bytes: a header is {HEADER_LEN} bytes, got {len(data)}")
        _, chain_id, parent_id, body_id = _HEADER.unpack(data)
        return cls(chain_id, parent_id, body_id)


def _certificate(der: bytes) -> Certificate | None:
    if not der:
        return None
    if len(der) > MAX_CERTIFICATE_LEN:
        # Refused on its length alone, before the parser (and its cache) hashes it.
        raise InvalidBlock(
            f"invalid certificate: {len(der)} bytes, more than {MAX_CERTIFICATE_LEN}"
        )
    try:
        return Certificate.parse(der)
    except InvalidCertificate as error:
        raise InvalidBlock(f"invalid certificate: {error.reason}") from None


@attrs.frozen
class PostForkBlock:
    """A signed or unsigned post-fork block (type 0, or type 2 when it has an ``epoch``).

    The fields are the encoded ones; ``id``, ``certificate_info`` (the parsed certificate)
    and ``proposer`` (its NodeID, ``None`` when unsigned) follow from them, and
    ``bytes(block)`` is the encoding. The constructor checks field ranges (``ValueError``)
    and parses the certificate (``InvalidBlock`` if avalanchego would not); it does not
    check the signature — :meth:`verify` does.
    """

    parent_id: bytes
    timestamp: int
    pchain_height: int
    certificate: bytes
    inner: bytes
    signature: bytes = b""
    epoch: Epoch | None = None
    id: bytes = attrs.field(init=False, repr=False)
    certificate_info: Certificate | None = attrs.field(init=False, repr=False, eq=False)
    _encoded: bytes = attrs.field(init=False, repr=False, eq=False)
    _unsigned_len: int = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        _check_id("parent_id", self.parent_id)
        _check_int("timestamp", self.timestamp, *_INT64)
        _check_int("pchain_height", self.pchain_height, 0, _UINT64_MAX)
        _check_bytes("certificate", self.certificate)
        _check_bytes("inner", self.inner)
        _check_bytes("signature", self.signature)
        if self.epoch is not None and not isinstance(self.epoch, Epoch):
            raise ValueError(f"epoch must be an Epoch or None, got {self.epoch!r}")
        type_id = TYPE_POST_FORK if self.epoch is None else TYPE_GRANITE
        parts = [
            _PREFIX.pack(CODEC_VERSION, type_id),
            _FIXED.pack(self.parent_id, self.timestamp, self.pchain_height),
            _packed(self.certificate),
            _packed(self.inner),
        ]
        if self.epoch is not None:
            parts.append(
                _EPOCH.pack(self.epoch.pchain_height, self.epoch.number, self.epoch.start_time)
            )
        unsigned = b"".join(parts)
        object.__setattr__(self, "_unsigned_len", len(unsigned))
        object.__setattr__(self, "_encoded", unsigned + _packed(self.signature))
        object.__setattr__(self, "id", hashlib.sha256(unsigned).digest())
        object.__setattr__(self, "certificate_info", _certificate(self.certificate))

    @classmethod
    def _decoded(
        cls,
        data: bytes,
        unsigned_len: int,
        parent_id: bytes,
        timestamp: int,
        pchain_height: int,
        certificate: bytes,
        inner: bytes,
        signature: bytes,
        epoch: Epoch | None,
    ) -> PostForkBlock:
        """Build from fields just decoded off ``data``: no range checks, no re-encoding."""
        block = object.__new__(cls)
        for name, value in (
            ("parent_id", parent_id),
            ("timestamp", timestamp),
            ("pchain_height", pchain_height),
            ("certificate", certificate),
            ("inner", inner),
            ("signature", signature),
            ("epoch", epoch),
            ("_encoded", data),
            ("_unsigned_len", unsigned_len),
            ("id", hashlib.sha256(data[:unsigned_len]).digest()),
            ("certificate_info", _certificate(certificate)),
        ):
            object.__setattr__(block, name, value)
        return block

    @property
    def type_id(self) -> int:
        """:data:`TYPE_POST_FORK`, or :data:`TYPE_GRANITE` for a block with an epoch."""
        return TYPE_POST_FORK if self.epoch is None else TYPE_GRANITE

    @property
    def signed(self) -> bool:
        """Whether the block names a proposer (carries a certificate)."""
        return bool(self.certificate)

    @property
    def proposer(self) -> bytes | None:
        """The proposer's NodeID (20 bytes), or ``None`` for an unsigned block."""
        return None if self.certificate_info is None else self.certificate_info.node_id

    @property
    def proposer_str(self) -> str | None:
        """The proposer as ``NodeID-…``, or ``None`` for an unsigned block."""
        return None if self.proposer is None else format_node_id(self.proposer)

    @property
    def unsigned_len(self) -> int:
        """Length of the bytes the ID hashes (all but the signature and its length)."""
        return self._unsigned_len

    def __bytes__(self) -> bytes:
        return self._encoded

    def header(self, chain_id: bytes) -> Header:
        """The header this block's proposer signs on ``chain_id``."""
        return Header(chain_id, self.parent_id, self.id)

    def verify(
        self,
        chain_id: bytes,
        *,
        check_signature: Callable[[Certificate, bytes, bytes], None] | None = None,
    ) -> None:
        """The checks of avalanchego's ``Parse`` beyond decoding, in its order.

        A Granite block must not carry the zero epoch; an unsigned block must carry no
        signature; a signed block's signature must verify against its certificate over the
        :class:`Header` on ``chain_id``. Failures raise ``InvalidBlock``.
        ``check_signature`` (default :meth:`Certificate.check_signature`) is the signature
        check, given the certificate, message and signature; a batch passes one that
        consults verdicts its worker processes computed with that very check
        (:mod:`vmstack.wrappers.proposer.verdicts`).
        """
        if self.epoch is not None and self.epoch.is_zero:
            raise InvalidBlock("zero epoch: a Granite block must carry its epoch")
        if self.certificate_info is None:
            if self.signature:
                raise InvalidBlock("unexpected signature on an unsigned block")
            return
        check = Certificate.check_signature if check_signature is None else check_signature
        try:
            check(self.certificate_info, bytes(self.header(chain_id)), self.signature)
        except InvalidSignature as error:
            raise InvalidBlock(f"signature verification failed: {error.reason}") from None

    @classmethod
    def decode(cls, data: bytes) -> PostForkBlock:
        """Decode a type 0 or type 2 block (no signature check); see :func:`decode_block`."""
        block = decode_block(data)
        if not isinstance(block, PostForkBlock):
            raise InvalidBlock("an option block, not a signed post-fork block")
        return block


@attrs.frozen
class OptionBlock:
    """A post-fork option (type 1): the child of an oracle block; its ID hashes all bytes."""

    parent_id: bytes
    inner: bytes
    id: bytes = attrs.field(init=False, repr=False)
    _encoded: bytes = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        _check_id("parent_id", self.parent_id)
        _check_bytes("inner", self.inner)
        encoded = _OPTION_HEAD.pack(CODEC_VERSION, TYPE_OPTION, self.parent_id) + _packed(
            self.inner
        )
        object.__setattr__(self, "_encoded", encoded)
        object.__setattr__(self, "id", hashlib.sha256(encoded).digest())

    type_id = TYPE_OPTION

    @classmethod
    def _decoded(cls, data: bytes, parent_id: bytes, inner: bytes) -> OptionBlock:
        """Build from fields just decoded off ``data``."""
        block = object.__new__(cls)
        for name, value in (
            ("parent_id", parent_id),
            ("inner", inner),
            ("_encoded", data),
            ("id", hashlib.sha256(data).digest()),
        ):
            object.__setattr__(block, name, value)
        return block

    def __bytes__(self) -> bytes:
        return self._encoded

    def verify(self, chain_id: bytes) -> None:
        """Options carry no signature: nothing to check beyond decoding."""

    @classmethod
    def decode(cls, data: bytes) -> OptionBlock:
        """Decode a type 1 block; see :func:`decode_block`."""
        block = decode_block(data)
        if not isinstance(block, OptionBlock):
            raise InvalidBlock("a signed post-fork block, not an option")
        return block


def _span(data: bytes, offset: int, what: str) -> int:
    """Skip a u32-length-prefixed byte string at ``offset``; return where it ends."""
    start = offset + 4
    if start > len(data):
        raise InvalidBlock(f"insufficient length: the length of the {what} runs past the end")
    stop: int = start + _U32.unpack_from(data, offset)[0]
    if stop > len(data):
        raise InvalidBlock(
            f"insufficient length: the {what} ({stop - start} bytes) runs past the end"
        )
    return stop


_Frame = tuple[int, int, int, int]
"""Where an encoded block's fields lie: type ID, certificate end, inner end, unsigned length."""


def _frame(data: bytes) -> _Frame:
    """Check the framing of ``data`` as the codec reads it, field by field, in order."""
    size = len(data)
    if size < 2:
        raise InvalidBlock("too short for a codec version")
    version = int.from_bytes(data[:2], "big")
    if version != CODEC_VERSION:
        raise InvalidBlock(f"unknown codec version {version}")
    if size < _PREFIX.size:
        raise InvalidBlock("insufficient length: no type ID")
    type_id = _U32.unpack_from(data, 2)[0]
    if type_id == TYPE_OPTION:
        if size < _OPTION_HEAD.size:
            raise InvalidBlock("insufficient length: the parent ID runs past the end")
        end = _span(data, _OPTION_HEAD.size, "inner block")
        _no_trailing(size, end)
        return type_id, _OPTION_HEAD.size, end, end
    if type_id not in (TYPE_POST_FORK, TYPE_GRANITE):
        raise InvalidBlock(f"unknown type ID {type_id}")
    offset = _PREFIX.size + _FIXED.size
    if offset > size:
        raise InvalidBlock(
            "insufficient length: the parent ID, timestamp and P-chain height run past the end"
        )
    certificate_end = _span(data, offset, "certificate")
    inner_end = _span(data, certificate_end, "inner block")
    unsigned_len = inner_end
    if type_id == TYPE_GRANITE:
        unsigned_len += _EPOCH.size
        if unsigned_len > size:
            raise InvalidBlock("insufficient length: the epoch runs past the end")
    _no_trailing(size, _span(data, unsigned_len, "signature"))
    return type_id, certificate_end, inner_end, unsigned_len


def _no_trailing(size: int, offset: int) -> None:
    extra = size - offset
    if extra:
        raise InvalidBlock(f"trailing bytes: {extra} after the block")


def decode_block(data: bytes) -> PostForkBlock | OptionBlock:
    """Decode a post-fork block or option strictly, without checking its signature.

    This is avalanchego's ``ParseWithoutVerification``: it fails (``InvalidBlock``) on a
    buffer too short for a version, an unknown codec version, an unknown type ID, a field
    running past the end, trailing bytes, or a certificate avalanchego cannot parse.
    """
    data = bytes(data)
    type_id, certificate_end, inner_end, unsigned_len = _frame(data)
    if type_id == TYPE_OPTION:
        return OptionBlock._decoded(
            data, data[_PREFIX.size : _OPTION_HEAD.size], data[_OPTION_HEAD.size + 4 : inner_end]
        )
    parent_id, timestamp, pchain_height = _FIXED.unpack_from(data, _PREFIX.size)
    certificate_start = _PREFIX.size + _FIXED.size + 4
    epoch = None
    if type_id == TYPE_GRANITE:
        epoch = Epoch(*_EPOCH.unpack_from(data, inner_end))
    return PostForkBlock._decoded(
        data,
        unsigned_len,
        parent_id,
        timestamp,
        pchain_height,
        data[certificate_start:certificate_end],
        data[certificate_end + 4 : inner_end],
        data[unsigned_len + 4 :],
        epoch,
    )


def peek_block(data: bytes) -> tuple[bytes, bytes]:
    """``(id, parent id)`` of an encoded block: its framing checked, its certificate unread.

    For reading back bytes that were fully checked before they were stored (the ancestors
    walk): no certificate parse, no object built, one sha256. Bad framing raises
    ``InvalidBlock`` as :func:`decode_block` does.
    """
    unsigned_len = _frame(data)[3]
    parent_id = bytes(data[_PREFIX.size : _PREFIX.size + _ID_LEN])
    return hashlib.sha256(data[:unsigned_len]).digest(), parent_id


def parse_block(data: bytes, chain_id: bytes) -> PostForkBlock | OptionBlock:
    """Decode and verify, as avalanchego's ``Parse(bytes, chainID)``: epoch and signature."""
    block = decode_block(data)
    block.verify(chain_id)
    return block


def build_unsigned(
    parent_id: bytes, timestamp: int, pchain_height: int, inner: bytes, epoch: Epoch | None = None
) -> PostForkBlock:
    """An unsigned post-fork block; a zero ``epoch`` gives type 0, as ``BuildUnsigned`` does."""
    if epoch is not None and epoch.is_zero:
        epoch = None
    return PostForkBlock(parent_id, timestamp, pchain_height, b"", inner, b"", epoch)


def build_signed(
    parent_id: bytes,
    timestamp: int,
    pchain_height: int,
    inner: bytes,
    *,
    key: StakingKey,
    chain_id: bytes,
    epoch: Epoch | None = None,
) -> PostForkBlock:
    """A post-fork block signed by ``key`` for ``chain_id``, as avalanchego's ``Build``."""
    if epoch is not None and epoch.is_zero:
        epoch = None
    unsigned = PostForkBlock(
        parent_id, timestamp, pchain_height, key.certificate.raw, inner, b"", epoch
    )
    signature = key.sign(bytes(unsigned.header(chain_id)))
    return attrs.evolve(unsigned, signature=signature)


def build_option(parent_id: bytes, inner: bytes) -> OptionBlock:
    """An option block over ``inner``, the child of oracle block ``parent_id``."""
    return OptionBlock(parent_id, inner)
