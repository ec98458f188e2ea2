"""The two-flavour codec: records, optional fields, signing, receipts, and malformed input."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import rlp

from tests.cchain.types.samples import SENDER, TO, signed_transactions
from vmstack.cchain import (
    AVALANCHE,
    EMPTY_EXT_DATA_HASH,
    EMPTY_ROOT,
    EMPTY_UNCLE_HASH,
    ETHEREUM,
    AvalancheHeader,
    Block,
    Body,
    Flavour,
    Header,
    LegacyTx,
    Log,
    Receipt,
    Withdrawal,
    block_bytes,
    check_body,
    decode_receipts,
    decode_transaction,
    derive_receipts,
    encode_receipts,
    ext_data_hash,
    keccak256,
    list_prefix,
    logs_bloom,
    receipts_root,
)
from vmstack.errors import InvalidBlock


def _enc(value: Any) -> bytes:
    return rlp.encode(value, infer_serializer=False)


def test_seal_commits_the_header_to_the_body() -> None:
    """seal sets the roots, uncle hash, withdrawals root, ext data hash, receipts root and bloom."""
    txs = signed_transactions()[:4]
    receipts = [
        Receipt(cumulative_gas_used=21000 * (i + 1), logs=(Log(address=TO, topics=(bytes(32),)),))
        for i in range(len(txs))
    ]
    eth = ETHEREUM.seal(
        Header(number=1, base_fee=7),
        ETHEREUM.body(txs, withdrawals=[Withdrawal(index=1, address=TO, amount=5)]),
        receipts,
    )
    check_body(eth)
    assert eth.header.receipt_root == receipts_root(receipts)
    assert eth.header.bloom == logs_bloom([log for r in receipts for log in r.logs])
    assert eth.header.bloom != bytes(256)
    ava = AVALANCHE.seal(AvalancheHeader(number=1), AVALANCHE.body(txs, ext_data=b"atomic"))
    check_body(ava)
    assert isinstance(ava.header, AvalancheHeader)
    assert ava.header.ext_data_hash == ext_data_hash(b"atomic")
    assert ava.body.withdrawals is None and ava.body.version == 0
    assert ETHEREUM.body().withdrawals is None and ETHEREUM.body().ext_data is None
    with pytest.raises(InvalidBlock, match="transactions root"):
        check_body(Block(eth.header, ETHEREUM.body(txs[:1], withdrawals=())))


def test_empty_commitments_are_the_known_constants() -> None:
    """Empty tries, uncle lists and extData hash to the constants geth and coreth use."""
    assert EMPTY_ROOT.hex().startswith("56e81f17")
    assert EMPTY_UNCLE_HASH.hex().startswith("1dcc4de8")
    assert ext_data_hash(b"") == EMPTY_EXT_DATA_HASH == keccak256(b"\x80")
    assert ext_data_hash(b"\x01\x02") == keccak256(b"\x82\x01\x02")


@pytest.mark.parametrize(
    ("flavour", "header", "body", "reason"),
    [
        (ETHEREUM, AvalancheHeader(), Body(), "needs a Header"),
        (AVALANCHE, Header(), Body(), "needs a AvalancheHeader"),
        (ETHEREUM, Header(), Body(version=0), "no version"),
        (AVALANCHE, AvalancheHeader(), Body(version=0), "ext_data"),
        (AVALANCHE, AvalancheHeader(), AVALANCHE.body(uncles=[Header()]), "Header"),
        (ETHEREUM, Header(coinbase=b"\x01" * 19), Body(), "coinbase"),
        (ETHEREUM, Header(gas_limit=2**64), Body(), "gas_limit"),
        (ETHEREUM, Header(), Body(transactions=(LegacyTx(to=b"x"),)), "to"),
        (AVALANCHE, AvalancheHeader(), AVALANCHE.body(version=2**32), "version"),
    ],
)
def test_encoding_a_bad_record_is_a_value_error(
    flavour: Flavour, header: Any, body: Body, reason: str
) -> None:
    """Records the flavour cannot write raise ValueError naming the problem."""
    with pytest.raises(ValueError, match=reason):
        flavour.encode_block(Block(header, body, hash=bytes(32)))


def test_flavour_declaration_is_checked() -> None:
    """A flavour whose body fields are unknown, repeated or misordered cannot be declared."""
    fields = AVALANCHE.body_fields
    with pytest.raises(ValueError):
        Flavour("twice", Header, (fields[0], fields[0]))
    with pytest.raises(ValueError):
        Flavour("misordered", Header, (*ETHEREUM.body_fields, fields[2]))


def test_receipts_storage_round_trip_and_derived_fields() -> None:
    """Storage receipts round-trip; derive fills type, gas used, contract address, log indexes."""
    txs = signed_transactions()[:4]
    log = Log(address=TO, topics=(b"\x02" * 32,), data=b"payload")
    receipts = (
        Receipt(status=1, cumulative_gas_used=21000, logs=(log,)),
        Receipt(status=0, cumulative_gas_used=80000),
        Receipt(status=None, post_state=b"\x07" * 32, cumulative_gas_used=100000, logs=(log, log)),
        Receipt(status=1, cumulative_gas_used=121000),
    )
    data = encode_receipts(receipts)
    assert decode_receipts(data) == receipts
    block = ETHEREUM.seal(Header(number=3, base_fee=10), ETHEREUM.body(txs))
    derived = derive_receipts(decode_receipts(data), block, [SENDER] * 4)
    assert [r.tx_type for r in derived] == [0, 0, 1, 2]
    assert [r.gas_used for r in derived] == [21000, 59000, 20000, 21000]
    assert [r.first_log_index for r in derived] == [0, 1, 1, 3]
    assert derived[1].contract_address == keccak256(_enc([SENDER, b"\x01"]))[12:]
    assert derived[0].contract_address is None
    assert derived[3].effective_gas_price == 12
    assert derived[0].tx_hash == txs[0].hash and derived[2].block_hash == block.hash
    assert derived[2].encode()[0] == 1 and derived[0].encode()[0] >= 0xC0
    assert derived[0].bloom == logs_bloom([log]) != bytes(256)
    with pytest.raises(InvalidBlock, match="receipts"):
        derive_receipts(receipts[:3], block, [SENDER] * 4)


def test_contract_address_matches_the_known_value() -> None:
    """A creation by 0x6ac7ea33... at nonce 0 derives the well-known contract address."""
    creator = bytes.fromhex("6ac7ea33f8831ea9dcc53393aaa88b25a785dbf0")
    tx = LegacyTx(nonce=0, gas=100000, to=None)
    block = ETHEREUM.seal(Header(), ETHEREUM.body([tx]))
    (receipt,) = derive_receipts([Receipt(cumulative_gas_used=50000)], block, [creator])
    assert receipt.contract_address == bytes.fromhex("cd234a471b72ba2f1ccf0a70fcaba648a5eecd8d")


# --- the malformed-input table: each kind of bad input gets InvalidBlock ----------------------

BASE_TX = signed_transactions()[3]


def _eth_block(header: list[Any] | bytes | None = None, body: list[Any] | None = None) -> bytes:
    good = ETHEREUM.seal(Header(number=1), ETHEREUM.body([BASE_TX], withdrawals=[Withdrawal()]))
    items = [good.header.to_items(), *ETHEREUM._body_items(good.body)]
    if header is not None:
        items[0] = header
    if body is not None:
        items[1:] = body
    return _enc(items)


def _ava_block(header: list[Any] | None = None, body: list[Any] | None = None) -> bytes:
    good = AVALANCHE.seal(AvalancheHeader(number=1), AVALANCHE.body([BASE_TX], ext_data=b"e"))
    items = [good.header.to_items(), *AVALANCHE._body_items(good.body)]
    if header is not None:
        items[0] = header
    if body is not None:
        items[1:] = body
    return _enc(items)


def _header_with(index: int, value: Any, flavour_header: Any = Header) -> list[Any]:
    items: list[Any] = flavour_header(number=1).to_items()
    items[index] = value
    return items


TX_ITEM = BASE_TX.encode()
LEGACY_ITEMS = LegacyTx(nonce=1, to=TO, v=27, r=1, s=1).to_items()
ETH_HEADER = Header(number=1).to_items()
AVA_HEADER = AvalancheHeader(number=1).to_items()
VALID = _eth_block()

ACCESS_TX_HEAD = [b"\x01", b"", b"", b"", TO, b"", b""]
SIGNATURE = [b"\x01", b"\x01", b"\x01"]


def _framed(encoded_items: list[bytes]) -> bytes:
    """A list around already-encoded items (to plant a non-canonical item inside)."""
    payload = b"".join(encoded_items)
    return list_prefix(len(payload)) + payload


NON_CANONICAL_HEADER = _framed(
    [_enc(x) for x in ETH_HEADER[:8]] + [b"\x81\x01"] + [_enc(x) for x in ETH_HEADER[9:]]
)

MALFORMED: dict[str, tuple[Flavour, bytes, str]] = {
    "empty input": (ETHEREUM, b"", "end of the input"),
    "a string, not a list": (ETHEREUM, b"\x83abc", "found a string"),
    "empty list": (ETHEREUM, b"\xc0", "empty list"),
    "trailing byte": (ETHEREUM, VALID + b"\x00", "trailing bytes"),
    "truncated": (ETHEREUM, VALID[:-1], "remain in its input"),
    "declared length 2**60": (
        ETHEREUM,
        b"\xff" + (2**60).to_bytes(8, "big") + VALID[3:],
        f"declares {2**60} bytes",
    ),
    "length with leading zero": (ETHEREUM, b"\xfa\x00" + VALID[1:], "leading zero"),
    "long form for a short list": (ETHEREUM, b"\xf8\x02\xc0\xc0", "long length form"),
    "single byte as string": (
        ETHEREUM,
        _framed([NON_CANONICAL_HEADER, b"\xc0", b"\xc0"]),
        "single byte below 0x80",
    ),
    "header is a string": (
        ETHEREUM,
        _eth_block(header=b"\x01" * 600),
        "header must be an RLP list",
    ),
    "header with 14 fields": (
        ETHEREUM,
        _eth_block(header=ETH_HEADER[:14]),
        "header has 14 fields, expected 15 to 21",
    ),
    "header with 22 fields": (
        ETHEREUM,
        _eth_block(header=[*ETH_HEADER, *[b""] * 7]),
        "header has 22 fields",
    ),
    "parent hash of 31 bytes": (
        ETHEREUM,
        _eth_block(header=_header_with(0, b"\x01" * 31)),
        "parent_hash must be 32 bytes, found 31",
    ),
    "coinbase of 21 bytes": (
        ETHEREUM,
        _eth_block(header=_header_with(2, b"\x01" * 21)),
        "coinbase must be 20 bytes",
    ),
    "bloom of 255 bytes": (
        ETHEREUM,
        _eth_block(header=_header_with(6, bytes(255))),
        "bloom must be 256 bytes",
    ),
    "nonce of 7 bytes": (
        ETHEREUM,
        _eth_block(header=_header_with(14, bytes(7))),
        "nonce must be 8 bytes",
    ),
    "gas limit of 9 bytes": (
        ETHEREUM,
        _eth_block(header=_header_with(9, b"\x01" * 9)),
        "gas_limit is 9 bytes, wider than uint64",
    ),
    "difficulty of 33 bytes": (
        ETHEREUM,
        _eth_block(header=_header_with(7, b"\x01" * 33)),
        "difficulty is 33 bytes",
    ),
    "number with leading zero": (
        ETHEREUM,
        _eth_block(header=_header_with(8, b"\x00\x01")),
        "number is a non-canonical integer",
    ),
    "header field is a list": (
        ETHEREUM,
        _eth_block(header=_header_with(12, [b"x"])),
        "extra must be an RLP string",
    ),
    "block without uncles": (ETHEREUM, _eth_block(body=[[]]), "1 body fields, expected 2 to 3"),
    "block with an extra item": (ETHEREUM, _eth_block(body=[[], [], [], []]), "4 body fields"),
    "transactions not a list": (
        ETHEREUM,
        _eth_block(body=[b"\x01", []]),
        "transactions field must be an RLP list",
    ),
    "unknown tx type 0x05": (
        ETHEREUM,
        _eth_block(body=[[b"\x05" + TX_ITEM[1:]], []]),
        "transaction 0: transaction type 0x05 is not supported",
    ),
    "tx type 0x00 as a string": (
        ETHEREUM,
        _eth_block(body=[[b"\x00" + TX_ITEM[1:]], []]),
        "type 0x00 is not supported",
    ),
    "empty typed tx": (ETHEREUM, _eth_block(body=[[b""], []]), "0 bytes is too short"),
    "typed tx, trailing byte": (
        ETHEREUM,
        _eth_block(body=[[TX_ITEM + b"\x00"], []]),
        "typed payload: malformed RLP: 1 trailing bytes",
    ),
    "typed tx, payload a string": (
        ETHEREUM,
        _eth_block(body=[[b"\x02\x83abc"], []]),
        "dynamic-fee transaction must be an RLP list",
    ),
    "typed tx, truncated payload": (
        ETHEREUM,
        _eth_block(body=[[TX_ITEM[:-1]], []]),
        "typed payload: malformed RLP",
    ),
    "legacy tx with 8 fields": (
        ETHEREUM,
        _eth_block(body=[[LEGACY_ITEMS[:8]], []]),
        "legacy transaction has 8 fields, expected 9",
    ),
    "legacy tx to of 19 bytes": (
        ETHEREUM,
        _eth_block(body=[[[*LEGACY_ITEMS[:3], b"\x01" * 19, *LEGACY_ITEMS[4:]]], []]),
        "field to must be empty (contract creation) or 20 bytes",
    ),
    "access tuple with 3 fields": (
        ETHEREUM,
        _eth_block(body=[[b"\x01" + _enc([*ACCESS_TX_HEAD, [[TO, [], b""]], *SIGNATURE])], []]),
        "access_list[0]: access list entry has 3 fields",
    ),
    "storage key of 31 bytes": (
        ETHEREUM,
        _eth_block(body=[[b"\x01" + _enc([*ACCESS_TX_HEAD, [[TO, [bytes(31)]]], *SIGNATURE])], []]),
        "storage_keys[0]: access list entry field storage_keys must be 32 bytes",
    ),
    "blob tx without to": (
        ETHEREUM,
        _eth_block(
            body=[[b"\x03" + _enc([b"\x01", *[b""] * 5, b"", b"", [], b"", [], *SIGNATURE])], []]
        ),
        "blob transaction field to must be 20 bytes, found 0",
    ),
    "uncles not a list": (ETHEREUM, _eth_block(body=[[], b"\x01"]), "uncles field must be"),
    "uncle with 3 fields": (
        ETHEREUM,
        _eth_block(body=[[], [[b"", b"", b""]]]),
        "uncle 0: header has 3 fields",
    ),
    "withdrawal with 3 fields": (
        ETHEREUM,
        _eth_block(body=[[], [], [[b"", b"", TO]]]),
        "withdrawal 0: withdrawal has 3 fields",
    ),
    "withdrawal address of 19 bytes": (
        ETHEREUM,
        _eth_block(body=[[], [], [[b"", b"", b"\x01" * 19, b""]]]),
        "withdrawal field address must be 20 bytes",
    ),
    "withdrawals not a list": (
        ETHEREUM,
        _eth_block(body=[[], [], b"\x01"]),
        "withdrawals field must be an RLP list",
    ),
    "avalanche header with 15 fields": (
        AVALANCHE,
        _ava_block(header=AVA_HEADER[:15]),
        "header has 15 fields, expected 16 to 24",
    ),
    "avalanche header with 25 fields": (
        AVALANCHE,
        _ava_block(header=[*AVA_HEADER, *[b""] * 9]),
        "header has 25 fields",
    ),
    "ethereum header on avalanche": (
        AVALANCHE,
        _ava_block(header=ETH_HEADER),
        "header has 15 fields, expected 16 to 24",
    ),
    "ext data hash of 20 bytes": (
        AVALANCHE,
        _ava_block(header=_header_with(15, bytes(20), AvalancheHeader)),
        "ext_data_hash must be 32 bytes",
    ),
    "avalanche body without ext data": (
        AVALANCHE,
        _ava_block(body=[[], [], b""]),
        "3 body fields, expected 4",
    ),
    "avalanche body with withdrawals": (
        AVALANCHE,
        _ava_block(body=[[], [], b"", b"", []]),
        "5 body fields, expected 4",
    ),
    "version wider than uint32": (
        AVALANCHE,
        _ava_block(body=[[], [], b"\x01" * 5, b""]),
        "version is 5 bytes, wider than uint32",
    ),
    "version is a list": (
        AVALANCHE,
        _ava_block(body=[[], [], [], b""]),
        "version must be an integer string",
    ),
    "ext data is a list": (
        AVALANCHE,
        _ava_block(body=[[], [], b"", []]),
        "ext_data field must be an RLP string",
    ),
}


@pytest.mark.parametrize(("flavour", "data", "reason"), MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_block_raises_invalid_block(flavour: Flavour, data: bytes, reason: str) -> None:
    """Each kind of bad block input raises InvalidBlock (only) saying what was wrong."""
    with pytest.raises(InvalidBlock) as excinfo:
        flavour.decode_block(data)
    assert type(excinfo.value) is InvalidBlock
    assert reason in excinfo.value.reason


def test_malformed_table_starts_from_valid_blocks() -> None:
    """The unmutated bases of the table decode, so each row fails for its own reason."""
    assert ETHEREUM.decode_block(_eth_block()).number == 1
    assert AVALANCHE.decode_block(_ava_block()).body.ext_data == b"e"


DECODERS: dict[str, tuple[Callable[[bytes], object], bytes]] = {
    "header: string": (ETHEREUM.decode_header, b"\x80"),
    "header: trailing": (ETHEREUM.decode_header, ETHEREUM.encode_header(Header()) + b"\x80"),
    "body: string": (ETHEREUM.decode_body, b"\x80"),
    "body: one field": (AVALANCHE.decode_body, b"\xc1\xc0"),
    "receipts: string": (decode_receipts, b"\x80"),
    "receipt: two fields": (decode_receipts, _enc([[b"\x01", b""]])),
    "receipt: bad status": (decode_receipts, _enc([[b"\x02", b"", []]])),
    "receipt: log topic of 31 bytes": (
        decode_receipts,
        _enc([[b"\x01", b"", [[TO, [bytes(31)], b""]]]]),
    ),
    "transaction: empty": (decode_transaction, b""),
    "transaction: type 0x7f": (decode_transaction, b"\x7f\xc0"),
}


@pytest.mark.parametrize(("decode", "data"), DECODERS.values(), ids=DECODERS.keys())
def test_other_decoders_raise_invalid_block(decode: Callable[[bytes], object], data: bytes) -> None:
    """Headers, bodies, receipts and transactions reject bad bytes with InvalidBlock."""
    with pytest.raises(InvalidBlock):
        decode(data)


def test_stitching_stored_parts_equals_encoding_the_block() -> None:
    """Header and body encoded apart and stitched equal the block encoded whole, per flavour."""
    for flavour, header in (
        (ETHEREUM, Header(number=4, base_fee=1)),
        (AVALANCHE, AvalancheHeader()),
    ):
        block = flavour.seal(header, flavour.body(signed_transactions(), [header], withdrawals=[]))
        data = flavour.encode_block(block)
        assert block_bytes(flavour.encode_header(block.header), flavour.encode_body(block)) == data
        assert flavour.encode_body(block.body) == flavour.encode_body(block)
        assert flavour.decode_block(data) == block
        assert flavour.decode_block(memoryview(bytearray(data))) == block
        header_rlp = memoryview(bytearray(flavour.encode_header(block.header)))
        body_rlp = memoryview(bytearray(flavour.encode_body(block)))
        assert flavour.block_from_parts(header_rlp, body_rlp) == block
        assert flavour.block_from_parts(header_rlp, body_rlp, block.hash).hash == block.hash
