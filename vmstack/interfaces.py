"""The protocols every layer speaks: :class:`Block`, :class:`ChainVM`, :class:`BatchedChainVM`.

They are small ``typing.Protocol`` classes, checked structurally: a VM does not inherit
from them, it simply has the methods. :class:`BatchedChainVM` is the optional capability; a
VM that has its methods but cannot serve them (a pass-through layer over a VM that cannot
batch) raises :class:`~vmstack.errors.BatchingNotImplemented`, and the engine helpers in
:mod:`vmstack.batching` fall back to one call per block. The sentinel carries the
capability (:mod:`vmstack.layers`, the layer author's toolkit, with the ``Layer``
protocol); ``batching`` describes it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

__all__ = [
    "BatchedChainVM",
    "Block",
    "ChainVM",
    "Mempool",
    "SubmitsTransactions",
    "TransactionSink",
    "TransactionSource",
    "find_layer",
    "iter_layers",
]

LayerT = TypeVar("LayerT")

#: More layers than any real stack has: a longer ``inner`` chain is taken for a loop.
MAX_STACK_DEPTH = 256


@runtime_checkable
class Block(Protocol):
    """A block as the consensus engine sees it.

    ``id`` is 32 bytes and identifies the block; ``bytes(block)`` is its wire encoding, and
    parsing those bytes yields a block with the same ``id``. ``verify`` raises
    :class:`~vmstack.errors.InvalidBlock` for a block that breaks a rule; ``accept`` and
    ``reject`` record the engine's decision. A layer's block wraps the block of the layer
    below so that all three reach the bottom.
    """

    @property
    def id(self) -> bytes: ...

    @property
    def parent_id(self) -> bytes: ...

    @property
    def height(self) -> int: ...

    @property
    def timestamp(self) -> int: ...

    def __bytes__(self) -> bytes: ...

    def verify(self) -> None: ...

    def accept(self) -> None: ...

    def reject(self) -> None: ...


@runtime_checkable
class ChainVM(Protocol):
    """The one-block-at-a-time VM interface every layer offers.

    ``get_block`` serves processing (verified, undecided) and accepted blocks and raises
    :class:`~vmstack.errors.BlockNotFound` for anything else; ``parse_block`` raises
    :class:`~vmstack.errors.InvalidBlock` for bytes that are not a block.
    """

    def get_block(self, block_id: bytes) -> Block: ...

    def parse_block(self, data: bytes) -> Block: ...

    def build_block(self) -> Block: ...

    def set_preference(self, block_id: bytes) -> None: ...

    def last_accepted(self) -> bytes: ...

    def get_block_id_at_height(self, height: int) -> bytes: ...


@runtime_checkable
class BatchedChainVM(Protocol):
    """The optional batched protocol (ARCHITECTURE.md, section 3).

    ``get_ancestors`` returns the bytes of ``block_id`` and then its ancestors, newest first,
    within the three budgets, for the WHOLE answer. ``batched_parse_block`` parses every
    element or none: a bad element raises :class:`~vmstack.errors.InvalidBlock` naming its
    index. Either may raise :class:`~vmstack.errors.BatchingNotImplemented`.
    """

    def get_ancestors(
        self,
        block_id: bytes,
        max_blocks_num: int,
        max_blocks_size: int,
        max_retrieval_time: float,
    ) -> list[bytes]: ...

    def batched_parse_block(self, blocks: Sequence[bytes]) -> list[Block]: ...


def iter_layers(vm: object) -> Iterator[object]:
    """``vm`` and every VM below it, top to bottom, following each layer's ``inner``.

    The one way to walk a stack: the bottom VM (one without ``inner``) comes last. A stack
    whose ``inner`` links loop, or that is absurdly deep, raises ``ValueError``.
    """
    seen: set[int] = set()
    current: object | None = vm
    while current is not None:
        if id(current) in seen or len(seen) >= MAX_STACK_DEPTH:
            raise ValueError(
                f"the stack of {type(vm).__name__} loops or is deeper than "
                f"{MAX_STACK_DEPTH} layers, at {type(current).__name__}"
            )
        seen.add(id(current))
        yield current
        current = getattr(current, "inner", None)


def find_layer(vm: object, kind: type[LayerT]) -> LayerT:
    """The topmost layer of ``vm``'s stack that is a ``kind`` (``vm`` itself included), e.g.
    ``find_layer(stack, CChainVM)`` for the VM at the bottom of a C-chain stack; a
    ``LookupError`` naming the layers if none is.

    ``kind`` may be any class or runtime-checkable protocol.
    """
    layers = []
    for layer in iter_layers(vm):
        if isinstance(layer, kind):
            return layer
        layers.append(type(layer).__name__)
    raise LookupError(f"no layer of the stack is a {kind.__name__}: {' > '.join(layers)}")


# --- the mempool: where a stack's transactions wait for a block ---------------------------
# Transactions are typed ``Any`` here: this floor knows no transaction format (the C-chain's
# are vmstack.cchain.types.Transaction).


@runtime_checkable
class TransactionSink(Protocol):
    """A mempool transactions can be queued in: ``add_transactions`` queues them all for the
    blocks the VM builds, or raises :class:`~vmstack.errors.InvalidTransaction` for one no
    block could carry now and queues none."""

    def add_transactions(self, transactions: Iterable[Any]) -> None: ...


@runtime_checkable
class TransactionSource(Protocol):
    """A mempool whose waiting transactions can be taken out: ``take_transactions`` removes
    every pending one and returns them in arrival order."""

    def take_transactions(self) -> list[Any]: ...


@runtime_checkable
class Mempool(TransactionSink, TransactionSource, Protocol):
    """The mempool of a VM that builds blocks from transactions (``CChainVM`` is one): what
    submission, a transition's hand-over, ``generate_chain`` and the simulators use.

    ``chain_id`` is the chain the transactions must be signed for; ``gas_limit`` the gas one
    block holds, so no block carries more than ``gas_limit // 21000`` transactions;
    ``pending_transactions()`` how many wait; ``next_nonce(address)`` the nonce a new
    transaction from ``address`` takes (its nonce in the state the next block builds on,
    past the pending ones that follow on).
    """

    @property
    def chain_id(self) -> int: ...

    @property
    def gas_limit(self) -> int: ...

    def pending_transactions(self) -> int: ...

    def next_nonce(self, address: bytes) -> int: ...


@runtime_checkable
class SubmitsTransactions(Protocol):
    """A layer that queues transactions in a mempool it does not hold (a client of a VM in
    another process): ``submit_transactions`` returns how many were queued, with the
    mempool's refusals."""

    def submit_transactions(self, transactions: Iterable[Any]) -> int: ...
