"""Blocks (:mod:`vmstack.cchain.types.blocks`): a block hashes its header when it is built."""

from __future__ import annotations

import pytest

from vmstack.cchain import Block, Header


def test_a_block_needs_an_encodable_header() -> None:
    """Building a block hashes its header, so an unencodable header is a ValueError at once."""
    with pytest.raises(ValueError, match="coinbase"):
        Block(Header(coinbase=b"\x01"))
