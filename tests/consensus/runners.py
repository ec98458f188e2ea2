"""Runners that play the ported vectors (tests/consensus/vectors) against an
implementation: the real one in the tests, deliberately broken copies in
test_mutations.py. Each runner raises AssertionError at the first step that differs."""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
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


class VectorBlockError(Exception):
    """The failure a vector's block raises from accept or reject."""


class VectorBlock:
    """A block of a vector: records its decisions; ``accept`` / ``reject`` raise where the
    vector says so."""

    def __init__(self, name: str, block_id: bytes, parent_id: bytes, height: int) -> None:
        self.name = name
        self.id = block_id
        self.parent_id = parent_id
        self.height = height
        self.status = "undecided"
        self.decisions: list[str] = []
        self.accept_error: Exception | None = None
        self.reject_error: Exception | None = None

    def accept(self) -> None:
        self.decisions.append("accept")
        if self.accept_error is not None:
            raise self.accept_error
        self.status = "accepted"

    def reject(self) -> None:
        self.decisions.append("reject")
        if self.reject_error is not None:
            raise self.reject_error
        self.status = "rejected"


def counter_ids() -> Callable[[], bytes]:
    """Fresh IDs as upstream's ids.GenerateTestID makes them: Prefix(1), Prefix(2), ..."""
    from tests.consensus.vectors import prefixed

    count = 0

    def fresh() -> bytes:
        nonlocal count
        count += 1
        return prefixed(count)

    return fresh


def case_ids(case: dict[str, Any], fresh: Callable[[], bytes]) -> dict[str, bytes]:
    """An ID for the genesis, every block and every unknown voted name of ``case``: pinned
    where the case pins them, else from ``fresh``; pairs in ``same_bit0`` share bit 0 (the
    second drawn again until it does, as upstream)."""
    from vmstack.consensus.snowball import bit

    names = ["G"] + [name for name, _ in case["blocks"]]
    for step in case["steps"]:
        if step[0] == "poll":
            names += [name for name in step[1] if name not in names]
    pinned = case.get("pinned", {})
    ids: dict[str, bytes] = {}
    for name in names:
        ids[name] = choice_id(pinned[name]) if name in pinned else fresh()
    for first, second in case.get("same_bit0", []):
        while bit(ids[first], 0) != bit(ids[second], 0):
            ids[second] = fresh()
    return ids


def run_topological_case(
    case: dict[str, Any],
    ids: dict[str, bytes] | None = None,
    *,
    topological: Callable[..., Any] | None = None,
    factory: Factory | None = None,
) -> list[tuple[str, str]]:
    """Play one block-tree vector; return the trace of what happened (each block's
    decisions in order, and the preference after every step), by block name. Checks
    that no block is decided twice and the accepted blocks form one chain."""
    from vmstack import errors
    from vmstack.consensus import DEFAULT_PARAMETERS, Topological
    from vmstack.consensus.snowball import SNOWFLAKE

    ids = ids if ids is not None else case_ids(case, counter_ids())
    names = {block_id: name for name, block_id in ids.items()}
    if case["params"] == "default":
        params = DEFAULT_PARAMETERS
    else:
        k, alpha_preference, alpha_confidence, beta = case["params"]
        params = Parameters(
            k=k,
            alpha_preference=alpha_preference,
            alpha_confidence=alpha_confidence,
            beta=beta,
            concurrent_repolls=1,
            optimal_processing=1,
            max_outstanding_items=1,
            max_item_processing_time=1e-9,
        )
    tree = (topological or Topological)(params, factory or SNOWFLAKE)
    tree.initialize(ids["G"], 0)
    genesis = VectorBlock("G", ids["G"], bytes(32), 0)
    genesis.status = "accepted"
    blocks = {"G": genesis}
    heights = case.get("heights", {})
    for name, parent in case["blocks"]:
        parent_id = ids[parent] if parent in ids else bytes.fromhex("ff" * 32)
        height = heights.get(name, blocks[parent].height + 1 if parent in blocks else 1)
        blocks[name] = VectorBlock(name, ids[name], parent_id, height)
    failure = VectorBlockError("the vector's block refuses")
    for name in case.get("accept_fails", []):
        blocks[name].accept_error = failure
    for name in case.get("reject_fails", []):
        blocks[name].reject_error = failure
    trace: list[tuple[str, str]] = []
    for number, step in enumerate(case["steps"]):
        where = f"{case['name']} step {number} {step[:2]!r}"
        operation = step[0]
        if operation == "add":
            if len(step) == 2:
                tree.add(blocks[step[1]])
            else:
                kind = getattr(errors, step[2])
                try:
                    tree.add(blocks[step[1]])
                except kind:
                    pass
                else:
                    raise AssertionError(f"{where}: add did not raise {step[2]}")
        elif operation == "poll":
            votes = {ids[name]: count for name, count in step[1].items()}
            if len(step) == 2:
                tree.record_poll(votes)
            else:
                try:
                    tree.record_poll(votes)
                except VectorBlockError as raised:
                    assert raised is failure, f"{where}: another error object"
                else:
                    raise AssertionError(f"{where}: record_poll did not raise")
        elif operation == "reject":
            blocks[step[1]].reject()
        elif operation == "expect":
            _check(where, step[1], tree, blocks, ids, names)
        else:
            raise ValueError(f"{where}: unknown step")
        trace.append(("preference", names.get(tree.preference(), "?")))
    for block in blocks.values():
        assert len(block.decisions) <= 1, f"{case['name']}: {block.name} {block.decisions}"
        trace.append((block.name, ",".join(block.decisions)))
    accepted = sorted(
        (block for block in blocks.values() if block.status == "accepted"),
        key=lambda block: block.height,
    )
    for parent, child in pairwise(accepted):
        assert child.parent_id == parent.id, f"{case['name']}: accepted blocks fork"
    return trace


def _check(
    where: str,
    wanted: dict[str, Any],
    tree: Any,
    blocks: dict[str, VectorBlock],
    ids: dict[str, bytes],
    names: dict[bytes, str],
) -> None:
    for field, value in wanted.items():
        if field == "preference":
            got: object = names.get(tree.preference())
        elif field == "processing_count":
            got = tree.num_processing()
        elif field == "status":
            got = {name: blocks[name].status for name in value}
        elif field == "processing":
            got = {name: tree.processing(ids[name]) for name in value}
        elif field == "preferred":
            got = {name: tree.is_preferred(ids[name]) for name in value}
        elif field == "at_height":
            at_height: dict[int, str | None] = {}
            for height in value:
                found = tree.preference_at_height(height)
                at_height[height] = None if found is None else names.get(found)
            got = at_height
        elif field == "last_accepted":
            block_id, height = tree.last_accepted()
            got = names.get(block_id)
            assert height == blocks[value].height, f"{where}: last accepted height {height}"
        elif field == "polls":
            got = (tree.polls_successful, tree.polls_failed)
        else:
            raise ValueError(f"{where}: unknown field {field}")
        assert got == value, f"{where}: {field} is {got!r}, upstream {value!r}"
