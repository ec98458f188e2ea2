"""Faults a network-run test puts into one node, on either engine: a node that answers its
real block IDs with other bodies, and a node whose store is damaged.

Each fault is a function of the node (:class:`~vmstack.sim.network.node.NodeServer`);
:func:`inject` applies it to a node of a local engine in this process, or inside the Ray
actor that holds the node (the function travels by reference: Ray's workers import this
module)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vmstack.cchain import rawdb
from vmstack.cchain.rlpbytes import block_bytes, split_block
from vmstack.errors import InvalidBlock
from vmstack.sim.network import LocalEngine, RayEngine
from vmstack.sim.network.node import NodeServer, Served

__all__ = ["answer_other_bodies", "damage_bodies", "inject"]

Fault = Callable[[NodeServer], None]


def answer_other_bodies(node: NodeServer) -> None:
    """From now on ``node`` serves the honest answer with each C-chain block's body moved
    to the next C-chain block of the answer (its headers, so its IDs, unchanged: the blocks
    parse, and fail ``verify`` on their transactions root); envelopes stay as they are."""
    honest = node.serve

    def serve(want: bytes, now: float, max_blocks_num: int) -> Served:
        blocks = list(honest(want, now, max_blocks_num).blocks)
        parts: dict[int, tuple[bytes, bytes]] = {}
        for index, data in enumerate(blocks):
            try:
                parts[index] = split_block(data)
            except InvalidBlock:
                continue  # a proposer envelope
        order = list(parts)
        for index, donor in zip(order, order[1:] + order[:1], strict=True):
            if index != donor:
                blocks[index] = block_bytes(parts[index][0], parts[donor][1])
        return Served(tuple(blocks))

    node.serve = serve  # type: ignore[method-assign]


def damage_bodies(node: NodeServer) -> None:
    """Flip a byte of every stored C-chain block body in ``node``'s store (its canonical
    chain above genesis)."""
    schema = rawdb.Schema(b"")
    store = node._store
    height = 1
    while store.has(schema.canonical_hash_key(height)):
        block_hash = store.get(schema.canonical_hash_key(height))
        key = schema.body_key(height, block_hash)
        body = bytearray(store.get(key))
        body[len(body) // 2] ^= 0xFF
        store.put(key, bytes(body))
        height += 1


def _on_actor(host: Any, node: int, fault: Fault) -> None:
    fault(host.nodes[node])


def inject(engine: LocalEngine | RayEngine, node: int, fault: Fault) -> None:
    """Apply ``fault`` to ``node`` of a started ``engine``."""
    if isinstance(engine, LocalEngine):
        fault(engine._nodes[node])
        return
    import ray

    ray.get(engine.actor_of(node).__ray_call__.remote(_on_actor, node, fault), timeout=60)
