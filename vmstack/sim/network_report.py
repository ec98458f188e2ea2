"""How a network run reads: a table per node and the network totals, JSON, and a plot."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from vmstack.sim.network_records import NetworkReport, NodeResult
from vmstack.sim.report import transactions_per_block

__all__ = ["placement_summary", "print_network_report", "write_network_json",
           "write_network_plot"]


def _seconds(value: float | int | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _fate(node: NodeResult) -> str:
    if node.crashed_at is not None:
        return f"at {node.crashed_at:.2f} s"
    return "stalled" if node.stalled is not None else "-"


def _bad(node: NodeResult) -> str:
    """Bad answers the node dropped, and (after a slash) those it gave, when any."""
    return (str(node.bad_answers) if not node.bad_answers_sent
            else f"{node.bad_answers}/{node.bad_answers_sent} sent")


def placement_summary(engine: dict[str, object]) -> str | None:
    """One line saying where the actors ran: per host, its address, the start of its node
    ID, its actors and the simulated nodes they held (``None`` for an engine without
    hosts)."""
    hosts, actors = engine.get("hosts"), engine.get("actors")
    if not isinstance(hosts, list) or not isinstance(actors, list):
        return None
    held = {actor["actor"]: len(actor["nodes"]) for actor in actors}
    parts = [f"{host['address']} ({str(host['node_id'])[:8]}) {len(host['actors'])} actors, "
             f"{sum(held.get(index, 0) for index in host['actors'])} nodes"
             for host in hosts]
    asked = engine.get("workers_asked")
    fewer = (f" (asked for {asked}; the cluster held {engine.get('workers')})"
             if asked not in (None, engine.get("workers")) else "")
    plural = "host" if len(hosts) == 1 else "hosts"
    return (f"placement: {len(actors)} actors on {len(hosts)} {plural}{fewer}: "
            + "; ".join(parts))


def print_network_report(report: NetworkReport, console: Console) -> None:
    """One row per node (simulated figures), then the network's totals. The ``bad``
    column counts the bad answers a node dropped (and, as ``n sent``, those it gave)."""
    config, totals = report.config, report.totals
    engine = report.engine
    where = engine["name"] if "workers" not in engine else \
        f"{engine['name']} ({engine['workers']} actors)"
    per_block = transactions_per_block(config.txs_per_block, report.transactions,
                                       config.blocks)
    console.print(f"network: {config.nodes} nodes ({config.builder_count} builders), chain "
                  f"{config.blocks} blocks x {per_block} + "
                  f"{config.live_blocks} built live, seed {config.seed}; engine: {where}; "
                  f"node stores: {config.node_store_used}; costs: {report.costs.source}")
    placement = placement_summary(engine)
    if placement is not None:
        console.print(placement, markup=False)
    table = Table(title="nodes (simulated; sim s from joining)", title_justify="left")
    for column in ("node", "role", "joined s", "requests", "retries", "bad", "MB",
                   "fetched", "rounds", "gossip", "height", "bootstrap s", "crashed"):
        table.add_column(column, justify="left" if column == "role" else "right")
    for node in report.nodes:
        table.add_row(str(node.index), node.role, f"{node.joined_at:.2f}", str(node.requests),
                      str(node.retries), _bad(node), f"{node.bytes_received / 1e6:.2f}",
                      str(node.blocks_fetched), str(node.rounds), str(node.gossip_accepted),
                      str(node.height), _seconds(node.bootstrap_seconds), _fate(node))
    console.print(table)
    summary = Table(title="network totals", title_justify="left")
    summary.add_column("figure")
    summary.add_column("value", justify="right")
    for name, value in totals.items():
        summary.add_row(name, f"{value:.3f}" if isinstance(value, float) else str(value))
    summary.add_row("setup wall s (measured)", f"{report.setup_wall_seconds:.2f}")
    summary.add_row("run wall s (measured)", f"{report.run_wall_seconds:.2f}")
    console.print(summary)


def write_network_json(report: NetworkReport, path: Path) -> None:
    """Every figure, with the engine, seed and configuration, as JSON."""
    path.write_text(json.dumps(report.as_dict(), indent=2, sort_keys=True) + "\n")


def write_network_plot(report: NetworkReport, path: Path) -> None:
    """Blocks fetched over simulated time, one line per bootstrapping node (crashed ones
    dashed), as a PNG (needs matplotlib)."""
    try:
        import matplotlib
    except ImportError as error:
        raise RuntimeError("--plot needs matplotlib: pip install 'vmstack[plot]'") from error
    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(9, 5))
    for node in report.nodes:
        if not node.timeline:
            continue
        times = [point[0] for point in node.timeline]
        counts = [point[1] for point in node.timeline]
        label = f"node {node.index} ({node.role}" + (", crashed)" if node.crashed else ")")
        axes.step(times, counts, where="post", linestyle="--" if node.crashed else "-",
                  linewidth=1.2, label=label)
    axes.set_xlabel("simulated time (s)")
    axes.set_ylabel("blocks fetched")
    axes.set_title(f"{report.config.nodes} nodes bootstrapping from "
                   f"{report.config.builder_count} builders (seed {report.config.seed}, "
                   f"engine {report.engine['name']})")
    axes.grid(alpha=0.3)
    if len(report.nodes) <= 16:
        axes.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    pyplot.close(figure)
