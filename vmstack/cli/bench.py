"""``vmstack bench``: the benchmarks side by side, as ratios."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console

from vmstack.cli.common import check_output

__all__ = ["add_bench_parser", "run_bench"]


def add_bench_parser(commands: Any) -> None:
    """Add ``bench`` to ``commands`` (the top parser's subparsers)."""
    bench = commands.add_parser("bench", help="the benchmarks side by side, as ratios")
    bench.add_argument("--quick", action="store_true", help="fewer rounds (under 30 s)")
    bench.add_argument("--json", type=Path, metavar="FILE", help="write every row here")
    bench.add_argument(
        "--markdown",
        type=Path,
        metavar="FILE",
        help="write the rows here as docs/benchmarks.md's table, with the missed goals' reasons",
    )
    bench.add_argument(
        "--only",
        metavar="CASES",
        help="run only these case modules, comma-separated (e.g. "
        "boundary,history; default: all of them)",
    )


def run_bench(args: argparse.Namespace, console: Console) -> int:
    """Run the benchmarks asked for and print (and write) their rows."""
    from vmstack.bench import (
        markdown_table,
        print_comparisons,
        run_benchmarks,
        select_modules,
        write_json,
    )

    check_output(args.json, "--json")
    check_output(args.markdown, "--markdown")
    try:
        modules = select_modules(args.only)
    except ValueError as error:
        console.print(f"vmstack bench: {error}", markup=False)
        return 2
    with console.status("benchmarking") as status:
        rows = run_benchmarks(
            quick=args.quick,
            modules=modules,
            on_module=lambda name: status.update(f"benchmarking {name}"),
        )
    print_comparisons(rows, console)
    if args.json is not None:
        write_json(rows, args.json, quick=args.quick)
        console.print(f"wrote {args.json}", markup=False)
    if args.markdown is not None:
        args.markdown.write_text(markdown_table(rows), encoding="utf-8")
        console.print(f"wrote {args.markdown}", markup=False)
    return 0
