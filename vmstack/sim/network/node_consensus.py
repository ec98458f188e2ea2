"""A network node's Snowman engine: the node methods a network run with ``--consensus
snowman`` calls (:class:`NodeConsensus`, mixed into
:class:`~vmstack.sim.network.node.NodeServer`), and what they answer
(:class:`ConsensusStep`).

A node joins consensus once it has bootstrapped (:meth:`NodeConsensus.consensus_join`):
it then runs a :class:`~vmstack.consensus.SnowmanEngine` over its own stack. Every call
hands the engine one message (or a build, or a change of who is connected) at a simulated
time; the messages the engine sends to other nodes come back in the answer for the
coordinator to carry over the simulated links, and the messages it sends to itself are
handled at once, in the same call. The answer also says which blocks the engine decided
meanwhile and when the node may next build on its preference (the first slot of its own in
the proposer windows of the preferred block). See docs/network-consensus.md.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vmstack.sim.network.node import Tip

import attrs

from vmstack.cchain import CChainVM
from vmstack.cchain.generate import pool_transactions
from vmstack.consensus import Parameters, SnowmanEngine, StakeSampler
from vmstack.consensus.engine import Message, PullQuery, PushQuery
from vmstack.errors import AnyoneCanPropose, BlockNotFound, InvalidTransaction, VMStackError
from vmstack.interfaces import ChainVM, find_layer
from vmstack.submission import find_mempool
from vmstack.wrappers.proposer.windower import MAX_LOOK_AHEAD_SLOTS, WINDOW_DURATION, time_to_slot

if TYPE_CHECKING:
    from vmstack.clock import SimClock
    from vmstack.sim.network.node import NodeSpec
    from vmstack.wrappers.proposer import ProposerVM

__all__ = ["CONSENSUS_METHODS", "ConsensusStep", "NodeConsensus"]

#: The node methods of consensus (added to the node's callable methods).
CONSENSUS_METHODS = frozenset(
    {
        "consensus_join",
        "consensus_receive",
        "consensus_build",
        "consensus_connect",
        "consensus_frontier",
        "consensus_equivocate",
    }
)

#: Messages a node hands itself within one call, at most (a loop would fail, not hang).
MAX_SELF_MESSAGES = 100_000


@attrs.frozen
class ConsensusStep:
    """What one consensus call did on a node: ``sends`` the messages for other nodes
    (destination index, message), ``accepted`` the blocks accepted meanwhile (ID, height),
    oldest first, ``rejected`` the IDs rejected meanwhile, ``built`` the IDs of the blocks
    this node's engine built and issued meanwhile (in a build call, or later from a build
    it had deferred while ``optimal_processing`` blocks processed), ``tip`` its last
    accepted block, ``processing`` how many blocks its engine holds undecided, ``build_at``
    the simulated time at which the node may next build on its preference (``None``: not
    within the windower's look-ahead), ``preference`` its preferred block, its engine's poll
    counts so far, ``transactions`` the hashes of the transactions of each built block
    when the node gossips transactions (``--tx-rate``), ``built_slots`` the proposer slot
    each built block took and its delay after its parent (whole seconds), and
    ``equivocated`` the two blocks a byzantine proposer built in one slot."""

    sends: tuple[tuple[int, Message], ...]
    accepted: tuple[tuple[bytes, int], ...]
    rejected: tuple[bytes, ...]
    built: tuple[bytes, ...]
    tip: Tip
    processing: int
    build_at: float | None
    preference: bytes
    preference_height: int
    polls_successful: int
    polls_failed: int
    transactions: tuple[tuple[bytes, ...], ...] = ()
    built_slots: tuple[tuple[int, int], ...] = ()
    equivocated: tuple[bytes, ...] = ()


class NodeConsensus:
    """The consensus methods of a network node; the node provides ``vm``, ``spec``,
    ``clock``, ``_proposer``, ``tip()`` and ``_at(now)``."""

    vm: ChainVM
    spec: NodeSpec
    clock: SimClock
    _proposer: ProposerVM
    _engine: SnowmanEngine | None = None
    _outbox: list[tuple[int, Message]]
    _accepted_seen: int
    _rejected_seen: int
    _built_seen: int
    _block_interval: float

    if TYPE_CHECKING:

        def tip(self) -> Tip: ...

        def _at(self, now: float) -> None: ...

        def gossip_forget_accepted(self) -> tuple[bytes, ...]: ...

        @property
        def gossiping(self) -> bool: ...

    def consensus_join(
        self,
        now: float,
        params: Parameters,
        sampler_seed: int,
        block_interval: float,
        disconnected: tuple[int, ...] = (),
        above_height: int | None = None,
    ) -> ConsensusStep:
        """Start this node's engine over its stack from its last accepted block, with
        ``params``, a stake sampler seeded with ``sampler_seed`` and the peers in
        ``disconnected`` taken as unreachable. The answer's ``accepted`` lists the blocks
        the node accepted before it joined (while bootstrapping) above ``above_height``."""
        self._at(now)
        stake = self.spec.stake
        if stake is None:
            raise VMStackError("consensus needs a network whose nodes validate with stake")
        own = stake.node_ids[self.spec.index]
        self._outbox = []
        self._self_queue: deque[tuple[bytes, Message]] = deque()
        self._accepted_seen = 0
        self._rejected_seen = 0
        self._built_seen = 0
        self._block_interval = block_interval
        self._facts: dict[bytes, Tip] = {}
        self._own_slots: dict[bytes, tuple[int, float]] = {}

        def send(destination: bytes, message: Message) -> None:
            if destination == own:
                self._self_queue.append((own, message))
            else:
                self._outbox.append((stake.node_of(destination), message))

        self._engine = SnowmanEngine(
            self.vm,
            params,
            node_id=own,
            sampler=StakeSampler(
                dict(zip(stake.node_ids, stake.weights, strict=True)), seed=sampler_seed
            ),
            send=send,
            clock=self.clock,
        )
        for peer in disconnected:
            self._engine.disconnected(stake.node_ids[peer])
        before: tuple[tuple[bytes, int], ...] = ()
        if above_height is not None:
            last_height = self._engine.last_accepted()[1]
            before = tuple(
                (self.vm.get_block_id_at_height(height), height)
                for height in range(above_height + 1, last_height + 1)
            )
        return self._step(before)

    def _running(self) -> SnowmanEngine:
        if self._engine is None:
            raise VMStackError(f"node {self.spec.index} has not joined consensus")
        return self._engine

    def consensus_receive(self, now: float, sender: int, message: Message) -> ConsensusStep:
        """Hand the engine ``message`` from node ``sender``."""
        self._at(now)
        engine = self._running()
        assert self.spec.stake is not None
        engine.receive(self.spec.stake.node_ids[sender], message)
        return self._step()

    def consensus_connect(self, now: float, peers: tuple[int, ...], up: bool) -> ConsensusStep:
        """Tell the engine ``peers`` are reachable again (``up``) or not."""
        self._at(now)
        engine = self._running()
        assert self.spec.stake is not None
        for peer in peers:
            node_id = self.spec.stake.node_ids[peer]
            if up:
                engine.connected(node_id)
            else:
                engine.disconnected(node_id)
        return self._step()

    def consensus_build(
        self, now: float, preference: bytes, seed: int, position: int, txs: int
    ) -> ConsensusStep:
        """Build one block on the preference, if it is still ``preference``: put ``txs``
        transactions of the seed's pool from ``position`` in the mempool (none: the block
        holds what the node's own mempool holds, as with transaction gossip) and tell the
        engine there is work (it builds, issues and pushes the block). A transaction the
        preferred chain holds already is left out."""
        self._at(now)
        engine = self._running()
        if engine.preference() != preference:
            return self._step()
        if txs:
            mempool = find_mempool(self.vm)
            for transaction in pool_transactions(
                seed=seed, chain_id=mempool.chain_id, start=position, count=txs
            ):
                try:
                    mempool.add_transactions([transaction])
                except InvalidTransaction:
                    continue  # on the preferred chain already (its nonce is used)
        engine.notify_pending()
        return self._step()

    def consensus_equivocate(
        self,
        now: float,
        preference: bytes,
        seed: int,
        position: int,
        txs: int,
        halves: tuple[tuple[int, ...], tuple[int, ...]],
    ) -> ConsensusStep:
        """A byzantine proposer's slot: build two blocks on the preference (if it is still
        ``preference``), one empty and one with ``txs`` transactions of the seed's pool
        from ``position``, both in this slot, and push the first to every node of
        ``halves[0]``, the second to every node of ``halves[1]`` (queries outside any poll
        of this node's engine, which issues neither: it learns of them as any node does)."""
        self._at(now)
        engine = self._running()
        if engine.preference() != preference:
            return self._step()
        self.vm.set_preference(preference)
        empty = self.vm.build_block()
        mempool = find_mempool(self.vm)
        for transaction in pool_transactions(
            seed=seed, chain_id=mempool.chain_id, start=position, count=txs
        ):
            try:
                mempool.add_transactions([transaction])
            except InvalidTransaction:
                continue
        self.vm.set_preference(preference)
        full = self.vm.build_block()
        blocks = (empty, full) if empty.id != full.id else (empty,)
        for block, half in zip(blocks, halves, strict=False):
            for destination in half:
                self._outbox.append(
                    (destination, PushQuery(self._frontier_request(), bytes(block), block.height))
                )
        return self._step(equivocated=tuple(block.id for block in blocks))

    def _transactions_of(self, block_id: bytes) -> tuple[bytes, ...]:
        """The hashes of the transactions of this node's block ``block_id``."""
        chain = find_layer(self.vm, CChainVM)
        try:
            inner = chain.get_block(self._proposer.get_block(block_id).inner.id)
        except BlockNotFound:
            return ()
        return tuple(transaction.hash for transaction in inner.transactions)

    def consensus_frontier(self, now: float) -> ConsensusStep:
        """With nothing processing, ask one validator (drawn by stake) for its preferred
        block above this node's last accepted one: a pull query of the last accepted block
        at the next height, outside any poll. A peer ahead answers with a block this node
        does not have, which the engine fetches and issues (how a node that missed the last
        blocks catches up once no more are built)."""
        self._at(now)
        engine = self._running()
        if engine.consensus.num_processing() == 0:
            drawn = engine.sampler.sample(1)
            if drawn is not None and drawn[0] != engine.node_id:
                last_id, last_height = engine.last_accepted()
                engine.send(drawn[0], PullQuery(self._frontier_request(), last_id, last_height + 1))
        return self._step()

    def _frontier_request(self) -> int:
        """A request ID no poll of the engine uses (counted down from the top)."""
        self._frontier_requests = getattr(self, "_frontier_requests", 2**62) - 1
        return self._frontier_requests

    def _step(
        self,
        before: tuple[tuple[bytes, int], ...] = (),
        *,
        equivocated: tuple[bytes, ...] = (),
    ) -> ConsensusStep:
        engine = self._running()
        handled = 0
        while self._self_queue:
            sender, message = self._self_queue.popleft()
            engine.receive(sender, message)
            handled += 1
            if handled > MAX_SELF_MESSAGES:
                raise VMStackError(f"node {self.spec.index}'s engine does not settle")
        sends, self._outbox = tuple(self._outbox), []
        accepted = before + tuple(
            (block_id, self._fact(block_id).height)
            for block_id in engine.accepted_ids[self._accepted_seen :]
        )
        rejected = tuple(engine.rejected_ids[self._rejected_seen :])
        self._accepted_seen = len(engine.accepted_ids)
        self._rejected_seen = len(engine.rejected_ids)
        built = tuple(engine.built_ids[self._built_seen :])
        self._built_seen = len(engine.built_ids)
        built_slots = []
        for block_id in built:
            block = self._fact(block_id)
            parent = self._fact(self._proposer.get_block(block_id).parent_id)
            built_slots.append(
                (
                    time_to_slot(parent.timestamp, block.timestamp),
                    block.timestamp - parent.timestamp,
                )
            )
        transactions: tuple[tuple[bytes, ...], ...] = ((),) * len(built)
        if self.gossiping:
            if accepted:
                self.gossip_forget_accepted()
            transactions = tuple(self._transactions_of(block_id) for block_id in built)
        preference = engine.preference()
        return ConsensusStep(
            sends=sends,
            accepted=accepted,
            rejected=rejected,
            built=built,
            tip=self._fact(engine.last_accepted()[0]),
            processing=engine.consensus.num_processing(),
            build_at=self._build_at(preference),
            preference=preference,
            preference_height=self._fact(preference).height,
            polls_successful=engine.consensus.polls_successful,
            polls_failed=engine.consensus.polls_failed,
            transactions=transactions,
            built_slots=tuple(built_slots),
            equivocated=equivocated,
        )

    def _fact(self, block_id: bytes) -> Tip:
        """What the run needs of a block (its ID, height, timestamp, P-chain height,
        whether post-fork), read once from the stack."""
        fact = self._facts.get(block_id)
        if fact is None:
            from vmstack.sim.network.node import Tip

            block = self._proposer.get_block(block_id)
            fact = self._facts[block_id] = Tip(
                block_id, block.height, block.timestamp, block.pchain_height, block.post_fork
            )
        return fact

    def _build_at(self, preference: bytes) -> float | None:
        """When this node may build on ``preference``: ``block_interval`` after it at the
        earliest, in the first slot the proposer windows give this node from then on."""
        parent = self._fact(preference)
        earliest = max(self.clock(), parent.timestamp + self._block_interval)
        stake = self.spec.stake
        assert stake is not None
        if not parent.post_fork:
            return earliest if self.spec.index == 0 else None
        start_slot = time_to_slot(parent.timestamp, earliest)
        known = self._own_slots.get(preference)
        if known is not None and known[0] <= start_slot <= known[1] / WINDOW_DURATION:
            delay = known[1]
        else:
            try:
                delay = stake.windower(self.spec.chain_id).min_delay_for_proposer(
                    parent.height + 1,
                    parent.pchain_height,
                    stake.node_ids[self.spec.index],
                    start_slot,
                )
            except AnyoneCanPropose:
                return earliest if self.spec.index == 0 else None
            self._own_slots[preference] = (start_slot, delay)
        if delay >= (start_slot + MAX_LOOK_AHEAD_SLOTS) * WINDOW_DURATION:
            return None
        return max(earliest, parent.timestamp + delay)


def consensus_answer(value: Any) -> ConsensusStep | None:
    """``value`` if it is a :class:`ConsensusStep`, else ``None`` (a node gone)."""
    return value if isinstance(value, ConsensusStep) else None
