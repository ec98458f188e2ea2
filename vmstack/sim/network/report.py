"""How a network run reads: a table per node, the proposers against their stake, the slot
delays and missed slots, the network totals; JSON; and a plot."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from vmstack.sim.network.records import MISSED_REASONS, NetworkReport, NodeResult
from vmstack.sim.report import transactions_per_block
from vmstack.wrappers.proposer.windower import WINDOW_DURATION

__all__ = ["placement_summary", "print_network_report", "write_network_json", "write_network_plot"]


def _seconds(value: float | int | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _fate(node: NodeResult) -> str:
    if node.crashed_at is not None:
        return f"at {node.crashed_at:.2f} s"
    return "stalled" if node.stalled is not None else "-"


def _bad(node: NodeResult) -> str:
    """Bad answers the node dropped, and (after a slash) those it gave, when any."""
    return (
        str(node.bad_answers)
        if not node.bad_answers_sent
        else f"{node.bad_answers}/{node.bad_answers_sent} sent"
    )


def placement_summary(engine: dict[str, object]) -> str | None:
    """One line saying where the actors ran: per host, its address, the start of its node
    ID, its actors and the simulated nodes they held (``None`` for an engine without
    hosts)."""
    hosts, actors = engine.get("hosts"), engine.get("actors")
    if not isinstance(hosts, list) or not isinstance(actors, list):
        return None
    held = {actor["actor"]: len(actor["nodes"]) for actor in actors}
    parts = [
        f"{host['address']} ({str(host['node_id'])[:8]}) {len(host['actors'])} actors, "
        f"{sum(held.get(index, 0) for index in host['actors'])} nodes"
        for host in hosts
    ]
    asked = engine.get("workers_asked")
    fewer = (
        f" (asked for {asked}; the cluster held {engine.get('workers')})"
        if asked not in (None, engine.get("workers"))
        else ""
    )
    plural = "host" if len(hosts) == 1 else "hosts"
    return f"placement: {len(actors)} actors on {len(hosts)} {plural}{fewer}: " + "; ".join(parts)


def print_network_report(report: NetworkReport, console: Console) -> None:
    """One row per node (simulated figures), then the network's totals. The ``bad``
    column counts the bad answers a node dropped (and, as ``n sent``, those it gave)."""
    config, totals = report.config, report.totals
    engine = report.engine
    where = (
        engine["name"]
        if "workers" not in engine
        else f"{engine['name']} ({engine['workers']} actors)"
    )
    per_block = transactions_per_block(config.txs_per_block, report.transactions, config.blocks)
    console.print(
        f"network: {config.nodes} nodes ({config.builder_count} builders), chain "
        f"{config.blocks} blocks x {per_block} + "
        f"{config.live_blocks} built live, seed {config.seed}, stake {config.stake}; "
        f"engine: {where}; node stores: {config.node_store_used}; "
        f"costs: {report.costs.source}",
        markup=False,
        soft_wrap=True,
    )
    placement = placement_summary(engine)
    if placement is not None:
        console.print(placement, markup=False)
    table = Table(title="nodes (simulated; sim s from joining)", title_justify="left")
    for column in (
        "node",
        "role",
        "joined s",
        "requests",
        "retries",
        "bad",
        "MB",
        "fetched",
        "rounds",
        "gossip",
        "height",
        "bootstrap s",
        "crashed",
    ):
        table.add_column(column, justify="left" if column == "role" else "right")
    for node in report.nodes:
        table.add_row(
            str(node.index),
            node.role,
            f"{node.joined_at:.2f}",
            str(node.requests),
            str(node.retries),
            _bad(node),
            f"{node.bytes_received / 1e6:.2f}",
            str(node.blocks_fetched),
            str(node.rounds),
            str(node.gossip_accepted),
            str(node.height),
            _seconds(node.bootstrap_seconds),
            _fate(node),
        )
    console.print(table)
    _print_proposers(report, console)
    _print_slots(report, console)
    summary = Table(title="network totals", title_justify="left")
    summary.add_column("figure")
    summary.add_column("value", justify="right")
    for name, value in totals.items():
        summary.add_row(name, f"{value:.3f}" if isinstance(value, float) else str(value))
    summary.add_row("setup wall s (measured)", f"{report.setup_wall_seconds:.2f}")
    summary.add_row("run wall s (measured)", f"{report.run_wall_seconds:.2f}")
    console.print(summary)
    from vmstack.sim.network.consensus import print_consensus_summary

    print_consensus_summary(report, console)
    if report.gossip is not None:
        _print_gossip(report.gossip, console)


def _print_gossip(gossip: dict[str, object], console: Console) -> None:
    """The transaction gossip figures of a run with a transaction rate."""
    table = Table(title="transaction gossip (simulated)", title_justify="left")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for name, value in gossip.items():
        if isinstance(value, dict):
            for part, figure in value.items():
                table.add_row(f"{name} {part}", _figure(figure))
        else:
            table.add_row(name, _figure(value))
    console.print(table)


def _figure(value: object) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


#: Proposers listed one by one (by weight, heaviest first); the rest share a row.
PROPOSER_ROWS = 16
#: Missed slots listed one by one (the first ones); the rest are counted.
MISSED_ROWS = 10


def _print_proposers(report: NetworkReport, console: Console) -> None:
    """Blocks built per node against its stake share: ``expected`` is the blocks built
    times the share, what a node would build if every slot's proposer built."""
    built = sum(node.blocks_built for node in report.nodes)
    table = Table(
        title=f"proposers (simulated; {built} blocks built in the windows)", title_justify="left"
    )
    for column in ("node", "weight", "stake %", "built", "built %", "expected", "slots missed"):
        table.add_column(column, justify="right")
    ranked = sorted(report.nodes, key=lambda node: (-node.weight, node.index))
    shown, rest = ranked[:PROPOSER_ROWS], ranked[PROPOSER_ROWS:]

    def row(name: str, nodes: list[NodeResult]) -> None:
        share = sum(node.stake_share for node in nodes)
        count = sum(node.blocks_built for node in nodes)
        table.add_row(
            name,
            f"{sum(node.weight for node in nodes):,}",
            f"{100 * share:.1f}",
            str(count),
            f"{100 * count / built:.1f}" if built else "-",
            f"{built * share:.1f}",
            str(sum(node.slots_missed for node in nodes)),
        )

    for node in shown:
        row(str(node.index), [node])
    if rest:
        row(f"{len(rest)} others", rest)
    console.print(table)


