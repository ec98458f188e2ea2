"""The two-flavour codec: records, optional fields, signing, receipts, and malformed input."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pytest
import rlp

from vmstack.cchain import (
    AVALANCHE,
    EMPTY_EXT_DATA_HASH,
    EMPTY_ROOT,
    EMPTY_UNCLE_HASH,
    ETHEREUM,
    AccessListTx,
    AccessTuple,
    Authorization,
    AvalancheHeader,
    BlobTx,
    Block,
    Body,
    DynamicFeeTx,
    Flavour,
    Header,
    LegacyTx,
    Log,
    Receipt,
    SetCodeTx,
    Withdrawal,
    address_of,
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
    recover_sender,
    sign_hash,
    sign_transaction,
)
from vmstack.errors import InvalidBlock

KEY = keccak256(b"codec test key")
SENDER = address_of(KEY)
TO = bytes.fromhex("35" * 20)
CHAIN = 43114


def _enc(value: Any) -> bytes:
    return rlp.encode(value, infer_serializer=False)  # type: ignore[no-any-return]


def _signed_txs() -> list[Any]:
    access = (AccessTuple(address=TO, storage_keys=(bytes(32), b"\x01" * 32)),)
    unsigned: list[Any] = [
        LegacyTx(nonce=0, gas_price=25 * 10**9, gas=21000, to=TO, value=1),
        LegacyTx(nonce=1, gas_price=25 * 10**9, gas=90000, to=None, data=b"\x60\x00"),
        AccessListTx(
            chain_id=CHAIN, nonce=2, gas_price=10**9, gas=30000, to=TO, access_list=access
        ),
        DynamicFeeTx(
            chain_id=CHAIN,
            nonce=3,
            max_priority_fee_per_gas=2,
            max_fee_per_gas=50 * 10**9,
            gas=21000,
            to=TO,
            value=10**18,
        ),
        BlobTx(
            chain_id=CHAIN,
            nonce=4,
            max_fee_per_gas=10**10,
            gas=21000,
            to=TO,
            max_fee_per_blob_gas=1,
            blob_versioned_hashes=(b"\x01" + bytes(31),),
        ),
        SetCodeTx(
            chain_id=CHAIN,
            nonce=5,
            max_fee_per_gas=10**10,
            gas=50000,
            to=TO,
            authorization_list=(Authorization(chain_id=CHAIN, address=TO, nonce=6),),
        ),
    ]
    return [sign_transaction(tx, KEY, CHAIN) for tx in unsigned]


def test_every_transaction_type_signs_and_recovers() -> None:
    """Each type signs deterministically, recovers its sender and survives its canonical bytes."""
    for tx in _signed_txs():
        assert tx.sender() == SENDER
        assert recover_sender(tx, CHAIN) == SENDER
        data = tx.encode()
        assert decode_transaction(data) == tx
        assert decode_transaction(memoryview(data)) == tx
        assert tx.hash == keccak256(data)
        assert (data[0] == tx.TYPE) if tx.TYPE else data[0] >= 0xC0


def test_legacy_protection_follows_the_chain_id() -> None:
    """A legacy tx signed without a chain id is unprotected (v 27/28) and valid on any chain."""
    tx = sign_transaction(LegacyTx(nonce=1, gas=21000, to=TO), KEY, None)
    assert tx.v in (27, 28) and tx.chain_id is None
    assert tx.sender(CHAIN) == SENDER
    protected = sign_transaction(LegacyTx(nonce=1, gas=21000, to=TO), KEY, CHAIN)
    assert protected.chain_id == CHAIN and protected.signing_hash(CHAIN) != tx.signing_hash()
    with pytest.raises(InvalidBlock, match="chain id"):
        protected.sender(1)


def test_typed_transactions_reject_another_chain() -> None:
    """A typed tx signs and recovers only for its own chain id."""
    tx = _signed_txs()[3]
    with pytest.raises(InvalidBlock, match="chain id"):
        tx.sender(1)
    with pytest.raises(ValueError, match="chain id"):
        sign_transaction(attrs.evolve(tx, r=0, s=0), KEY, 1)


def test_unsigned_or_tampered_transactions_have_no_sender() -> None:
    """An unsigned tx, a bad parity or a changed field give InvalidBlock or another sender."""
    with pytest.raises(InvalidBlock, match="v = 0"):
        LegacyTx(nonce=1).sender()
    signed = _signed_txs()[3]
    with pytest.raises(InvalidBlock, match="parity"):
        attrs.evolve(signed, y_parity=2).sender()
    assert attrs.evolve(signed, value=2).sender() != SENDER


def test_authorization_recovers_its_authority() -> None:
    """A 7702 authorization signed over keccak(0x05 || rlp(...)) recovers the signer."""
    auth = Authorization(chain_id=CHAIN, address=TO, nonce=3)
    parity, r, s = sign_hash(auth.signing_hash(), KEY)
    assert attrs.evolve(auth, y_parity=parity, r=r, s=s).authority() == SENDER
    assert auth.signing_hash() == keccak256(b"\x05" + _enc([CHAIN.to_bytes(2, "big"), TO, b"\x03"]))


def test_header_field_counts_follow_the_forks() -> None:
    """Headers write 15-21 (Ethereum) and 16-24 (Avalanche) fields by their last present one."""
    assert len(Header().to_items()) == 15
    assert len(Header(base_fee=7).to_items()) == 16
    assert len(Header(base_fee=7, withdrawals_hash=EMPTY_ROOT).to_items()) == 17
    assert len(Header(requests_hash=EMPTY_ROOT, base_fee=1, withdrawals_hash=EMPTY_ROOT,
                      parent_beacon_root=EMPTY_ROOT).to_items()) == 21
    assert len(AvalancheHeader().to_items()) == 16
    assert len(AvalancheHeader(base_fee=1, block_gas_cost=0).to_items()) == 19
    assert len(AvalancheHeader(min_delay_excess=5, parent_beacon_root=EMPTY_ROOT).to_items()) == 24


def test_an_absent_hash_before_a_present_field_is_refused_at_encoding() -> None:
    """A gap that would be written empty but cannot be read back empty is a ValueError."""
    with pytest.raises(ValueError, match="withdrawals_hash is absent"):
        ETHEREUM.encode_header(Header(base_fee=7, blob_gas_used=5))
    with pytest.raises(ValueError, match="parent_beacon_root is absent"):
        AVALANCHE.encode_header(AvalancheHeader(min_delay_excess=3))


def test_missing_optional_field_before_a_present_one_is_written_empty() -> None:
    """The geth rule: a gap is written as the empty string, so a missing integer reads as 0."""
    header = Header(withdrawals_hash=EMPTY_ROOT)
    items = header.to_items()
    assert len(items) == 17 and items[15] == b"" and items[16] == EMPTY_ROOT
    decoded = ETHEREUM.decode_header(ETHEREUM.encode_header(header))
    assert decoded.base_fee == 0 and decoded.withdrawals_hash == EMPTY_ROOT
    ava = AVALANCHE.decode_header(AVALANCHE.encode_header(AvalancheHeader(block_gas_cost=5)))
    assert (ava.base_fee, ava.ext_data_gas_used, ava.block_gas_cost) == (0, 0, 5)


def test_a_missing_hash_before_a_present_field_does_not_decode() -> None:
    """As in geth, an empty string where a hash belongs is rejected when read back."""
    items = Header(blob_gas_used=5, withdrawals_hash=EMPTY_ROOT).to_items()
    items[16] = b""
    data = rlp.encode(items)
    with pytest.raises(InvalidBlock, match="withdrawals_hash must be 32 bytes"):
        ETHEREUM.decode_header(data)


def test_header_decode_is_a_named_decoder_too() -> None:
    """Header.decode and the flavour's decode_header agree, and a block hash is the header's."""
    header = AvalancheHeader(number=9, time=1_600_000_000, base_fee=25 * 10**9)
    data = AVALANCHE.encode_header(header)
    assert AvalancheHeader.decode(data) == AVALANCHE.decode_header(data) == header
    assert header.encode() == data and header.hash == keccak256(data)
    assert Block(header).hash == keccak256(data)


def test_seal_commits_the_header_to_the_body() -> None:
    """seal sets the roots, uncle hash, withdrawals root, ext data hash, receipts root and bloom."""
    txs = _signed_txs()[:4]
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


def test_a_block_needs_an_encodable_header() -> None:
    """Building a block hashes its header, so an unencodable header is a ValueError at once."""
    with pytest.raises(ValueError, match="coinbase"):
        Block(Header(coinbase=b"\x01"))


def test_flavour_declaration_is_checked() -> None:
    """A flavour whose body fields are unknown, repeated or misordered cannot be declared."""
    fields = AVALANCHE.body_fields
    with pytest.raises(ValueError):
        Flavour("twice", Header, (fields[0], fields[0]))
    with pytest.raises(ValueError):
        Flavour("misordered", Header, (*ETHEREUM.body_fields, fields[2]))


def test_receipts_storage_round_trip_and_derived_fields() -> None:
    """Storage receipts round-trip; derive fills type, gas used, contract address, log indexes."""
    txs = _signed_txs()[:4]
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


def test_bloom_sets_three_bits_per_value() -> None:
    """Each address and topic sets the bits named by the first three byte pairs of its hash."""
    log = Log(address=TO, topics=(b"\x09" * 32,))
    bloom = int.from_bytes(logs_bloom([log]), "big")
    for value in (TO, b"\x09" * 32):
        digest = keccak256(value)
        for i in (0, 2, 4):
            assert bloom >> (int.from_bytes(digest[i : i + 2], "big") % 2048) & 1
    assert bin(bloom).count("1") <= 6


# --- the malformed-input table: each kind of bad input gets InvalidBlock ----------------------

BASE_TX = _signed_txs()[3]


def _eth_block(header: list[Any] | None = None, body: list[Any] | None = None) -> bytes:
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
    ),  # type: ignore[arg-type]
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
        block = flavour.seal(header, flavour.body(_signed_txs(), [header], withdrawals=[]))
        data = flavour.encode_block(block)
        assert block_bytes(flavour.encode_header(block.header), flavour.encode_body(block)) == data
        assert flavour.encode_body(block.body) == flavour.encode_body(block)
        assert flavour.decode_block(data) == block
        assert flavour.decode_block(memoryview(bytearray(data))) == block
        header_rlp = memoryview(bytearray(flavour.encode_header(block.header)))
        body_rlp = memoryview(bytearray(flavour.encode_body(block)))
        assert flavour.block_from_parts(header_rlp, body_rlp) == block
        assert flavour.block_from_parts(header_rlp, body_rlp, block.hash).hash == block.hash


def test_the_rusty_rlp_backend_is_refused_loudly() -> None:
    """An rlp codec that switched to rusty-rlp is refused with a message saying what to do."""
    import types

    from vmstack.cchain.types.fields import require_pyrlp_backend

    require_pyrlp_backend(types.SimpleNamespace())
    with pytest.raises(ImportError, match="uninstall rusty-rlp"):
        require_pyrlp_backend(types.SimpleNamespace(rusty_rlp=object()))
