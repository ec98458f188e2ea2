"""docs/network-consensus.md's excerpt of a 64-node run with a partition: its command runs
as written (scaled down here) and prints lines of the excerpt's form."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from vmstack.cli import main

DOC = Path(__file__).resolve().parents[2] / "docs" / "network-consensus.md"

#: The options that make the excerpt's network small enough for a test.
SMALLER = {
    "--nodes": "6",
    "--blocks": "12",
    "--live-blocks": "4",
    "--k": "4",
    "--alpha": "3",
    "--beta": "4",
    "--partition": "0.3@5-15",
}


def _excerpt() -> tuple[list[str], list[str]]:
    match = re.search(
        r"A real excerpt \(`(vmstack simulate --nodes 64 [^`]+)`\).*?\n```\n(.*?)\n```",
        DOC.read_text(),
        re.DOTALL,
    )
    assert match is not None, "docs/network-consensus.md has no 64-node excerpt"
    return shlex.split(match.group(1)), match.group(2).splitlines()


def _shape(line: str) -> str:
    """A printed line with its numbers and its table's padding and rules taken out."""
    line = re.sub(r"-?\d+(\.\d+)?", "N", line)
    line = re.sub(r"[━─┏┓┗┛┡┩└┘╇┳┻]+", "-", line)
    return re.sub(r"\s+", " ", line).strip()


def _rows(lines: list[str]) -> list[str]:
    """The lines that a run of another size prints too: the headline and the consensus
    table."""
    kept: list[str] = []
    in_table = False
    for line in lines:
        if line.startswith("consensus (snowman)"):
            in_table = True
        if line.startswith("network: ") or in_table:
            kept.append(_shape(line))
        if in_table and line.startswith("└"):
            in_table = False
    return kept


def test_the_excerpt_is_a_partition_run_at_the_defaults() -> None:
    command, excerpt = _excerpt()
    assert command[:2] == ["vmstack", "simulate"]
    assert "--partition" in command and "--consensus" not in command
    assert excerpt[0].startswith("network: 64 nodes")
    assert any(re.fullmatch(r"│ conflicting_accepts +│ +0 │", line) for line in excerpt)
    assert len(_rows(excerpt)) > 10


@pytest.mark.timeout(600)
def test_the_excerpts_command_prints_lines_of_the_excerpts_form(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    command, excerpt = _excerpt()
    options = command[2:]
    for flag, value in {**SMALLER, "--json": str(tmp_path / "run.json")}.items():
        if flag in options:
            options[options.index(flag) + 1] = value
        else:
            options += [flag, value]
    assert main(["simulate", *options]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert _rows(excerpt) == _rows(printed)
