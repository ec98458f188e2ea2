"""How a node joins a network run and catches up: the bootstrapping protocol.

A joining node asks a random peer for its last accepted block, then ``get_ancestors`` from
it down to a block the node has, ``batched_parse_block`` each answer, verify and accept
oldest first; a request that is dropped or not answered in time goes to another peer, and
a node gives up after ``max_attempts`` peers in a row failed it. A bad answer (one that does
not parse or chain, blocks that fail ``verify``, a peer whose store fails while serving) is
dropped and counted, the peer that gave it is asked no more by that node, and another peer
is asked: one bad node never ends the run. A node that finishes a
round asks again until a peer has nothing newer; a caught-up node keeps asking a peer every
``block_interval`` while blocks are being built or it is behind (as consensus polls would
tell it). Only nodes that have caught up once serve others.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vmstack.batching import CONTAINER_LEN_OVERHEAD
from vmstack.sim.bootstrap import REQUEST_BYTES
from vmstack.sim.network.events import NetworkEventLoop
from vmstack.sim.network.node import Call, Executed, Received, Served, Tip

__all__ = ["NodeBootstrapping"]


class NodeBootstrapping(NetworkEventLoop):
    """The event loop with the joining, bootstrapping and polling of every node."""

    #: Random draws :meth:`_pick_peer` makes among the serving nodes before it lists the
    #: eligible ones instead.
    PEER_DRAWS = 16

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: The nodes that have caught up once (and so serve), in the order they did.
        self.serving: list[int] = []

    def _crashed(self, node: int, reason: str) -> None:
        """Record the crash; when no live node holds the network's tip any more (the node
        that built it crashed before any other accepted it), the tip to build on is the
        highest a live node holds, so the builders left go on building."""
        super()._crashed(node, reason)
        tip = self.network_tip
        if tip is None or not any(
            state.tip == tip and self._up(index) for index, state in enumerate(self.states)
        ):
            held = [
                state.tip
                for index, state in enumerate(self.states)
                if state.tip is not None and self._up(index)
            ]
            self.network_tip = max(held, key=lambda held_tip: held_tip.height, default=tip)

    def _can_serve(self, peer: int, node: int, height: int) -> bool:
        """Whether ``peer`` can serve ``node`` up to ``height``: not ``node`` itself, up,
        caught up once, (as far as the coordinator's book says) that high, and never caught
        giving ``node`` a bad answer."""
        state = self.states[peer]
        return (
            peer != node
            and state.ready
            and self._up(peer)
            and state.tip is not None
            and state.tip.height >= height
            and peer not in self.states[node].distrusted
        )

    def _pick_peer(self, node: int, height: int) -> int | None:
        """A random peer that can serve ``node`` up to ``height`` (``None`` if none can).

        Draws among the serving nodes until one can (at most :attr:`PEER_DRAWS` draws, so a
        pick costs the same whatever the size of the network), then picks among those that
        can, listed: every peer that can serve has the same chance either way."""
        serving = self.serving
        if not serving:
            return None
        for _ in range(self.PEER_DRAWS):
            peer = serving[self.rng.randrange(len(serving))]
            if self._can_serve(peer, node, height):
                return peer
        peers = [peer for peer in serving if self._can_serve(peer, node, height)]
        return self.rng.choice(peers) if peers else None

    def _join(self, node: int) -> None:
        state = self.states[node]
        state.joined = True
        state.result.joined_at = self.clock() - self.started
        state.result.timeline.append((state.result.joined_at, 0))
        self._ask_frontier(node)

    def _ask_frontier(self, node: int) -> None:
        """Ask a random peer for its last accepted block (a round trip of small messages)."""
        state = self.states[node]
        state.in_round = True
        if not self._give_up_after_attempts(node, "frontier"):
            return
        request = next(self._requests)
        state.outstanding = request
        self.schedule(
            self.config.network.timeout,
            node,
            lambda _: self._timed_out(node, request, lambda: self._ask_frontier(node)),
        )
        peer = self._pick_peer(node, 0)
        if peer is None:
            return
        state.result.requests += 1
        delay = self.mesh.transfer(node, peer, REQUEST_BYTES)
        if delay is not None:
            self.schedule(
                delay, peer, lambda _: self._answer_frontier(peer, node, request), read=True
            )

    def _answer_frontier(self, peer: int, node: int, request: int) -> None:
        tip = self.states[peer].tip
        delay = self.mesh.transfer(peer, node, REQUEST_BYTES)
        if tip is not None and delay is not None:
            self.schedule(delay, node, lambda _: self._frontier(node, request, tip))

    def _frontier(self, node: int, request: int, tip: Tip) -> None:
        state = self.states[node]
        if state.outstanding != request:
            return
        state.outstanding = None
        state.attempts = 0
        if state.tip is not None and tip.height <= state.tip.height:
            self._caught_up(node)
            return
        state.target = tip.height
        self._request(node, tip.block_id)

    def _give_up_after_attempts(self, node: int, what: str) -> bool:
        state = self.states[node]
        if state.attempts >= self.config.max_attempts:
            state.result.stalled = (
                f"no peer answered its {what} request after {self.config.max_attempts} attempts"
            )
            state.in_round = False
            return False
        state.attempts += 1
        return True

    def _timed_out(self, node: int, request: int, again: Callable[[], None]) -> None:
        state = self.states[node]
        if state.outstanding == request:
            state.outstanding = None
            state.result.retries += 1
            again()

    def _request(self, node: int, want: bytes) -> None:
        """``get_ancestors`` of ``want`` from a random peer that has it."""
        state = self.states[node]
        if not self._give_up_after_attempts(node, "ancestors"):
            return
        request = next(self._requests)
        state.outstanding = request
        self.schedule(
            self.config.network.timeout,
            node,
            lambda _: self._timed_out(node, request, lambda: self._request(node, want)),
        )
        peer = self._pick_peer(node, state.target)
        if peer is None:
            return
        state.result.requests += 1
        delay = self.mesh.transfer(node, peer, REQUEST_BYTES)
        if delay is None:
            return
        at = self.clock() + delay
        self.schedule(
            delay,
            peer,
            lambda answer: self._served(peer, node, request, want, answer),
            call=lambda: Call(peer, "serve", (want, at, self.config.max_blocks_num)),
            read=True,
        )

    def _served(self, peer: int, node: int, request: int, want: bytes, served: Served) -> None:
        state = self.states[peer]
        answer = list(served.blocks)
        now = self.clock()
        start = max(now, state.busy_until)
        cost = self.costs.serve_batched(len(answer), sum(map(len, answer)))
        state.busy_until = start + cost
        size = sum(len(block) + CONTAINER_LEN_OVERHEAD for block in answer)
        delay = self.mesh.transfer(peer, node, size)
        if delay is None:
            return
        wait = start - now + cost + delay
        at = now + wait
        receiver = self.states[node]
        if served.failure is not None:
            # The peer's store failed: what reaches the node is an answer without blocks.
            self.schedule(wait, node, lambda _: self._failed(node, peer, request, want))
            return
        self.schedule(
            wait,
            node,
            lambda received: self._received(node, peer, want, answer, received),
            call=lambda: (
                Call(node, "receive", (want, answer, at, peer))
                if receiver.outstanding == request
                else None
            ),
        )

    def _failed(self, node: int, peer: int, request: int, want: bytes) -> None:
        """``peer`` could not serve ``node``'s request (its store failed): a bad answer."""
        state = self.states[node]
        if state.outstanding != request:
            return
        state.outstanding = None
        self._bad_answer(node, peer)
        state.result.retries += 1
        self._request(node, want)

    def _received(
        self, node: int, peer: int, want: bytes, answer: list[bytes], received: Received | None
    ) -> None:
        if received is None:  # an answer to a request given up on
            return
        state = self.states[node]
        state.outstanding = None
        state.result.bytes_received += sum(map(len, answer))
        if not received.usable:
            if received.bad is not None:
                self._bad_answer(node, peer)
            state.result.retries += 1
            self._request(node, want)
            return
        now = self.clock()
        start = max(now, state.busy_until)
        cost = self.costs.parse_batched(len(answer), sum(map(len, answer)))
        state.busy_until = start + cost
        self.schedule(start - now + cost, node, lambda _: self._parsed(node, received))

    def _parsed(self, node: int, received: Received) -> None:
        state = self.states[node]
        state.attempts = 0
        state.result.blocks_fetched += received.new_blocks
        state.result.timeline.append((self.clock() - self.started, state.result.blocks_fetched))
        if not received.reached:
            assert received.next_want is not None
            self._request(node, received.next_want)
            return
        at = self.clock()
        self.schedule(
            0.0,
            node,
            lambda executed: self._executed(node, executed),
            call=lambda: Call(node, "execute", (at,)),
        )

    def _executed(self, node: int, executed: Executed) -> None:
        state = self.states[node]
        if executed.refused is not None:
            # The blocks from the refused one up are dropped; the next round asks again,
            # from the node's new tip, of the peers it still trusts.
            self._bad_answer(node, executed.refused_from)
        self._set_tip(node, executed.tip)
        state.result.rounds += 1
        cost = sum(self.costs.execute(1, size) for size in executed.sizes)
        start = max(self.clock(), state.busy_until)
        state.busy_until = start + cost
        self.schedule(start - self.clock() + cost, node, lambda _: self._ask_frontier(node))

    def _caught_up(self, node: int) -> None:
        state = self.states[node]
        state.in_round = False
        if not state.ready:
            state.ready = True
            self.serving.append(node)
            state.result.bootstrap_seconds = self.clock() - self.started - state.result.joined_at
            state.result.timeline.append((self.clock() - self.started, state.result.blocks_fetched))
        self._schedule_poll(node)

    def _schedule_poll(self, node: int) -> None:
        state = self.states[node]
        if not state.poll_due and self._worth_polling(node):
            state.poll_due = True
            self.schedule(self.config.block_interval, node, lambda _: self._poll(node))

    def _worth_polling(self, node: int) -> bool:
        """Whether a caught-up node should ask a peer again later, as consensus polls do:
        while blocks are still being built, or while it is behind a tip some live node has
        (a gossiped block it missed)."""
        tip = self.network_tip
        if tip is None:
            return False
        if self.built < self.config.live_blocks and self.building:
            return True
        state = self.states[node]
        return (state.tip is None or state.tip.height < tip.height) and any(
            other.tip is not None and other.tip.height >= tip.height and self._up(peer)
            for peer, other in enumerate(self.states)
            if peer != node
        )

    def _poll(self, node: int) -> None:
        state = self.states[node]
        state.poll_due = False
        if not state.ready or state.in_round:
            return  # the round under way ends in a poll of its own.
        if not self._worth_polling(node):
            return
        state.result.polls += 1
        self._ask_frontier(node)
