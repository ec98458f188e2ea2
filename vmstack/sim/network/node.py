"""A node of a simulated network: :class:`NodeServer`, and the plain data it is called with
and answers.

A node is its own full stack over its own LMDB store, on a simulated clock of its own that
every call sets to the simulated time the call happens at. The coordinator
(:mod:`vmstack.sim.network.run`) never touches a node's stack: it names a node method in a
:class:`Call` (one of :data:`NODE_METHODS`, the only methods a call may name) and gets back
plain data (:class:`Tip`, :class:`Served`, :class:`Received`, :class:`Executed`,
:class:`Delivered`, :class:`Built`), the same whichever process the node lives in, so the
simulated figures do not depend on the engine (:mod:`vmstack.sim.network.engines`) that hosts the
node.

What a peer sends is never trusted: an answer that does not parse or chain, or whose blocks
fail ``verify`` when executed, and a peer whose own store fails while serving, come back as
plain data saying so (:attr:`Received.bad`, :attr:`Executed.refused`, :attr:`Served.failure`,
:attr:`Delivered.refused`); the coordinator drops that peer's blocks and asks another. An
error of the node's own making (its own store damaged while it executes or builds) is
raised, and the engine reports the node as crashed.
"""

from __future__ import annotations

import contextlib
import itertools
import shutil
import tempfile
from pathlib import Path
from typing import Any

import attrs

from vmstack.batching import (
    MAX_CONTAINERS_LEN,
    batched_parse_block,
    get_ancestors,
)
from vmstack.cchain import generate_chain
from vmstack.cchain.generate import pool_transactions
from vmstack.clock import SimClock
from vmstack.errors import BlockNotFound, InvalidBlock, InvalidTransaction, StoreCorrupted
from vmstack.interfaces import Block, ChainVM, find_layer
from vmstack.sim.chain import chain_transactions
from vmstack.sim.network.gossip_node import GOSSIP_METHODS, NodeGossip
from vmstack.sim.network.node_consensus import CONSENSUS_METHODS, NodeConsensus
from vmstack.sim.network.stake import HISTORY_PCHAIN_HEIGHT, LIVE_PCHAIN_HEIGHT, StakeSchedule
from vmstack.stack import build_stack
from vmstack.store import KeyValueStore, LMDBStore, MemoryStore
from vmstack.submission import find_mempool
from vmstack.wrappers.proposer import ProposerVM, StakingKey

__all__ = [
    "Built",
    "Call",
    "Delivered",
    "Executed",
    "NODE_METHODS",
    "NODE_STORES",
    "NodeServer",
    "NodeSpec",
    "Received",
    "Served",
    "Tip",
    "failure_reason",
    "peak_rss",
]

#: The node methods a :class:`Call` may name.
NODE_METHODS = frozenset(
    {
        "generate",
        "export",
        "import_blocks",
        "tip",
        "transactions",
        "serve",
        "receive",
        "execute",
        "deliver",
        "build",
    }
    | GOSSIP_METHODS
    | CONSENSUS_METHODS
)


#: The stores a node can keep its chain in (:attr:`NodeSpec.store`).
NODE_STORES = ("lmdb", "memory")


@attrs.frozen
class NodeSpec:
    """What a node needs to build its stack: the chain's parameters, the seed of its
    staking key (its post-fork blocks are signed with it; ``None``: unsigned), when the
    network has validators their ``stake`` (the node's proposer layer then enforces the
    proposer windows over it, and the node's P-chain height is the schedule's live one,
    :data:`~vmstack.sim.network.stake.LIVE_PCHAIN_HEIGHT`, but while it builds the chain's
    history, :meth:`NodeServer.generate`), and its ``store``, one of :data:`NODE_STORES`:
    ``lmdb`` (its own LMDB environment, a few file descriptors held while the node lives)
    or ``memory`` (a :class:`~vmstack.store.MemoryStore`: no files, gone with the node)."""

    index: int
    chain_id: int
    start_time: float
    fork_time: float
    transition_time: float
    staking_seed: bytes | None = None
    stake: StakeSchedule | None = None
    store: str = "lmdb"

    def __attrs_post_init__(self) -> None:
        if self.store not in NODE_STORES:
            raise ValueError(f"node stores are {NODE_STORES}, not {self.store!r}")


