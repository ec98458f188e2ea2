"""Byte mutations of valid blocks, as hypothesis strategies, and the valid seeds they start from.

A mutation is a small frozen record with an ``apply(data) -> bytes`` method, so hypothesis
prints a failing case as a readable recipe (``SetLength(item=3, length=2**60)``) rather than
as opaque bytes. Two families:

- byte-level: :class:`BitFlip`, :class:`Truncate`, :class:`Extend`, :class:`Overwrite`
  (a big-endian integer written over the bytes at a position: u32 length fields of a
  proposer envelope);
- RLP-aware, located by walking the item prefixes of the current bytes:
  :class:`SetLength` (an item's declared length rewritten: off by a few, zero, 2**60,
  2**64 - 1, in canonical or non-canonical form) and :class:`SwapItems` (an item swapped
  with its next sibling, so fields change places while every length stays right).

Seeds are valid blocks: generated C-chain blocks of both flavours (every transaction type,
uncles, withdrawals, extData, a block over 64 KiB), the vector blocks when the vectors are
present, and proposer envelopes of every type.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import attrs
from hypothesis import strategies as st

from tests.conftest import load_vectors, vectors_dir
from vmstack.cchain import (
    AVALANCHE,
    ETHEREUM,
    AccessListTx,
    AccessTuple,
    Authorization,
    AvalancheHeader,
    BlobTx,
    DynamicFeeTx,
    Flavour,
    Header,
    LegacyTx,
    Receipt,
    SetCodeTx,
    Transaction,
    Withdrawal,
    list_prefix,
    read_prefix,
    sign_transaction,
)
from vmstack.errors import InvalidBlock
from vmstack.wrappers.proposer.envelope import (
    Epoch,
    build_option,
    build_signed,
    build_unsigned,
)
from vmstack.wrappers.proposer.staking import StakingKey

__all__ = [
    "HUGE_LENGTHS",
    "BitFlip",
    "Extend",
    "Item",
    "Mutation",
    "Overwrite",
    "SetLength",
    "SwapItems",
    "Truncate",
    "byte_mutations",
    "cchain_seeds",
    "deeply_nested",
    "huge_length_inputs",
    "mutate",
    "proposer_seeds",
    "rlp_items",
    "rlp_mutations",
    "u32_mutations",
    "vector_proposer_blocks",
    "vector_seeds",
]

#: Declared lengths that no buffer can hold: a decoder must refuse them without allocating.
HUGE_LENGTHS = (2**31, 2**32 - 1, 2**32, 2**60, 2**63, 2**64 - 1)

CHAIN_ID = 43114
_KEY = 0x4C0883A69102937D6231471B5DBB6204FE5129617082792AE468D01A3F362318
_ADDRESS = bytes.fromhex("11" * 20)


@attrs.frozen
class Item:
    """One RLP item found in a buffer: where its prefix starts, where its payload starts and
    ends, whether it is a list, and the index of the list item it belongs to (-1 at top)."""

    offset: int
    payload: int
    end: int
    is_list: bool
    parent: int


def rlp_items(data: bytes) -> list[Item]:
    """Every RLP item of ``data`` in prefix order, stopping quietly at the first bad prefix."""
    items: list[Item] = []
    stack: list[tuple[int, int]] = []
    scope_end = len(data)
    parent = -1
    offset = 0
    try:
        while True:
            if offset < scope_end:
                is_list, payload, length = read_prefix(data, offset, scope_end)
                items.append(Item(offset, payload, payload + length, is_list, parent))
                if is_list:
                    stack.append((scope_end, parent))
                    scope_end, parent, offset = payload + length, len(items) - 1, payload
                else:
                    offset = payload + length
            elif stack:
                scope_end, parent = stack.pop()
            else:
                return items
    except InvalidBlock:
        return items


def _prefix(is_list: bool, length: int, *, long_form: bool = False) -> bytes:
    """An RLP prefix declaring ``length``; ``long_form`` forces the long form (non-canonical
    below 56 bytes)."""
    short_base, long_base = (0xC0, 0xF7) if is_list else (0x80, 0xB7)
    if length < 56 and not long_form:
        return bytes((short_base + length,))
    width = max(1, (length.bit_length() + 7) // 8)
    return bytes((long_base + width,)) + length.to_bytes(width, "big")


class Mutation:
    """Base of the mutations: ``apply`` turns valid bytes into (probably) invalid ones."""

    def apply(self, data: bytes) -> bytes:
        raise NotImplementedError


@attrs.frozen
class BitFlip(Mutation):
    """Flip bit ``bit`` of the byte at ``position`` (modulo the length)."""

    position: int
    bit: int

    def apply(self, data: bytes) -> bytes:
        if not data:
            return data
        i = self.position % len(data)
        return data[:i] + bytes((data[i] ^ (1 << (self.bit % 8)),)) + data[i + 1 :]


@attrs.frozen
class Truncate(Mutation):
    """Keep the first ``keep`` bytes (modulo the length: always shorter)."""

    keep: int

    def apply(self, data: bytes) -> bytes:
        return data[: self.keep % len(data)] if data else data


@attrs.frozen
class Extend(Mutation):
    """Append ``tail``."""

    tail: bytes

    def apply(self, data: bytes) -> bytes:
        return data + self.tail


@attrs.frozen
class Overwrite(Mutation):
    """Write ``value`` as ``width`` big-endian bytes at ``position`` (modulo the length)."""

    position: int
    value: int
    width: int = 4

    def apply(self, data: bytes) -> bytes:
        if len(data) < self.width:
            return data
        i = self.position % (len(data) - self.width + 1)
        return data[:i] + self.value.to_bytes(self.width, "big") + data[i + self.width :]


@attrs.frozen
class SetLength(Mutation):
    """Rewrite the prefix of RLP item number ``item`` (modulo the item count) to declare
    ``length`` bytes, keeping its payload; ``long_form`` writes a non-canonical long form."""

    item: int
    length: int
    long_form: bool = False

    def apply(self, data: bytes) -> bytes:
        items = rlp_items(data)
        if not items:
            return data
        target = items[self.item % len(items)]
        if target.payload == target.offset:
            return data
        prefix = _prefix(target.is_list, self.length, long_form=self.long_form)
        return data[: target.offset] + prefix + data[target.payload :]


@attrs.frozen
class SwapItems(Mutation):
    """Swap RLP item number ``item`` (modulo the item count) with its next sibling."""

    item: int

    def apply(self, data: bytes) -> bytes:
        items = rlp_items(data)
        if not items:
            return data
        first = items[self.item % len(items)]
        second = next(
            (it for it in items if it.offset == first.end and it.parent == first.parent), None
        )
        if second is None:
            return data
        return (
            data[: first.offset]
            + data[second.offset : second.end]
            + data[first.offset : first.end]
            + data[second.end :]
        )


_lengths = st.one_of(
    st.sampled_from((0, 1, 55, 56, 255, 256, 65535, 65536, *HUGE_LENGTHS)),
    st.integers(0, 2**64 - 1),
)

#: Mutations that work on any bytes.
byte_mutations = st.one_of(
    st.builds(BitFlip, st.integers(0, 2**20), st.integers(0, 7)),
    st.builds(Truncate, st.integers(0, 2**20)),
    st.builds(Extend, st.binary(min_size=1, max_size=40)),
)
#: Mutations of RLP framing and field order, plus the byte-level ones.
rlp_mutations = st.one_of(
    byte_mutations,
    st.builds(SetLength, st.integers(0, 2**16), _lengths, st.booleans()),
    st.builds(SwapItems, st.integers(0, 2**16)),
)
#: Mutations of u32 length fields (proposer envelopes), plus the byte-level ones.
u32_mutations = st.one_of(
    byte_mutations,
    st.builds(
        Overwrite,
        st.integers(0, 2**16),
        st.sampled_from((0, 1, 31, 32, 0x7FFFFFFF, 0xFFFFFFFF)) | st.integers(0, 2**32 - 1),
    ),
)


@st.composite
def mutate(
    draw: st.DrawFn, seeds: Sequence[bytes], mutations: st.SearchStrategy[Mutation]
) -> bytes:
    """One of ``seeds`` with one to three of ``mutations`` applied in turn."""
    data = draw(st.sampled_from(seeds))
    for mutation in draw(st.lists(mutations, min_size=1, max_size=3)):
        data = mutation.apply(data)
    return data


def huge_length_inputs(seed: bytes) -> list[bytes]:
    """``seed`` with its outer list, its header and a deep string declaring huge lengths, in
    long form, plus bare prefixes declaring them over a few bytes."""
    items = rlp_items(seed)
    inner_string = next(it for it in items if not it.is_list and it.payload > it.offset)
    inputs: list[bytes] = []
    for length in (2**60, 2**64 - 1):
        for target in (items[0], items[1], inner_string):
            prefix = _prefix(target.is_list, length)
            inputs.append(seed[: target.offset] + prefix + seed[target.payload :])
        inputs.append(_prefix(True, length) + b"\xc0" * 8)
        inputs.append(_prefix(False, length) + b"\x00" * 8)
    return inputs


def deeply_nested(depth: int) -> bytes:
    """An RLP list nested ``depth`` levels deep: valid RLP that no block can be."""
    data = b"\xc0"
    for _ in range(depth):
        data = list_prefix(len(data)) + data
    return data


# --- seeds --------------------------------------------------------------------------------


def _transactions(nonce: int, *, big: bool = False) -> list[Transaction]:
    """One signed transaction of every type (data of 70 KiB in one when ``big``)."""
    keys = (b"\x22" * 32, b"\x33" * 32)
    access = (AccessTuple(address=_ADDRESS, storage_keys=keys),)
    common: dict[str, Any] = {"chain_id": CHAIN_ID, "gas": 21_000, "value": 10**18}
    fees: dict[str, Any] = {"max_priority_fee_per_gas": 2 * 10**9, "max_fee_per_gas": 50 * 10**9}
    unsigned: list[Transaction] = [
        LegacyTx(
            nonce=nonce,
            gas_price=25 * 10**9,
            gas=21_000,
            to=_ADDRESS,
            value=1,
            data=b"\x01" * (70_000 if big else 3),
        ),
        AccessListTx(
            nonce=nonce + 1,
            gas_price=25 * 10**9,
            to=None,
            data=b"\x60\x00",
            access_list=access,
            **common,
        ),
        DynamicFeeTx(nonce=nonce + 2, to=_ADDRESS, access_list=access, **fees, **common),
        BlobTx(
            nonce=nonce + 3,
            to=_ADDRESS,
            max_fee_per_blob_gas=1,
            blob_versioned_hashes=(b"\x01" + b"\x44" * 31,),
            **fees,
            **common,
        ),
        SetCodeTx(
            nonce=nonce + 4,
            to=_ADDRESS,
            authorization_list=(
                Authorization(chain_id=CHAIN_ID, address=_ADDRESS, nonce=7, y_parity=1, r=5, s=6),
            ),
            **fees,
            **common,
        ),
    ]
    signed = [sign_transaction(tx, _KEY, CHAIN_ID) for tx in unsigned]
    signed.append(
        sign_transaction(
            LegacyTx(nonce=nonce + 5, gas_price=1, gas=21_000, to=_ADDRESS), _KEY, None
        )
    )
    return signed


def _receipts(txs: Sequence[Transaction]) -> list[Receipt]:
    return [
        Receipt(status=1, cumulative_gas_used=21_000 * (i + 1), tx_type=tx.TYPE)
        for i, tx in enumerate(txs)
    ]


def cchain_seeds() -> list[tuple[Flavour, bytes]]:
    """Valid generated blocks of both flavours, each with the flavour that decodes it."""
    parent = b"\x55" * 32
    out: list[tuple[Flavour, bytes]] = []
    eth_headers = [
        Header(parent_hash=parent, number=1, time=1_000, gas_limit=8_000_000),
        Header(parent_hash=parent, number=2, time=1_002, gas_limit=8_000_000, base_fee=7),
        Header(
            parent_hash=parent,
            number=3,
            time=1_004,
            gas_limit=30_000_000,
            base_fee=7,
            withdrawals_hash=bytes(32),
        ),
        Header(
            parent_hash=parent,
            number=4,
            time=1_006,
            gas_limit=30_000_000,
            base_fee=7,
            withdrawals_hash=bytes(32),
            blob_gas_used=131_072,
            excess_blob_gas=0,
            parent_beacon_root=b"\x66" * 32,
            requests_hash=b"\x77" * 32,
        ),
    ]
    uncle = Header(parent_hash=b"\x88" * 32, number=1, time=999, extra=b"uncle")
    for i, header in enumerate(eth_headers):
        txs = _transactions(10 * i) if i else []
        withdrawals = (
            None
            if header.withdrawals_hash is None
            else [Withdrawal(index=i, validator_index=9, address=_ADDRESS, amount=32)]
        )
        body = ETHEREUM.body(txs, [uncle] if i == 1 else [], withdrawals=withdrawals)
        out.append((ETHEREUM, ETHEREUM.encode_block(ETHEREUM.seal(header, body, _receipts(txs)))))
    big = _transactions(100, big=True)[:1]
    out.append(
        (
            ETHEREUM,
            ETHEREUM.encode_block(
                ETHEREUM.seal(eth_headers[1], ETHEREUM.body(big), _receipts(big))
            ),
        )
    )
    ava_headers = [
        AvalancheHeader(parent_hash=parent, number=1, time=1_000, gas_limit=8_000_000),
        AvalancheHeader(
            parent_hash=parent, number=2, time=1_002, gas_limit=8_000_000, base_fee=25 * 10**9
        ),
        AvalancheHeader(
            parent_hash=parent,
            number=3,
            time=1_004,
            gas_limit=15_000_000,
            base_fee=25 * 10**9,
            ext_data_gas_used=0,
            block_gas_cost=100,
        ),
        AvalancheHeader(
            parent_hash=parent,
            number=4,
            time=1_006,
            gas_limit=15_000_000,
            base_fee=25 * 10**9,
            ext_data_gas_used=0,
            block_gas_cost=0,
            blob_gas_used=0,
            excess_blob_gas=0,
            parent_beacon_root=bytes(32),
            time_milliseconds=1_006_500,
            min_delay_excess=3,
        ),
    ]
    for i, ava_header in enumerate(ava_headers):
        txs = _transactions(10 * i) if i else []
        body = AVALANCHE.body(txs, version=0, ext_data=b"\x00\x01atomic" * i)
        out.append(
            (AVALANCHE, AVALANCHE.encode_block(AVALANCHE.seal(ava_header, body, _receipts(txs))))
        )
    return out


def vector_seeds() -> list[tuple[Flavour, bytes]]:
    """The vector blocks with their flavours; empty when the vectors are absent."""
    out: list[tuple[Flavour, bytes]] = []
    for name, flavour in (("blocks.json", ETHEREUM), ("cchain_blocks.json", AVALANCHE)):
        if not (vectors_dir() / name).is_file():
            continue
        loaded = load_vectors(name)
        blocks = loaded["blocks"] if isinstance(loaded, dict) else loaded
        out.extend((flavour, bytes.fromhex(b["rlp"][2:])) for b in blocks)
    return out


def vector_proposer_blocks() -> list[dict[str, object]]:
    """The proposer vectors (hex decoded into ``data``); empty when they are absent."""
    path = vectors_dir() / "proposervm_blocks.json"
    if not path.is_file():
        return []
    entries: list[dict[str, object]] = json.loads(path.read_text())
    for entry in entries:
        entry["data"] = bytes.fromhex(str(entry["hex"])[2:])
    return entries


def proposer_seeds(inner: bytes = b"\x03" * 40) -> list[bytes]:
    """Valid proposer envelopes over ``inner``: unsigned, signed (ECDSA), Granite, option."""
    key = StakingKey.generate(seed=b"reliability")
    chain_id = bytes(32)
    parent = b"\x01" * 32
    return [
        bytes(build_unsigned(parent, 123, 2, inner)),
        bytes(build_unsigned(parent, 123, 2, inner, Epoch(2, 1, 123))),
        bytes(build_signed(parent, 125, 3, inner, key=key, chain_id=chain_id)),
        bytes(
            build_signed(parent, 125, 3, inner, key=key, chain_id=chain_id, epoch=Epoch(3, 1, 124))
        ),
        bytes(build_option(parent, inner)),
    ]
