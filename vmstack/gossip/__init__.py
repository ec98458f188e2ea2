"""Mempool gossip as avalanchego's ``network/p2p/gossip`` and ``utils/bloom`` do it, with
coreth's parameters (``docs/gossip.md``).

- :mod:`~vmstack.gossip.bloom`: the bloom filter, its hash and sizing functions;
- :mod:`~vmstack.gossip.messages`: ``sdk.proto``'s messages and the handler prefix;
- :mod:`~vmstack.gossip.sets`: the sets the gossipers read, the salted filter of one;
- :mod:`~vmstack.gossip.push` and :mod:`~vmstack.gossip.pull`: the gossipers, the handler;
- :mod:`~vmstack.gossip.transactions`: the C-chain's transactions as gossip, one node's
  transaction gossip over a stack.

None of it knows a transport: pushes and pull requests leave through callables, and what
peers send comes in through :class:`TransactionGossip` or a :class:`GossipRouter`.
"""

from vmstack.gossip.bloom import (
    MAX_HASHES,
    MIN_ENTRIES,
    MIN_HASHES,
    BloomFilter,
    bloom_hash,
    estimate_count,
    optimal_entries,
    optimal_hashes,
    optimal_parameters,
)
from vmstack.gossip.messages import (
    SALT_SIZE,
    TRANSACTION_GOSSIP_HANDLER,
    marshal_pull_request,
    marshal_pull_response,
    marshal_push_gossip,
    parse_pull_request,
    parse_pull_response,
    parse_push_gossip,
    prefix_handler,
    split_handler,
    uvarint,
)
from vmstack.gossip.pull import (
    GossipHandler,
    GossipRouter,
    PullGossiper,
    ReceiveStatistics,
    ResponseCallback,
)
from vmstack.gossip.push import (
    BranchingFactor,
    PushGossiper,
    PushStatistics,
    SendConfig,
    choose_peers,
    top_validators,
)
from vmstack.gossip.sets import (
    GossipSet,
    HandlerSet,
    Marshaller,
    PullGossiperSet,
    PushGossiperSet,
    SetWithBloomFilter,
)
from vmstack.gossip.transactions import (
    CORETH_GOSSIP,
    TARGET_MESSAGE_SIZE,
    GossipConfig,
    GossipTransaction,
    MempoolGossipSet,
    TransactionGossip,
    TransactionMarshaller,
)

__all__ = [
    "BloomFilter",
    "BranchingFactor",
    "CORETH_GOSSIP",
    "GossipConfig",
    "GossipHandler",
    "GossipRouter",
    "GossipSet",
    "GossipTransaction",
    "HandlerSet",
    "MAX_HASHES",
    "MIN_ENTRIES",
    "MIN_HASHES",
    "Marshaller",
    "MempoolGossipSet",
    "PullGossiper",
    "PullGossiperSet",
    "PushGossiper",
    "PushGossiperSet",
    "PushStatistics",
    "ReceiveStatistics",
    "ResponseCallback",
    "SALT_SIZE",
    "SendConfig",
    "SetWithBloomFilter",
    "TARGET_MESSAGE_SIZE",
    "TRANSACTION_GOSSIP_HANDLER",
    "TransactionGossip",
    "TransactionMarshaller",
    "bloom_hash",
    "choose_peers",
    "estimate_count",
    "marshal_pull_request",
    "marshal_pull_response",
    "marshal_push_gossip",
    "optimal_entries",
    "optimal_hashes",
    "optimal_parameters",
    "parse_pull_request",
    "parse_pull_response",
    "parse_push_gossip",
    "prefix_handler",
    "split_handler",
    "top_validators",
    "uvarint",
]
