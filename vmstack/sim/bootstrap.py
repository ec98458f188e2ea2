"""One node bootstrapping a chain from its peers, the way avalanchego's bootstrapper does.

The node asks a peer for the ancestors of the tip (``get_ancestors`` with the engine's
defaults), checks that the first block is the one it asked for, parses the answer, and asks
again from the oldest block's parent until it reaches a block it has; then it verifies and
accepts everything from the oldest block up. A request that is dropped or not answered in
time goes to the next peer. A peer that is gone (its process behind the gRPC boundary died:
``VMUnavailable``) never answers; it is dropped, the request times out and goes to the next
peer, and the bootstrap goes on with the peers left.

In ``batched`` mode the peers answer through the batched protocol and the node parses with
``batched_parse_block``; in serial mode peers walk ``get_block`` and the node calls
``parse_block`` per block: the fallback an engine gets from a stack that cannot batch. Every
call is a real call on a real stack; the simulated time it takes is charged from the
:class:`~vmstack.sim.costs.CostModel`, and its wall time is measured beside it.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence

import attrs

from vmstack.batching import (
    CONTAINER_LEN_OVERHEAD,
    DEFAULT_MAX_BLOCKS_NUM,
    DEFAULT_MAX_RETRIEVAL_TIME,
    MAX_CONTAINERS_LEN,
    AncestorBudget,
    BlockFetch,
    batched_parse_block,
    fetch_through,
    get_ancestors,
    serial_parse_block,
    walk_ancestors,
)
from vmstack.clock import SimClock
from vmstack.errors import BlockNotFound, InvalidBlock, VMStackError, VMUnavailable
from vmstack.interfaces import Block, ChainVM
from vmstack.sim.costs import CostModel
from vmstack.sim.events import EventLoop
from vmstack.sim.links import Network

__all__ = [
    "BootstrapResult",
    "Bootstrapper",
    "REQUEST_BYTES",
]

#: Size of a GetAncestors request on the wire (chain ID, request ID, deadline, block ID...).
REQUEST_BYTES = 96


@attrs.frozen
class BootstrapResult:
    """What one bootstrap did. Simulated figures depend only on the seed, the configuration
    and the cost model; ``*_wall_seconds`` are measured and vary from run to run."""

    mode: str
    blocks: int
    requests: int
    retries: int
    bytes_received: int
    fetch_seconds: float
    total_seconds: float
    wall_seconds: float
    serving_wall_seconds: float
    parsing_wall_seconds: float
    timeline: tuple[tuple[float, int], ...]
    retries_at: tuple[tuple[float, str], ...] = ()
    peers_dropped: tuple[int, ...] = ()

    @property
    def blocks_per_second(self) -> float:
        """Blocks per simulated second, over the whole bootstrap."""
        return self.blocks / self.total_seconds if self.total_seconds > 0 else 0.0

    def simulated(self) -> dict[str, object]:
        """The figures that the seed, configuration and cost model determine."""
        return {
            "mode": self.mode,
            "blocks": self.blocks,
            "requests": self.requests,
            "retries": self.retries,
            "bytes_received": self.bytes_received,
            "fetch_seconds": self.fetch_seconds,
            "total_seconds": self.total_seconds,
            "blocks_per_second": self.blocks_per_second,
            "timeline": [list(point) for point in self.timeline],
            "retries_at": [list(point) for point in self.retries_at],
            "peers_dropped": list(self.peers_dropped),
        }

    def measured(self) -> dict[str, float]:
        """The wall-clock figures of this run."""
        return {
            "wall_seconds": self.wall_seconds,
            "serving_wall_seconds": self.serving_wall_seconds,
            "parsing_wall_seconds": self.parsing_wall_seconds,
        }


@attrs.define
class _Peer:
    vm: ChainVM
    busy_until: float = 0.0


class Bootstrapper:
    """Bootstraps ``node`` from ``peers`` over ``network`` on the simulated ``clock``.

    ``progress`` is called with the number of blocks fetched so far after every answer. A
    peer whose VM is unavailable is dropped (:attr:`BootstrapResult.peers_dropped`); with
    every peer dropped the bootstrap fails with ``VMStackError``.
    """

    def __init__(
        self,
        *,
        node: ChainVM,
        peers: Sequence[ChainVM],
        network: Network,
        costs: CostModel,
        clock: SimClock,
        batched: bool,
        max_blocks_num: int = DEFAULT_MAX_BLOCKS_NUM,
        max_blocks_size: int = MAX_CONTAINERS_LEN,
        max_retrieval_time: float = DEFAULT_MAX_RETRIEVAL_TIME,
        max_attempts: int = 100,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        if len(peers) != len(network.links):
            raise ValueError("the network needs one link per peer")
        self.node = node
        self.peers = [_Peer(vm) for vm in peers]
        self.network = network
        self.costs = costs
        self.clock = clock
        self.batched = batched
        AncestorBudget(max_blocks_num, max_blocks_size, max_retrieval_time)  # validates them
        self.max_blocks_num = max_blocks_num
        self.max_blocks_size = max_blocks_size
        self.max_retrieval_time = max_retrieval_time
        self.max_attempts = max_attempts
        self.progress = progress
        self.loop = EventLoop(clock)
        self._fetched: list[Block] = []
        self._timeline: list[tuple[float, int]] = []
        self._requests = 0
        self._retries = 0
        self._retry_log: list[tuple[float, str]] = []
        self._attempts_for_want = 0
        self._next_peer = 0
        self._dropped: list[int] = []
        self._outstanding: int | None = None
        self._bytes = 0
        self._serving_wall = 0.0
        self._parsing_wall = 0.0
        self._node_busy_until = 0.0
        self._fetch_done_at: float | None = None
        self._done_at: float | None = None
        self._error: BaseException | None = None

    # --- the run ---------------------------------------------------------------------

    def run(self, tip: bytes) -> BootstrapResult:
        """Fetch, parse, verify and accept everything from the node's last accepted block up
        to ``tip``; raises what stopped it if the bootstrap could not finish."""
        started_wall = time.perf_counter()
        started = self.clock()
        self._have = self.node.last_accepted()
        self._timeline.append((started, 0))
        if tip == self._have:
            self._fetch_done_at = self._done_at = started
        else:
            self._request(tip)
            self.loop.run()
        if self._error is not None:
            raise self._error
        if self._done_at is None or self._fetch_done_at is None:
            raise VMStackError("bootstrap ended without reaching the node's last accepted block")
        return BootstrapResult(
            mode="batched" if self.batched else "serial",
            blocks=len(self._fetched),
            requests=self._requests,
            retries=self._retries,
            bytes_received=self._bytes,
            fetch_seconds=self._fetch_done_at - started,
            total_seconds=self._done_at - started,
            wall_seconds=time.perf_counter() - started_wall,
            serving_wall_seconds=self._serving_wall,
            parsing_wall_seconds=self._parsing_wall,
            timeline=tuple((at - started, count) for at, count in self._timeline),
            retries_at=tuple((at - started, reason) for at, reason in self._retry_log),
            peers_dropped=tuple(self._dropped),
        )

    # --- fetching ------------------------------------------------------------------------

    def _request(self, want: bytes) -> None:
        if self._attempts_for_want >= self.max_attempts:
            self._error = VMStackError(
                f"no peer answered for block {want.hex()} after {self.max_attempts} attempts"
            )
            return
        if len(self._dropped) == len(self.peers):
            self._error = VMStackError(
                f"every peer was dropped (their VMs are unavailable) "
                f"before block {want.hex()} was fetched"
            )
            return
        self._attempts_for_want += 1
        self._requests += 1
        request_id = self._requests
        self._outstanding = request_id
        while self._next_peer in self._dropped:
            self._next_peer = (self._next_peer + 1) % len(self.peers)
        peer = self._next_peer
        self._next_peer = (self._next_peer + 1) % len(self.peers)
        self.loop.schedule(self.network.config.timeout, lambda: self._timed_out(request_id, want))
        delay = self.network.transfer(peer, REQUEST_BYTES)
        if delay is not None:
            self.loop.schedule(delay, lambda: self._serve(peer, request_id, want))

    def _timed_out(self, request_id: int, want: bytes) -> None:
        if self._outstanding == request_id:
            self._retry(want, "timeout")

    def _retry(self, want: bytes, reason: str) -> None:
        """Ask the next peer; ``reason`` is ``"timeout"`` (no answer in time), ``"empty"``
        (the peer lacks the block) or ``"invalid"`` (the answer did not parse or chain)."""
        self._retries += 1
        self._retry_log.append((self.clock(), reason))
        self._request(want)

    def _serve(self, peer_index: int, request_id: int, want: bytes) -> None:
        peer = self.peers[peer_index]
        now = self.clock()
        start = max(now, peer.busy_until)
        wall = time.perf_counter()
        try:
            answer, cost = (
                self._serve_batched(peer.vm, want, start)
                if self.batched
                else self._serve_serial(peer.vm, want, start)
            )
        except VMUnavailable:
            # The peer is gone: no answer comes, the request times out, and the peer is
            # asked no more.
            self._dropped.append(peer_index)
            return
        finally:
            self._serving_wall += time.perf_counter() - wall
        peer.busy_until = start + cost
        size = sum(len(block) + CONTAINER_LEN_OVERHEAD for block in answer)
        delay = self.network.transfer(peer_index, size)
        if delay is not None:
            self.loop.schedule(
                start - now + cost + delay, lambda: self._receive(request_id, want, answer)
            )

    def _serve_batched(self, vm: ChainVM, want: bytes, start: float) -> tuple[list[bytes], float]:
        """One batched call on the peer's stack, then the same walk as the serial path over
        its answer, charging each block as the walk reaches it: the time budget binds on
        simulated time exactly as it binds the serial walk."""
        answer = iter(
            get_ancestors(
                vm,
                want,
                max_blocks_num=self.max_blocks_num,
                max_blocks_size=self.max_blocks_size,
                max_retrieval_time=self.max_retrieval_time,
                clock=self.clock,
            )
        )

        def fetch(block_id: bytes) -> tuple[bytes, bytes]:
            data = next(answer, None)
            if data is None:
                raise BlockNotFound("the end of the batched answer")
            return data, block_id

        # One call: its base cost once, then each block's share as the walk reaches it.
        cost = self.costs.serve_batched
        return self._charged_walk(
            fetch, want, start, cost.base, lambda data: cost(1, len(data)) - cost.base
        )

    def _serve_serial(self, vm: ChainVM, want: bytes, start: float) -> tuple[list[bytes], float]:
        # One get_block call per block, each costing a whole call.
        cost = self.costs.serve_serial
        return self._charged_walk(
            fetch_through(vm), want, start, 0.0, lambda data: cost(1, len(data))
        )

    def _charged_walk(
        self,
        fetch_one: BlockFetch,
        want: bytes,
        start: float,
        upfront: float,
        per_fetch: Callable[[bytes], float],
    ) -> tuple[list[bytes], float]:
        """The ancestors walk (rules 2-4) over ``fetch_one``, on a clock that starts at
        ``start + upfront`` and moves by ``per_fetch(block)`` as each block is fetched; the
        answer and the simulated seconds spent."""
        spent = upfront

        def fetch(block_id: bytes) -> tuple[bytes, bytes]:
            nonlocal spent
            data, parent_id = fetch_one(block_id)
            spent += per_fetch(data)
            return data, parent_id

        budget = AncestorBudget(
            self.max_blocks_num,
            self.max_blocks_size,
            self.max_retrieval_time,
            clock=lambda: start + spent,
        )
        return walk_ancestors(fetch, want, budget).blocks, spent

    def _receive(self, request_id: int, want: bytes, answer: list[bytes]) -> None:
        if self._outstanding != request_id:
            return
        self._outstanding = None
        self._bytes += sum(map(len, answer))
        if not answer:
            self._retry(want, "empty")
            return
        wall = time.perf_counter()
        try:
            blocks = (
                batched_parse_block(self.node, answer)
                if self.batched
                else serial_parse_block(self.node, answer)
            )
        except InvalidBlock:
            blocks = []
        self._parsing_wall += time.perf_counter() - wall
        cost = (
            self.costs.parse_batched(len(answer), sum(map(len, answer)))
            if self.batched
            else sum(self.costs.parse_serial(1, len(data)) for data in answer)
        )
        start = max(self.clock(), self._node_busy_until)
        self._node_busy_until = start + cost
        self.loop.schedule(start - self.clock() + cost, lambda: self._parsed(want, blocks))

    def _parsed(self, want: bytes, blocks: list[Block]) -> None:
        if not blocks or blocks[0].id != want or not self._is_chain(blocks):
            self._retry(want, "invalid")
            return
        self._attempts_for_want = 0
        have = next((i for i, block in enumerate(blocks) if block.id == self._have), None)
        if have is not None:
            blocks = blocks[:have]
        self._fetched.extend(blocks)
        self._timeline.append((self.clock(), len(self._fetched)))
        if self.progress is not None:
            self.progress(len(self._fetched))
        if have is not None or blocks[-1].parent_id == self._have:
            self._fetch_done_at = self.clock()
            self._execute()
        else:
            self._request(blocks[-1].parent_id)

    @staticmethod
    def _is_chain(blocks: list[Block]) -> bool:
        return all(child.parent_id == parent.id for child, parent in itertools.pairwise(blocks))

    # --- executing -------------------------------------------------------------------

    def _execute(self) -> None:
        cost = 0.0
        try:
            for block in reversed(self._fetched):
                block.verify()
                block.accept()
                cost += self.costs.execute(1, len(bytes(block)))
        except VMStackError as error:
            self._error = error
            return

        def finished() -> None:
            self._done_at = self.clock()
            self._timeline.append((self.clock(), len(self._fetched)))

        self.loop.schedule(cost, finished)
