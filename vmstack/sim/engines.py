"""Where the nodes of a simulated network live: in this process, or in Ray actors.

A node is a :class:`NodeServer`: its own full stack over its own LMDB store, on a simulated
clock of its own that every call sets to the simulated time the call happens at. The
coordinator (:mod:`vmstack.sim.multinode`) never touches a node's stack; it hands an
:class:`Engine` a list of :class:`Call` and gets one answer per call, in order:

- :class:`LocalEngine` keeps every node in this process and runs the calls one after the
  other;
- :class:`RayEngine` puts the nodes in Ray actors (one node per actor by default, or the
  nodes spread over ``workers`` actors), submits every call of the list at once so that
  calls on different actors run at the same time, and then gathers the answers, each within
  a bounded wait.

A node answers the same bytes for the same calls on either engine, so the simulated figures
do not depend on the engine. A node whose actor dies, or does not answer within
``call_timeout`` seconds, answers :class:`NodeCrashed` from then on: the coordinator reports
it and the run goes on without it.
"""

from __future__ import annotations

import contextlib
import itertools
import shutil
import socket
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import attrs

from vmstack.batching import (
    MAX_CONTAINERS_LEN,
    batched_parse_block,
    get_ancestors,
)
from vmstack.cchain import generate_chain
from vmstack.cchain.generate import find_mempool, transaction_pool
from vmstack.clock import SimClock
from vmstack.errors import BlockNotFound, InvalidBlock, NodeCrashed, VMStackError
from vmstack.interfaces import Block, ChainVM
from vmstack.stack import build_stack
from vmstack.store import LMDBStore
from vmstack.wrappers.proposer import StakingKey

__all__ = [
    "ENGINES",
    "Built",
    "Call",
    "Delivered",
    "Engine",
    "Executed",
    "LocalEngine",
    "NodeCrashed",
    "NodeServer",
    "NodeSpec",
    "Received",
    "RayEngine",
    "Tip",
    "make_engine",
]

ENGINES = ("local", "ray")

#: The node methods a :class:`Call` may name.
NODE_METHODS = frozenset({"generate", "export", "import_blocks", "tip", "serve", "receive",
                          "execute", "deliver", "build"})


@attrs.frozen
class NodeSpec:
    """What a node needs to build its stack: the chain's parameters and, for a node that
    builds blocks, the seed of its staking key (its post-fork blocks are signed with it)."""

    index: int
    chain_id: int
    start_time: float
    fork_time: float
    transition_time: float
    staking_seed: bytes | None = None


@attrs.frozen
class Tip:
    """A node's last accepted block."""

    block_id: bytes
    height: int


@attrs.frozen
class Received:
    """What a node made of an answer to its ``get_ancestors`` request.

    ``usable`` is False when the answer was empty, did not parse, did not start with the
    block asked for or was not a chain; then nothing was kept. Otherwise ``new_blocks``
    blocks were kept for execution; ``reached`` says the answer reached a block the node
    has (the fetch is over), and ``next_want`` is the block to ask for next when not.
    """

    usable: bool
    new_blocks: int = 0
    reached: bool = False
    next_want: bytes | None = None


@attrs.frozen
class Executed:
    """The fetched blocks a node verified and accepted, oldest first, by size."""

    sizes: tuple[int, ...]
    tip: Tip


@attrs.frozen
class Delivered:
    """A gossiped block at a node: ``accepted`` when it extended the node's chain,
    ``known`` when the node already had it, neither when its parent is missing (a gap the
    node has to fetch)."""

    accepted: bool
    known: bool
    tip: Tip


@attrs.frozen
class Built:
    """A block a builder built, verified and accepted: its bytes and the builder's tip."""

    block: bytes
    tip: Tip


