"""The bounds of the two-node run's options, in a module of their own so that the command
line can state them without importing the simulation."""

from __future__ import annotations

__all__ = ["MAX_PEERS", "MAX_PEERS_OUT_OF_PROCESS"]

#: The most serving peers a run takes: each is a full stack (about 0.6 MB, and a share of
#: the set-up time); out of process each is also a process of its own (about 60 MB).
MAX_PEERS = 256
MAX_PEERS_OUT_OF_PROCESS = 16
