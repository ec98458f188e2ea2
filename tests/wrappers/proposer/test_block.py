"""The post-fork block format against avalanchego's encodings (proposervm_blocks.json)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from tests.conftest import load_vectors, vectors_dir
from vmstack.errors import InvalidBlock
from vmstack.wrappers.proposer.certificate import cb58decode
from vmstack.wrappers.proposer.envelope import (
    HEADER_LEN,
    TYPE_GRANITE,
    TYPE_OPTION,
    TYPE_POST_FORK,
    Epoch,
    Header,
    OptionBlock,
    PostForkBlock,
    build_option,
    build_signed,
    build_unsigned,
    decode_block,
    format_id,
    parse_block,
)
from vmstack.wrappers.proposer.staking import StakingKey

VECTORS = "proposervm_blocks.json"

#: The Go error each vector names, and the phrase our InvalidBlock reason starts with.
GO_ERRORS = {
    "ErrUnknownVersion": "unknown codec version",
    "ErrInsufficientLength": "insufficient length",
    "ErrExtraSpace": "trailing bytes",
    "unknown type ID": "unknown type ID",
    "errZeroEpoch": "zero epoch",
    "errUnexpectedSignature": "unexpected signature",
    "rsa.ErrVerification": "signature verification failed",
    "errInvalidCertificate": "invalid certificate",
}

PARENT = bytes([1]) + bytes(31)
CHAIN = bytes([4]) + bytes(31)


def _vector_names(kind: str) -> list[str]:
    path = vectors_dir() / VECTORS
    if not path.is_file():
        return ["<vectors absent>"]
    entries = json.loads(path.read_text())
    return [e["name"] for e in entries if (e.get("kind") == "header") == (kind == "header")]


@pytest.fixture(scope="module")
def vectors() -> dict[str, Any]:
    return {entry["name"]: entry for entry in load_vectors(VECTORS)}


def _hex(value: str) -> bytes:
    return bytes.fromhex(value.removeprefix("0x"))


def _outcome(call: Any) -> str:
    try:
        call()
    except InvalidBlock as error:
        return error.reason
    return "ok"


def _matches(expected: str, outcome: str) -> bool:
    return outcome == "ok" if expected == "ok" else outcome.startswith(GO_ERRORS[expected])


@pytest.mark.parametrize("name", _vector_names("block"))
def test_vector_parses_to_the_stated_result(vectors: dict[str, Any], name: str) -> None:
    """Each vector decodes and parses (with its chain ID) to the result avalanchego states."""
    vector = vectors[name]
    data, chain_id = _hex(vector["hex"]), _hex(vector["chain_id"])
    without = _outcome(lambda: decode_block(data))
    with_verification = _outcome(lambda: parse_block(data, chain_id))
    assert _matches(vector["expect"]["parse_without_verification"], without), without
    assert _matches(vector["expect"]["parse"], with_verification), with_verification


@pytest.mark.parametrize("name", _vector_names("block"))
def test_vector_fields_id_and_round_trip(vectors: dict[str, Any], name: str) -> None:
    """A decodable vector re-encodes byte for byte and yields the stated ID, fields and proposer."""
    vector = vectors[name]
    if vector["expect"]["parse_without_verification"] != "ok":
        pytest.skip("a negative vector: covered by the parse test")
    data = _hex(vector["hex"])
    block = decode_block(data)
    assert bytes(block) == data
    assert block.id == _hex(vector["id"])
    assert format_id(block.id) == vector["id_cb58"]
    assert cb58decode(vector["id_cb58"]) == block.id
    assert block.type_id == vector["type_id"]
    assert block.parent_id == _hex(vector["parent_id"])
    assert block.inner == _hex(vector["inner_hex"])
    if isinstance(block, OptionBlock):
        assert block.id == hashlib.sha256(data).digest()
        assert OptionBlock(block.parent_id, block.inner) == block
        return
    assert block.timestamp == vector["timestamp"]
    assert block.pchain_height == vector["pchain_height"]
    assert len(block.certificate) == vector["certificate_len"]
    assert len(block.signature) == vector["signature_len"]
    assert block.unsigned_len == vector["unsigned_len"]
    assert block.id == hashlib.sha256(data[: block.unsigned_len]).digest()
    assert block.proposer_str == vector["proposer"]
    if "certificate_key" in vector:
        assert block.certificate_info is not None
        assert block.certificate_info.key_type == vector["certificate_key"]
    if "epoch" in vector:
        epoch = vector["epoch"]
        assert block.epoch == Epoch(epoch["pchain_height"], epoch["number"], epoch["start_time"])
    else:
        assert block.epoch is None
    rebuilt = PostForkBlock(
        block.parent_id,
        block.timestamp,
        block.pchain_height,
        block.certificate,
        block.inner,
        block.signature,
        block.epoch,
    )
    assert rebuilt == block
    assert bytes(rebuilt) == data


@pytest.mark.parametrize("name", _vector_names("header"))
def test_header_vector_round_trips(vectors: dict[str, Any], name: str) -> None:
    """The 98-byte header decodes to the stated IDs and encodes back to the same bytes."""
    vector = vectors[name]
    data = _hex(vector["hex"])
    header = Header.decode(data)
    assert len(data) == HEADER_LEN
    assert header == Header(
        _hex(vector["chain_id"]), _hex(vector["parent_id"]), _hex(vector["body_id"])
    )
    assert bytes(header) == data


def test_granite_signature_is_valid_although_parse_fails_on_the_epoch(
    vectors: dict[str, Any],
) -> None:
    """The upstream Granite vector's ECDSA signature verifies: the zero epoch alone fails it."""
    vector = vectors["upstream/parse_test/granite_zero_epoch_ecdsa"]
    block = decode_block(_hex(vector["hex"]))
    assert isinstance(block, PostForkBlock) and block.certificate_info is not None
    header = bytes(block.header(_hex(vector["chain_id"])))
    block.certificate_info.check_signature(header, block.signature)


