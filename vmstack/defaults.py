"""The defaults more than one part of the package shares, each defined here once.

A light module (it imports nothing), so the command line, ``build_stack`` and the
simulation can name a default without importing the C-chain VM.
"""

from __future__ import annotations

from typing import Final

__all__ = ["DEFAULT_CACHE_SIZE", "DEFAULT_CHAIN_ID"]

#: The C-chain's EVM chain ID on mainnet: the chain every stack, simulation and
#: benchmark runs unless told otherwise.
DEFAULT_CHAIN_ID: Final = 43114
#: Entries of the canonical hash cache (``cache_size``; the cache's ``DEFAULT_CAPACITY``):
#: 10,000 settled heights, about 1.7 MB.
DEFAULT_CACHE_SIZE: Final = 10_000
