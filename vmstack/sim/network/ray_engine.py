"""The Ray engine: the nodes of a simulated network in Ray actors, spread over the cluster.

:class:`RayEngine` places the nodes on ``workers`` actors in total (one node per actor by
default), pins the actors to the cluster's alive hosts in turn (:func:`plan_placement`,
Ray's node affinity with ``soft=False``: never left to Ray's best-effort spreading), submits
every call of a list at once so that calls on different actors run at the same time, and
then gathers the answers, each within a bounded wait. :meth:`RayEngine.describe` says which
host every actor ran on and which nodes it held. An actor holds the
:class:`~vmstack.sim.network.node.NodeServer` of each node placed on it. A node whose actor
dies, or does not answer within ``call_timeout`` seconds, answers
:class:`~vmstack.errors.NodeCrashed` from then on: the coordinator reports it and the run
goes on without it. So does a node whose call raises an error of the project's tree (its
actor closes that node and goes on hosting the others), as on the local engine.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from vmstack.errors import NodeCrashed, VMStackError
from vmstack.sim.network.node import Call, NodeServer, NodeSpec, failure_reason, peak_rss
from vmstack.sim.network.ray_cluster import (
    RayHost,
    _actor_death,
    _check_reachable,
    _probe_cluster,
    _root_cause,
    plan_placement,
)

__all__ = ["RayEngine"]


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
        self.nodes[spec.index] = NodeServer(spec, Path(root) / f"node-{spec.index}", remove=True)

    def call(self, node: int, method: str, args: tuple[Any, ...]) -> Any:
        try:
            return self.nodes[node].call(method, args)
        except VMStackError as error:
            self.nodes.pop(node).close()
            return _Failed(failure_reason(method, error))

    def peak_memory(self) -> int:
        return peak_rss()

    def where(self) -> str:
        """The node ID of the Ray host this actor runs on."""
        import ray

        return str(ray.get_runtime_context().get_node_id())

    def ping(self) -> int:
        """The number of nodes on this actor (an answer proves the actor alive)."""
        return len(self.nodes)

    def close(self) -> None:
        for node in self.nodes.values():
            node.close()
        self.nodes.clear()


class RayEngine:
    """The nodes in Ray actors: ``workers`` actors in total over the whole cluster (default:
    one per node), node ``i`` on actor ``i % workers``.

    The actors are spread over the cluster's alive hosts (ordered by address, then node
    ID) by :func:`plan_placement`: actor ``i`` on the next host in turn, pinned there with
    Ray's node affinity (``soft=False``), so with several hosts alive the actors never pile
    up on one. Each actor asks Ray for ``actor_cpus`` CPUs (default 0: an actor only
    answers the coordinator's calls); a host whose free CPUs cannot take another is full
    and skipped, and when the cluster cannot hold ``workers`` actors the nodes go to as
    many as it can hold (:meth:`describe` gives both counts). An actor that does not come
    up on its host within ``placement_timeout`` seconds is killed and placed on the next
    host in turn; when no host takes it, the run fails with
    :class:`~vmstack.errors.VMStackError`.

    Joins the Ray cluster at ``address`` (asking its control service first, within
    ``join_timeout`` seconds: a cluster that refuses this driver, for want of its
    authentication token or for another Ray or Python version, or an address where no Ray
    cluster answers, is a :class:`~vmstack.errors.VMStackError` in one line naming the
    cause) or, without one, uses the Ray already started in
    this process or starts a local one (``num_cpus`` CPUs, no dashboard) that :meth:`close`
    shuts down again. Every answer is awaited at most ``call_timeout`` seconds from the
    moment the engine starts gathering a list of calls; an actor that dies or does not
    answer in time is killed and all its nodes answer :class:`NodeCrashed` from then on.
    The nodes' stores live in one folder per run (:attr:`store_root`, in the temporary
    directory of the machine each actor runs on); :meth:`close` removes it, including what
    a killed actor left on this machine.
    """

    name = "ray"

    def __init__(
        self,
        *,
        address: str | None = None,
        workers: int | None = None,
        num_cpus: int | None = 2,
        call_timeout: float = 120.0,
        actor_cpus: float = 0.0,
        placement_timeout: float = 120.0,
        join_timeout: float = 15.0,
    ) -> None:
        if workers is not None and workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        if not call_timeout > 0 or not placement_timeout > 0 or not join_timeout > 0:
            raise ValueError(
                f"call_timeout, placement_timeout and join_timeout must be "
                f"positive, got {call_timeout}, {placement_timeout} and "
                f"{join_timeout}"
            )
        if actor_cpus < 0:
            raise ValueError(f"actor_cpus must be at least 0, got {actor_cpus}")
        try:
            import ray
        except ImportError as error:
            raise VMStackError("--engine ray needs Ray: pip install 'vmstack[ray]'") from error
        self._ray = ray
        self.address = address
        self.workers = workers
        self.num_cpus = num_cpus
        self.call_timeout = call_timeout
        self.actor_cpus = actor_cpus
        self.placement_timeout = placement_timeout
        self.join_timeout = join_timeout
        self._started_ray = False
        self._actors: list[Any] = []
        self._placement: list[int] = []
        self._dead: dict[int, str] = {}
        self._failed: dict[int, str] = {}
        self._worker_count = 0
        self._workers_asked = 0
        self._hosts: list[RayHost] = []
        self._actor_hosts: list[int] = []
        self._root: Path | None = None

    def _connect(self) -> None:
        ray = self._ray
        local_address = None if self.address is None else _check_reachable(self.address)
        if ray.is_initialized():
            return
        if self.address is not None:
            _probe_cluster(ray, self.address, self.join_timeout)
        try:
            if self.address is not None:
                # This machine's address on the route to the cluster is the one the cluster
                # reaches the driver at; naming it spares Ray its own guess (a connection
                # attempt to a public resolver). Loopback is left to Ray.
                known = (
                    {}
                    if local_address is None
                    or local_address.startswith("127.")
                    or local_address == "::1"
                    else {"_node_ip_address": local_address}
                )
                ray.init(address=self.address, log_to_driver=False, **known)
            else:
                ray.init(num_cpus=self.num_cpus, include_dashboard=False, log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as error:
            where = self.address or "a local Ray"
            raise VMStackError(f"cannot start or join {where}: {_root_cause(error)}") from None
        self._started_ray = True

    def cluster_hosts(self) -> list[RayHost]:
        """The cluster's alive hosts, ordered by address then node ID, each with the room
        its free CPUs leave for actors of ``actor_cpus`` CPUs."""
        ray = self._ray
        alive = [node for node in ray.nodes() if node.get("Alive")]
        free: dict[str, dict[str, float]] = {}
        if self.actor_cpus > 0:
            from ray._private import state

            # Ray's per-node view of free resources (a developer API: no public one yet).
            free_per_node: Any = state.available_resources_per_node
            free = free_per_node()
        hosts = []
        for node in alive:
            node_id = str(node["NodeID"])
            room = None
            if self.actor_cpus > 0:
                cpus = free.get(node_id, node.get("Resources", {})).get("CPU", 0.0)
                room = int(cpus // self.actor_cpus + 1e-9)
            hosts.append(RayHost(node_id, str(node["NodeManagerAddress"]), room))
        return sorted(hosts, key=lambda host: (host.address, host.node_id))

    def start(self, specs: Sequence[NodeSpec]) -> None:
        self._connect()
        self._workers_asked = min(self.workers or len(specs), len(specs))
        self._hosts = self.cluster_hosts()
        plan = plan_placement(self._workers_asked, self._hosts)
        if not plan:
            raise VMStackError(
                f"no host of the Ray cluster has room for an actor of {self.actor_cpus:g} "
                f"CPUs ({len(self._hosts)} alive)"
            )
        self._actors, self._actor_hosts = self._place(plan)
        workers = len(self._actors)
        self._worker_count = workers
        self._placement = [spec.index % workers for spec in specs]
        # Every node's store under one folder per run: what a killed actor leaves behind on
        # this machine goes when the engine closes.
        self._root = Path(tempfile.gettempdir()) / f"vmstack-ray-{uuid.uuid4().hex[:12]}"
        adds = [
            self._actors[self._placement[spec.index]].add.remote(spec, str(self._root))
            for spec in specs
        ]
        for spec, ref in zip(specs, adds, strict=True):
            self._await(ref, self._placement[spec.index], time.monotonic() + self.call_timeout)

    def _actor_on(self, host: RayHost) -> Any:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        strategy = NodeAffinitySchedulingStrategy(node_id=host.node_id, soft=False)
        host_class = self._ray.remote(num_cpus=self.actor_cpus, max_restarts=0)(_NodeHost)
        return host_class.options(scheduling_strategy=strategy).remote()

    def _place(self, plan: list[int]) -> tuple[list[Any], list[int]]:
        """Start one actor per planned host and wait (``placement_timeout``) until each
        answers from its host; an actor that does not is killed, its host counted full,
        and it is tried on the next host in turn that is not."""
        ray = self._ray
        hosts = self._hosts
        actors = [self._actor_on(hosts[host]) for host in plan]
        placed = list(plan)
        full: set[int] = set()
        for index in range(len(actors)):
            tried: list[str] = []
            while True:
                host = placed[index]
                try:
                    where = ray.get(actors[index].where.remote(), timeout=self.placement_timeout)
                    if where == hosts[host].node_id:
                        break
                    problem = f"it ran on {where} instead"
                except ray.exceptions.GetTimeoutError:
                    problem = f"not up within {self.placement_timeout:g} s"
                except (
                    ray.exceptions.RayActorError,
                    ray.exceptions.ActorUnavailableError,
                    ray.exceptions.ActorUnschedulableError,
                ) as error:
                    problem = f"{type(error).__name__}: {_actor_death(error)}"
                tried.append(f"{hosts[host].address} ({hosts[host].node_id[:8]}): {problem}")
                with contextlib.suppress(Exception):
                    ray.kill(actors[index], no_restart=True)
                full.add(host)
                following = [(host + step) % len(hosts) for step in range(1, len(hosts))]
                fallback = next((other for other in following if other not in full), None)
                if fallback is None:
                    for actor in actors:
                        with contextlib.suppress(Exception):
                            ray.kill(actor, no_restart=True)
                    raise VMStackError(
                        f"no host of the Ray cluster takes actor {index}: " + "; ".join(tried)
                    )
                placed[index] = fallback
                actors[index] = self._actor_on(hosts[fallback])
        return actors, placed

    @property
    def store_root(self) -> Path | None:
        """The folder holding this run's node stores (``None`` before :meth:`start`)."""
        return self._root

    def actor_of(self, node: int) -> Any:
        """The Ray actor handle ``node`` lives on."""
        return self._actors[self._placement[node]]

    def host_of(self, node: int) -> RayHost:
        """The host ``node``'s actor runs on."""
        return self._hosts[self._actor_hosts[self._placement[node]]]

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
            refs.append(
                None
                if self._gone(call.node) is not None
                else self._actors[actor].call.remote(call.node, call.method, call.args)
            )
        deadline = time.monotonic() + (self.call_timeout if timeout is None else timeout)
        answers: list[Any] = []
        for call, ref in zip(calls, refs, strict=True):
            actor = self._placement[call.node]
            answer = (
                None if ref is None or actor in self._dead else self._await(ref, actor, deadline)
            )
            if isinstance(answer, _Failed):
                self._failed[call.node] = answer.reason
            reason = self._gone(call.node)
            answers.append(NodeCrashed(call.node, reason) if reason is not None else answer)
        return answers

    def crash(self, node: int) -> None:
        self._bury(self._placement[node], "killed")

    def close(self) -> None:
        ray = self._ray
        closing = [
            (index, actor.close.remote())
            for index, actor in enumerate(self._actors)
            if index not in self._dead
        ]
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

    def _peaks(self) -> dict[int, int]:
        """Each live actor's peak resident bytes, by actor index."""
        live = [
            (index, actor.peak_memory.remote())
            for index, actor in enumerate(self._actors)
            if index not in self._dead
        ]
        deadline = time.monotonic() + self.call_timeout
        answers = [(index, self._await(ref, index, deadline)) for index, ref in live]
        return {index: answer for index, answer in answers if isinstance(answer, int)}

    def peak_memory(self) -> list[int]:
        return list(self._peaks().values())

    def memory_by_place(self) -> dict[str, object]:
        """Peak resident bytes of each live actor (with its host), and per host the sum of
        its actors' peaks (their processes are separate, so the sum bounds what they held
        at once on that host)."""
        peaks = self._peaks()
        by_actor = [
            {
                "actor": index,
                "node_id": self._hosts[self._actor_hosts[index]].node_id,
                "bytes": peak,
            }
            for index, peak in peaks.items()
        ]
        by_host = []
        for position, host in enumerate(self._hosts):
            mine = [peak for index, peak in peaks.items() if self._actor_hosts[index] == position]
            if mine:
                by_host.append({**host.as_dict(), "actors": len(mine), "bytes": sum(mine)})
        return {"peak_memory_bytes_by_host": by_host, "peak_memory_bytes_by_actor": by_actor}

    def describe(self) -> dict[str, object]:
        """The engine, the hosts that held actors (node ID, address, actor indices) and, per
        actor, its host and the simulated nodes it held. ``workers`` counts the actors over
        the whole cluster (``workers_asked`` what was asked, more when the cluster held
        fewer)."""
        actors = [
            {
                "actor": index,
                "node_id": self._hosts[host].node_id,
                "address": self._hosts[host].address,
                "nodes": [node for node, actor in enumerate(self._placement) if actor == index],
            }
            for index, host in enumerate(self._actor_hosts)
        ]
        hosts = [
            {
                **host.as_dict(),
                "actors": [
                    index for index, placed in enumerate(self._actor_hosts) if placed == position
                ],
            }
            for position, host in enumerate(self._hosts)
        ]
        return {
            "name": self.name,
            "workers": self._worker_count,
            "workers_asked": self._workers_asked,
            "address": self.address,
            "hosts": [host for host in hosts if host["actors"]],
            "actors": actors,
        }
