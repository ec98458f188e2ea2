"""The ETHEREUM flavour's block rewards and withdrawals: :func:`apply_rewards`.

Before the merge (a header whose difficulty is not 0) a block credits its coinbase the block
reward of its fork (5 ether from Frontier, 3 from Byzantium, 2 from Constantinople), plus
1/32 of it for each uncle it includes, and each uncle's coinbase ``(8 + uncle.number -
number) / 8`` of it, as go-ethereum's ethash ``accumulateRewards`` does. From the merge on
there is no reward; a block credits each of its withdrawals (EIP-4895, amounts in gwei) to
its address. That is every state change of a block that carries no transaction, so the
state root of such a block follows from its parent's accounts
(:func:`vmstack.cchain.era1.state_roots.recompute_state_roots`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Final

import attrs

from vmstack.cchain.state import Account
from vmstack.cchain.types import Body

if TYPE_CHECKING:
    from vmstack.cchain.types.headers import AnyHeader

__all__ = [
    "ETHER",
    "Forks",
    "GWEI",
    "apply_rewards",
    "block_reward",
]

#: Wei in an ether, and in a gwei (a withdrawal's unit).
ETHER: Final = 10**18
GWEI: Final = 10**9


@attrs.frozen(slots=True)
class Forks:
    """The fork blocks that change the block reward (``None``: never reached)."""

    byzantium: int | None = None
    constantinople: int | None = None

    @classmethod
    def from_json(cls, text: str | bytes) -> Forks:
        """The ``config.byzantiumBlock`` and ``config.constantinopleBlock`` of a geth-style
        genesis file (``ValueError`` for one that is not a number)."""
        document = json.loads(text)
        config = document.get("config", {}) if isinstance(document, dict) else {}
        found: dict[str, int | None] = {}
        for name, key in (
            ("byzantium", "byzantiumBlock"),
            ("constantinople", "constantinopleBlock"),
        ):
            value = config.get(key) if isinstance(config, dict) else None
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise ValueError(f"config.{key} must be a block number, got {value!r}")
            found[name] = value
        return cls(**found)


def block_reward(number: int, forks: Forks) -> int:
    """The block reward in wei of a pre-merge block ``number``: 5, 3 or 2 ether."""
    if forks.constantinople is not None and number >= forks.constantinople:
        return 2 * ETHER
    if forks.byzantium is not None and number >= forks.byzantium:
        return 3 * ETHER
    return 5 * ETHER


def apply_rewards(
    accounts: dict[bytes, Account], header: AnyHeader, body: Body, forks: Forks
) -> dict[bytes, Account]:
    """Credit ``header``'s block reward and its uncles' (before the merge) or its body's
    withdrawals (from the merge on) to ``accounts`` (address -> account, changed in
    place); returns the accounts changed, by address."""
    credits: dict[bytes, int] = {}
    if header.difficulty:
        reward = block_reward(header.number, forks)
        credits[header.coinbase] = reward + len(body.uncles) * (reward // 32)
        for uncle in body.uncles:
            share = (8 + uncle.number - header.number) * reward // 8
            credits[uncle.coinbase] = credits.get(uncle.coinbase, 0) + share
    for withdrawal in body.withdrawals or ():
        credits[withdrawal.address] = credits.get(withdrawal.address, 0) + withdrawal.amount * GWEI
    changed = {}
    for address, amount in credits.items():
        before = accounts.get(address, Account())
        changed[address] = accounts[address] = attrs.evolve(before, balance=before.balance + amount)
    return changed
