"""The snowflake / snowball instances and the bit tree play avalanchego's own test vectors
(tests/consensus/vectors, ported as data)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.consensus.runners import run_instance_case, run_tree_case
from tests.consensus.vectors import choice_id, instances, tree
from vmstack.consensus import Parameters
from vmstack.consensus.snowball import SNOWBALL, SNOWFLAKE, Factory, Tree, bit


@pytest.mark.parametrize("case", instances.CASES, ids=lambda case: case["name"])
def test_instance_vectors(case: dict[str, Any]) -> None:
    """Each instance vector passes, step by step, including the String() dumps."""
    run_instance_case(case)


@pytest.mark.parametrize("case", tree.CASES, ids=lambda case: case["name"])
def test_tree_vectors(case: dict[str, Any]) -> None:
    """Each bit-tree vector passes on the snowball factory, dumps byte for byte."""
    run_tree_case(case, SNOWBALL)


def test_named_ids_are_upstreams() -> None:
    """Blue is ids.Empty.Prefix(1): its CB58 is the one upstream's n-ary dump prints."""
    from vmstack.wrappers.proposer.certificate import cb58encode

    assert cb58encode(choice_id("Blue")) == "TtF4d2QWbk5vzQGTEPrN48x6vwgAoAmKQ9cbp79inpQmcRKES"


def test_five_colors_split_alike() -> None:
    """TestSnowball5Colors: two trees over the same five colors, added in another order,
    dump with as many indents."""
    params = Parameters(k=5, alpha_preference=5, alpha_confidence=5, beta=20)
    from tests.consensus.vectors import prefixed

    colors = [prefixed(i) for i in range(5)]
    first = Tree(SNOWBALL, params, colors[4])
    for color in colors[:4]:
        first.add(color)
    second = Tree(SNOWBALL, params, colors[3])
    for color in [*colors[:3], colors[4]]:
        second.add(color)
    assert str(first).count("    ") == str(second).count("    ")


def test_snowflake_tree_dump() -> None:
    """On the snowflake factory (Snowman's) the dump names SF instances only."""
    params = Parameters(k=1, alpha_preference=1, alpha_confidence=1, beta=2)
    decision = Tree(SNOWFLAKE, params, choice_id("00"))
    assert str(decision) == "SF(Confidence = [0], Finalized = false) Bits = [0, 256)"
    decision.add(choice_id("01"))
    assert str(decision) == (
        "SF(Confidence = [0], Finalized = false, SL(Preference = 0)) Bit = 0\n"
        "    SF(Confidence = [0], Finalized = false) Bits = [1, 256)\n"
        "    SF(Confidence = [0], Finalized = false) Bits = [1, 256)"
    )


def test_bit_order() -> None:
    """Bit i is (id[i // 8] >> (i % 8)) & 1."""
    choice = bytes([0b0000_0010]) + bytes(30) + bytes([0x80])
    assert [bit(choice, i) for i in range(3)] == [0, 1, 0]
    assert bit(choice, 255) == 1 and bit(choice, 254) == 0


def test_unknown_factory_kind() -> None:
    """A factory of an unknown kind is refused with a clear error."""
    with pytest.raises(ValueError, match="snowflake"):
        Factory("slush")
