"""How a simulation reads: a terminal table, a JSON file, and a plot."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from rich.console import Console
from rich.table import Table

from vmstack.sim.run import SimulationReport

__all__ = [
    "plural",
    "print_report",
    "show_and_write",
    "transactions_per_block",
    "write_json",
    "write_plot",
]

Report = TypeVar("Report")


def show_and_write(
    report: Report,
    console: Console,
    *,
    show: Callable[[Report, Console], None],
    json_path: Path | None,
    write_json: Callable[[Report, Path], None],
    plot_path: Path | None,
    write_plot: Callable[[Report, Path], None],
) -> None:
    """What every simulate command does with its report: print it with ``show``, then write
    the JSON and the plot where asked, saying so."""
    show(report, console)
    if json_path is not None:
        write_json(report, json_path)
        console.print(f"wrote {json_path}", markup=False)
    if plot_path is not None:
        write_plot(report, plot_path)
        console.print(f"wrote {plot_path}", markup=False)


def plural(count: int, noun: str) -> str:
    """``"1 block"``, ``"2 blocks"``: a count with its noun, singular or plural."""
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {noun}s"


def transactions_per_block(asked: int, built: int | None, blocks: int) -> str:
    """The transactions a block of a chain of ``blocks`` blocks holds: ``asked`` per
    block, or, when the gas limit held fewer, the ``built`` ones on average."""
    if built is None or built == asked * blocks:
        return plural(asked, "tx")
    return (
        f"{built / blocks:,.0f} txs on average ({asked:,} asked for; a block holds "
        "what its gas limit pays for)"
    )


def print_report(report: SimulationReport, console: Console) -> None:
    """The closing tables: one row per mode, then the per-layer figures."""
    config = report.config
    chain = (
        "reused from the data directory"
        if report.chain_reused
        else (f"built in {report.build_wall_seconds:.1f} s")
    )
    per_block = transactions_per_block(config.txs_per_block, report.transactions, config.blocks)
    if report.source is not None:
        console.print(
            f"chain: {plural(config.blocks, 'block')}, "
            f"{plural(report.transactions or 0, 'transaction')} ({report.source}), "
            f"seed {config.seed}, {plural(config.peers, 'peer')}; costs: "
            f"{report.costs.source}",
            markup=False,
        )
    else:
        console.print(
            f"chain: {plural(config.blocks, 'block')} x {per_block}, "
            f"seed {config.seed}, {plural(config.peers, 'peer')}, {chain}; costs: "
            f"{report.costs.source}",
            markup=False,
        )
    table = Table(
        title="bootstrap (sim s, blocks/s: simulated; wall s, serve s: measured)",
        title_justify="left",
    )
    for column in (
        "mode",
        "blocks",
        "requests",
        "retries",
        "MB",
        "sim s",
        "blocks/s",
        "wall s",
        "serve s",
    ):
        table.add_column(column, justify="right")
    for mode, result in report.results.items():
        table.add_row(
            mode,
            str(result.blocks),
            str(result.requests),
            str(result.retries),
            f"{result.bytes_received / 1e6:.2f}",
            f"{result.total_seconds:.2f}",
            f"{result.blocks_per_second:,.0f}",
            f"{result.wall_seconds:.2f}",
            f"{result.serving_wall_seconds:.3f}",
        )
    console.print(table)
    for mode, result in report.results.items():
        if result.peers_dropped:
            dropped = ", ".join(str(peer) for peer in result.peers_dropped)
            console.print(
                f"{mode}: dropped {plural(len(result.peers_dropped), 'peer')} "
                f"({dropped}) whose VM became unavailable; the others served "
                "the rest"
            )
    speedup = report.speedup()
    if speedup is not None:
        console.print(f"batched bootstrap is {speedup:.1f}x faster than serial (simulated time)")
    layers = Table(
        title="per layer (serving peers, from the Prometheus registries)", title_justify="left"
    )
    layers.add_column("mode")
    layers.add_column("layer.method")
    layers.add_column("calls", justify="right")
    layers.add_column("seconds", justify="right")
    for mode, figures in report.layers.items():
        for name, entry in figures.items():
            layers.add_row(mode, name, f"{entry['calls']:.0f}", f"{entry['seconds']:.4f}")
    console.print(layers)
    if report.round_trips:
        _print_round_trips(report, console)


def _print_round_trips(report: SimulationReport, console: Console) -> None:
    """What crossing the process boundary cost: calls and wall time per side and method."""
    table = Table(title="process boundary (gRPC round trips, measured)", title_justify="left")
    for column, justify in (
        ("mode", "left"),
        ("side", "left"),
        ("method", "left"),
        ("calls", "right"),
        ("seconds", "right"),
        ("µs per call", "right"),
    ):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for mode, sides in report.round_trips.items():
        for side, methods in sides.items():
            for method, entry in methods.items():
                calls, seconds = entry["calls"], entry["seconds"]
                table.add_row(
                    mode,
                    side,
                    method,
                    f"{calls:.0f}",
                    f"{seconds:.3f}",
                    f"{seconds / calls * 1e6:,.0f}" if calls else "",
                )
    console.print(table)


def write_json(report: SimulationReport, path: Path) -> None:
    """Every figure, with the seed and configuration, as JSON."""
    path.write_text(json.dumps(report.as_dict(), indent=2, sort_keys=True) + "\n")


def _fetched_at(timeline: tuple[tuple[float, int], ...], at: float) -> int:
    """Blocks fetched by simulated time ``at``, read off a bootstrap's timeline."""
    fetched = 0
    for time_point, count in timeline:
        if time_point > at:
            break
        fetched = count
    return fetched


def write_plot(report: SimulationReport, path: Path) -> None:
    """Blocks fetched over simulated time, one line per mode, with the verify-and-accept
    phase shaded and each retry marked; the format follows the suffix (needs matplotlib)."""
    try:
        import matplotlib
    except ImportError as error:
        raise RuntimeError("--plot needs matplotlib: pip install 'vmstack[plot]'") from error
    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(9, 5))
    for mode, result in report.results.items():
        times = [point[0] for point in result.timeline]
        counts = [point[1] for point in result.timeline]
        (line,) = axes.step(
            times,
            counts,
            where="post",
            label=f"{mode}: {result.total_seconds:.1f} s, {plural(result.requests, 'request')}",
        )
        color = line.get_color()
        # After the last block arrives the node verifies and accepts everything.
        axes.axvspan(
            result.fetch_seconds,
            result.total_seconds,
            color=color,
            alpha=0.12,
            label=f"{mode}: verify + accept",
        )
        if result.retries_at:
            retry_times = [at for at, _ in result.retries_at]
            reasons = {reason for _, reason in result.retries_at}
            why = "a timeout" if reasons == {"timeout"} else "a timeout, an empty or a bad answer"
            axes.plot(
                retry_times,
                [_fetched_at(result.timeline, at) for at in retry_times],
                "x",
                color=color,
                markersize=7,
                label=f"{mode}: retries ({why}, then the next peer)",
            )
    if any(result.retries_at for result in report.results.values()):
        axes.text(
            0.99,
            0.02,
            "flat stretches before an x: waiting for a request to time out",
            transform=axes.transAxes,
            ha="right",
            va="bottom",
            fontsize=8,
            alpha=0.7,
        )
    axes.set_xlabel("simulated time (s)")
    axes.set_ylabel("blocks fetched")
    axes.set_title(
        f"Bootstrapping {report.config.blocks} blocks from "
        f"{report.config.peers} peers (seed {report.config.seed})"
    )
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8, loc="upper left")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    pyplot.close(figure)
