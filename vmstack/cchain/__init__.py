"""The C-chain VM and its building blocks: :class:`CChainVM` (blocks in a key-value store, a
batched fast path and an honest slow path), :func:`generate_chain`, block types, the
two-flavour codec, byte-level RLP helpers, hashing and signatures, and the tries a header
commits to.

Two flavours share one codec: :data:`ETHEREUM` and :data:`AVALANCHE` (coreth's C-chain
format). :func:`block_bytes` stitches a stored header RLP and body RLP into the block RLP
without decoding; :func:`header_parent_hash` reads a parent hash in place.
"""

from __future__ import annotations

from vmstack.cchain.block import BlockStatus, CChainBlock
from vmstack.cchain.cache import CanonicalHashCache
from vmstack.cchain.codec import (
    AVALANCHE,
    ETHEREUM,
    BodyField,
    Flavour,
    decode_receipts,
    derive_receipts,
    encode_receipts,
)
from vmstack.cchain.crypto import (
    address_of,
    recover_address,
    sign_hash,
)
from vmstack.cchain.execution import execute_transactions
from vmstack.cchain.generate import TransactionPool, generate_chain, transaction_pool
from vmstack.cchain.genesis import (
    DEV_BALANCE,
    DEV_KEYS,
    Genesis,
    GenesisAccount,
    default_genesis,
    dev_addresses,
    genesis_block,
)
from vmstack.cchain.rlpbytes import (
    block_bytes,
    block_hash,
    check_rlp,
    header_parent_hash,
    header_slice,
    list_prefix,
    split_block,
)
from vmstack.cchain.state import EMPTY_CODE_HASH, EMPTY_TRIE_ROOT, Account, AccountTrie
from vmstack.cchain.tries import (
    check_body,
    ext_data_hash,
    receipts_root,
    transactions_root,
    uncles_hash,
    withdrawals_root,
)
from vmstack.cchain.types import (
    EMPTY_BLOOM,
    EMPTY_EXT_DATA_HASH,
    EMPTY_ROOT,
    EMPTY_UNCLE_HASH,
    ZERO_ADDRESS,
    ZERO_HASH,
    AccessListTx,
    AccessTuple,
    AnyHeader,
    Authorization,
    AvalancheHeader,
    BlobTx,
    Block,
    Body,
    DynamicFeeTx,
    Header,
    LegacyTx,
    Log,
    Receipt,
    RLPItem,
    SetCodeTx,
    Transaction,
    Withdrawal,
    decode_rlp,
    decode_transaction,
    logs_bloom,
    recover_sender,
    sign_transaction,
    transaction_from_item,
)
from vmstack.cchain.vm import CChainVM
from vmstack.defaults import DEFAULT_CHAIN_ID
from vmstack.keccak import keccak256
from vmstack.rlpreader import iter_list_items, list_items, read_prefix

__all__ = [
    "AVALANCHE",
    "AccessListTx",
    "AccessTuple",
    "Account",
    "AccountTrie",
    "AnyHeader",
    "Authorization",
    "AvalancheHeader",
    "BlobTx",
    "Block",
    "BlockStatus",
    "Body",
    "BodyField",
    "CChainBlock",
    "CChainVM",
    "CanonicalHashCache",
    "DEFAULT_CHAIN_ID",
    "DEV_BALANCE",
    "DEV_KEYS",
    "DynamicFeeTx",
    "EMPTY_BLOOM",
    "EMPTY_CODE_HASH",
    "EMPTY_EXT_DATA_HASH",
    "EMPTY_ROOT",
    "EMPTY_TRIE_ROOT",
    "EMPTY_UNCLE_HASH",
    "ETHEREUM",
    "Flavour",
    "Genesis",
    "GenesisAccount",
    "Header",
    "LegacyTx",
    "Log",
    "RLPItem",
    "Receipt",
    "SetCodeTx",
    "Transaction",
    "TransactionPool",
    "Withdrawal",
    "ZERO_ADDRESS",
    "ZERO_HASH",
    "address_of",
    "block_bytes",
    "block_hash",
    "check_body",
    "check_rlp",
    "decode_receipts",
    "decode_rlp",
    "decode_transaction",
    "default_genesis",
    "derive_receipts",
    "dev_addresses",
    "encode_receipts",
    "execute_transactions",
    "ext_data_hash",
    "generate_chain",
    "genesis_block",
    "header_parent_hash",
    "header_slice",
    "iter_list_items",
    "keccak256",
    "list_items",
    "list_prefix",
    "logs_bloom",
    "read_prefix",
    "receipts_root",
    "recover_address",
    "recover_sender",
    "sign_hash",
    "sign_transaction",
    "split_block",
    "transaction_from_item",
    "transaction_pool",
    "transactions_root",
    "uncles_hash",
    "withdrawals_root",
]