@attrs.frozen
class Tip:
    """A node's last accepted block: its ID, height, timestamp, the P-chain height it
    names (0 for a pre-fork block) and whether it is a post-fork block."""

    block_id: bytes
    height: int
    timestamp: int = 0
    pchain_height: int = 0
    post_fork: bool = False


@attrs.frozen
class Served:
    """A node's answer to a ``get_ancestors`` request: the blocks, newest first (empty if
    it does not have the block asked for), or, when its own store failed while serving
    (``StoreCorrupted``), no blocks and ``failure`` saying why."""

    blocks: tuple[bytes, ...]
    failure: str | None = None


@attrs.frozen
class Received:
    """What a node made of an answer to its ``get_ancestors`` request.

    ``usable`` is False when the answer was empty, did not parse, did not start with the
    block asked for or was not a chain; then nothing was kept, and ``bad`` says why when
    the answer was not empty (a bad answer, not a peer that lacks the block). Otherwise
    ``new_blocks`` blocks were kept for execution; ``reached`` says the answer reached a
    block the node has (the fetch is over), and ``next_want`` is the block to ask for next
    when not.
    """

    usable: bool
    new_blocks: int = 0
    reached: bool = False
    next_want: bytes | None = None
    bad: str | None = None


@attrs.frozen
class Executed:
    """The fetched blocks a node verified and accepted, oldest first, by size.

    ``refused`` is why a fetched block failed ``verify`` (``None`` if none did), and
    ``refused_from`` the peer whose answer carried it: that block and every fetched block
    above it were dropped, unverified; the blocks below it were accepted."""

    sizes: tuple[int, ...]
    tip: Tip
    refused: str | None = None
    refused_from: int | None = None


@attrs.frozen
class Delivered:
    """A gossiped block at a node: ``accepted`` when it extended the node's chain,
    ``known`` when the node already had it, neither when its parent is missing (a gap the
    node has to fetch) or when it extended the chain but failed ``verify`` (``refused``
    says why; the block is dropped)."""

    accepted: bool
    known: bool
    tip: Tip
    refused: str | None = None


@attrs.frozen
class Built:
    """A block a builder built, verified and accepted: its bytes and the builder's tip, and
    the hashes of the transactions it holds when the node gossips transactions."""

    block: bytes
    tip: Tip
    transactions: tuple[bytes, ...] = ()


@attrs.frozen
class Call:
    """One call on one node: ``method`` (one of :data:`NODE_METHODS`) with ``args``."""

    node: int
    method: str
    args: tuple[Any, ...] = ()

    def __attrs_post_init__(self) -> None:
        if self.method not in NODE_METHODS:
            raise ValueError(f"a node has no method {self.method!r}")


