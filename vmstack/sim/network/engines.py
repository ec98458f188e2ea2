"""Where the nodes of a simulated network live: in this process, or in Ray actors.

A node is a :class:`~vmstack.sim.network.node.NodeServer`: its own full stack over its own
LMDB store, on a simulated clock of its own that every call sets to the simulated time the
call happens at. The coordinator (:mod:`vmstack.sim.network.run`) never touches a node's stack;
it hands an :class:`Engine` a list of :class:`Call` and gets one answer per call, in order:

- :class:`LocalEngine` keeps every node in this process and runs the calls one after the
  other;
- :class:`~vmstack.sim.network.ray_engine.RayEngine` puts the nodes in Ray actors (one
  node per actor by default, or the nodes spread over ``workers`` actors in total), pins
  the actors to the cluster's hosts in turn, submits every call of the list at once so
  that calls on different actors run at the same time, and then gathers the answers, each
  within a bounded wait.

A node answers the same bytes for the same calls on either engine, so the simulated figures
do not depend on the engine. A node whose actor dies, or does not answer within
``call_timeout`` seconds, or whose call raises an error of the project's tree (its own
store damaged, say), answers :class:`NodeCrashed` from then on: the coordinator reports it
and the run goes on without it. The node and its data live in
:mod:`vmstack.sim.network.node`, the Ray engine in :mod:`vmstack.sim.network.ray_engine`.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from typing import Any, Protocol

from vmstack.errors import NodeCrashed, VMStackError
from vmstack.sim.network.node import Call, NodeServer, NodeSpec, failure_reason, peak_rss
from vmstack.sim.network.ray_engine import RayEngine
from vmstack.sim.network.records import DESCRIPTORS_PER_LMDB_NODE, lmdb_nodes_fit

__all__ = ["ENGINES", "Engine", "LocalEngine", "make_engine"]

ENGINES = ("local", "ray")


class Engine(Protocol):
    """Runs the calls of a simulation on its nodes."""

    name: str

    def start(self, specs: Sequence[NodeSpec]) -> None:
        """Create one node per spec (indices 0..n-1, in order)."""

    def run(self, calls: Sequence[Call], *, timeout: float | None = None) -> list[Any]:
        """Run ``calls`` and return one answer per call, in order: the method's result, or
        :class:`NodeCrashed` for a node that is gone (a call that raised an error of the
        project's tree leaves its node gone, with :func:`failure_reason`). Calls on one
        node run in list order; calls on different nodes may run at the same time.
        ``timeout`` replaces the engine's bound on the wait for these calls (for long
        ones, such as building the chain)."""

    def crash(self, node: int) -> None:
        """Make ``node`` fail as a dead process does (fault injection)."""

    def close(self) -> None:
        """Stop every node and release what the engine started."""

    def describe(self) -> dict[str, object]:
        """What the engine ran on (JSON-ready)."""

    def peak_memory(self) -> list[int]:
        """Peak resident bytes of each live process holding nodes (measured)."""

    def memory_by_place(self) -> dict[str, object]:
        """Peak resident bytes by host and by process holding nodes (measured,
        JSON-ready): ``peak_memory_bytes_by_host`` and ``peak_memory_bytes_by_actor``."""


class LocalEngine:
    """Every node in this process; calls run one after the other."""

    name = "local"

    def __init__(self) -> None:
        self._nodes: list[NodeServer] = []
        self._crashed: dict[int, str] = {}

    def start(self, specs: Sequence[NodeSpec]) -> None:
        """Make every node here; refuses (before making any) more LMDB node stores than
        this process's file descriptors hold."""
        lmdb_nodes = sum(1 for spec in specs if spec.store == "lmdb")
        if not lmdb_nodes_fit(lmdb_nodes):
            import resource

            soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
            raise VMStackError(
                f"{lmdb_nodes} LMDB node stores need about "
                f"{lmdb_nodes * DESCRIPTORS_PER_LMDB_NODE} file descriptors and this process "
                f"may open {soft} (ulimit -n): use --node-store memory (or auto), or raise "
                f"the limit"
            )
        self._nodes = [NodeServer(spec) for spec in specs]

    def run(self, calls: Sequence[Call], *, timeout: float | None = None) -> list[Any]:
        answers: list[Any] = []
        for call in calls:
            if call.node not in self._crashed:
                try:
                    answers.append(self._nodes[call.node].call(call.method, call.args))
                    continue
                except VMStackError as error:
                    self._stop(call.node, failure_reason(call.method, error))
            answers.append(NodeCrashed(call.node, self._crashed[call.node]))
        return answers

    def _stop(self, node: int, reason: str) -> None:
        if node not in self._crashed:
            self._crashed[node] = reason
            self._nodes[node].close()

    def crash(self, node: int) -> None:
        self._stop(node, "stopped")

    def close(self) -> None:
        for index, node in enumerate(self._nodes):
            if index not in self._crashed:
                node.close()
        self._nodes = []

    def describe(self) -> dict[str, object]:
        return {"name": self.name}

    def peak_memory(self) -> list[int]:
        return [peak_rss()]

    def memory_by_place(self) -> dict[str, object]:
        """This process's peak, as the one host's; there are no actors."""
        return {
            "peak_memory_bytes_by_host": [
                {"node_id": None, "address": socket.gethostname(), "actors": 0, "bytes": peak_rss()}
            ],
            "peak_memory_bytes_by_actor": [],
        }


def make_engine(
    name: str,
    *,
    address: str | None = None,
    workers: int | None = None,
    call_timeout: float = 120.0,
) -> Engine:
    """The engine called ``name`` (one of :data:`ENGINES`); ``address`` and ``workers``
    apply to Ray only."""
    if name == "local":
        if address is not None or workers is not None:
            raise ValueError("--ray-address and --workers need --engine ray")
        return LocalEngine()
    if name == "ray":
        return RayEngine(address=address, workers=workers, call_timeout=call_timeout)
    raise ValueError(f"engines are {ENGINES}, not {name!r}")
