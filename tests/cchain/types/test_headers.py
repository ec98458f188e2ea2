"""Headers (:mod:`vmstack.cchain.types.headers`): field counts by fork and the geth rule for
absent optional fields."""

from __future__ import annotations

import pytest
import rlp

from vmstack.cchain import (
    AVALANCHE,
    EMPTY_ROOT,
    ETHEREUM,
    AvalancheHeader,
    Block,
    Header,
    keccak256,
)
from vmstack.errors import InvalidBlock


def test_header_field_counts_follow_the_forks() -> None:
    """Headers write 15-21 (Ethereum) and 16-24 (Avalanche) fields by their last present one."""
    assert len(Header().to_items()) == 15
    assert len(Header(base_fee=7).to_items()) == 16
    assert len(Header(base_fee=7, withdrawals_hash=EMPTY_ROOT).to_items()) == 17
    assert (
        len(
            Header(
                requests_hash=EMPTY_ROOT,
                base_fee=1,
                withdrawals_hash=EMPTY_ROOT,
                parent_beacon_root=EMPTY_ROOT,
            ).to_items()
        )
        == 21
    )
    assert len(AvalancheHeader().to_items()) == 16
    assert len(AvalancheHeader(base_fee=1, block_gas_cost=0).to_items()) == 19
    assert len(AvalancheHeader(min_delay_excess=5, parent_beacon_root=EMPTY_ROOT).to_items()) == 24


def test_an_absent_hash_before_a_present_field_is_refused_at_encoding() -> None:
    """A gap that would be written empty but cannot be read back empty is a ValueError."""
    with pytest.raises(ValueError, match="withdrawals_hash is absent"):
        ETHEREUM.encode_header(Header(base_fee=7, blob_gas_used=5))
    with pytest.raises(ValueError, match="parent_beacon_root is absent"):
        AVALANCHE.encode_header(AvalancheHeader(min_delay_excess=3))


def test_missing_optional_field_before_a_present_one_is_written_empty() -> None:
    """The geth rule: a gap is written as the empty string, so a missing integer reads as 0."""
    header = Header(withdrawals_hash=EMPTY_ROOT)
    items = header.to_items()
    assert len(items) == 17 and items[15] == b"" and items[16] == EMPTY_ROOT
    decoded = ETHEREUM.decode_header(ETHEREUM.encode_header(header))
    assert isinstance(decoded, Header)
    assert decoded.base_fee == 0 and decoded.withdrawals_hash == EMPTY_ROOT
    ava = AVALANCHE.decode_header(AVALANCHE.encode_header(AvalancheHeader(block_gas_cost=5)))
    assert isinstance(ava, AvalancheHeader)
    assert (ava.base_fee, ava.ext_data_gas_used, ava.block_gas_cost) == (0, 0, 5)


def test_a_missing_hash_before_a_present_field_does_not_decode() -> None:
    """As in geth, an empty string where a hash belongs is rejected when read back."""
    items = Header(blob_gas_used=5, withdrawals_hash=EMPTY_ROOT).to_items()
    items[16] = b""
    data = rlp.encode(items)
    with pytest.raises(InvalidBlock, match="withdrawals_hash must be 32 bytes"):
        ETHEREUM.decode_header(data)


def test_header_decode_is_a_named_decoder_too() -> None:
    """Header.decode and the flavour's decode_header agree, and a block hash is the header's."""
    header = AvalancheHeader(number=9, time=1_600_000_000, base_fee=25 * 10**9)
    data = AVALANCHE.encode_header(header)
    assert AvalancheHeader.decode(data) == AVALANCHE.decode_header(data) == header
    assert header.encode() == data and header.hash == keccak256(data)
    assert Block(header).hash == keccak256(data)
