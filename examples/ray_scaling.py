"""Wall time of one network run, local against Ray by number of workers.

Runs the same network (32 nodes by default) once on the local engine and once on Ray per
worker count, checks that every run gives the same simulated figures, and prints one row
per run: setup wall time (starting the nodes, building and importing the chain), run wall
time (the simulation itself), their ratio to the local run, how many calls the coordinator
handed over and in how many batches, and the peak memory of the processes holding nodes.

    python examples/ray_scaling.py                      # 32 nodes; local, Ray 2/4/8/32
    python examples/ray_scaling.py --nodes 8 --workers 2 8 --json scaling.json

Wall times are this machine's; the simulated figures are the same everywhere.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from vmstack.sim.network import (
    Engine,
    LocalEngine,
    NetworkReport,
    NetworkSimulationConfig,
    RayEngine,
    simulate_network,
)


def _row(
    label: str,
    workers: int | str,
    report: NetworkReport,
    local: NetworkReport | None,
) -> dict[str, Any]:
    memory = report.peak_memory_bytes
    totals = report.totals
    return {
        "engine": label,
        "workers": workers,
        "setup_wall_seconds": report.setup_wall_seconds,
        "run_wall_seconds": report.run_wall_seconds,
        "run_vs_local": (
            report.run_wall_seconds / local.run_wall_seconds if local is not None else 1.0
        ),
        "calls": totals["calls"],
        "batches": totals["batches"],
        "widest_batch": totals["widest_batch"],
        "processes": len(memory),
        "median_peak_mb": statistics.median(memory) / 1e6 if memory else None,
        "total_peak_mb": sum(memory) / 1e6,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=32)
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 4, 8, 32])
    parser.add_argument("--blocks", type=int, default=60)
    parser.add_argument("--txs-per-block", type=int, default=2)
    parser.add_argument("--live-blocks", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--ray-address", help="join this Ray cluster (default: a local Ray)")
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args()
    console = Console(width=None if sys.stdout.isatty() else 140)
    config = NetworkSimulationConfig(
        nodes=args.nodes,
        blocks=args.blocks,
        txs_per_block=args.txs_per_block,
        live_blocks=args.live_blocks,
        seed=args.seed,
    )

    import ray

    started = time.perf_counter()
    if args.ray_address:
        ray.init(address=args.ray_address, log_to_driver=False)
    else:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray_start = time.perf_counter() - started
    rows: list[dict[str, Any]] = []
    reference: dict[str, Any] | None = None
    local: NetworkReport | None = None
    try:
        runs: list[tuple[str, int | str, Engine]] = [("local", "-", LocalEngine())]
        runs += [("ray", workers, RayEngine(workers=workers)) for workers in args.workers]
        for label, workers, engine in runs:
            with console.status(f"{config.nodes} nodes on {label} ({workers} workers)"):
                report = simulate_network(config, engine)
            simulated = report.as_dict()["simulated"]
            if reference is None:
                reference, local = simulated, report  # type: ignore[assignment]
            elif simulated != reference:
                console.print(
                    f"[red]{label} with {workers} workers gave other simulated "
                    "figures than the local run[/red]"
                )
                return 1
            rows.append(_row(label, workers, report, local))
    finally:
        ray.shutdown()

    assert local is not None
    totals = local.totals
    console.print(
        f"{config.nodes} nodes ({config.builder_count} builders), {config.blocks} "
        f"blocks x {config.txs_per_block} txs + {config.live_blocks} live; "
        f"simulated {totals['simulated_seconds']:.1f} s, {totals['messages']} "
        f"messages, {totals['events']} events; Ray started in {ray_start:.1f} s"
    )
    console.print("same simulated figures on every run: yes")
    table = Table(title="wall time by engine and workers (measured)", title_justify="left")
    for column in (
        "engine",
        "workers",
        "setup s",
        "run s",
        "run vs local",
        "calls",
        "batches",
        "widest",
        "processes",
        "median peak MB",
        "total peak MB",
    ):
        table.add_column(column, justify="left" if column == "engine" else "right")
    for row in rows:
        table.add_row(
            row["engine"],
            str(row["workers"]),
            f"{row['setup_wall_seconds']:.1f}",
            f"{row['run_wall_seconds']:.1f}",
            f"{row['run_vs_local']:.2f}x",
            str(row["calls"]),
            str(row["batches"]),
            str(row["widest_batch"]),
            str(row["processes"]),
            f"{row['median_peak_mb']:.0f}",
            f"{row['total_peak_mb']:.0f}",
        )
    console.print(table)
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {
                    "config": config.as_dict(),
                    "ray_start_seconds": ray_start,
                    "totals": totals,
                    "rows": rows,
                },
                indent=2,
            )
            + "\n"
        )
        console.print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
