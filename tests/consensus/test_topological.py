"""The block tree plays avalanchego's consensus_test.go vectors (tests/consensus/vectors),
under upstream's IDs and under any other IDs where a case does not pin them."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.consensus.runners import case_ids, counter_ids, run_topological_case
from tests.consensus.vectors import topological
from vmstack.consensus import DEFAULT_PARAMETERS, Topological

CASES = topological.CASES
#: The IDs the runner gives the genesis's parent and an unknown parent: no block has them.
RESERVED = (bytes(32), b"\xff" * 32)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case["name"])
def test_vectors(case: dict[str, Any]) -> None:
    """Each vector passes with IDs drawn as upstream's test IDs are, on the snowflake
    factory (the one topological_test.go runs them on, and Snowman's)."""
    run_topological_case(case)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
@pytest.mark.parametrize(
    "case", [case for case in CASES if "pinned" not in case], ids=lambda case: case["name"]
)
def test_outcomes_do_not_depend_on_unpinned_ids(case: dict[str, Any], data: st.DataObject) -> None:
    """Any other distinct IDs give the same trace: every block's decisions and the
    preference after every step."""
    expected = run_topological_case(case)
    drawn = iter(
        data.draw(
            st.lists(
                st.binary(min_size=32, max_size=32).filter(lambda drawn: drawn not in RESERVED),
                min_size=64,
                max_size=64,
                unique=True,
            )
        )
    )
    ids = case_ids(case, lambda: next(drawn))
    assert run_topological_case(case, ids) == expected


def test_counter_ids_are_upstreams_test_ids() -> None:
    """The first test ID is ids.Empty.Prefix(1)."""
    import hashlib

    assert counter_ids()() == hashlib.sha256((1).to_bytes(8, "big") + bytes(32)).digest()


def test_preference_height_and_decided() -> None:
    """preference_height follows the preferred tip; decided() is 'at or below the last
    accepted height'."""
    from tests.consensus.runners import VectorBlock

    tree = Topological(DEFAULT_PARAMETERS)
    tree.initialize(b"\x01" * 32, 7)
    assert tree.preference_height() == 7
    child = VectorBlock("c", b"\x02" * 32, b"\x01" * 32, 8)
    tree.add(child)
    assert tree.preference_height() == 8
    assert tree.parent_of(child.id) == b"\x01" * 32
    assert tree.parent_of(b"\x01" * 32) is None
    assert not tree.decided(child)
    assert tree.decided(VectorBlock("old", b"\x03" * 32, b"\x00" * 32, 7))
