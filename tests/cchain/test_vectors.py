"""The codec against every saved real block: Ethereum, the C-chain fixture, bodies, RLP cases."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import load_vectors
from vmstack.cchain import (
    AVALANCHE,
    EMPTY_ROOT,
    ETHEREUM,
    Flavour,
    Header,
    block_bytes,
    block_hash,
    check_body,
    check_rlp,
    decode_receipts,
    derive_receipts,
    encode_receipts,
    header_parent_hash,
    header_slice,
    keccak256,
    logs_bloom,
    receipts_root,
    recover_address,
    split_block,
    transactions_root,
    withdrawals_root,
)
from vmstack.cchain.types import LegacyTx, decode_rlp
from vmstack.errors import InvalidBlock

# Unit-test blocks built by hand in geth and coreth: their header roots were typed in, not
# derived from their bodies, so only the encoding (not the commitments) can be checked.
SYNTHETIC = {
    "geth-unit/TestEIP1559BlockEncoding",
    "coreth-unit/TestEIP1559BlockEncoding",
    "coreth-unit/TestAP4BlockEncoding",
}
# The unit tests' legacy transaction carries a high s, valid only under the Frontier rule.
HIGH_S = {"geth-unit/TestBlockEncoding", *SYNTHETIC}


def _hex(value: str) -> bytes:
    return bytes.fromhex(value.removeprefix("0x"))


def _cases() -> list[Any]:
    cases = []
    for name, flavour in (("blocks.json", ETHEREUM), ("cchain_blocks.json", AVALANCHE)):
        cases.append(pytest.param(name, flavour, id=flavour.name))
    return cases


def _blocks(name: str) -> list[dict[str, Any]]:
    data = load_vectors(name)
    blocks: list[dict[str, Any]] = data["blocks"] if isinstance(data, dict) else data
    assert blocks, f"{name} holds no blocks"
    return blocks


@pytest.mark.parametrize(("name", "flavour"), _cases())
def test_decode_then_encode_gives_the_same_bytes(name: str, flavour: Flavour) -> None:
    """Every vector block decodes strictly and re-encodes to exactly its bytes."""
    for vector in _blocks(name):
        data = _hex(vector["rlp"])
        block = flavour.decode_block(data)
        assert flavour.encode_block(block) == data, vector["name"]
        assert block.number == vector["number"], vector["name"]


@pytest.mark.parametrize(("name", "flavour"), _cases())
def test_hash_equals_the_attested_hash(name: str, flavour: Flavour) -> None:
    """A decoded block's hash, and keccak of its header slice, equal the attested hash."""
    for vector in _blocks(name):
        data = _hex(vector["rlp"])
        expected = _hex(vector["hash"])
        assert flavour.decode_block(data).hash == expected, vector["name"]
        assert block_hash(data) == expected, vector["name"]
        assert keccak256(flavour.encode_header(flavour.decode_block(data).header)) == expected


@pytest.mark.parametrize(("name", "flavour"), _cases())
def test_split_then_block_bytes_gives_the_block_back(name: str, flavour: Flavour) -> None:
    """Header and body split off a block stitch back to it, from bytes and from views."""
    for vector in _blocks(name):
        data = _hex(vector["rlp"])
        header_rlp, body_rlp = split_block(data)
        block = flavour.decode_block(data)
        assert header_rlp == flavour.encode_header(block.header), vector["name"]
        assert body_rlp == flavour.encode_body(block), vector["name"]
        assert block_bytes(header_rlp, body_rlp) == data, vector["name"]
        views = memoryview(bytearray(header_rlp)), memoryview(bytearray(body_rlp))
        assert block_bytes(*views) == data, vector["name"]
        assert bytes(header_slice(data)) == header_rlp
        assert header_parent_hash(header_rlp) == block.parent_hash


