"""``vmstack bench``: the benchmarks side by side in one run, ratios first.

Each case module under :mod:`vmstack.benchmarks` compares a fast path with its honest
baseline and the floor (the cheapest conceivable way to the same bytes); this module runs
them all and renders one table. Nothing here asserts a time.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs
from rich.console import Console
from rich.table import Table

from vmstack.benchmarks import Comparison

__all__ = [
    "CASE_MODULES",
    "NO_REASON",
    "markdown_table",
    "print_comparisons",
    "run_benchmarks",
    "select_modules",
    "write_json",
]

#: The case modules, in the order their rows appear.
CASE_MODULES = (
    "vmstack.benchmarks.codec",
    "vmstack.benchmarks.ancestors",
    "vmstack.benchmarks.parse",
    "vmstack.benchmarks.full_stack",
    "vmstack.benchmarks.cache",
    "vmstack.benchmarks.layers",
    "vmstack.benchmarks.boundary",
    "vmstack.benchmarks.hostile",
    "vmstack.benchmarks.history",
    "vmstack.benchmarks.windower",
    "vmstack.benchmarks.state",
    "vmstack.benchmarks.startup",
    "vmstack.benchmarks.consensus",
    "vmstack.benchmarks.gossip",
)


def select_modules(only: str | None) -> tuple[str, ...]:
    """The case modules named in ``only`` (short names such as ``"boundary,history"``, in
    :data:`CASE_MODULES` order), or all of them for ``None``; an unknown name is
    ``ValueError`` listing the known ones."""
    if only is None:
        return CASE_MODULES
    short = {name.rsplit(".", 1)[1]: name for name in CASE_MODULES}
    wanted = {part.strip() for part in only.split(",") if part.strip()}
    unknown = sorted(wanted - short.keys())
    if unknown or not wanted:
        raise ValueError(
            f"unknown case {', '.join(unknown) or '(none given)'}; known: {', '.join(short)}"
        )
    return tuple(name for name in CASE_MODULES if name.rsplit(".", 1)[1] in wanted)


def run_benchmarks(
    *,
    quick: bool,
    modules: Sequence[str] = CASE_MODULES,
    on_module: Callable[[str], None] | None = None,
) -> list[Comparison]:
    """Run every case module's ``run(quick)`` and return all rows, each carrying the
    short name of the module that printed it."""
    rows: list[Comparison] = []
    for name in modules:
        if on_module is not None:
            on_module(name)
        module = importlib.import_module(name)
        short = name.rsplit(".", 1)[1]
        rows.extend(attrs.evolve(row, module=short) for row in module.run(quick))
    return rows


def _ratio(value: float | None) -> str:
    return "" if value is None else f"{value:,.1f}x"


def _met(met: bool | None) -> str:
    return "" if met is None else ("yes" if met else "no")


def _micros(seconds: float | None) -> str:
    return "" if seconds is None else f"{seconds * 1e6:,.2f}"


def print_comparisons(rows: Sequence[Comparison], console: Console) -> None:
    """One table: ratios first, then the times (µs) they come from, the goal and whether
    this run met it; under it, for each row whose goal was not met, why it cannot be (its
    ``reason``). What each time measures (``fast_label`` and the others) is in the JSON
    output."""
    table = Table(
        title="vmstack bench: medians in one run (ratios hold, times drift)", title_justify="left"
    )
    table.add_column("benchmark")
    table.add_column("speedup", justify="right")
    table.add_column("vs floor", justify="right")
    table.add_column("fast µs", justify="right")
    table.add_column("baseline µs", justify="right")
    table.add_column("floor µs", justify="right")
    table.add_column("goal")
    table.add_column("met")
    for row in rows:
        table.add_row(
            f"{row.group}: {row.case}",
            _ratio(row.speedup),
            _ratio(row.over_floor),
            _micros(row.fast_seconds),
            _micros(row.baseline_seconds),
            _micros(row.floor_seconds),
            row.goal,
            _met(row.goal_met),
        )
    console.print(table)
    for row in rows:
        if row.goal_met is False:
            why = row.reason or "no reason given: this run missed the goal"
            console.print(f"not met: {row.group}: {row.case}: {why}", soft_wrap=True)


#: What a missed row without a reason of its own says in :func:`markdown_table`.
NO_REASON = (
    "missed in this run; the case gives no reason of its own, so the goal is not known "
    "to be out of reach"
)


def markdown_table(rows: Sequence[Comparison]) -> str:
    """The rows as docs/benchmarks.md shows them: one Markdown table (module, benchmark,
    the ratios, the times in µs, goal, met), then a "Goals not met in this run" list
    giving each missed row's reason (or :data:`NO_REASON`)."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    lines = [
        "| module | benchmark | speedup | vs floor | fast µs | baseline µs | floor µs | goal "
        "| met |",
        "|---|---|---:|---:|---:|---:|---:|---|---|",
    ]
    for row in rows:
        lines.append(
            "| "
            + " | ".join(
                (
                    row.module,
                    cell(f"{row.group}: {row.case}"),
                    _ratio(row.speedup),
                    _ratio(row.over_floor),
                    _micros(row.fast_seconds),
                    _micros(row.baseline_seconds),
                    _micros(row.floor_seconds),
                    cell(row.goal),
                    _met(row.goal_met),
                )
            )
            + " |"
        )
    missed = [row for row in rows if row.goal_met is False]
    if missed:
        lines += ["", "## Goals not met in this run", ""]
        lines += [
            f"- **{cell(f'{row.group}: {row.case}')}**: {row.reason or NO_REASON}" for row in missed
        ]
    return "\n".join(lines) + "\n"


def write_json(rows: Sequence[Comparison], path: Path, *, quick: bool) -> None:
    """All rows as JSON: ``{"quick": ..., "rows": [...]}``."""
    path.write_text(
        json.dumps({"quick": quick, "rows": [row.as_dict() for row in rows]}, indent=2) + "\n"
    )