class NodeServer(NodeGossip, NodeConsensus):
    """One node: its stack over its own store, on its own simulated clock. An LMDB store
    (``spec.store == "lmdb"``) lives in ``directory`` (a private temporary directory when
    ``None``; committed without fsync), and :meth:`close` removes the directory if
    ``remove`` (default: if the node made it); a memory store needs no directory.

    Every method that happens at a simulated time takes it as ``now``; the node's clock is
    moved there first (never back). The answers are plain data, the same whichever process
    the node lives in.
    """

    def __init__(
        self, spec: NodeSpec, directory: Path | None = None, *, remove: bool | None = None
    ) -> None:
        self.spec = spec
        self.clock = SimClock(spec.start_time)
        self._owned = False
        self.directory: Path | None = None
        self._store: KeyValueStore
        if spec.store == "memory":
            self._store = MemoryStore()
        else:
            self._owned = directory is None if remove is None else remove
            self.directory = (
                Path(tempfile.mkdtemp(prefix=f"vmstack-node-{spec.index}-"))
                if directory is None
                else directory
            )
            self.directory.mkdir(parents=True, exist_ok=True)
            # A node's store lives as long as the run: commits skip the fsync that only an
            # OS crash would need.
            self._store = LMDBStore(self.directory, sync=False)
        key = None if spec.staking_seed is None else StakingKey.generate(seed=spec.staking_seed)
        stake = spec.stake
        self._pchain_height = LIVE_PCHAIN_HEIGHT
        self.vm: ChainVM = build_stack(
            self._store,
            chain_id=spec.chain_id,
            fork_time=spec.fork_time,
            transition_time=spec.transition_time,
            clock=self.clock,
            staking_key=key,
            validators=None if stake is None else stake.windower(spec.chain_id),
            durango_time=0.0 if stake is None else stake.durango_time,
            pchain_height=lambda: self._pchain_height,
        )
        self._proposer = find_layer(self.vm, ProposerVM)
        self._fetched: list[tuple[Block, int | None]] = []
        self._tip: Tip | None = None

    def close(self) -> None:
        """Close the store; remove the directory if the node made it."""
        self._store.close()
        if self._owned and self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)

    def _at(self, now: float) -> None:
        self.clock.advance(max(0.0, now - self.clock()))

    def tip(self) -> Tip:
        """The node's last accepted block (read once per block: an accepted block's tip
        never changes, so it is kept until another block is accepted)."""
        block_id = self.vm.last_accepted()
        kept = self._tip
        if kept is not None and kept.block_id == block_id:
            return kept
        block = self._proposer.get_block(block_id)
        self._tip = Tip(
            block_id, block.height, block.timestamp, block.pchain_height, block.post_fork
        )
        return self._tip

    # --- before the run: the chain the builders start with --------------------------

    def generate(self, blocks: int, txs_per_block: int, seed: int, block_interval: float) -> Tip:
        """Build the first ``blocks`` blocks (deterministic for ``seed``): the chain's
        history, at P-chain height 0 but for its last block, which names the live one."""

        def reach_live_height(built: int) -> None:
            if built == blocks - 1:
                self._pchain_height = LIVE_PCHAIN_HEIGHT

        self._pchain_height = HISTORY_PCHAIN_HEIGHT if blocks > 1 else LIVE_PCHAIN_HEIGHT
        generate_chain(
            self.vm,
            blocks=blocks,
            txs_per_block=txs_per_block,
            seed=seed,
            clock=self.clock,
            block_interval=block_interval,
            progress=reach_live_height,
        )
        self._pchain_height = LIVE_PCHAIN_HEIGHT
        return self.tip()

    def transactions(self, blocks: int) -> int:
        """The transactions in the node's first ``blocks`` blocks
        (:func:`chain_transactions`)."""
        return chain_transactions(self._store, blocks)

    def export(self) -> list[bytes]:
        """Every accepted block above genesis, oldest first."""
        height = self.tip().height
        return [
            bytes(self.vm.get_block(self.vm.get_block_id_at_height(h)))
            for h in range(1, height + 1)
        ]

    def import_blocks(self, blocks: list[bytes]) -> Tip:
        """Parse, verify and accept ``blocks`` (oldest first) as the chain this node holds."""
        for data in blocks:
            block = self.vm.parse_block(data)
            self._at(float(block.timestamp))
            block.verify()
            block.accept()
        return self.tip()

    # --- bootstrapping: serving, fetching, executing -----------------------------------

    def serve(self, want: bytes, now: float, max_blocks_num: int) -> Served:
        """``get_ancestors`` of ``want`` with the engine's limits; no blocks if the node
        does not have it, and a ``failure`` if its store fails on the block asked for
        (mid-walk, a damaged block ends the answer before it: what is served is always a
        prefix of the true chain)."""
        self._at(now)
        try:
            return Served(
                tuple(
                    get_ancestors(
                        self.vm,
                        want,
                        max_blocks_num=max_blocks_num,
                        max_blocks_size=MAX_CONTAINERS_LEN,
                        clock=self.clock,
                    )
                )
            )
        except BlockNotFound:
            return Served(())
        except StoreCorrupted as error:
            return Served((), failure=f"its store failed: {error}")

    def receive(
        self, want: bytes, answer: list[bytes], now: float, peer: int | None = None
    ) -> Received:
        """Parse an answer from ``peer`` to a request for ``want`` with
        ``batched_parse_block`` and keep the blocks the node does not have yet, down to its
        last accepted block (remembering which peer sent them)."""
        self._at(now)
        if not answer:
            return Received(usable=False)
        try:
            blocks = batched_parse_block(self.vm, answer)
        except InvalidBlock as error:
            return Received(usable=False, bad=f"does not parse: {error}")
        if not blocks or blocks[0].id != want:
            return Received(usable=False, bad="does not start with the block asked for")
        if any(child.parent_id != parent.id for child, parent in itertools.pairwise(blocks)):
            return Received(usable=False, bad="is not a chain")
        have = self.vm.last_accepted()
        reached_at = next((i for i, block in enumerate(blocks) if block.id == have), None)
        if reached_at is not None:
            blocks = blocks[:reached_at]
        self._fetched.extend((block, peer) for block in blocks)
        reached = reached_at is not None or (bool(blocks) and blocks[-1].parent_id == have)
        return Received(
            usable=True,
            new_blocks=len(blocks),
            reached=reached,
            next_want=None if reached else blocks[-1].parent_id,
        )

    def execute(self, now: float) -> Executed:
        """Verify and accept every fetched block, oldest first, and forget them; at the
        first block that fails ``verify`` (a peer's bad bytes), stop and drop it and every
        block above it."""
        self._at(now)
        fetched, self._fetched = self._fetched, []
        sizes: list[int] = []
        for block, peer in reversed(fetched):
            try:
                block.verify()
            except (InvalidBlock, BlockNotFound) as error:
                return Executed(tuple(sizes), self.tip(), refused=str(error), refused_from=peer)
            block.accept()
            sizes.append(len(bytes(block)))
        self.gossip_forget_accepted()
        return Executed(tuple(sizes), self.tip())

    # --- after bootstrapping: gossip and building ----------------------------------------

    def deliver(self, data: bytes, now: float) -> Delivered:
        """Take a gossiped block: accept it if it extends the node's chain."""
        self._at(now)
        tip = self.tip()
        try:
            block = self.vm.parse_block(data)
        except (InvalidBlock, BlockNotFound):
            return Delivered(accepted=False, known=False, tip=tip)
        if block.height <= tip.height:
            return Delivered(accepted=False, known=True, tip=tip)
        if block.parent_id != tip.block_id:
            return Delivered(accepted=False, known=False, tip=tip)
        try:
            block.verify()
        except (InvalidBlock, BlockNotFound) as error:
            return Delivered(accepted=False, known=False, tip=tip, refused=str(error))
        self.vm.set_preference(block.id)
        block.accept()
        self.gossip_forget_accepted()
        return Delivered(accepted=True, known=False, tip=self.tip())

    def build(self, now: float, seed: int, position: int, txs: int) -> Built:
        """Build the next block on the node's chain with ``txs`` transactions of the
        seed's sequence from ``position`` (:func:`~vmstack.cchain.generate.pool_transactions`,
        the sequence the chain was generated from; none: what the node's own mempool holds),
        verify and accept it. A transaction the mempool refuses (one no block on this chain
        could carry: already included, say) is dropped and the block built with the rest: a
        stale transaction never stops a build."""
        self._at(now)
        # Build on the last accepted block, whatever a fetch accepted since the last
        # preference.
        self.vm.set_preference(self.vm.last_accepted())
        mempool = find_mempool(self.vm)
        if txs:
            # One by one: a transaction no block on this chain could carry (one the chain
            # already holds, from a slice that overlaps what it included) is dropped, and
            # the block is built with the rest.
            for tx in pool_transactions(
                seed=seed, chain_id=mempool.chain_id, start=position, count=txs
            ):
                with contextlib.suppress(InvalidTransaction):
                    mempool.add_transactions([tx])
        block = self.vm.build_block()
        block.verify()
        self.vm.set_preference(block.id)
        block.accept()
        return Built(bytes(block), self.tip(), self.gossip_forget_accepted())

    def call(self, method: str, args: tuple[Any, ...]) -> Any:
        """Run one of :data:`NODE_METHODS` with ``args``."""
        if method not in NODE_METHODS:
            raise ValueError(f"a node has no method {method!r}")
        return getattr(self, method)(*args)


def failure_reason(method: str, error: BaseException) -> str:
    """Why a node whose ``method`` raised ``error`` is out of the run (the same words on
    every engine)."""
    return f"its {method} failed: {type(error).__name__}: {error}"


def peak_rss() -> int:
    """Peak resident set of this process, in bytes (Linux reports kilobytes)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
