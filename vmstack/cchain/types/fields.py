"""How a C-chain record's fields are written in RLP: field kinds, the record base, strict decoding.

Every record is a frozen, slotted attrs class whose fields carry their RLP kind (hash,
address, uint64, ...) in one declaration (``_field``), so a record's field list is written
once and both its encoder and its strict decoder come from it (``_seal`` derives them when the
record's module is imported). Records convert to and from *raw RLP items* (``bytes`` or nested
lists of them, what ``rlp.decode`` returns with no sedes); they are written as bytes by
:func:`~vmstack.cchain.rlpbytes.encode_item` (``rlp.encode``'s bytes, faster) and read by
the ``rlp`` package's strict decoder (:func:`decode_rlp`).

Decoding is strict, as geth's is: a field of the wrong shape (a list where a string belongs),
the wrong width (a hash that is not 32 bytes, an address that is not 20, a bloom that is not
256, a nonce that is not 8), an integer with leading zero bytes or wider than its type, or a
wrong field count raises :class:`~vmstack.errors.InvalidBlock` naming the field. Encoding
checks the values it is given and raises ``ValueError`` for a record that cannot be encoded
(a negative integer, a 19-byte address): a bad record is a caller's mistake, not bad data.
:func:`decode_rlp` is the one way bytes from outside become raw items. The ``rlp`` package
(with its imports, about half of what a stack imports) loads when the first item is decoded,
not when this module is imported: a process that never decodes RLP (a parse pool's worker
checking signatures) never loads it.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from types import ModuleType
from typing import Any, ClassVar, Self, TypeAlias

import attrs

from vmstack.cchain.rlpbytes import check_rlp, encode_item
from vmstack.errors import InvalidBlock

RLPItem: TypeAlias = bytes | list["RLPItem"]
"""A raw RLP item: a byte string or a list of raw items (``rlp.decode`` with no sedes)."""

ZERO_HASH = bytes(32)
ZERO_ADDRESS = bytes(20)
EMPTY_BLOOM = bytes(256)


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
    _ENCODERS: ClassVar[tuple[tuple[Encoder, str], ...]]

    def to_items(self) -> list[RLPItem]:
        """The record as a raw RLP list (trailing absent optional fields left out)."""
        values = self._VALUES(self)
        if None not in values:
            # Every field present (the common case): each value through its encoder.
            return [
                encode(value, label)
                for (encode, label), value in zip(self._ENCODERS, values, strict=True)
            ]
        spec = self._SPEC
        last = len(values)
        while last > self._REQUIRED and values[last - 1] is None:
            last -= 1
        items: list[RLPItem] = []
        for (_, decode, encode, optional, label), value in zip(spec[:last], values, strict=False):
            if value is None and optional:
                # geth writes an absent optional field before a present one as empty; only
                # a field that reads an empty value back may be absent there.
                try:
                    decode(b"", label)
                except InvalidBlock:
                    raise ValueError(
                        f"{label} is absent but a later optional field is present: set it too"
                    ) from None
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
        return encode_item(self.to_items())

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
    cls._ENCODERS = tuple((field[2], field[4]) for field in spec)
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
            "uninstall rusty-rlp (pip uninstall rusty-rlp)"
        )


_RLP: ModuleType | None = None


def _rlp_package() -> ModuleType:
    """The ``rlp`` package, imported (and its backend checked) on the first call."""
    global _RLP
    if _RLP is None:
        import rlp

        require_pyrlp_backend(rlp.codec)
        _RLP = rlp
    return _RLP


#: Items larger than this are checked for their nesting depth before the ``rlp`` package
#: decodes them: it copies a nested list's bytes once per level, so bytes nested n deep cost
#: n times their size (n is bounded by the recursion limit, about 1000, so below this size
#: an item costs at most ~16 MB).
DEPTH_CHECK_FROM = 16 * 1024


def decode_rlp(
    data: bytes | bytearray | memoryview, what: str, *, max_depth: int | None = None
) -> RLPItem:
    """Strictly decode one RLP item to raw items with the ``rlp`` package.

    Non-canonical encodings, truncation and trailing bytes raise ``InvalidBlock`` naming
    ``what``; the ``rlp`` package's own errors never escape. ``max_depth`` is the deepest
    list nesting the structure allows; an item over :data:`DEPTH_CHECK_FROM` bytes nested
    deeper is refused before anything is decoded, so its memory stays proportional to it.
    """
    rlp = _RLP if _RLP is not None else _rlp_package()
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
