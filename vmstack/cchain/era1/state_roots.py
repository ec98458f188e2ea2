"""The state roots of real history recomputed from a geth-style genesis:
:func:`genesis_header`, :func:`recompute_state_roots`.

Block 0's header follows from the genesis file (go-ethereum's ``Genesis.ToBlock``): its
fields as written, the allocation's account trie root as its state root, empty transaction,
receipt and uncle commitments, and from London on a base fee (the file's
``baseFeePerGas``, else 1 gwei), from Shanghai on the empty withdrawals root. Each later
block's state is its parent's with the block's rewards or withdrawals credited
(:mod:`vmstack.cchain.rewards`). A block that carries transactions needs their execution
(transfers pay gas; contract creations and calls need an EVM), which the accounts model
does not do: it is refused with :class:`StateNotModelled` naming its height, never counted
as verified.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from vmstack.cchain.codec import ETHEREUM
from vmstack.cchain.genesis import Genesis
from vmstack.cchain.rewards import GWEI, Forks, apply_rewards
from vmstack.cchain.state import AccountTrie
from vmstack.cchain.types import EMPTY_ROOT, Header
from vmstack.errors import InvalidBlock
from vmstack.keccak import keccak256

if TYPE_CHECKING:
    from vmstack.store.history import EraArchive

__all__ = ["StateNotModelled", "genesis_header", "recompute_state_roots"]


class StateNotModelled(InvalidBlock):
    """A block whose state change needs execution the accounts model does not do."""


def _number(document: dict[str, Any], key: str, default: int) -> int:
    value = document.get(key)
    if value is None:
        return default
    if isinstance(value, str) and value.startswith("0x"):
        return int(value, 16)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ValueError(f"{key} must be a number, got {value!r}")


def _bytes(document: dict[str, Any], key: str, length: int) -> bytes:
    value = document.get(key)
    if value is None:
        return bytes(length)
    if not isinstance(value, str) or not value.startswith("0x"):
        raise ValueError(f"{key} must be 0x-prefixed hex, got {value!r}")
    raw = bytes.fromhex(value[2:].rjust(2 * length, "0"))
    if len(raw) != length:
        raise ValueError(f"{key} must be {length} bytes")
    return raw


def genesis_header(text: str | bytes) -> Header:
    """Block 0's header as go-ethereum builds it from the geth-style genesis ``text``
    (:class:`~vmstack.cchain.genesis.Genesis` reads its allocation). ``ValueError`` naming
    a field that does not read."""
    genesis = Genesis.from_json(text)
    document = json.loads(text)
    config = document.get("config") or {}
    timestamp = genesis.timestamp
    london = config.get("londonBlock")
    shanghai = config.get("shanghaiTime")
    return Header(
        parent_hash=_bytes(document, "parentHash", 32),
        coinbase=_bytes(document, "coinbase", 20),
        state_root=genesis.state_root(),
        difficulty=_number(document, "difficulty", 0),
        number=_number(document, "number", 0),
        gas_limit=genesis.gas_limit,
        gas_used=_number(document, "gasUsed", 0),
        time=timestamp,
        extra=genesis.extra_data,
        mix_digest=_bytes(document, "mixHash", 32),
        nonce=_number(document, "nonce", 0).to_bytes(8, "big"),
        base_fee=(
            _number(document, "baseFeePerGas", GWEI) if london is not None and london == 0 else None
        ),
        withdrawals_hash=(EMPTY_ROOT if shanghai is not None and shanghai <= timestamp else None),
    )


def recompute_state_roots(
    archive: EraArchive,
    genesis_text: str | bytes,
    *,
    on_block: Callable[[int], None] | None = None,
) -> int:
    """Recompute the state root of every block of ``archive`` from the geth-style genesis
    ``genesis_text`` (block 0's header must be :func:`genesis_header`'s, its root the
    allocation's; each later block's its parent's
    accounts with :func:`apply_rewards`) and compare it with the header's. Returns the
    number of roots checked. :class:`InvalidBlock` naming the first height whose root
    differs; :class:`StateNotModelled` naming the first height whose block carries
    transactions; ``ValueError`` for an archive that does not start at block 0 or has gaps.
    ``on_block(n)`` is called after each block."""
    genesis = Genesis.from_json(genesis_text)
    forks = Forks.from_json(genesis_text)
    zero = genesis_header(genesis_text)
    if archive.first != 0 or len(archive) != archive.last + 1:
        raise ValueError(
            f"the state of {archive.directory} is recomputed from its genesis: it must hold "
            f"every block from 0 (it holds {len(archive)} blocks from {archive.first} "
            f"to {archive.last})"
        )
    accounts = dict(genesis.accounts())
    trie = AccountTrie().updated((keccak256(a), acct) for a, acct in accounts.items())
    checked = 0
    for number in range(archive.first, archive.last + 1):
        header = ETHEREUM.decode_header(archive.header_rlp(number))
        if number:
            body = ETHEREUM.decode_body(archive.body_rlp(number))
            if body.transactions:
                raise StateNotModelled(
                    f"block {number} carries {len(body.transactions)} transactions: its "
                    "state needs their execution (transfers' gas, contract creation and "
                    "calls), which the accounts model does not do; not verified"
                )
            changed = apply_rewards(accounts, header, body, forks)
            trie = trie.updated((keccak256(a), acct) for a, acct in changed.items())
        if trie.root_hash != header.state_root:
            raise InvalidBlock(
                f"block {number}: state root {header.state_root.hex()} in its header, "
                f"{trie.root_hash.hex()} recomputed from the genesis"
            )
        if number == 0 and archive.hash(0) != keccak256(ETHEREUM.encode_header(zero)):
            raise InvalidBlock(
                "block 0: its header is not the one the genesis gives "
                f"(hash {keccak256(ETHEREUM.encode_header(zero)).hex()})"
            )
        checked += 1
        if on_block is not None:
            on_block(number)
    return checked
