"""Coverage-guided fuzzing of the C-chain codec and its byte-level helpers (atheris).

Every entry point that reads block bytes from a peer or a store gets each input: both
flavours' ``decode_block`` / ``decode_header`` / ``decode_body``, ``split_block``,
``header_slice``, ``header_parent_hash``, ``block_bytes`` (the input cut in two),
``check_rlp`` / ``decode_rlp``, ``decode_transaction`` and ``decode_receipts``. Only
``InvalidBlock`` may come out, and whatever decodes must re-encode to the very same bytes.
See fuzz/README.md for how to run it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from harness import attempt, main, vector_files

from vmstack.cchain import (
    AVALANCHE,
    ETHEREUM,
    AccessListTx,
    AvalancheHeader,
    DynamicFeeTx,
    Header,
    LegacyTx,
    Receipt,
    Transaction,
    block_bytes,
    check_rlp,
    decode_receipts,
    decode_rlp,
    decode_transaction,
    encode_receipts,
    header_parent_hash,
    header_slice,
    keccak256,
    sign_transaction,
    split_block,
)
from vmstack.errors import InvalidBlock

FLAVOURS = (ETHEREUM, AVALANCHE)


def one_input(data: bytes) -> None:
    """Feed ``data`` to every codec entry point; raise on anything but ``InvalidBlock``."""
    for flavour in FLAVOURS:
        block = attempt(flavour.decode_block, data)
        if block is not None:
            assert flavour.encode_block(block) == data, "decode_block is not inverted"
            header_rlp = bytes(header_slice(data))
            assert block.hash == keccak256(header_rlp), "hash is not of the header bytes"
            assert header_parent_hash(header_rlp) == block.header.parent_hash
            header_part, body_part = split_block(data)
            assert block_bytes(header_part, body_part) == data, "split and stitch disagree"
            assert flavour.decode_body(body_part) == block.body
            for tx in block.transactions:
                attempt(tx.sender)
        header = attempt(flavour.decode_header, data)
        if header is not None:
            assert flavour.encode_header(header) == data
        body = attempt(flavour.decode_body, data)
        if body is not None:
            assert flavour.encode_body(body) == data
    parts = attempt(split_block, data)
    if parts is not None:
        assert block_bytes(*parts) == data
    view = attempt(header_slice, data)
    if view is not None:
        attempt(header_parent_hash, view)
    if data:
        cut = data[0] % len(data)
        attempt(block_bytes, data[:cut], data[cut:])
    attempt(header_parent_hash, data)
    try:
        check_rlp(data)
        framed = True
    except InvalidBlock:
        framed = False
    decoded = attempt(decode_rlp, data, "input")
    assert (decoded is not None) == framed, "check_rlp and decode_rlp disagree"
    transaction = attempt(decode_transaction, data)
    if transaction is not None:
        assert transaction.encode() == data
        attempt(transaction.sender)
    receipts = attempt(decode_receipts, data)
    if receipts is not None:
        assert encode_receipts(receipts) == data


def seeds() -> Iterator[bytes]:
    """Valid blocks of both flavours (signed transactions of three types), their halves,
    stored receipts, and the vector blocks when the vectors are present."""
    key, chain_id, to = 0x1234, 43114, b"\x11" * 20
    txs: list[Transaction] = [
        sign_transaction(
            LegacyTx(nonce=0, gas_price=10**9, gas=21_000, to=to, value=1), key, chain_id
        ),
        sign_transaction(
            AccessListTx(chain_id=chain_id, nonce=1, gas_price=10**9, gas=30_000, data=b"\x60\x00"),
            key,
            chain_id,
        ),
        sign_transaction(
            DynamicFeeTx(
                chain_id=chain_id,
                nonce=2,
                max_fee_per_gas=10**10,
                max_priority_fee_per_gas=1,
                gas=21_000,
                to=to,
            ),
            key,
            chain_id,
        ),
    ]
    blocks = [
        ETHEREUM.encode_block(
            ETHEREUM.seal(
                Header(
                    number=7,
                    time=1_000,
                    gas_limit=30_000_000,
                    base_fee=7,
                    withdrawals_hash=bytes(32),
                ),
                ETHEREUM.body(txs, withdrawals=[]),
            )
        ),
        AVALANCHE.encode_block(
            AVALANCHE.seal(
                AvalancheHeader(number=7, time=1_000, gas_limit=15_000_000, base_fee=25),
                AVALANCHE.body(txs, version=0, ext_data=b"atomic"),
            )
        ),
    ]
    for block in blocks:
        yield block
        yield from split_block(block)
    yield from (tx.encode() for tx in txs)
    yield encode_receipts(
        [
            Receipt(status=1, cumulative_gas_used=21_000),
            Receipt(status=0, cumulative_gas_used=51_000),
        ]
    )
    folder = vector_files()
    if folder is not None:
        for name in ("blocks.json", "cchain_blocks.json"):
            path = folder / name
            if path.is_file():
                loaded = json.loads(path.read_text())
                entries = loaded["blocks"] if isinstance(loaded, dict) else loaded
                yield from (bytes.fromhex(entry["rlp"][2:]) for entry in entries)


if __name__ == "__main__":
    main(one_input, seeds)
