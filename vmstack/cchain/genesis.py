"""The chain's parameters: its genesis (:class:`Genesis`: the accounts it funds, its gas
limit, timestamp and extra data), its genesis block and the header template of every new
block.

The genesis block's state root is the account trie root of the genesis allocation
(:mod:`vmstack.cchain.state`); every later block's is the root after its transactions. The
gas limit and base fee are constants of the chain, and Avalanche's ``ext_data_gas_used``
grows with the size of the block's extData. Without a genesis of its own a chain gets
:func:`default_genesis`, which funds :data:`DEV_KEYS`. Everything here is a pure function of
its arguments, so two nodes build byte-identical genesis blocks from the same flavour,
chain id and genesis.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final

import attrs

from vmstack.cchain.codec import AVALANCHE, Flavour
from vmstack.cchain.crypto import address_of
from vmstack.cchain.state import EMPTY_CODE_HASH, Account, AccountTrie
from vmstack.cchain.types import AnyHeader, AvalancheHeader, Block, Header
from vmstack.defaults import DEFAULT_CHAIN_ID
from vmstack.keccak import keccak256

__all__ = [
    "BASE_FEE",
    "BLACKHOLE_ADDRESS",
    "DEV_BALANCE",
    "DEV_KEYS",
    "GAS_LIMIT",
    "Genesis",
    "GenesisAccount",
    "MAX_ACCOUNT_NONCE",
    "MAX_BALANCE",
    "default_genesis",
    "dev_addresses",
    "genesis_block",
    "new_header",
]

#: Gas limit of every block (the C-chain's since Cortina).
GAS_LIMIT: Final = 15_000_000
#: Base fee of every block after genesis, in wei (the C-chain's 25 nAVAX floor).
BASE_FEE: Final = 25 * 10**9
#: coreth's coinbase: fees are burnt to this address.
BLACKHOLE_ADDRESS: Final = bytes.fromhex("0100000000000000000000000000000000000000")

_EXT_DATA_GAS_PER_BYTE = 16
#: The largest balance an account holds: a uint256.
MAX_BALANCE: Final = 2**256 - 1
#: The largest nonce an account reaches (EIP-2681).
MAX_ACCOUNT_NONCE: Final = 2**64 - 1

#: Deterministic secp256k1 development keys (private keys as ints): the default genesis
#: funds each with :data:`DEV_BALANCE`, and ``generate_chain`` signs with them. Public
#: knowledge: never for value.
DEV_KEYS: Final = tuple(
    int.from_bytes(keccak256(b"vmstack dev key %d" % index), "big") for index in range(16)
)
#: What the default genesis gives each development key: 10^9 coins of 10^18 wei.
DEV_BALANCE: Final = 10**27


def dev_addresses() -> tuple[bytes, ...]:
    """The addresses of :data:`DEV_KEYS`, in order."""
    return tuple(address_of(key) for key in DEV_KEYS)


def _quantity(value: object, what: str) -> int:
    """A geth-style number: an int, or a string of decimal or ``0x`` hex digits."""
    if isinstance(value, bool):
        raise ValueError(f"{what} must be a number, got {value!r}")
    if isinstance(value, int):
        number = value
    elif isinstance(value, str):
        try:
            number = int(value, 16) if value.lower().startswith("0x") else int(value, 10)
        except ValueError:
            raise ValueError(f"{what} is not a number: {value!r}") from None
    else:
        raise ValueError(f"{what} must be a number, got {value!r}")
    if number < 0:
        raise ValueError(f"{what} must not be negative, got {number}")
    return number


def _hex_bytes(value: object, what: str, length: int | None = None) -> bytes:
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a hex string, got {value!r}")
    text = value[2:] if value.lower().startswith("0x") else value
    try:
        data = bytes.fromhex(text)
    except ValueError:
        raise ValueError(f"{what} is not hex: {value!r}") from None
    if length is not None and len(data) != length:
        raise ValueError(f"{what} must be {length} bytes, got {len(data)}")
    return data


@attrs.frozen
class GenesisAccount:
    """An account a genesis allocates: ``balance`` (wei, a uint256), ``nonce`` (at most
    2^64 - 1, EIP-2681) and ``code`` (kept as its hash in the account; the model runs no
    code). ``ValueError`` for a balance or nonce out of range."""

    balance: int = 0
    nonce: int = 0
    code: bytes = b""

    def __attrs_post_init__(self) -> None:
        for name, bound in (("balance", MAX_BALANCE), ("nonce", MAX_ACCOUNT_NONCE)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= bound:
                raise ValueError(
                    f"a genesis account's {name} is an int from 0 to {bound:#x}, got {value!r}"
                )
        if not isinstance(self.code, bytes):
            raise ValueError(f"a genesis account's code is bytes, got {self.code!r}")

    def account(self) -> Account:
        return Account(
            self.nonce, self.balance, keccak256(self.code) if self.code else EMPTY_CODE_HASH
        )


def _alloc_field(alloc: Mapping[bytes, int | GenesisAccount]) -> dict[bytes, GenesisAccount]:
    checked: dict[bytes, GenesisAccount] = {}
    for address, entry in dict(alloc).items():
        if not isinstance(address, bytes) or len(address) != 20:
            raise ValueError(f"a genesis address is 20 bytes, got {address!r}")
        if isinstance(entry, GenesisAccount):
            account = entry
        elif isinstance(entry, int) and not isinstance(entry, bool) and entry >= 0:
            account = GenesisAccount(balance=entry)
        else:
            raise ValueError(
                f"a genesis allocation is a balance or a GenesisAccount, got {entry!r}"
            )
        checked[address] = account
    return checked


@attrs.frozen
class Genesis:
    """What a chain starts from: ``alloc`` (address -> balance in wei, or a
    :class:`GenesisAccount`), the block ``gas_limit``, ``timestamp``, ``extra_data`` and,
    from a genesis file, its ``chain_id`` (``None``: whatever the VM is given)."""

    alloc: Mapping[bytes, GenesisAccount] = attrs.field(factory=dict, converter=_alloc_field)
    gas_limit: int = attrs.field(default=GAS_LIMIT, kw_only=True)
    timestamp: int = attrs.field(default=0, kw_only=True)
    extra_data: bytes = attrs.field(default=b"", kw_only=True)
    chain_id: int | None = attrs.field(default=None, kw_only=True)

    def chain_id_for(self, chain_id: int) -> int:
        """The EVM chain ID a chain from this genesis runs when given ``chain_id``: the
        genesis's when it names one and ``chain_id`` is the default (``DEFAULT_CHAIN_ID``,
        what leaving it out means) or the same, else ``chain_id``. Another is
        ``ValueError`` naming both. The one place that decides it, for ``CChainVM`` and
        ``build_stack`` alike."""
        if self.chain_id is None or chain_id == self.chain_id:
            return chain_id
        if chain_id != DEFAULT_CHAIN_ID:
            raise ValueError(f"chain_id {chain_id} differs from the genesis's {self.chain_id}")
        return self.chain_id

    def __attrs_post_init__(self) -> None:
        for name in ("gas_limit", "timestamp"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a non-negative int, got {value!r}")
        if self.gas_limit < 21_000:
            raise ValueError(f"gas_limit {self.gas_limit} cannot carry one transaction")
        if len(self.extra_data) > 32:
            raise ValueError("extra_data is at most 32 bytes")

    @classmethod
    def from_json(cls, text: str | bytes) -> Genesis:
        """A geth-style genesis file: ``config.chainId``, ``alloc`` (hex addresses, with or
        without ``0x``, each with ``balance`` and optional ``nonce`` and ``code``),
        ``gasLimit``, ``timestamp``, ``extraData``; other fields are ignored.
        ``ValueError`` naming the field for one that does not read."""
        try:
            document = json.loads(text)
        except ValueError as error:
            raise ValueError(f"the genesis is not JSON: {error}") from None
        if not isinstance(document, dict):
            raise ValueError("the genesis is not a JSON object")
        config = document.get("config", {})
        if not isinstance(config, dict):
            raise ValueError("config must be an object")
        chain_id = (
            None if "chainId" not in config else _quantity(config["chainId"], "config.chainId")
        )
        alloc: dict[bytes, int | GenesisAccount] = {}
        entries = document.get("alloc", {})
        if not isinstance(entries, dict):
            raise ValueError("alloc must be an object")
        for key, entry in entries.items():
            where = f"alloc[{key}]"
            if not isinstance(entry, dict):
                raise ValueError(f"{where} must be an object")
            alloc[_hex_bytes(key, where, 20)] = GenesisAccount(
                balance=_quantity(entry.get("balance", 0), f"{where}.balance"),
                nonce=_quantity(entry.get("nonce", 0), f"{where}.nonce"),
                code=_hex_bytes(entry.get("code", "0x"), f"{where}.code"),
            )
        return cls(
            alloc,
            gas_limit=_quantity(document.get("gasLimit", GAS_LIMIT), "gasLimit"),
            timestamp=_quantity(document.get("timestamp", 0), "timestamp"),
            extra_data=_hex_bytes(document.get("extraData", "0x"), "extraData"),
            chain_id=chain_id,
        )

    def accounts(self) -> dict[bytes, Account]:
        """The allocated accounts that are not empty, by address."""
        found = {address: entry.account() for address, entry in self.alloc.items()}
        return {address: account for address, account in found.items() if not account.empty}

    def state_root(self) -> bytes:
        """The account trie root of the allocation."""
        return (
            AccountTrie()
            .updated((keccak256(address), account) for address, account in self.accounts().items())
            .root_hash
        )


def default_genesis(*, timestamp: int = 0) -> Genesis:
    """The genesis a chain gets without one: :data:`DEV_BALANCE` for each of
    :data:`DEV_KEYS`."""
    return Genesis(dict.fromkeys(dev_addresses(), DEV_BALANCE), timestamp=timestamp)


def _is_avalanche(flavour: Flavour) -> bool:
    return flavour.header_type is AvalancheHeader


def genesis_block(
    flavour: Flavour = AVALANCHE, *, chain_id: int, genesis: Genesis | None = None
) -> Block:
    """The genesis block of a chain: number 0, no transactions, ``genesis``'s gas limit,
    timestamp and extra data, and the state root of its allocation (default:
    :func:`default_genesis`). ``chain_id`` is checked, as the chain's.

    Avalanche: an AP4-style header (base fee, extData gas, block gas cost), empty extData.
    Ethereum: a Shanghai header with an empty withdrawals list.
    """
    if isinstance(chain_id, bool) or not isinstance(chain_id, int) or chain_id < 1:
        raise ValueError(f"chain_id must be a positive int, got {chain_id!r}")
    genesis = default_genesis() if genesis is None else genesis
    root = genesis.state_root()
    header: AnyHeader
    if _is_avalanche(flavour):
        header = AvalancheHeader(
            coinbase=BLACKHOLE_ADDRESS,
            state_root=root,
            difficulty=1,
            gas_limit=genesis.gas_limit,
            time=genesis.timestamp,
            extra=genesis.extra_data,
            base_fee=BASE_FEE,
            ext_data_gas_used=0,
            block_gas_cost=0,
        )
        body = flavour.body()
    else:
        header = Header(
            state_root=root,
            gas_limit=genesis.gas_limit,
            time=genesis.timestamp,
            extra=genesis.extra_data,
            base_fee=BASE_FEE,
        )
        body = flavour.body(withdrawals=())
    return flavour.seal(header, body, ())


def new_header(
    flavour: Flavour,
    parent: AnyHeader,
    *,
    parent_hash: bytes,
    timestamp: int,
    gas_used: int,
    ext_data: bytes = b"",
    gas_limit: int | None = None,
    base_fee: int = BASE_FEE,
) -> AnyHeader:
    """The header of a child of ``parent`` (whose hash is ``parent_hash``), before the
    flavour's ``seal`` sets the roots its body and receipts commit to, with ``gas_limit``
    (default the parent's: a chain keeps its genesis's) and ``base_fee`` (the chain's fee
    rule gives it: :func:`vmstack.cchain.rules.base_fee_rule`).

    The state root is left as the parent's: the caller sets the post-state's.
    """
    number = parent.number + 1
    gas_limit = parent.gas_limit if gas_limit is None else gas_limit
    if _is_avalanche(flavour):
        return AvalancheHeader(
            parent_hash=parent_hash,
            coinbase=BLACKHOLE_ADDRESS,
            state_root=parent.state_root,
            difficulty=1,
            number=number,
            gas_limit=gas_limit,
            gas_used=gas_used,
            time=timestamp,
            base_fee=base_fee,
            ext_data_gas_used=len(ext_data) * _EXT_DATA_GAS_PER_BYTE,
            block_gas_cost=0,
        )
    return Header(
        parent_hash=parent_hash,
        coinbase=BLACKHOLE_ADDRESS,
        state_root=parent.state_root,
        number=number,
        gas_limit=gas_limit,
        gas_used=gas_used,
        time=timestamp,
        extra=b"vmstack",
        mix_digest=keccak256(parent_hash),
        base_fee=base_fee,
    )
