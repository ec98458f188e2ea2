"""The record machinery (:mod:`vmstack.cchain.types.fields`): strict decoding that names the
field, encoding that refuses bad values, the bounded RLP decoder, and the rlp backend it needs."""

from __future__ import annotations

import types

import pytest
import rlp

from vmstack.cchain import Withdrawal, decode_rlp, list_prefix
from vmstack.cchain.types.fields import DEPTH_CHECK_FROM, require_pyrlp_backend
from vmstack.errors import InvalidBlock

ADDRESS = b"\x01" * 20


def _nested(payload: bytes, depth: int) -> bytes:
    for _ in range(depth):
        payload = list_prefix(len(payload)) + payload
    return payload


@pytest.mark.parametrize(
    ("items", "reason"),
    [
        ([1, 2, ADDRESS[:19], 3], "withdrawal field address must be 20 bytes, found 19 bytes"),
        ([1, 2, ADDRESS], "withdrawal has 3 fields, expected 4"),
        ([b"\x00\x01", 2, ADDRESS, 3], "withdrawal field index is a non-canonical integer"),
        ([2**64, 2, ADDRESS, 3], "withdrawal field index is 9 bytes, wider than uint64"),
    ],
)
def test_decoding_names_the_field_that_breaks_a_rule(items: list[object], reason: str) -> None:
    """A wrong width, count or integer form is InvalidBlock naming the record and field."""
    with pytest.raises(InvalidBlock, match=reason):
        Withdrawal.decode(rlp.encode(items))


def test_a_caller_context_goes_in_front_of_a_nested_error() -> None:
    """``from_items(item, what)`` puts ``what`` before the record's own message."""
    with pytest.raises(InvalidBlock) as caught:
        Withdrawal.from_items([b"", b"", [], b""], "withdrawal 7")
    assert caught.value.reason == (
        "withdrawal 7: withdrawal field address must be 20 bytes, found a list"
    )


def test_encoding_a_bad_value_is_a_value_error_naming_the_field() -> None:
    """A value the field cannot hold is the caller's mistake: ValueError, not InvalidBlock."""
    with pytest.raises(ValueError, match=r"amount must be an int in \[0, 2\*\*64\)"):
        Withdrawal(amount=-1).encode()
    with pytest.raises(ValueError, match="address must be 20 bytes"):
        Withdrawal(address=b"x").encode()


def test_a_record_round_trips_through_any_byte_buffer() -> None:
    """Encoding then decoding gives the record back, from bytes, bytearray or a view."""
    withdrawal = Withdrawal(index=1, validator_index=2, address=ADDRESS, amount=3)
    data = withdrawal.encode()
    assert Withdrawal.decode(data) == withdrawal
    assert Withdrawal.decode(memoryview(bytearray(data))) == withdrawal
    assert decode_rlp(bytearray(data), "withdrawal") == [b"\x01", b"\x02", ADDRESS, b"\x03"]


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"\xc1\x01\x00", "thing: malformed RLP: 1 trailing bytes"),
        (b"\x81\x05", "thing: malformed RLP: non-canonical RLP at offset 0"),
        (b"\xc3\x01\x02", "thing: malformed RLP: RLP list at offset 0 runs past the end"),
    ],
)
def test_decode_rlp_refuses_bad_framing_naming_what(data: bytes, reason: str) -> None:
    """Trailing bytes, non-canonical prefixes and truncation are InvalidBlock naming ``what``."""
    with pytest.raises(InvalidBlock, match=reason):
        decode_rlp(data, "thing")


def test_decode_rlp_checks_depth_only_for_large_items() -> None:
    """``max_depth`` is enforced before decoding for items over DEPTH_CHECK_FROM bytes; a
    small item is decoded as it is."""
    assert decode_rlp(_nested(b"\x80", 5), "small", max_depth=2) == [[[[[b""]]]]]
    large = _nested(b"\xb9\x50\x00" + b"\x01" * 0x5000, 5)
    assert len(large) > DEPTH_CHECK_FROM
    with pytest.raises(InvalidBlock, match="large: malformed RLP: lists nested deeper than 2"):
        decode_rlp(large, "large", max_depth=2)
    assert len(decode_rlp(large, "large", max_depth=5)) == 1


def test_decode_rlp_refuses_nesting_too_deep_to_decode() -> None:
    """Lists nested thousands deep (valid RLP, never a record) are InvalidBlock, not a
    RecursionError."""
    with pytest.raises(InvalidBlock, match="deep: RLP lists nested too deeply to decode"):
        decode_rlp(_nested(b"\x80", 3000), "deep")


def test_the_rusty_rlp_backend_is_refused_loudly() -> None:
    """An rlp codec that switched to rusty-rlp is refused with a message saying what to do."""
    require_pyrlp_backend(types.SimpleNamespace())
    with pytest.raises(ImportError, match="uninstall rusty-rlp"):
        require_pyrlp_backend(types.SimpleNamespace(rusty_rlp=object()))
