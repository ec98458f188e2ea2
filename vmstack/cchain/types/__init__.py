"""Ethereum and Avalanche C-chain records: headers, transactions, receipts, blocks.

One module per kind of record; this package re-exports their public names, so
``from vmstack.cchain.types import Block`` is the way to import them. The modules, each with
the public names it defines:

- :mod:`~vmstack.cchain.types.fields`: how a record's fields are written in RLP and read back
  strictly: ``RLPItem``, ``ZERO_HASH``, ``ZERO_ADDRESS``, ``EMPTY_BLOOM``, ``decode_rlp``.
- :mod:`~vmstack.cchain.types.headers`: the two header flavours: ``Header``,
  ``AvalancheHeader``, ``AnyHeader``, ``EMPTY_ROOT``, ``EMPTY_UNCLE_HASH``,
  ``EMPTY_EXT_DATA_HASH``.
- :mod:`~vmstack.cchain.types.transactions`: the transaction kinds, decoding, signing and
  senders: ``LegacyTx``, ``AccessListTx``, ``DynamicFeeTx``, ``BlobTx``, ``SetCodeTx``,
  ``Transaction``, ``AccessTuple``, ``Authorization``, ``decode_transaction``,
  ``transaction_from_item``, ``recover_sender``, ``sign_transaction``.
- :mod:`~vmstack.cchain.types.receipts`: ``Log``, ``logs_bloom``, ``Receipt``.
- :mod:`~vmstack.cchain.types.blocks`: ``Withdrawal``, ``Body``, ``Block``.

The modules import in that order (each only from those before it), so none imports the package.
"""

from vmstack.cchain.types.blocks import Block, Body, Withdrawal
from vmstack.cchain.types.fields import EMPTY_BLOOM, ZERO_ADDRESS, ZERO_HASH, RLPItem, decode_rlp
from vmstack.cchain.types.headers import (
    EMPTY_EXT_DATA_HASH,
    EMPTY_ROOT,
    EMPTY_UNCLE_HASH,
    AnyHeader,
    AvalancheHeader,
    Header,
)
from vmstack.cchain.types.receipts import Log, Receipt, logs_bloom
from vmstack.cchain.types.transactions import (
    AccessListTx,
    AccessTuple,
    Authorization,
    BlobTx,
    DynamicFeeTx,
    LegacyTx,
    SetCodeTx,
    Transaction,
    decode_transaction,
    recover_sender,
    sign_transaction,
    transaction_from_item,
)

__all__ = [
    "AccessListTx",
    "AccessTuple",
    "AnyHeader",
    "Authorization",
    "AvalancheHeader",
    "BlobTx",
    "Block",
    "Body",
    "DynamicFeeTx",
    "EMPTY_BLOOM",
    "EMPTY_EXT_DATA_HASH",
    "EMPTY_ROOT",
    "EMPTY_UNCLE_HASH",
    "Header",
    "LegacyTx",
    "Log",
    "RLPItem",
    "Receipt",
    "SetCodeTx",
    "Transaction",
    "Withdrawal",
    "ZERO_ADDRESS",
    "ZERO_HASH",
    "decode_rlp",
    "decode_transaction",
    "logs_bloom",
    "recover_sender",
    "sign_transaction",
    "transaction_from_item",
]
