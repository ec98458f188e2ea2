"""docs/benchmarks.md names the bench's cases as they are: its table's rows are those of
one ``vmstack bench`` run, each under the case module that printed it, so a module added,
removed or renamed, or a group renamed, without the table regenerated fails here."""

from __future__ import annotations

import re
from pathlib import Path

from vmstack.bench import CASE_MODULES

DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
BENCHMARKS = Path(__file__).resolve().parents[1] / "vmstack" / "benchmarks"
#: A row of the table: | module | group: case | speedup | ... |
ROW = re.compile(r"^\| (\w+) \| ([^|]+?): ((?:[^|\\]|\\\|)+?) \|")


def _rows() -> list[tuple[str, str, str]]:
    rows = []
    for line in DOC.read_text(encoding="utf-8").splitlines():
        match = ROW.match(line)
        if match and match[1] != "module":
            rows.append((match[1], match[2], match[3]))
    return rows


def test_the_table_has_a_row_of_every_case_module_and_of_no_other() -> None:
    modules = {name.rsplit(".", 1)[1] for name in CASE_MODULES}
    rows = _rows()
    assert rows, "docs/benchmarks.md has no table rows"
    assert {module for module, _, _ in rows} == modules


def test_each_rows_group_is_one_its_module_prints() -> None:
    for module, group, case in _rows():
        source = (BENCHMARKS / f"{module}.py").read_text(encoding="utf-8")
        if module == "full_stack":  # the ancestors case through the full stack
            assert case.endswith(", full stack") and ", full stack" in source
            source = (BENCHMARKS / "ancestors.py").read_text(encoding="utf-8")
        declared = re.compile(r'(GROUP\s*=\s*|group=)"' + re.escape(group) + '"')
        assert declared.search(source), f"{module} prints no group {group!r}"


def test_every_row_that_misses_its_goal_says_why() -> None:
    text = DOC.read_text(encoding="utf-8")
    missed = [
        f"{group}: {case}"
        for line in text.splitlines()
        if line.startswith("| ") and line.rstrip().endswith("| no |")
        for _, group, case in [ROW.match(line).groups()]  # type: ignore[union-attr]
    ]
    why = text[text.index("## Goals not met") :] if missed else ""
    for name in missed:
        assert f"**{name}**:" in why, f"no reason given for {name}"
