"""Property tests: for generated blocks of both flavours, stitching equals encoding and decoding
inverts encoding."""

from __future__ import annotations

from typing import Any

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from vmstack.cchain import (
    AVALANCHE,
    ETHEREUM,
    AccessListTx,
    AccessTuple,
    Authorization,
    AvalancheHeader,
    BlobTx,
    Block,
    DynamicFeeTx,
    Flavour,
    Header,
    LegacyTx,
    SetCodeTx,
    Withdrawal,
    block_bytes,
    header_parent_hash,
    split_block,
)

hashes = st.binary(min_size=32, max_size=32)
addresses = st.binary(min_size=20, max_size=20)
u64 = st.integers(0, 2**64 - 1)
u256 = st.integers(0, 2**256 - 1)
small = st.integers(0, 2**20)
data = st.binary(max_size=120)
access_lists = st.lists(
    st.builds(AccessTuple, address=addresses, storage_keys=st.lists(hashes, max_size=2).map(tuple)),
    max_size=2,
).map(tuple)
_signature = {"r": u256, "s": u256}

legacy = st.builds(
    LegacyTx,
    nonce=u64,
    gas_price=u256,
    gas=u64,
    to=st.none() | addresses,
    value=u256,
    data=data,
    v=u256,
    **_signature,
)
_typed_common = {
    "chain_id": u256,
    "nonce": u64,
    "gas": u64,
    "value": u256,
    "data": data,
    "access_list": access_lists,
    "y_parity": st.integers(0, 1),
    **_signature,
}
access_list_txs = st.builds(AccessListTx, gas_price=u256, to=st.none() | addresses, **_typed_common)
_fees = {"max_priority_fee_per_gas": u256, "max_fee_per_gas": u256}
dynamic_fee_txs = st.builds(DynamicFeeTx, to=st.none() | addresses, **_fees, **_typed_common)
blob_txs = st.builds(
    BlobTx,
    to=addresses,
    max_fee_per_blob_gas=u256,
    blob_versioned_hashes=st.lists(hashes, max_size=3).map(tuple),
    **_fees,
    **_typed_common,
)
authorizations = st.builds(
    Authorization,
    chain_id=u256,
    address=addresses,
    nonce=u64,
    y_parity=st.integers(0, 255),
    r=u256,
    s=u256,
)
set_code_txs = st.builds(
    SetCodeTx,
    to=addresses,
    authorization_list=st.lists(authorizations, max_size=2).map(tuple),
    **_fees,
    **_typed_common,
)
any_transaction = st.one_of(legacy, access_list_txs, dynamic_fee_txs, blob_txs, set_code_txs)

_base_header = {
    "parent_hash": hashes,
    "uncle_hash": hashes,
    "coinbase": addresses,
    "state_root": hashes,
    "tx_root": hashes,
    "receipt_root": hashes,
    "bloom": st.binary(min_size=256, max_size=256),
    "difficulty": u256,
    "number": small,
    "gas_limit": u64,
    "gas_used": u64,
    "time": u64,
    "extra": st.binary(max_size=80),
    "mix_digest": hashes,
    "nonce": st.binary(min_size=8, max_size=8),
}
_ETH_OPTIONAL = {
    "base_fee": u256,
    "withdrawals_hash": hashes,
    "blob_gas_used": u64,
    "excess_blob_gas": u64,
    "parent_beacon_root": hashes,
    "requests_hash": hashes,
}
_AVA_OPTIONAL = {
    "base_fee": u256,
    "ext_data_gas_used": u256,
    "block_gas_cost": u256,
    "blob_gas_used": u64,
    "excess_blob_gas": u64,
    "parent_beacon_root": hashes,
    "time_milliseconds": u64,
    "min_delay_excess": u64,
}


@st.composite
def headers(draw: st.DrawFn, cls: Any, optional: dict[str, Any], extra: dict[str, Any]) -> Any:
    """A header with the optional fields of some fork: a prefix of the optional tail."""
    present = draw(st.integers(0, len(optional)))
    fields = {**_base_header, **extra, **dict(list(optional.items())[:present])}
    return draw(st.builds(cls, **fields))