def test_header_decode_is_strict() -> None:
    """A header with another version, too few or too many bytes raises InvalidBlock."""
    good = bytes(Header(CHAIN, PARENT, bytes(32)))
    with pytest.raises(InvalidBlock, match="unknown codec version"):
        Header.decode(b"\x00\x01" + good[2:])
    with pytest.raises(InvalidBlock, match="insufficient length"):
        Header.decode(good[:-1])
    with pytest.raises(InvalidBlock, match="trailing bytes"):
        Header.decode(good + b"\0")


@pytest.mark.parametrize(
    "data, reason",
    [
        (b"", "too short for a codec version"),
        (b"\x00", "too short for a codec version"),
        (b"\x00\x00\x00\x00", "insufficient length: no type ID"),
        (b"\x00\x00\x00\x00\x00\x00" + bytes(40), "insufficient length"),
        (b"\x00\x00\x00\x00\x00\x01" + bytes(20), "insufficient length"),
        (b"\x00\x00\xff\xff\xff\xff", "unknown type ID 4294967295"),
    ],
)
def test_short_and_unknown_buffers_raise(data: bytes, reason: str) -> None:
    """Buffers too short for any field, or of an unknown type, raise InvalidBlock."""
    with pytest.raises(InvalidBlock, match=reason):
        decode_block(data)


def test_truncation_anywhere_raises_and_trailing_bytes_raise() -> None:
    """Every strict prefix of a Granite block and the block plus one byte are refused."""
    block = build_unsigned(PARENT, 123, 2, b"\x03", Epoch(2, 1, 123))
    data = bytes(block)
    for cut in range(len(data)):
        with pytest.raises(InvalidBlock):
            decode_block(data[:cut])
    with pytest.raises(InvalidBlock, match="trailing bytes"):
        decode_block(data + b"\0")


def test_unsigned_builds_follow_build_unsigned() -> None:
    """A zero epoch gives type 0, a real epoch type 2; both are unsigned with no proposer."""
    plain = build_unsigned(PARENT, 123, 2, b"\x03", Epoch())
    granite = build_unsigned(PARENT, 123, 2, b"\x03", Epoch(2, 1, 123))
    assert plain.type_id == TYPE_POST_FORK and granite.type_id == TYPE_GRANITE
    for block in (plain, granite):
        assert block.proposer is None and not block.signed
        assert decode_block(bytes(block)) == block
        block.verify(CHAIN)


def test_signed_block_verifies_only_on_its_chain() -> None:
    """A block signed for one chain verifies there and fails on another chain."""
    key = StakingKey.generate(seed=b"block test")
    block = build_signed(PARENT, 123, 2, b"\x03", key=key, chain_id=CHAIN)
    assert block.proposer == key.node_id
    assert parse_block(bytes(block), CHAIN) == block
    with pytest.raises(InvalidBlock, match="signature verification failed"):
        parse_block(bytes(block), bytes(32))


def test_signature_is_not_part_of_the_id() -> None:
    """Replacing the signature keeps the ID; changing any signed field changes it."""
    key = StakingKey.generate(seed=b"block test")
    block = build_signed(PARENT, 123, 2, b"\x03", key=key, chain_id=CHAIN)
    tampered = PostForkBlock(
        block.parent_id,
        block.timestamp,
        block.pchain_height,
        block.certificate,
        block.inner,
        b"\x01",
    )
    assert tampered.id == block.id
    with pytest.raises(InvalidBlock, match="signature verification failed"):
        tampered.verify(CHAIN)
    moved = PostForkBlock(
        block.parent_id,
        block.timestamp + 1,
        block.pchain_height,
        block.certificate,
        block.inner,
        block.signature,
    )
    assert moved.id != block.id


def test_option_id_hashes_all_bytes() -> None:
    """An option's ID is the sha256 of its whole encoding and it decodes back to itself."""
    option = build_option(PARENT, b"\x03")
    data = bytes(option)
    assert data[:6] == bytes([0, 0, 0, 0, 0, TYPE_OPTION])
    assert option.id == hashlib.sha256(data).digest()
    assert OptionBlock.decode(data) == option
    with pytest.raises(InvalidBlock, match="option"):
        PostForkBlock.decode(data)


@pytest.mark.parametrize(
    "change",
    [
        {"parent_id": b"short"},
        {"timestamp": 2**63},
        {"pchain_height": -1},
        {"timestamp": True},
    ],
)
def test_constructor_rejects_out_of_range_fields(change: dict[str, Any]) -> None:
    """Fields outside the codec's ranges raise ValueError at construction."""
    fields: dict[str, Any] = {
        "parent_id": PARENT,
        "timestamp": 1,
        "pchain_height": 0,
        "certificate": b"",
        "inner": b"",
    }
    fields.update(change)
    with pytest.raises(ValueError):
        PostForkBlock(**fields)


def test_negative_timestamps_round_trip() -> None:
    """The timestamp is a signed 64-bit field, so negative values encode and decode."""
    block = build_unsigned(PARENT, -5, 0, b"")
    assert decode_block(bytes(block)).timestamp == -5  # type: ignore[union-attr]