@attrs.frozen
class Call:
    """One call on one node: ``method`` (one of :data:`NODE_METHODS`) with ``args``."""

    node: int
    method: str
    args: tuple[Any, ...] = ()

    def __attrs_post_init__(self) -> None:
        if self.method not in NODE_METHODS:
            raise ValueError(f"a node has no method {self.method!r}")


class NodeServer:
    """One node: its stack over its own LMDB store in ``directory`` (a private temporary
    directory when ``None``; committed without fsync), on its own simulated clock.
    :meth:`close` removes the directory if ``remove`` (default: if the node made it).

    Every method that happens at a simulated time takes it as ``now``; the node's clock is
    moved there first (never back). The answers are plain data, the same whichever process
    the node lives in.
    """

    def __init__(self, spec: NodeSpec, directory: Path | None = None, *,
                 remove: bool | None = None) -> None:
        self.spec = spec
        self._owned = directory is None if remove is None else remove
        self.directory = (Path(tempfile.mkdtemp(prefix=f"vmstack-node-{spec.index}-"))
                          if directory is None else directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.clock = SimClock(spec.start_time)
        # A node's store lives as long as the run: commits skip the fsync that only an OS
        # crash would need.
        self._store = LMDBStore(self.directory, sync=False)
        key = (None if spec.staking_seed is None
               else StakingKey.generate(seed=spec.staking_seed))
        self.vm: ChainVM = build_stack(self._store, chain_id=spec.chain_id,
                                       fork_time=spec.fork_time,
                                       transition_time=spec.transition_time,
                                       clock=self.clock, staking_key=key)
        self._fetched: list[Block] = []

    def close(self) -> None:
        """Close the store; remove the directory if the node made it."""
        self._store.close()
        if self._owned:
            shutil.rmtree(self.directory, ignore_errors=True)

    def _at(self, now: float) -> None:
        self.clock.advance(max(0.0, now - self.clock()))

    def tip(self) -> Tip:
        """The node's last accepted block."""
        block_id = self.vm.last_accepted()
        return Tip(block_id, self.vm.get_block(block_id).height)

    # --- before the run: the chain the builders start with --------------------------

    def generate(self, blocks: int, txs_per_block: int, seed: int,
                 block_interval: float) -> Tip:
        """Build the first ``blocks`` blocks (deterministic for ``seed``)."""
        generate_chain(self.vm, blocks=blocks, txs_per_block=txs_per_block, seed=seed,
                       clock=self.clock, block_interval=block_interval)
        return self.tip()

    def export(self) -> list[bytes]:
        """Every accepted block above genesis, oldest first."""
        height = self.tip().height
        return [bytes(self.vm.get_block(self.vm.get_block_id_at_height(h)))
                for h in range(1, height + 1)]

    def import_blocks(self, blocks: list[bytes]) -> Tip:
        """Parse, verify and accept ``blocks`` (oldest first) as the chain this node holds."""
        for data in blocks:
            block = self.vm.parse_block(data)
            self._at(float(block.timestamp))
            block.verify()
            block.accept()
        return self.tip()

    # --- bootstrapping: serving, fetching, executing -----------------------------------

    def serve(self, want: bytes, now: float, max_blocks_num: int) -> list[bytes]:
        """``get_ancestors`` of ``want`` with the engine's limits; ``[]`` if the node does
        not have it."""
        self._at(now)
        try:
            return get_ancestors(self.vm, want, max_blocks_num=max_blocks_num,
                                 max_blocks_size=MAX_CONTAINERS_LEN, clock=self.clock)
        except BlockNotFound:
            return []

    def receive(self, want: bytes, answer: list[bytes], now: float) -> Received:
        """Parse an answer to a request for ``want`` with ``batched_parse_block`` and keep
        the blocks the node does not have yet, down to its last accepted block."""
        self._at(now)
        if not answer:
            return Received(usable=False)
        try:
            blocks = batched_parse_block(self.vm, answer)
        except InvalidBlock:
            return Received(usable=False)
        if (not blocks or blocks[0].id != want
                or any(child.parent_id != parent.id
                       for child, parent in itertools.pairwise(blocks))):
            return Received(usable=False)
        have = self.vm.last_accepted()
        reached_at = next((i for i, block in enumerate(blocks) if block.id == have), None)
        if reached_at is not None:
            blocks = blocks[:reached_at]
        self._fetched.extend(blocks)
        reached = reached_at is not None or (bool(blocks) and blocks[-1].parent_id == have)
        return Received(usable=True, new_blocks=len(blocks), reached=reached,
                        next_want=None if reached else blocks[-1].parent_id)

    def execute(self, now: float) -> Executed:
        """Verify and accept every fetched block, oldest first, and forget them."""
        self._at(now)
        fetched, self._fetched = self._fetched, []
        sizes = []
        for block in reversed(fetched):
            block.verify()
            block.accept()
            sizes.append(len(bytes(block)))
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
        block.verify()
        self.vm.set_preference(block.id)
        block.accept()
        return Delivered(accepted=True, known=False, tip=self.tip())

    def build(self, now: float, seed: int, position: int, txs: int) -> Built:
        """Build the next block on the node's chain with ``txs`` transactions of the
        seed's pool from ``position``, verify and accept it."""
        self._at(now)
        mempool = find_mempool(self.vm)
        if txs:
            pool = transaction_pool(seed=seed, chain_id=mempool.chain_id)
            mempool.add_transactions(pool.take(position, txs))
        block = self.vm.build_block()
        block.verify()
        self.vm.set_preference(block.id)
        block.accept()
        return Built(bytes(block), self.tip())

    def call(self, method: str, args: tuple[Any, ...]) -> Any:
        """Run one of :data:`NODE_METHODS` with ``args``."""
        if method not in NODE_METHODS:
            raise ValueError(f"a node has no method {method!r}")
        return getattr(self, method)(*args)


class Engine(Protocol):
    """Runs the calls of a simulation on its nodes."""

    name: str

    def start(self, specs: Sequence[NodeSpec]) -> None:
        """Create one node per spec (indices 0..n-1, in order)."""

    def run(self, calls: Sequence[Call], *, timeout: float | None = None) -> list[Any]:
        """Run ``calls`` and return one answer per call, in order: the method's result, or
        :class:`NodeCrashed` for a node that is gone. Calls on one node run in list order;
        calls on different nodes may run at the same time. ``timeout`` replaces the
        engine's bound on the wait for these calls (for long ones, such as building the
        chain)."""

    def crash(self, node: int) -> None:
        """Make ``node`` fail as a dead process does (fault injection)."""

    def close(self) -> None:
        """Stop every node and release what the engine started."""

    def describe(self) -> dict[str, object]:
        """What the engine ran on (JSON-ready)."""

    def peak_memory(self) -> list[int]:
        """Peak resident bytes of each live process holding nodes (measured)."""


class LocalEngine:
    """Every node in this process; calls run one after the other."""

    name = "local"

    def __init__(self) -> None:
        self._nodes: list[NodeServer] = []
        self._crashed: dict[int, str] = {}

    def start(self, specs: Sequence[NodeSpec]) -> None:
        self._nodes = [NodeServer(spec) for spec in specs]

    def run(self, calls: Sequence[Call], *, timeout: float | None = None) -> list[Any]:
        answers: list[Any] = []
        for call in calls:
            reason = self._crashed.get(call.node)
            answers.append(NodeCrashed(call.node, reason) if reason is not None
                           else self._nodes[call.node].call(call.method, call.args))
        return answers

    def crash(self, node: int) -> None:
        if node not in self._crashed:
            self._crashed[node] = "stopped"
            self._nodes[node].close()

    def close(self) -> None:
        for index, node in enumerate(self._nodes):
            if index not in self._crashed:
                node.close()
        self._nodes = []

    def describe(self) -> dict[str, object]:
        return {"name": self.name}

    def peak_memory(self) -> list[int]:
        return [_peak_rss()]


def _check_reachable(address: str, timeout: float = 10.0) -> None:
    """Refuse a ``host:port`` cluster address that does not accept a connection within
    ``timeout`` seconds (Ray itself would keep retrying); other forms (``auto``,
    ``ray://...``) are left to Ray."""
    host, separator, port = address.rpartition(":")
    if not separator or "://" in address or not port.isdigit():
        return
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as error:
        raise VMStackError(f"no Ray cluster answers at {address}: "
                           f"{error.strerror or error}") from None


def _peak_rss() -> int:
    """Peak resident set of this process, in bytes (Linux reports kilobytes)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class _NodeHost:
    """The body of a Ray actor: the nodes placed on it, each with its stack and store."""

    def __init__(self) -> None:
        self.nodes: dict[int, NodeServer] = {}

    def add(self, spec: NodeSpec, root: str) -> None:
        self.nodes[spec.index] = NodeServer(spec, Path(root) / f"node-{spec.index}",
                                            remove=True)

    def call(self, node: int, method: str, args: tuple[Any, ...]) -> Any:
        return self.nodes[node].call(method, args)

    def peak_memory(self) -> int:
        return _peak_rss()

    def ping(self) -> int:
        """The number of nodes on this actor (an answer proves the actor alive)."""
        return len(self.nodes)

    def close(self) -> None:
        for node in self.nodes.values():
            node.close()
        self.nodes.clear()


class RayEngine:
    """The nodes in Ray actors: ``workers`` actors (default: one per node), node ``i`` on
    actor ``i % workers``, spread over the cluster.

    Joins the Ray cluster at ``address`` or, without one, uses the Ray already started in
    this process or starts a local one (``num_cpus`` CPUs, no dashboard) that :meth:`close`
    shuts down again. Every answer is awaited at most ``call_timeout`` seconds from the
    moment the engine starts gathering a list of calls; an actor that dies or does not
    answer in time is killed and all its nodes answer :class:`NodeCrashed` from then on.
    The nodes' stores live in one folder per run (:attr:`store_root`, in the temporary
    directory of the machine each actor runs on); :meth:`close` removes it, including what
    a killed actor left on this machine.
    """

    name = "ray"

    def __init__(self, *, address: str | None = None, workers: int | None = None,
                 num_cpus: int | None = 2, call_timeout: float = 120.0) -> None:
        if workers is not None and workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        if not call_timeout > 0:
            raise ValueError(f"call_timeout must be positive, got {call_timeout}")
        try:
            import ray
        except ImportError as error:
            raise VMStackError("--engine ray needs Ray: pip install 'vmstack[ray]'") from error
        self._ray = ray
        self.address = address
        self.workers = workers
        self.num_cpus = num_cpus
        self.call_timeout = call_timeout
        self._started_ray = False
        self._actors: list[Any] = []
        self._placement: list[int] = []
        self._dead: dict[int, str] = {}
        self._worker_count = 0
        self._root: Path | None = None

    def _connect(self) -> None:
        ray = self._ray
        if self.address is not None:
            _check_reachable(self.address)
        if ray.is_initialized():
            return
        try:
            if self.address is not None:
                ray.init(address=self.address, log_to_driver=False)
            else:
                ray.init(num_cpus=self.num_cpus, include_dashboard=False,
                         log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as error:
            where = self.address or "a local Ray"
            raise VMStackError(f"cannot start or join {where}: {error}") from None
        self._started_ray = True

    def start(self, specs: Sequence[NodeSpec]) -> None:
        self._connect()
        ray = self._ray
        workers = min(self.workers or len(specs), len(specs))
        host = ray.remote(num_cpus=0, max_restarts=0, scheduling_strategy="SPREAD")(_NodeHost)
        self._actors = [host.remote() for _ in range(workers)]
        self._worker_count = workers
        self._placement = [spec.index % workers for spec in specs]
        # Every node's store under one folder per run: what a killed actor leaves behind on
        # this machine goes when the engine closes.
        self._root = Path(tempfile.gettempdir()) / f"vmstack-ray-{uuid.uuid4().hex[:12]}"
        adds = [self._actors[self._placement[spec.index]].add.remote(spec, str(self._root))
                for spec in specs]
        for spec, ref in zip(specs, adds, strict=True):
            self._await(ref, self._placement[spec.index], time.monotonic() + self.call_timeout)

    @property
    def store_root(self) -> Path | None:
        """The folder holding this run's node stores (``None`` before :meth:`start`)."""
        return self._root

    def actor_of(self, node: int) -> Any:
        """The Ray actor handle ``node`` lives on."""
        return self._actors[self._placement[node]]

    def _await(self, ref: Any, actor: int, deadline: float) -> Any:
        """The answer of ``ref`` by ``deadline`` (monotonic seconds), or ``NodeCrashed`` when
        its actor is gone or silent (and then killed)."""
        ray = self._ray
        try:
            return ray.get(ref, timeout=max(0.0, deadline - time.monotonic()))
        except ray.exceptions.GetTimeoutError:
            self._bury(actor, "no answer in time")
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as error:
            self._bury(actor, f"its actor died ({type(error).__name__})")
        return None

    def _bury(self, actor: int, reason: str) -> None:
        if actor in self._dead:
            return
        self._dead[actor] = reason
        # An actor already gone has nothing left to release.
        with contextlib.suppress(Exception):
            self._ray.kill(self._actors[actor], no_restart=True)

    def run(self, calls: Sequence[Call], *, timeout: float | None = None) -> list[Any]:
        refs: list[Any] = []
        for call in calls:
            actor = self._placement[call.node]
            refs.append(None if actor in self._dead else
                        self._actors[actor].call.remote(call.node, call.method, call.args))
        deadline = time.monotonic() + (self.call_timeout if timeout is None else timeout)
        answers: list[Any] = []
        for call, ref in zip(calls, refs, strict=True):
            actor = self._placement[call.node]
            answer = None if ref is None or actor in self._dead else \
                self._await(ref, actor, deadline)
            answers.append(NodeCrashed(call.node, self._dead[actor]) if actor in self._dead
                           else answer)
        return answers

    def crash(self, node: int) -> None:
        self._bury(self._placement[node], "killed")

    def close(self) -> None:
        ray = self._ray
        closing = [(index, actor.close.remote()) for index, actor in enumerate(self._actors)
                   if index not in self._dead]
        deadline = time.monotonic() + self.call_timeout
        for index, ref in closing:
            self._await(ref, index, deadline)
        for actor in self._actors:
            with contextlib.suppress(Exception):
                ray.kill(actor, no_restart=True)
        self._actors = []
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
        if self._started_ray:
            ray.shutdown()
            self._started_ray = False

    def peak_memory(self) -> list[int]:
        live = [(index, actor.peak_memory.remote()) for index, actor in enumerate(self._actors)
                if index not in self._dead]
        deadline = time.monotonic() + self.call_timeout
        answers = [self._await(ref, index, deadline) for index, ref in live]
        return [answer for answer in answers if isinstance(answer, int)]

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "workers": self._worker_count,
                "address": self.address}


def make_engine(name: str, *, address: str | None = None, workers: int | None = None,
                call_timeout: float = 120.0) -> Engine:
    """The engine called ``name`` (one of :data:`ENGINES`); ``address`` and ``workers``
    apply to Ray only."""
    if name == "local":
        if address is not None or workers is not None:
            raise ValueError("--ray-address and --workers need --engine ray")
        return LocalEngine()
    if name == "ray":
        return RayEngine(address=address, workers=workers, call_timeout=call_timeout)
    raise ValueError(f"engines are {ENGINES}, not {name!r}")