eth_headers = headers(Header, _ETH_OPTIONAL, {})
ava_headers = headers(AvalancheHeader, _AVA_OPTIONAL, {"ext_data_hash": hashes})
withdrawals = st.lists(
    st.builds(Withdrawal, index=u64, validator_index=u64, address=addresses, amount=u64),
    max_size=8,
)


@st.composite
def blocks(draw: st.DrawFn, flavour: Flavour, tx_count: int | None = None) -> Block:
    """A block of ``flavour``: 0-100 mixed transactions, uncles, the flavour's body extras.

    With ``tx_count``, that many transactions are made from a few drawn ones with distinct
    nonces (drawing 100 independent transactions would exceed Hypothesis' input budget).
    """
    header_strategy = eth_headers if flavour is ETHEREUM else ava_headers
    if tx_count is None:
        txs = draw(st.lists(any_transaction, max_size=100))
    else:
        seeds = draw(st.lists(any_transaction, min_size=1, max_size=6))
        txs = [attrs.evolve(seeds[i % len(seeds)], nonce=i) for i in range(tx_count)]
    body = flavour.body(
        txs,
        draw(st.lists(header_strategy, max_size=2)),
        withdrawals=draw(st.none() | withdrawals),
        version=draw(st.integers(0, 2**32 - 1)),
        ext_data=draw(st.binary(max_size=600)),
    )
    return Block(draw(header_strategy), body)


def _check(flavour: Flavour, block: Block) -> None:
    header_rlp = flavour.encode_header(block.header)
    body_rlp = flavour.encode_body(block.body)
    data = flavour.encode_block(block)
    assert block_bytes(header_rlp, body_rlp) == data
    assert block_bytes(memoryview(header_rlp), memoryview(body_rlp)) == data
    assert split_block(data) == (header_rlp, body_rlp)
    assert header_parent_hash(header_rlp) == block.parent_hash
    decoded = flavour.decode_block(data)
    assert decoded == block
    assert flavour.decode_header(header_rlp) == block.header
    assert flavour.decode_body(body_rlp) == block.body


@settings(max_examples=30, deadline=None)
@given(blocks(ETHEREUM))
def test_ethereum_blocks_stitch_and_round_trip(block: Block) -> None:
    """Ethereum: block_bytes(header, body) == encode_block, and decoding inverts encoding."""
    _check(ETHEREUM, block)


@settings(max_examples=30, deadline=None)
@given(blocks(AVALANCHE))
def test_avalanche_blocks_stitch_and_round_trip(block: Block) -> None:
    """Avalanche: block_bytes(header, body) == encode_block, and decoding inverts encoding."""
    _check(AVALANCHE, block)


@settings(max_examples=2, deadline=None)
@given(
    st.sampled_from([ETHEREUM, AVALANCHE]).flatmap(lambda f: st.tuples(st.just(f), blocks(f, 100)))
)
def test_blocks_with_100_mixed_transactions(case: tuple[Flavour, Block]) -> None:
    """A block of 100 mixed-type transactions stitches and round-trips."""
    flavour, block = case
    assert len(block.transactions) == 100
    _check(flavour, block)


@settings(max_examples=4, deadline=None)
@given(
    st.sampled_from([ETHEREUM, AVALANCHE]),
    st.data(),
    st.integers(66_000, 90_000),
)
def test_bodies_over_64_kib_use_the_three_byte_length(
    flavour: Flavour, draw: st.DataObject, size: int
) -> None:
    """A body over 64 KiB (three-byte length prefix) stitches and round-trips in both flavours."""
    block = draw.draw(blocks(flavour))
    big = LegacyTx(nonce=1, to=None, data=b"\x5b" * size, v=27, r=1, s=1)
    body = flavour.body(
        (*block.transactions, big),
        block.uncles,
        withdrawals=block.body.withdrawals,
        version=block.body.version or 0,
        ext_data=b"\xee" * size,
    )
    large = Block(block.header, body)
    body_rlp = flavour.encode_body(body)
    assert body_rlp[0] == 0xFA and len(body_rlp) > 65536
    _check(flavour, large)
    assert flavour.encode_block(large)[0] == 0xFA
