"""vmstack: an Avalanche-style chain-VM stack with the batched protocol done right.

A consensus engine talks to a VM through wrapper layers; the optional batched protocol
(``get_ancestors``, ``batched_parse_block``) goes down as one call per layer, and the C-chain
VM at the bottom answers from the raw header and body bytes in its store.
"""

from vmstack.batching import (
    CONTAINER_LEN_OVERHEAD,
    MAX_CONTAINERS_LEN,
    batched_parse_block,
    get_ancestors,
)
from vmstack.clock import Clock, SimClock
from vmstack.closing import close_stack
from vmstack.describe import describe_stack
from vmstack.errors import (
    BatchingNotImplemented,
    BlockNotFound,
    ConfigMismatch,
    InvalidBlock,
    InvalidTransaction,
    StoreCorrupted,
    VMStackError,
    VMUnavailable,
)
from vmstack.interfaces import (
    BatchedChainVM,
    Block,
    ChainVM,
    find_layer,
    iter_layers,
)
from vmstack.layers import Layer, supports_batching
from vmstack.stack import build_stack
from vmstack.submission import find_mempool, submit_transactions

__all__ = [
    "BatchedChainVM",
    "BatchingNotImplemented",
    "Block",
    "BlockNotFound",
    "CONTAINER_LEN_OVERHEAD",
    "ChainVM",
    "Clock",
    "ConfigMismatch",
    "InvalidBlock",
    "InvalidTransaction",
    "Layer",
    "MAX_CONTAINERS_LEN",
    "SimClock",
    "StoreCorrupted",
    "VMStackError",
    "VMUnavailable",
    "batched_parse_block",
    "build_stack",
    "close_stack",
    "describe_stack",
    "find_layer",
    "find_mempool",
    "get_ancestors",
    "iter_layers",
    "submit_transactions",
    "supports_batching",
]
