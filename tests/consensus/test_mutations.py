"""The vectors catch real mistakes: each deliberately broken copy of the library fails at
least one ported vector.

A mutant is the library's own source with one rule changed (the text replaced must occur
exactly once, so a mutant cannot silently stop applying when the code moves), executed
as a separate module; the vectors are then played on it.
"""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import pytest

from tests.consensus.runners import run_instance_case, run_topological_case, run_tree_case
from tests.consensus.vectors import instances, topological, tree
from vmstack.consensus import snowball
from vmstack.consensus import topological as topological_module
from vmstack.consensus.snowball import instances as instances_module


def _mutant(module: types.ModuleType, original: str, replacement: str) -> types.ModuleType:
    source = Path(module.__file__ or "").read_text(encoding="utf-8")
    assert source.count(original) == 1, f"the mutated text must occur once: {original!r}"
    mutated = types.ModuleType(f"{module.__name__}_mutant")
    mutated.__file__ = module.__file__
    code = compile(source.replace(original, replacement), f"<mutant of {module.__name__}>", "exec")
    exec(code, mutated.__dict__)
    return mutated


def _failures(play: list[Any]) -> list[str]:
    failed: list[str] = []
    for name, run in play:
        try:
            run()
        except Exception as error:  # a mutant may also crash where the library would not
            failed.append(f"{name}: {type(error).__name__}: {str(error).splitlines()[:1]}")
    return failed


def _topological_play(**options: Any) -> list[Any]:
    return [
        (case["name"], lambda case=case: run_topological_case(case, **options))
        for case in topological.CASES
    ]


TOPOLOGICAL_MUTANTS = {
    "no transitive falter": (
        "transitively_falter = parent.should_falter",
        "transitively_falter = False",
    ),
    "no transitive reject": (
        "                child.reject()\n                rejected.append(child_id)",
        "                pass",
    ),
    "the voted child marked faltering": (
        "if not transitively_falter and child_id == next_id:",
        "if False:",
    ),
}


@pytest.mark.parametrize("mutant", sorted(TOPOLOGICAL_MUTANTS))
def test_block_tree_mutant_fails_a_vector(mutant: str) -> None:
    """A block tree with one rule broken fails at least one consensus_test.go vector."""
    original, replacement = TOPOLOGICAL_MUTANTS[mutant]
    broken = _mutant(topological_module, original, replacement)
    failed = _failures(_topological_play(topological=broken.Topological))
    assert failed, f"no vector caught {mutant!r}"


@pytest.mark.parametrize(
    "replacement",
    ["if confidence[index] > beta:", "if confidence[index] >= beta - 1:"],
    ids=["beta plus one", "beta minus one"],
)
def test_beta_off_by_one_fails_vectors(replacement: str) -> None:
    """Instances that finalize one poll late or early fail instance, tree and block-tree
    vectors alike."""
    broken = _mutant(instances_module, "if confidence[index] >= beta:", replacement)
    flake = broken.Factory("snowflake")
    ball = broken.Factory("snowball")
    for play in (
        [
            (case["name"], lambda case=case: run_instance_case(case, broken))
            for case in instances.CASES
        ],
        [(case["name"], lambda case=case: run_tree_case(case, ball)) for case in tree.CASES],
        _topological_play(factory=flake),
    ):
        assert _failures(play), f"no vector of a suite caught {replacement!r}"


def test_unmutated_copies_pass() -> None:
    """The mutation machinery itself changes nothing when nothing is replaced: the copy of
    the block tree passes every vector."""
    copy = _mutant(topological_module, "class Topological:", "class Topological:")
    assert _failures(_topological_play(topological=copy.Topological)) == []
    assert snowball.SNOWFLAKE.kind == "snowflake"
