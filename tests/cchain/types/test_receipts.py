"""Receipts and logs (:mod:`vmstack.cchain.types.receipts`): the logs bloom."""

from __future__ import annotations

from tests.cchain.types.samples import TO
from vmstack.cchain import Log, keccak256, logs_bloom


def test_bloom_sets_three_bits_per_value() -> None:
    """Each address and topic sets the bits named by the first three byte pairs of its hash."""
    log = Log(address=TO, topics=(b"\x09" * 32,))
    bloom = int.from_bytes(logs_bloom([log]), "big")
    for value in (TO, b"\x09" * 32):
        digest = keccak256(value)
        for i in (0, 2, 4):
            assert bloom >> (int.from_bytes(digest[i : i + 2], "big") % 2048) & 1
    assert bin(bloom).count("1") <= 6