@pytest.mark.parametrize(("name", "flavour"), _cases())
def test_summary_counts_match(name: str, flavour: Flavour) -> None:
    """Header field counts, transaction kinds, uncles and withdrawals match each summary."""
    for vector in _blocks(name):
        summary = vector["summary"]
        block = flavour.decode_block(_hex(vector["rlp"]))
        assert len(block.header.to_items()) == summary["header_fields"], vector["name"]
        kinds: dict[str, int] = {}
        for tx in block.transactions:
            kind = "legacy" if tx.TYPE == 0 else f"type{tx.TYPE}"
            kinds[kind] = kinds.get(kind, 0) + 1
        assert kinds == summary["txs"], vector["name"]
        assert len(block.uncles) == summary["uncles"], vector["name"]
        withdrawals = block.withdrawals
        assert summary.get("withdrawals") == (None if withdrawals is None else len(withdrawals))


@pytest.mark.parametrize(("name", "flavour"), _cases())
def test_body_matches_the_header_commitments(name: str, flavour: Flavour) -> None:
    """The transactions root, uncle hash and withdrawals root from each body match its header."""
    checked = 0
    for vector in _blocks(name):
        if vector["name"] in SYNTHETIC:
            continue
        block = flavour.decode_block(_hex(vector["rlp"]))
        assert transactions_root(block.transactions) == block.header.tx_root, vector["name"]
        if block.withdrawals is not None:
            assert isinstance(block.header, Header)
            assert withdrawals_root(block.withdrawals) == block.header.withdrawals_hash
        check_body(block)
        checked += 1
    assert checked > 20


def test_synthetic_blocks_are_caught_by_check_body() -> None:
    """The hand-built unit-test blocks, whose roots were typed in, fail the commitment check."""
    seen = 0
    for name, flavour in (("blocks.json", ETHEREUM), ("cchain_blocks.json", AVALANCHE)):
        for vector in _blocks(name):
            if vector["name"] in SYNTHETIC:
                with pytest.raises(InvalidBlock, match="transactions root"):
                    check_body(flavour.decode_block(_hex(vector["rlp"])))
                seen += 1
    assert seen == len(SYNTHETIC)


def test_avalanche_ext_data_hash_matches_from_apricot_phase_1() -> None:
    """Fixture headers from Apricot Phase 1 on commit to their extData; earlier ones hold zero."""
    from vmstack.cchain import ext_data_hash

    for vector in _blocks("cchain_blocks.json"):
        if not vector["name"].startswith("cchain-fixture/"):
            continue
        block = AVALANCHE.decode_block(_hex(vector["rlp"]))
        assert block.body.ext_data is not None and block.body.version == 0
        header = block.header
        if vector["fork"] == "noUpgrades":
            assert header.ext_data_hash == bytes(32), vector["name"]  # type: ignore[union-attr]
        else:
            expected = ext_data_hash(block.body.ext_data)
            assert header.ext_data_hash == expected, vector["name"]  # type: ignore[union-attr]


@pytest.mark.parametrize(("name", "flavour"), _cases())
def test_every_sender_recovers(name: str, flavour: Flavour) -> None:
    """Every signed transaction in the vectors yields a sender; the fixture's are its funded key."""
    senders: dict[str, set[bytes]] = {}
    for vector in _blocks(name):
        block = flavour.decode_block(_hex(vector["rlp"]))
        group = vector["name"].split("/")[0]
        for tx in block.transactions:
            if vector["name"] in HIGH_S and isinstance(tx, LegacyTx):
                with pytest.raises(InvalidBlock, match="not low"):
                    tx.sender()
                digest = tx.signing_hash(tx.chain_id)
                assert len(recover_address(digest, tx.y_parity, tx.r, tx.s, low_s=False)) == 20
                continue
            senders.setdefault(group, set()).add(tx.sender())
    if flavour is AVALANCHE:
        assert len(senders["cchain-fixture"]) == 1
    else:
        assert bytes.fromhex("a94f5374fce5edbc8e2a8697c15331677e6ebf0b") in senders["ethtests"]
        assert len(senders["geth-hivechain"]) == 1


