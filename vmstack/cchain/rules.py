"""The block rules of :class:`~vmstack.cchain.vm.CChainVM`, as pure functions: what a header
must meet against its parent, what every transaction must meet before any signature work,
what a body received as bytes must meet (its sizes, its decode, and that the header commits
to it), and that a header commits to the receipts its block's execution produced.

Each rule is here once and raises :class:`~vmstack.errors.InvalidBlock` naming the rule;
``verify`` calls them cheapest first, so that hostile bytes cost little to refuse. The body's
commitments themselves are computed and compared in :mod:`vmstack.cchain.tries`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Final

from vmstack.cchain.crypto import SECP256K1_HALF_N, SECP256K1_N
from vmstack.cchain.execution import TX_BASE_GAS, intrinsic_gas
from vmstack.cchain.genesis import BASE_FEE, BLACKHOLE_ADDRESS, GAS_LIMIT, MAX_ACCOUNT_NONCE
from vmstack.cchain.rlpbytes import ItemSpan, list_item_encodings
from vmstack.cchain.state import max_price
from vmstack.cchain.tries import (
    ReceiptCommitments,
    check_body_commitments,
    encoded_body_commitments,
    receipt_commitments,
)
from vmstack.cchain.types import (
    AnyHeader,
    AvalancheHeader,
    Body,
    LegacyTx,
    Receipt,
    Transaction,
)
from vmstack.errors import InvalidBlock

__all__ = [
    "MAX_FUTURE_SECONDS",
    "MAX_NONCE",
    "MAX_UNCLES",
    "MAX_WITHDRAWALS",
    "base_fee_rule",
    "check_fee_rules",
    "check_header_rules",
    "check_receipt_commitments",
    "check_receipts_commitments",
    "check_received_body",
    "check_transaction_rules",
]

#: How far (seconds) a block's timestamp may run ahead of the VM's clock (coreth's
#: ``maxFutureBlockTime``).
MAX_FUTURE_SECONDS: Final = 10
#: The most uncles an (Ethereum-flavour) block may carry, as geth allows.
MAX_UNCLES: Final = 2
#: The highest nonce an account may reach (EIP-2681): a transaction's nonce is below it.
MAX_NONCE: Final = MAX_ACCOUNT_NONCE
#: The most withdrawals a block may carry (the consensus layer's
#: ``MAX_WITHDRAWALS_PER_PAYLOAD``).
MAX_WITHDRAWALS: Final = 16


def check_header_rules(
    header: AnyHeader,
    *,
    parent_number: int,
    parent_time: int,
    now: float,
    gas_limit: int | None = GAS_LIMIT,
) -> None:
    """The header rules a child must meet against its parent (``InvalidBlock`` naming the
    rule): height is the parent's plus one; timestamp is at or after the parent's and at
    most :data:`MAX_FUTURE_SECONDS` ahead of ``now``; the gas limit is the chain's fixed
    ``gas_limit`` (as on the C-chain since Cortina; ``None`` takes the header's as given);
    gas used is within the gas limit."""
    if header.number != parent_number + 1:
        raise InvalidBlock(
            f"block height {header.number} is not its parent's {parent_number} plus one"
        )
    if header.time < parent_time:
        raise InvalidBlock(f"block timestamp {header.time} is before its parent's {parent_time}")
    if header.time > now + MAX_FUTURE_SECONDS:
        raise InvalidBlock(
            f"block timestamp {header.time} is more than "
            f"{MAX_FUTURE_SECONDS} s ahead of the clock ({now:.0f})"
        )
    if gas_limit is not None and header.gas_limit != gas_limit:
        raise InvalidBlock(f"block gas limit {header.gas_limit} is not the chain's {gas_limit}")
    if header.gas_used > header.gas_limit:
        raise InvalidBlock(
            f"block gas used {header.gas_used} exceeds its gas limit {header.gas_limit}"
        )


def base_fee_rule(parent: AnyHeader) -> int:
    """The chain's fee rule: the base fee of the child of ``parent``, the one its header
    must carry and its builder writes. Both flavours keep a static base fee,
    :data:`~vmstack.cchain.genesis.BASE_FEE` (25 gwei, the C-chain's floor since Apricot
    Phase 3) for every block after genesis; coreth's dynamic fee window is not modelled
    (see docs/chain-rules.md)."""
    del parent  # static: the same for every parent
    return BASE_FEE


def check_fee_rules(
    header: AnyHeader, transactions: Sequence[Transaction], *, base_fee: int
) -> None:
    """The fee rules of a block whose header must carry ``base_fee`` (from
    :func:`base_fee_rule`; ``InvalidBlock`` naming the rule): the header's base fee is
    ``base_fee``; an Avalanche header's coinbase is the blackhole address (coreth burns every
    fee there); every transaction's fee cap (gas price, or max fee) is at least the base fee,
    so what it pays a unit of gas (``min(max_fee, base_fee + tip)``) is within its caps."""
    if header.base_fee != base_fee:
        raise InvalidBlock(
            f"block base fee {header.base_fee} is not the {base_fee} the chain's fee rule gives"
        )
    if isinstance(header, AvalancheHeader) and header.coinbase != BLACKHOLE_ADDRESS:
        raise InvalidBlock(
            f"block coinbase 0x{header.coinbase.hex()} is not the blackhole address "
            f"0x{BLACKHOLE_ADDRESS.hex()} (fees are burnt)"
        )
    for index, tx in enumerate(transactions):
        cap = max_price(tx)
        if cap < base_fee:
            raise InvalidBlock(
                f"transaction {index}: fee cap {cap} wei/gas is below the base fee {base_fee}"
            )


def check_transaction_rules(
    transactions: Sequence[Transaction], *, chain_id: int, gas_limit: int
) -> None:
    """The rules every transaction of a block meets before any signature work is done
    (``InvalidBlock`` naming the transaction and the rule), transaction by transaction:

    - it is signed for ``chain_id``: a typed transaction carries it; a legacy one has
      ``v`` 27 or 28 (unprotected, which consensus still accepts) or
      ``chain_id * 2 + 35`` or ``+ 36`` (EIP-155), and any other ``v`` is refused;
    - its signature values are in range: y parity 0 or 1, ``0 < r < n`` and
      ``0 < s <= n / 2`` (low s, the Homestead rule) on secp256k1;
    - its nonce is below :data:`MAX_NONCE` (EIP-2681: an account's nonce stops at
      2^64 - 1);
    - a fee-market transaction's tip cap is within its fee cap;
    - its gas limit covers its :func:`intrinsic_gas` and is within the block's
      ``gas_limit``;
    - the intrinsic gas of the transactions so far is within ``gas_limit``, so a block
      that could not pay for its own transactions is refused as soon as that shows.

    Each check is arithmetic on the decoded fields (the intrinsic gas reads the data
    once), so the whole is linear in the block's size.
    """
    total = 0
    for index, tx in enumerate(transactions):
        where = f"transaction {index}"
        if isinstance(tx, LegacyTx):
            v = tx.v
            if v not in (27, 28) and v not in (chain_id * 2 + 35, chain_id * 2 + 36):
                if v >= 35:
                    raise InvalidBlock(
                        f"{where} is signed for chain {(v - 35) // 2}, not {chain_id} (v = {v})"
                    )
                raise InvalidBlock(f"{where}: legacy v = {v} is neither 27/28 nor EIP-155")
        else:
            if tx.chain_id != chain_id:
                raise InvalidBlock(f"{where} is signed for chain {tx.chain_id}, not {chain_id}")
            if tx.y_parity not in (0, 1):
                raise InvalidBlock(f"{where}: signature y parity {tx.y_parity} is not 0 or 1")
        if not 0 < tx.r < SECP256K1_N:
            raise InvalidBlock(f"{where}: signature r is out of range")
        if not 0 < tx.s <= SECP256K1_HALF_N:
            raise InvalidBlock(f"{where}: signature s is out of range (zero or above n/2)")
        if tx.nonce >= MAX_NONCE:
            raise InvalidBlock(
                f"{where}: nonce {tx.nonce} is at or above 2^64 - 1 (EIP-2681: the sender's "
                "nonce could not move on)"
            )
        tip = getattr(tx, "max_priority_fee_per_gas", None)
        if tip is not None and tip > getattr(tx, "max_fee_per_gas"):  # noqa: B009
            raise InvalidBlock(
                f"{where}: tip cap {tip} is above its fee cap {getattr(tx, 'max_fee_per_gas')}"  # noqa: B009
            )
        needed = intrinsic_gas(tx)
        if tx.gas < needed:
            raise InvalidBlock(f"{where}: gas limit {tx.gas} is below its intrinsic gas {needed}")
        if tx.gas > gas_limit:
            raise InvalidBlock(f"{where}: gas limit {tx.gas} exceeds the block's {gas_limit}")
        total += needed
        if total > gas_limit:
            raise InvalidBlock(
                f"the intrinsic gas of transactions 0..{index} ({total}) "
                f"exceeds the block gas limit {gas_limit}"
            )


def check_receipts_commitments(header: AnyHeader, receipts: Sequence[Receipt]) -> None:
    """The header commits to the receipts its block's execution produced, as
    :func:`~vmstack.cchain.tries.receipt_commitments` computes them
    (:func:`check_receipt_commitments`)."""
    check_receipt_commitments(header, receipt_commitments(receipts), "the block's execution")


def check_receipt_commitments(
    header: AnyHeader, expected: ReceiptCommitments, source: str = "the block"
) -> None:
    """The ONE comparison of a header with receipts' commitments: its gas used is their
    cumulative gas, its receipts root is theirs and its bloom is theirs (``InvalidBlock``
    naming the field that differs and ``source``, whose receipts they are)."""
    if header.gas_used != expected.gas_used:
        raise InvalidBlock(
            f"block gas used {header.gas_used} is not the {expected.gas_used} "
            f"the receipts of {source} use"
        )
    if header.receipt_root != expected.receipt_root:
        raise InvalidBlock(f"receipts root does not match the receipts of {source}")
    if header.bloom != expected.bloom:
        raise InvalidBlock(f"logs bloom does not match the receipts of {source}")


def check_received_body(
    header: AnyHeader,
    raw: bytes,
    spans: Mapping[str, ItemSpan],
    decode_body: Callable[[], Body],
    *,
    chain_id: int,
) -> tuple[Body, list[bytes]]:
    """The rules of a body received as the bytes ``raw`` (whose body fields lie at ``spans``,
    by field name), cheapest first:

    1. sizes and structure, before anything is decoded: at most
       ``gas_limit // TX_BASE_GAS`` transactions, at most :data:`MAX_UNCLES` uncles (none
       on Avalanche), at most :data:`MAX_WITHDRAWALS` withdrawals;
    2. the body decodes strictly (``decode_body``);
    3. the transactions' own rules and the gas they need (:func:`check_transaction_rules`);
    4. Avalanche: body version 0;
    5. the header commits to the body as received (transactions root, uncle hash,
       withdrawals root; Avalanche: ExtDataHash), computed over the bytes received, not over
       a re-encoding (:func:`~vmstack.cchain.tries.check_body_commitments`).

    Returns the decoded body and the transactions' encodings (for the sender checks).
    """
    gas_limit = header.gas_limit
    encodings = list_item_encodings(
        raw, spans["transactions"], limit=gas_limit // TX_BASE_GAS, what="transactions"
    )
    uncles = spans["uncles"]
    avalanche = isinstance(header, AvalancheHeader)
    if avalanche and uncles.payload < uncles.end:
        raise InvalidBlock("C-chain blocks have no uncles")
    list_item_encodings(raw, uncles, limit=MAX_UNCLES, what="uncles")
    withdrawals = spans.get("withdrawals")
    withdrawal_encodings = (
        None
        if withdrawals is None
        else list_item_encodings(raw, withdrawals, limit=MAX_WITHDRAWALS, what="withdrawals")
    )
    body = decode_body()
    check_transaction_rules(body.transactions, chain_id=chain_id, gas_limit=gas_limit)
    if avalanche and body.version != 0:
        raise InvalidBlock(f"body version {body.version} is not 0")
    ext_data = spans.get("ext_data")
    check_body_commitments(
        header,
        encoded_body_commitments(
            encodings,
            raw[uncles.start : uncles.end],
            withdrawal_encodings,
            None if ext_data is None else raw[ext_data.start : ext_data.end],
        ),
    )
    return body, encodings
