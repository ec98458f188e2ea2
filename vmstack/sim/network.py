"""The simulated network: per-link latency drawn once, jitter, bandwidth, and drops.

:class:`Messages` is the one message model: :class:`Network` links one bootstrapping node to
its peers, :class:`Mesh` links every pair of a network's nodes. Every random draw comes from
the one seeded ``random.Random`` handed in, in a fixed order, so the same seed gives the same
network.
"""

from __future__ import annotations

import hashlib
import random

import attrs

__all__ = ["Link", "Mesh", "Messages", "Network", "NetworkConfig"]


@attrs.frozen
class NetworkConfig:
    """How the simulated network behaves.

    ``latency`` is the mean one-way latency of a link and ``latency_spread`` the +/- range a
    link's own latency is drawn from (once per link); ``jitter`` is added per message, uniform
    in ``[0, jitter]``; ``bandwidth`` is bytes per second on every link; a message is lost
    with ``drop_probability``; a request not answered within ``timeout`` seconds is retried
    with the next peer.
    """

    latency: float = 0.040
    latency_spread: float = 0.030
    jitter: float = 0.005
    bandwidth: float = 12_500_000.0
    drop_probability: float = 0.01
    timeout: float = 2.0

    def __attrs_post_init__(self) -> None:
        if not (0 <= self.latency_spread <= self.latency):
            raise ValueError("latency_spread must be between 0 and latency")
        if self.jitter < 0 or self.bandwidth <= 0 or self.timeout <= 0:
            raise ValueError("jitter must be >= 0, bandwidth and timeout > 0")
        if not 0 <= self.drop_probability < 1:
            raise ValueError("drop_probability must be in [0, 1)")


@attrs.frozen
class Link:
    """One link from the bootstrapping node to a peer, with its own latency."""

    peer: int
    latency: float


class Messages:
    """The per-message part of a simulated network: each message is dropped or not, then
    takes its link's latency, a jitter and its size over the bandwidth, all drawn from the
    one seeded ``rng``; counts are kept."""

    def __init__(self, config: NetworkConfig, rng: random.Random) -> None:
        self.config = config
        self.rng = rng
        self.messages = 0
        self.dropped = 0
        self.bytes_sent = 0

    def link_latency(self) -> float:
        """A new link's latency, drawn once per link."""
        return self.config.latency + self.rng.uniform(-self.config.latency_spread,
                                                      self.config.latency_spread)

    def deliver(self, latency: float, size: int) -> float | None:
        """Seconds a message of ``size`` bytes takes over a link of ``latency``, or
        ``None`` if the network drops it."""
        self.messages += 1
        dropped = self.rng.random() < self.config.drop_probability
        jitter = self.rng.uniform(0.0, self.config.jitter)
        if dropped:
            self.dropped += 1
            return None
        self.bytes_sent += size
        return latency + jitter + size / self.config.bandwidth


class Network(Messages):
    """Links to ``peers`` peers and the time each message takes (``None`` when dropped)."""

    def __init__(self, config: NetworkConfig, rng: random.Random, peers: int) -> None:
        if peers < 1:
            raise ValueError(f"a bootstrap needs at least one peer, got {peers}")
        super().__init__(config, rng)
        self.links = [Link(peer, self.link_latency()) for peer in range(peers)]

    def transfer(self, peer: int, size: int) -> float | None:
        """Seconds a message of ``size`` bytes takes to reach the other end, or ``None``
        if the network drops it."""
        return self.deliver(self.links[peer].latency, size)


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
        digest = hashlib.blake2b(low.to_bytes(4, "little") + high.to_bytes(4, "little"),
                                 key=self._key, digest_size=8).digest()
        draw = int.from_bytes(digest, "little") / 2**64
        spread = self.config.latency_spread
        return self.config.latency - spread + 2 * spread * draw

    def transfer(self, source: int, destination: int, size: int) -> float | None:
        """Seconds a message of ``size`` bytes takes, or ``None`` if it is dropped."""
        return self.deliver(self.latency(source, destination), size)
