"""The links of a network of nodes: every pair linked, from the message model of
:mod:`vmstack.sim.links`."""

from __future__ import annotations

import hashlib
import random

from vmstack.sim.links import Messages, NetworkConfig

__all__ = ["Mesh"]


class Mesh(Messages):
    """Every pair of ``nodes`` nodes linked, each link with its own latency, then jitter,
    bandwidth and drops per message from the one seeded ``rng``.

    A link's latency is a function of the pair and of one key drawn from ``rng`` when the
    mesh is made (the pair's BLAKE2b digest under that key, read as a uniform draw over the
    configured range), computed when a message first needs it: the mesh holds nothing per
    pair, so making it and its memory do not grow with the square of the nodes, and the
    latencies depend on the seed alone, not on the order in which links are used.
    ``min_latency`` is the shortest latency any link can have
    (``latency - latency_spread``)."""

    def __init__(self, config: NetworkConfig, rng: random.Random, nodes: int) -> None:
        super().__init__(config, rng)
        self.nodes = nodes
        self._key = rng.getrandbits(128).to_bytes(16, "little")
        self.min_latency = config.latency - config.latency_spread

    def latency(self, a: int, b: int) -> float:
        """The link latency between nodes ``a`` and ``b``."""
        if not (0 <= a < self.nodes and 0 <= b < self.nodes) or a == b:
            raise ValueError(f"no link between nodes {a} and {b} of {self.nodes}")
        low, high = (a, b) if a < b else (b, a)
        digest = hashlib.blake2b(
            low.to_bytes(4, "little") + high.to_bytes(4, "little"), key=self._key, digest_size=8
        ).digest()
        draw = int.from_bytes(digest, "little") / 2**64
        spread = self.config.latency_spread
        return self.config.latency - spread + 2 * spread * draw

    def transfer(self, source: int, destination: int, size: int) -> float | None:
        """Seconds a message of ``size`` bytes takes, or ``None`` if it is dropped."""
        return self.deliver(self.latency(source, destination), size)
