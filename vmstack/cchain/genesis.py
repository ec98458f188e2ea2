"""The chain's parameters: its genesis block and the header template of every new block.

The VM does not run the EVM, so a few header fields stand in for what execution would
produce: the state root is a digest of the parent's state root and the block's transaction
and receipt roots (deterministic, and it changes with every block as a real one does), the
gas limit and base fee are constants, and Avalanche's ``ext_data_gas_used`` grows with the
size of the block's extData. Everything here is a pure function of its arguments, so two
nodes build byte-identical genesis blocks from the same flavour, chain id and timestamp.
"""

from __future__ import annotations

from typing import Final

from vmstack.cchain.codec import AVALANCHE, Flavour
from vmstack.cchain.crypto import keccak256
from vmstack.cchain.types import AnyHeader, AvalancheHeader, Block, Header

__all__ = [
    "BASE_FEE",
    "BLACKHOLE_ADDRESS",
    "GAS_LIMIT",
    "genesis_block",
    "new_header",
    "state_root",
]

#: Gas limit of every block (the C-chain's since Cortina).
GAS_LIMIT: Final = 15_000_000
#: Base fee of every block after genesis, in wei (the C-chain's 25 nAVAX floor).
BASE_FEE: Final = 25 * 10**9
#: coreth's coinbase: fees are burnt to this address.
BLACKHOLE_ADDRESS: Final = bytes.fromhex("0100000000000000000000000000000000000000")

_EXT_DATA_GAS_PER_BYTE = 16


def _is_avalanche(flavour: Flavour) -> bool:
    return flavour.header_type is AvalancheHeader


def genesis_block(flavour: Flavour = AVALANCHE, *, chain_id: int, timestamp: int = 0) -> Block:
    """The genesis block of a chain: number 0, no transactions, a state root derived from
    ``flavour``, ``chain_id`` and ``timestamp`` (so chains with different ids differ).

    Avalanche: an AP4-style header (base fee, extData gas, block gas cost), empty extData.
    Ethereum: a Shanghai header with an empty withdrawals list.
    """
    if isinstance(chain_id, bool) or not isinstance(chain_id, int) or chain_id < 1:
        raise ValueError(f"chain_id must be a positive int, got {chain_id!r}")
    if isinstance(timestamp, bool) or not isinstance(timestamp, int) or timestamp < 0:
        raise ValueError(f"timestamp must be a non-negative int, got {timestamp!r}")
    root = keccak256(b"vmstack genesis state %s %d %d" % (flavour.name.encode(), chain_id,
                                                          timestamp))
    header: AnyHeader
    if _is_avalanche(flavour):
        header = AvalancheHeader(coinbase=BLACKHOLE_ADDRESS, state_root=root, difficulty=1,
                                 gas_limit=GAS_LIMIT, time=timestamp, base_fee=BASE_FEE,
                                 ext_data_gas_used=0, block_gas_cost=0)
        body = flavour.body()
    else:
        header = Header(state_root=root, gas_limit=GAS_LIMIT, time=timestamp,
                        base_fee=BASE_FEE)
        body = flavour.body(withdrawals=())
    return flavour.seal(header, body, ())


def state_root(parent_state_root: bytes, tx_root: bytes, receipt_root: bytes) -> bytes:
    """The modelled state root of a block: ``keccak256(parent state root || tx root ||
    receipt root)``, standing in for the root of the state after execution."""
    return keccak256(parent_state_root + tx_root + receipt_root)


def new_header(
    flavour: Flavour,
    parent: AnyHeader,
    *,
    parent_hash: bytes,
    timestamp: int,
    gas_used: int,
    ext_data: bytes = b"",
) -> AnyHeader:
    """The header of a child of ``parent`` (whose hash is ``parent_hash``), before the
    flavour's ``seal`` sets the roots its body and receipts commit to.

    The state root is left as the parent's: the caller sets it with :func:`state_root`
    once the transaction and receipt roots are known.
    """
    number = parent.number + 1
    if _is_avalanche(flavour):
        return AvalancheHeader(
            parent_hash=parent_hash, coinbase=BLACKHOLE_ADDRESS,
            state_root=parent.state_root, difficulty=1, number=number, gas_limit=GAS_LIMIT,
            gas_used=gas_used, time=timestamp, base_fee=BASE_FEE,
            ext_data_gas_used=len(ext_data) * _EXT_DATA_GAS_PER_BYTE, block_gas_cost=0,
        )
    return Header(
        parent_hash=parent_hash, coinbase=BLACKHOLE_ADDRESS, state_root=parent.state_root,
        number=number, gas_limit=GAS_LIMIT, gas_used=gas_used, time=timestamp,
        extra=b"vmstack", mix_digest=keccak256(parent_hash), base_fee=BASE_FEE,
    )
