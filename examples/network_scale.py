"""Wall time and peak memory of a network run against its number of nodes, as a table and
a plot.

``python examples/network_scale.py [--nodes 1000 3000 10000] [--plot docs/network_scale.png]
[--json FILE]`` runs ``vmstack simulate --nodes N --consensus coordinator --blocks 60
--txs-per-block 2 --live-blocks 10`` for each N (the local engine, one process), one after
the other, and reads each run's JSON; ``--from-json A.json B.json ...`` tabulates and plots
runs made before instead. The memory is the peak resident size of the process holding the nodes, as
the run's JSON reports it (``measured.peak_memory_bytes``); the wall times are the run's
own (set-up, then the run), and the CPU time the process's own user and system time (what
a busy machine changes least). Each run has a bounded wait (``--timeout``, default 2 hours).
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

CHAIN = [
    "--blocks",
    "60",
    "--txs-per-block",
    "2",
    "--live-blocks",
    "10",
    "--consensus",
    "coordinator",
]


def run_network(nodes: int, folder: Path, timeout: float) -> dict[str, Any]:
    """One ``vmstack simulate`` run of ``nodes`` nodes; its JSON report, with the run's
    CPU seconds as ``cpu_seconds``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = folder / f"network-{nodes}.json"
    command = [
        sys.executable,
        "-m",
        "vmstack",
        "simulate",
        "--nodes",
        str(nodes),
        *CHAIN,
        "--json",
        str(out),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    if result.returncode != 0:
        raise SystemExit(
            f"{' '.join(command)} exited with {result.returncode}: "
            f"{result.stderr.strip().splitlines()[-1:]}"
        )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    report: dict[str, Any] = json.loads(out.read_text())
    report["cpu_seconds"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return report


def cpu_seconds_of(time_log: Path) -> float:
    """User plus system seconds from a ``/usr/bin/time -v`` log."""
    found = dict(re.findall(r"(User|System) time \(seconds\): ([0-9.]+)", time_log.read_text()))
    if set(found) != {"User", "System"}:
        raise SystemExit(f"{time_log} is not the output of /usr/bin/time -v")
    return float(found["User"]) + float(found["System"])


def row(report: dict[str, Any]) -> dict[str, Any]:
    """What the table and the plot show of one run."""
    config, measured = report["config"], report["measured"]
    totals = report["simulated"]["totals"]
    setup, run = measured["setup_wall_seconds"], measured["run_wall_seconds"]
    return {
        "nodes": config["nodes"],
        "node_store": config.get("node_store_used", "lmdb"),
        "setup_s": setup,
        "run_s": run,
        "wall_s": setup + run,
        "peak_mb": max(measured["peak_memory_bytes"]) / 2**20,
        "events": totals["events"],
        "nodes_at_tip": totals["nodes_at_tip"],
        "cpu_s": report.get("cpu_seconds"),
    }


def print_table(rows: list[dict[str, Any]], console: Console) -> None:
    table = Table(
        title="network runs by nodes (measured; 60 blocks x 2 txs + 10 live)", title_justify="left"
    )
    for column in (
        "nodes",
        "node store",
        "setup s",
        "run s",
        "wall s",
        "CPU s",
        "CPU s per node",
        "peak MB",
        "KB per node",
        "events",
        "at tip",
    ):
        table.add_column(column, justify="left" if column == "node store" else "right")
    for entry in rows:
        table.add_row(
            str(entry["nodes"]),
            entry["node_store"],
            f"{entry['setup_s']:.0f}",
            f"{entry['run_s']:.0f}",
            f"{entry['wall_s']:.0f}",
            "-" if entry["cpu_s"] is None else f"{entry['cpu_s']:.0f}",
            "-" if entry["cpu_s"] is None else f"{entry['cpu_s'] / entry['nodes']:.3f}",
            f"{entry['peak_mb']:.0f}",
            f"{entry['peak_mb'] * 1024 / entry['nodes']:.0f}",
            str(entry["events"]),
            f"{entry['nodes_at_tip']}/{entry['nodes']}",
        )
    console.print(table)


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """Wall time and peak memory against nodes, two panels, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    nodes = [entry["nodes"] for entry in rows]
    figure, (time_axes, memory_axes) = pyplot.subplots(1, 2, figsize=(10, 4))
    time_axes.plot(nodes, [entry["wall_s"] for entry in rows], "o-", label="wall (set-up + run)")
    time_axes.plot(nodes, [entry["run_s"] for entry in rows], "s--", label="run")
    if all(entry["cpu_s"] is not None for entry in rows):
        time_axes.plot(nodes, [entry["cpu_s"] for entry in rows], "^-", label="CPU (user + sys)")
    time_axes.set_xlabel("nodes")
    time_axes.set_ylabel("seconds (measured)")
    time_axes.set_title("time")
    time_axes.legend()
    memory_axes.plot(nodes, [entry["peak_mb"] for entry in rows], "o-", color="tab:red")
    for entry in rows:
        memory_axes.annotate(
            f"{entry['node_store']} stores",
            (entry["nodes"], entry["peak_mb"]),
            textcoords="offset points",
            xytext=(-10, 8),
            ha="right",
            fontsize="small",
        )
    memory_axes.set_xlabel("nodes")
    memory_axes.set_ylabel("peak resident MB (measured)")
    memory_axes.set_title("peak memory")
    for axes in (time_axes, memory_axes):
        axes.grid(alpha=0.3)
        axes.set_xlim(left=0)
        axes.set_ylim(bottom=0)
    figure.suptitle(
        "vmstack simulate, one process: 60 blocks x 2 txs + 10 live (a shared 2-core machine)"
    )
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    pyplot.close(figure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000, 3000, 10000])
    parser.add_argument(
        "--from-json",
        type=Path,
        nargs="+",
        metavar="FILE",
        help="tabulate these `vmstack simulate --json` reports instead",
    )
    parser.add_argument(
        "--time-logs",
        type=Path,
        nargs="+",
        metavar="LOG",
        help="with --from-json: each run's /usr/bin/time -v output",
    )
    parser.add_argument("--plot", type=Path, help="write the plot here (PNG)")
    parser.add_argument("--json", type=Path, help="write the table's rows here")
    parser.add_argument(
        "--timeout",
        type=float,
        default=7200.0,
        help="seconds one run may take (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    console = Console()
    if args.from_json:
        reports = [json.loads(path.read_text()) for path in args.from_json]
        if args.time_logs:
            if len(args.time_logs) != len(reports):
                parser.error("--time-logs needs one log per --from-json report")
            for report, log in zip(reports, args.time_logs, strict=True):
                report["cpu_seconds"] = cpu_seconds_of(log)
    else:
        with tempfile.TemporaryDirectory(prefix="vmstack-scale-") as folder:
            reports = []
            for nodes in args.nodes:
                with console.status(f"running {nodes} nodes"):
                    reports.append(run_network(nodes, Path(folder), args.timeout))
    rows = sorted((row(report) for report in reports), key=lambda entry: entry["nodes"])
    print_table(rows, console)
    if args.plot is not None:
        plot(rows, args.plot)
        console.print(f"wrote {args.plot}", markup=False)
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
