"""The Ray engine: the nodes of a simulated network in Ray actors.

:class:`RayEngine` places the nodes on ``workers`` actors (one node per actor by default),
submits every call of a list at once so that calls on different actors run at the same
time, and then gathers the answers, each within a bounded wait. An actor holds the
:class:`~vmstack.sim.node_server.NodeServer` of each node placed on it. A node whose actor
dies, or does not answer within ``call_timeout`` seconds, answers
:class:`~vmstack.errors.NodeCrashed` from then on: the coordinator reports it and the run
goes on without it. So does a node whose call raises an error of the project's tree (its
actor closes that node and goes on hosting the others), as on the local engine.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from vmstack.errors import NodeCrashed, VMStackError
from vmstack.sim.node_server import Call, NodeServer, NodeSpec, failure_reason, peak_rss

__all__ = ["RayEngine"]


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


@attrs.frozen
class _Failed:
    """What an actor answers for a node whose call raised an error of the project's tree
    (the node is closed; the engine answers :class:`NodeCrashed` for it from then on)."""

    reason: str


class _NodeHost:
    """The body of a Ray actor: the nodes placed on it, each with its stack and store."""

    def __init__(self) -> None:
        self.nodes: dict[int, NodeServer] = {}

    def add(self, spec: NodeSpec, root: str) -> None:
        self.nodes[spec.index] = NodeServer(spec, Path(root) / f"node-{spec.index}",
                                            remove=True)

    def call(self, node: int, method: str, args: tuple[Any, ...]) -> Any:
        try:
            return self.nodes[node].call(method, args)
        except VMStackError as error:
            self.nodes.pop(node).close()
            return _Failed(failure_reason(method, error))

    def peak_memory(self) -> int:
        return peak_rss()

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
        self._failed: dict[int, str] = {}
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

    def _gone(self, node: int) -> str | None:
        """Why ``node`` takes no more part (its actor died, or its own call failed)."""
        return self._dead.get(self._placement[node], self._failed.get(node))

    def run(self, calls: Sequence[Call], *, timeout: float | None = None) -> list[Any]:
        refs: list[Any] = []
        for call in calls:
            actor = self._placement[call.node]
            refs.append(None if self._gone(call.node) is not None else
                        self._actors[actor].call.remote(call.node, call.method, call.args))
        deadline = time.monotonic() + (self.call_timeout if timeout is None else timeout)
        answers: list[Any] = []
        for call, ref in zip(calls, refs, strict=True):
            actor = self._placement[call.node]
            answer = None if ref is None or actor in self._dead else \
                self._await(ref, actor, deadline)
            if isinstance(answer, _Failed):
                self._failed[call.node] = answer.reason
            reason = self._gone(call.node)
            answers.append(NodeCrashed(call.node, reason) if reason is not None else answer)
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

