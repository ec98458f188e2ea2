"""``vmstack simulate --nodes N [--engine local|ray]``: a network run from the command line.

The network run's flags are in :mod:`vmstack.cli.simulate`, with the other runs'; the
``--consensus`` flag's choices and default are the network run's own
(:func:`consensus_choices`)."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from rich.console import Console

from vmstack.cli.common import progress_bars

if TYPE_CHECKING:
    from vmstack.sim.costs import CostModel
    from vmstack.sim.network.run import NetworkRun

__all__ = [
    "PROGRESS_INTERVAL",
    "consensus_choices",
    "simulate_network_from_args",
]

#: Seconds between two updates of the progress bar.
PROGRESS_INTERVAL = 0.5


def consensus_choices() -> tuple[tuple[str, ...], str]:
    """``--consensus``'s choices and its default: the network run's engines and the one it
    runs when none is named."""
    from vmstack.sim.network.consensus import DEFAULT_CONSENSUS
    from vmstack.sim.network.records import CONSENSUS_ENGINES

    return tuple(CONSENSUS_ENGINES), DEFAULT_CONSENSUS


def simulate_network_from_args(
    args: argparse.Namespace, console: Console, *, costs: CostModel | None
) -> int:
    """Run the network the parsed ``simulate`` options describe, print it, and write the
    JSON and plot asked for. ``costs`` is the model read from ``--costs`` (the reference
    one when ``None``, unless ``--calibrate`` measures this machine). Bad options raise
    ``ValueError`` before any work is done (the flags of another run argparse refuses)."""
    from vmstack.sim.costs import REFERENCE_COSTS
    from vmstack.sim.network.consensus import consensus_options
    from vmstack.sim.network.engines import make_engine
    from vmstack.sim.network.records import NetworkSimulationConfig
    from vmstack.sim.network.report import (
        print_network_report,
        write_network_json,
        write_network_plot,
    )
    from vmstack.sim.network.run import simulate_network
    from vmstack.sim.report import show_and_write

    config = NetworkSimulationConfig(
        nodes=args.nodes,
        builders=args.builders,
        blocks=args.blocks,
        txs_per_block=args.txs_per_block,
        live_blocks=args.live_blocks,
        seed=args.seed,
        stake=args.stake,
        node_store=args.node_store,
        **consensus_options(args),
        tx_rate=args.tx_rate or 0.0,
    )
    engine = make_engine(args.engine, address=args.ray_address, workers=args.workers)
    model = costs or REFERENCE_COSTS
    if args.calibrate:
        from vmstack.sim.run import SimulationConfig, calibrate

        with console.status("measuring this machine's call costs"):
            model = calibrate(
                SimulationConfig(
                    blocks=args.blocks, txs_per_block=args.txs_per_block, seed=args.seed
                )
            )
    with progress_bars(console) as progress:
        caught_up = progress.add_task("nodes caught up", total=config.nodes)

        shown = [0.0]

        def observe(run: NetworkRun) -> None:
            # Counted a few times a second, not after every batch: a count is a pass over
            # every node, and a large network runs many batches.
            if time.monotonic() - shown[0] >= PROGRESS_INTERVAL:
                shown[0] = time.monotonic()
                progress.update(caught_up, completed=len(run.serving))

        report = simulate_network(config, engine, costs=model, observe=observe)
        progress.update(
            caught_up,
            completed=config.nodes
            - int(report.totals["crashed"] or 0)
            - int(report.totals["stalled"] or 0),
        )
    show_and_write(
        report,
        console,
        show=print_network_report,
        json_path=args.json,
        write_json=write_network_json,
        plot_path=args.plot,
        write_plot=write_network_plot,
    )
    return 0
