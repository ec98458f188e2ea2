"""Test vectors ported as data from avalanchego's consensus tests (BSD-3; see NOTICE here).

IDs are written as names: ``Red``, ``Blue``, ``Green`` are upstream's ``ids.Empty.Prefix(0)``,
``Prefix(1)``, ``Prefix(2)``; a hex string is an ID whose first bytes those are (upstream's
``ids.ID{0x01}``), the rest zero.
"""

from __future__ import annotations

import hashlib

NAMED = ("Red", "Blue", "Green")


def prefixed(number: int, base: bytes = bytes(32)) -> bytes:
    """upstream's ``id.Prefix(number)``: sha256 of the big-endian uint64 and the ID."""
    return hashlib.sha256(number.to_bytes(8, "big") + base).digest()


def choice_id(name: str) -> bytes:
    """The 32-byte ID a vector names."""
    if name in NAMED:
        return prefixed(NAMED.index(name))
    return bytes.fromhex(name).ljust(32, b"\0")