def test_cchain_fixture_senders_sign_for_its_chain() -> None:
    """Fixture transactions are EIP-155 or typed for chain 43110 and reject another chain id."""
    for vector in _blocks("cchain_blocks.json"):
        if not vector["name"].startswith("cchain-fixture/"):
            continue
        for tx in AVALANCHE.decode_block(_hex(vector["rlp"])).transactions:
            assert tx.sender(43110) == tx.sender()
            with pytest.raises(InvalidBlock, match="chain id"):
                tx.sender(1)


def test_libevm_body_vectors_round_trip() -> None:
    """The two C-chain body encodings (nil and non-nil extData) decode and re-encode exactly."""
    bodies = load_vectors("cchain_blocks.json")["bodies"]
    assert len(bodies) == 2
    for vector in bodies:
        data = _hex(vector["body_rlp"])
        body = AVALANCHE.decode_body(data)
        assert AVALANCHE.encode_body(body) == data, vector["name"]
        assert body.version == int.from_bytes(_hex(vector["items"][2])[1:], "big")
        assert len(body.transactions) == 1 and body.uncles == ()
        tx = body.transactions[0]
        assert isinstance(tx, LegacyTx) and tx.nonce == 42 and tx.r == 0
        assert AVALANCHE.encode_body(body) == data
        assert body.ext_data == decode_rlp(_hex(vector["items"][3]), "ext data")


def test_database_values_stitch_and_receipts_commit() -> None:
    """Fixture database header and body values stitch to the block; receipts match the header."""
    layout = load_vectors("cchain_blocks.json")["db_layout_examples"]
    blocks = {
        v["number"]: v for v in _blocks("cchain_blocks.json") if v["name"].startswith("cchain-")
    }
    examples = [e for e in layout["examples"] if "entries" in e]
    assert len(examples) == 3
    for example in examples:
        values = {entry["what"].split()[0]: _hex(entry["value"]) for entry in example["entries"]}
        number = example["block_number"]
        vector = blocks[number]
        data = block_bytes(values["header"], values["body"])
        assert data == _hex(vector["rlp"])
        block = AVALANCHE.decode_block(data)
        assert block.hash == _hex(example["block_hash"])
        receipts = decode_receipts(values["receipts"])
        assert encode_receipts(receipts) == values["receipts"]
        senders = [tx.sender() for tx in block.transactions]
        derived = derive_receipts(receipts, block, senders)
        assert receipts_root(derived) == block.header.receipt_root
        bloom = bytearray(256)
        for receipt in derived:
            assert receipt.bloom == logs_bloom(receipt.logs)
            assert receipt.block_hash == block.hash and receipt.tx_hash is not None
            bloom = bytearray(a | b for a, b in zip(bloom, receipt.bloom, strict=True))
        assert bytes(bloom) == block.header.bloom
        if not block.transactions:
            assert receipts_root(derived) == EMPTY_ROOT


def test_rlp_valid_vectors_decode_and_pass_the_framing_check() -> None:
    """Every valid RLP case decodes strictly to its input and passes check_rlp."""
    cases = load_vectors("rlp_vectors.json")["valid"]

    def expected(value: Any) -> Any:
        if isinstance(value, list):
            return [expected(v) for v in value]
        if isinstance(value, int):
            return value.to_bytes((value.bit_length() + 7) // 8, "big")
        if value.startswith("#"):
            number = int(value[1:])
            return number.to_bytes((number.bit_length() + 7) // 8, "big")
        return value.encode()

    assert len(cases) == 28
    for name, case in cases.items():
        data = _hex(case["out"])
        check_rlp(data)
        assert decode_rlp(data, name) == expected(case["in"]), name


def test_rlp_invalid_vectors_are_rejected() -> None:
    """Every invalid RLP case raises InvalidBlock from the decoder and from check_rlp."""
    cases = load_vectors("rlp_vectors.json")["invalid"]
    assert len(cases) == 26
    for name, case in cases.items():
        data = _hex(case["out"])
        with pytest.raises(InvalidBlock):
            decode_rlp(data, name)
        with pytest.raises(InvalidBlock):
            check_rlp(data)
