"""The simulated links: per-link latency drawn once, jitter, bandwidth, and drops.

:class:`Messages` is the one message model of both simulations: :class:`Network` links one
bootstrapping node to its peers (the two-node run), and
:class:`~vmstack.sim.network.mesh.Mesh` links every pair of a network's nodes (the network
run). Every random draw comes from the one seeded ``random.Random`` handed in, in a fixed
order, so the same seed gives the same network.
"""

from __future__ import annotations

import random

import attrs

__all__ = ["Link", "Messages", "Network", "NetworkConfig"]


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
        return self.config.latency + self.rng.uniform(
            -self.config.latency_spread, self.config.latency_spread
        )

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
