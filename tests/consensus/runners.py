"""Runners that play the ported vectors (tests/consensus/vectors) against an
implementation: the real one in the tests, deliberately broken copies in
test_mutations.py. Each runner raises AssertionError at the first step that differs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.consensus.vectors import choice_id
from vmstack.consensus import Parameters
from vmstack.consensus.snowball import Factory, instances

KINDS = {
    "unary_snowflake": "UnarySnowflake",
    "unary_snowball": "UnarySnowball",
    "binary_snowflake": "BinarySnowflake",
    "binary_snowball": "BinarySnowball",
    "nnary_snowflake": "NnarySnowflake",
    "nnary_snowball": "NnarySnowball",
}


def _choice(kind: str, value: Any) -> Any:
    return choice_id(value) if kind.startswith("nnary") and value is not None else value


def run_instance_case(case: dict[str, Any], module: Any = instances) -> None:
    """Play one snowflake / snowball instance vector on the classes of ``module``."""
    kind = case["kind"]
    make = getattr(module, KINDS[kind])
    if kind.startswith("unary"):
        current = make(case["alpha_preference"], case["conditions"])
    else:
        current = make(case["alpha_preference"], case["conditions"], _choice(kind, case["choice"]))
    named = {"main": current}
    for number, step in enumerate(case["steps"]):
        where = f"{case['name']} step {number} {step[:2]!r}"
        operation = step[0]
        is_unary = type(current).__name__.startswith("Unary")
        if operation == "poll":
            if is_unary:
                current.record_poll(step[1])
            else:
                current.record_poll(step[1], _choice(kind, step[2]))
        elif operation == "unsuccessful":
            current.record_unsuccessful_poll()
        elif operation == "add":
            current.add(_choice(kind, step[1]))
        elif operation == "clone":
            named[step[1]] = current.clone()
        elif operation == "extend":
            named[step[1]] = current.extend(step[2])
        elif operation == "use":
            current = named[step[1]]
        elif operation == "expect":
            for field, wanted in step[1].items():
                if field == "preference":
                    got = current.preference()
                    wanted = _choice(kind, wanted)
                elif field == "flake_preference":
                    got = current.slush_preference
                    wanted = _choice(kind, wanted)
                elif field == "finalized":
                    got = current.finalized()
                elif field == "confidence":
                    got = list(current.confidence)
                elif field == "strength":
                    got = current.preference_strength
                else:
                    got = str(current)
                assert got == wanted, f"{where}: {field} is {got!r}, upstream {wanted!r}"
        else:
            raise ValueError(f"{where}: unknown step")


def run_tree_case(
    case: dict[str, Any], factory: Factory, make_tree: Callable[..., Any] | None = None
) -> None:
    """Play one bit-tree vector with instances from ``factory``."""
    from vmstack.consensus.snowball import Tree

    k, alpha_preference, alpha_confidence, beta = case["params"]
    params = Parameters(
        k=k, alpha_preference=alpha_preference, alpha_confidence=alpha_confidence, beta=beta
    )
    tree = (make_tree or Tree)(factory, params, choice_id(case["choice"]))
    for number, step in enumerate(case["steps"]):
        where = f"{case['name']} step {number} {step[:2]!r}"
        operation = step[0]
        if operation == "add":
            tree.add(choice_id(step[1]))
        elif operation == "poll":
            votes: dict[bytes, int] = {}
            for name in step[1]:
                votes[choice_id(name)] = votes.get(choice_id(name), 0) + 1
            returned = tree.record_poll(votes)
            if step[2] is not None:
                assert returned is step[2], f"{where}: record_poll returned {returned}"
        elif operation == "unsuccessful":
            tree.record_unsuccessful_poll()
        elif operation == "expect":
            for field, wanted in step[1].items():
                if field == "preference":
                    got: object = tree.preference()
                    wanted = choice_id(wanted)
                elif field == "finalized":
                    got = tree.finalized()
                else:
                    got = str(tree)
                assert got == wanted, f"{where}: {field} is\n{got!s}\nupstream\n{wanted!s}"
        else:
            raise ValueError(f"{where}: unknown step")
