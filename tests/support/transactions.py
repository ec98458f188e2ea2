"""Signed transactions for the tests: one EIP-1559 transfer with the fields most tests leave
alone, each of which a test may set."""

from __future__ import annotations

from vmstack.cchain import DEV_KEYS, DynamicFeeTx

__all__ = ["CHAIN_ID", "FEE_CAP", "signed_transfer"]

#: The chain ID a stack gets by default (Avalanche's C-chain).
CHAIN_ID = 43114

#: A fee cap above any base fee a test chain reaches: 50 gwei.
FEE_CAP = 50 * 10**9


def signed_transfer(
    nonce: int = 0,
    *,
    key: int | bytes = DEV_KEYS[0],
    to: bytes | None = bytes(20),
    value: int = 0,
    gas: int = 21_000,
    data: bytes = b"",
    chain_id: int = CHAIN_ID,
    max_fee_per_gas: int = FEE_CAP,
    max_priority_fee_per_gas: int = 0,
) -> DynamicFeeTx:
    """A :class:`~vmstack.cchain.DynamicFeeTx` from ``key`` at ``nonce``, signed for
    ``chain_id``: by default a plain transfer of nothing to the zero address, with no tip."""
    return DynamicFeeTx(
        chain_id=chain_id,
        nonce=nonce,
        max_priority_fee_per_gas=max_priority_fee_per_gas,
        max_fee_per_gas=max_fee_per_gas,
        gas=gas,
        to=to,
        value=value,
        data=data,
    ).sign(key)
