"""Tests for SimClock and the shape of the error tree."""

from __future__ import annotations

import math

import pytest

import vmstack
from vmstack import (
    BatchingNotImplemented,
    BlockNotFound,
    InvalidBlock,
    SimClock,
    StoreCorrupted,
    VMStackError,
)


def test_sim_clock_moves_only_when_advanced() -> None:
    """SimClock returns the same time until advance() moves it."""
    clock = SimClock(10.0)
    assert clock() == clock() == 10.0
    assert clock.advance(2.5) == 12.5
    assert clock() == 12.5


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf])
def test_sim_clock_refuses_to_go_back_or_jump_to_infinity(bad: float) -> None:
    """SimClock.advance refuses negative, NaN and infinite steps."""
    clock = SimClock()
    with pytest.raises(ValueError):
        clock.advance(bad)
    assert clock() == 0.0


@pytest.mark.parametrize(
    "error", [BlockNotFound, InvalidBlock, BatchingNotImplemented, StoreCorrupted]
)
def test_every_error_is_a_vmstack_error(error: type[Exception]) -> None:
    """Every error of the tree is caught by one except VMStackError."""
    assert issubclass(error, VMStackError)


def test_invalid_block_is_a_value_error_naming_its_index() -> None:
    """InvalidBlock is a ValueError and, in a batch, names the index."""
    located = InvalidBlock("truncated RLP").at_index(4)
    assert isinstance(located, ValueError)
    assert located.index == 4 and located.reason == "truncated RLP"
    assert str(located) == "block 4 of the batch: truncated RLP"


def test_public_api_is_sorted_and_complete() -> None:
    """vmstack.__all__ is sorted and every name in it exists."""
    assert list(vmstack.__all__) == sorted(vmstack.__all__)
    for name in vmstack.__all__:
        assert hasattr(vmstack, name), name