def _print_slots(report: NetworkReport, console: Console) -> None:
    """How many blocks were built in each slot of their parent (a histogram; ``from s``
    is when the slot's proposer builds, in seconds after the parent), then the missed
    slots by reason and the first of them."""
    slots = report.slots
    most = max(slots.built_in_slot.values(), default=0)
    histogram = Table(title="slot delays (simulated)", title_justify="left")
    for column in ("slot", "from s", "blocks", ""):
        histogram.add_column(column, justify="left" if not column else "right")
    interval = report.config.block_interval
    for slot, count in sorted(slots.built_in_slot.items()):
        bar = "█" * max(1, round(40 * count / most))
        histogram.add_row(str(slot), f"{max(interval, WINDOW_DURATION * slot):g}", str(count), bar)
    console.print(histogram)
    reasons = ", ".join(
        f"{sum(1 for m in slots.missed if m.reason == reason)} {reason}"
        for reason in MISSED_REASONS
    )
    console.print(f"missed slots: {len(slots.missed)} ({reasons})", markup=False)
    for missed in slots.missed[:MISSED_ROWS]:
        console.print(
            f"  height {missed.height}, slot {missed.slot}, at {missed.at:.2f} s: "
            f"node {missed.node} {missed.reason}",
            markup=False,
        )
    if len(slots.missed) > MISSED_ROWS:
        console.print(
            f"  ... and {len(slots.missed) - MISSED_ROWS} more (in the JSON)", markup=False
        )


def write_network_json(report: NetworkReport, path: Path) -> None:
    """Every figure, with the engine, seed and configuration, as JSON."""
    path.write_text(json.dumps(report.as_dict(), indent=2, sort_keys=True) + "\n")


def write_network_plot(report: NetworkReport, path: Path) -> None:
    """A PNG (needs matplotlib) of two panels: every node's height over simulated time
    (crashed nodes dashed, ending where they crashed) under the network's tip, thick; and
    each node's share of the blocks built against its share of the stake."""
    try:
        import matplotlib
    except ImportError as error:
        raise RuntimeError("--plot needs matplotlib: pip install 'vmstack[plot]'") from error
    matplotlib.use("Agg")
    from matplotlib import pyplot

    config = report.config
    end = float(report.totals.get("simulated_seconds") or 0.0)
    figure, (heights, shares) = pyplot.subplots(
        1, 2, figsize=(13, 5), gridspec_kw={"width_ratios": [3, 2]}
    )
    few = len(report.nodes) <= 16
    for node in report.nodes:
        if not node.heights:
            continue
        times = [point[0] for point in node.heights]
        values = [point[1] for point in node.heights]
        last = node.crashed_at if node.crashed_at is not None else end
        times.append(max(last, times[-1]))
        values.append(values[-1])
        label = f"node {node.index} ({node.role}" + (", crashed)" if node.crashed else ")")
        heights.step(
            times,
            values,
            where="post",
            linestyle="--" if node.crashed else "-",
            linewidth=1.0,
            alpha=0.8 if few else 0.35,
            label=label if few else None,
        )
    if report.slots.tip:
        times = [point[0] for point in report.slots.tip] + [end]
        values = [point[1] for point in report.slots.tip]
        values.append(values[-1])
        heights.step(
            times,
            values,
            where="post",
            color="black",
            linewidth=4,
            alpha=0.3,
            zorder=1,
            label="network tip",
        )
    missed_at = [missed.at for missed in report.slots.missed]
    if missed_at:
        tip_at = dict(report.slots.tip)
        below = [max((h for t, h in tip_at.items() if t <= at), default=0) for at in missed_at]
        heights.scatter(missed_at, below, marker="x", color="red", zorder=5, label="missed slot")
    heights.set_xlabel("simulated time (s)")
    heights.set_ylabel("height (last accepted block)")
    heights.set_title(
        f"{config.nodes} nodes, stake {config.stake}: height over time "
        f"(seed {config.seed}, engine {report.engine['name']})"
    )
    heights.grid(alpha=0.3)
    heights.legend(fontsize="small")
    built = sum(node.blocks_built for node in report.nodes)
    stake = [100 * node.stake_share for node in report.nodes]
    won = [100 * node.blocks_built / built if built else 0.0 for node in report.nodes]
    shares.scatter(
        stake, won, color=["grey" if node.crashed else "tab:blue" for node in report.nodes]
    )
    top = max(stake + won + [1.0]) * 1.05
    shares.plot([0, top], [0, top], color="black", linewidth=0.8, label="built = stake")
    shares.set_xlim(0, top)
    shares.set_ylim(0, top)
    shares.set_xlabel("share of the stake (%)")
    shares.set_ylabel(f"share of the {built} blocks built (%)")
    shares.set_title("blocks built against stake (crashed nodes grey)")
    shares.grid(alpha=0.3)
    shares.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    pyplot.close(figure)
    if report.consensus.get("engine") == "snowman":
        from vmstack.sim.network.consensus import finality_plot_path, write_finality_plot

        write_finality_plot(report, finality_plot_path(path))
