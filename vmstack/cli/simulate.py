"""``vmstack simulate``: three runs, each with its own flags.

- the two-node run (the default): a chain built on the full stack, then a second node
  bootstrapped from it, batched and serial;
- a network run (``--nodes N`` other than 2, or ``--engine``): :mod:`vmstack.cli.network`;
- a history run (``--history DIR``): the bootstrap over real history from era1 files.

run_flags() says which runs take each flag. Which run a command line asks for is
read from ``--history``, ``--nodes`` and ``--engine`` alone; then that run's parser, which
holds only its flags, reads the whole line, so argparse itself refuses a flag of another
run (saying which run takes it). ``vmstack simulate --help`` lists every flag under the
runs that take it.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from rich.console import Console

from vmstack.cli.common import (
    check_data_dir,
    check_output,
    check_plot,
    damage_named,
    non_negative_float,
    non_negative_int,
    positive_int,
    progress_bars,
    read_costs,
)
from vmstack.sim.bounds import MAX_PEERS, MAX_PEERS_OUT_OF_PROCESS

__all__ = [
    "PEERS_PROGRESS_FROM",
    "RUNS",
    "RunFlag",
    "add_simulate_parser",
    "run_flags",
    "run_parser",
    "run_simulate",
    "selected_run",
]

#: From this many peers (and always out of process) the set-up of the peers has a bar.
PEERS_PROGRESS_FROM = 32

TWO_NODE = "two-node"
NETWORK = "network"
HISTORY = "history"

#: The runs of ``vmstack simulate``, each with how a message names it.
RUNS: dict[str, str] = {
    TWO_NODE: "the two-node run",
    NETWORK: "a network run (--nodes N other than 2, or --engine)",
    HISTORY: "a history run (--history DIR)",
}

DESCRIPTION = (
    "Build a chain on the full stack over an embedded LMDB store, then bootstrap a second "
    "node from it through get_ancestors / batched_parse_block over a simulated network, "
    "batched and serial (the two-node run). --nodes N other than 2, or --engine, runs a "
    "network of nodes instead; --history DIR bootstraps real history from era1 files. "
    "Each run takes only its own flags."
)


@dataclass(frozen=True)
class RunFlag:
    """One flag of ``vmstack simulate``: the runs that take it and argparse's settings
    for it (the same in every run); ``exclusive`` names a group of flags of which a run
    takes one at most."""

    flag: str
    runs: tuple[str, ...]
    settings: dict[str, Any] = field(default_factory=dict)
    exclusive: str | None = None


ALL_RUNS = (TWO_NODE, NETWORK, HISTORY)


def _consensus_flag() -> RunFlag:
    from vmstack.cli.network import consensus_choices

    choices, default = consensus_choices()
    return RunFlag(
        "--consensus",
        (NETWORK,),
        {
            "choices": choices,
            "default": default,
            "help": "what decides a network's blocks: every node's Snowman engine, or the "
            "coordinator (a block is final once built) (default: %(default)s)",
        },
    )


def _run_flags() -> tuple[RunFlag, ...]:
    return (
        RunFlag(
            "--blocks",
            ALL_RUNS,
            {
                "type": positive_int,
                "default": 600,
                "metavar": "N",
                "help": "blocks in the chain (a history run: blocks fetched from the "
                "archive) (default: %(default)s)",
            },
        ),
        RunFlag(
            "--txs-per-block",
            (TWO_NODE, NETWORK),
            {
                "type": non_negative_int,
                "default": 10,
                "metavar": "K",
                "help": "signed transactions per block (default: %(default)s)",
            },
        ),
        RunFlag(
            "--peers",
            (TWO_NODE, HISTORY),
            {
                "type": positive_int,
                "default": 3,
                "metavar": "P",
                "help": f"peers serving the chain (default: %(default)s; at most {MAX_PEERS}, "
                f"{MAX_PEERS_OUT_OF_PROCESS} with --out-of-process)",
            },
        ),
        RunFlag(
            "--seed",
            ALL_RUNS,
            {
                "type": int,
                "default": 1,
                "metavar": "S",
                "help": "seed of the chain and the network (default: %(default)s)",
            },
        ),
        RunFlag(
            "--data-dir",
            (TWO_NODE,),
            {
                "type": Path,
                "metavar": "DIR",
                "help": "keep the serving store here and reuse it on the next run",
            },
        ),
        RunFlag(
            "--serial",
            (TWO_NODE, HISTORY),
            {"action": "store_true", "help": "run only the serial (fallback) bootstrap"},
        ),
        RunFlag(
            "--out-of-process",
            (TWO_NODE,),
            {
                "action": "store_true",
                "help": "run each node's C-chain VM in a process of its own behind the gRPC "
                "boundary (vmstack serve), and report the round trips",
            },
        ),
        RunFlag(
            "--nodes",
            (TWO_NODE, NETWORK),
            {
                "type": positive_int,
                "default": 2,
                "metavar": "N",
                "help": "nodes in the network (default: %(default)s, one serving chain and one "
                "bootstrapping node); more, or an explicit --engine, runs a network of "
                "nodes: builders extend the chain while the others bootstrap from random "
                "peers",
            },
        ),
        RunFlag(
            "--engine",
            (NETWORK,),
            {
                "choices": ("local", "ray"),
                "default": "local",
                "help": "where the network's nodes live: this process (local), or Ray actors "
                "(ray; needs vmstack[ray]) (default: %(default)s)",
            },
        ),
        RunFlag(
            "--ray-address",
            (NETWORK,),
            {"metavar": "ADDR", "help": "join this Ray cluster (default: start a local Ray)"},
        ),
        RunFlag(
            "--workers",
            (NETWORK,),
            {
                "type": positive_int,
                "metavar": "W",
                "help": "Ray actors to spread the nodes over, in total over the cluster's "
                "hosts, which take them in turn (default: one per node)",
            },
        ),
        RunFlag(
            "--node-store",
            (NETWORK,),
            {
                "choices": ("auto", "lmdb", "memory"),
                "default": "auto",
                "help": "where each network node keeps its chain: its own LMDB environment (a "
                "few file descriptors each), memory, or auto: LMDB while the nodes' "
                "descriptors fit in ulimit -n, else memory (default: %(default)s)",
            },
        ),
        RunFlag(
            "--builders",
            (NETWORK,),
            {
                "type": positive_int,
                "metavar": "B",
                "help": "network nodes that start with the chain and serve it (default: an "
                "eighth of the nodes, 2 to 4)",
            },
        ),
        RunFlag(
            "--live-blocks",
            (NETWORK,),
            {
                "type": non_negative_int,
                "default": 20,
                "metavar": "L",
                "help": "blocks the network's validators build in their proposer windows and "
                "gossip during the run (default: %(default)s)",
            },
        ),
        RunFlag(
            "--tx-rate",
            (NETWORK,),
            {
                "type": non_negative_float,
                "metavar": "R",
                "help": "transactions a simulated second, across the network, submitted at "
                "random nodes while blocks are built; they travel by push and pull gossip "
                "(docs/gossip.md) and builders build from their own pool (default: none, "
                "each block takes --txs-per-block from the seed's pool)",
            },
        ),
        RunFlag(
            "--stake",
            (NETWORK,),
            {
                "choices": ("equal", "skewed"),
                "default": "equal",
                "help": "the network's validator weights, drawn from the seed: equal, or "
                "skewed (Pareto, shape 1.16) (default: %(default)s)",
            },
        ),
        _consensus_flag(),
        RunFlag(
            "--k",
            (NETWORK,),
            {"type": positive_int, "metavar": "K", "help": "Snowman's sample size"},
        ),
        RunFlag(
            "--alpha",
            (NETWORK,),
            {"type": positive_int, "metavar": "A", "help": "Snowman's alpha (both alphas)"},
        ),
        RunFlag(
            "--beta", (NETWORK,), {"type": positive_int, "metavar": "B", "help": "Snowman's beta"}
        ),
        RunFlag(
            "--partition",
            (NETWORK,),
            {
                "metavar": "FRACTION@START-END",
                "help": "cut the nodes holding FRACTION of the stake off from the others "
                "between those simulated seconds (with --consensus snowman)",
            },
        ),
        RunFlag(
            "--history",
            (HISTORY,),
            {
                "type": Path,
                "metavar": "DIR",
                "help": "bootstrap real history instead of a built chain: peers serve the era1 "
                "files in DIR, the node fetches up to --blocks of the archive's last "
                "contiguous run of files, from its first block (genesis, or a checkpoint)",
            },
        ),
        RunFlag(
            "--json", ALL_RUNS, {"type": Path, "metavar": "FILE", "help": "write every figure here"}
        ),
        RunFlag(
            "--plot",
            ALL_RUNS,
            {
                "type": Path,
                "metavar": "FILE",
                "help": "write a PNG of blocks fetched over time (a network: heights over time "
                "and blocks built against stake) here",
            },
        ),
        RunFlag(
            "--calibrate",
            (TWO_NODE, NETWORK),
            {
                "action": "store_true",
                "help": "measure this machine's call costs first and use them",
            },
            exclusive="costs",
        ),
        RunFlag(
            "--costs",
            ALL_RUNS,
            {
                "type": Path,
                "metavar": "FILE",
                "help": "use this cost model: a JSON file, or a report written by --json",
            },
            exclusive="costs",
        ),
    )


@functools.cache
def run_flags() -> tuple[RunFlag, ...]:
    """Every flag of ``vmstack simulate``, with the runs that take it. Made on first use:
    ``--consensus`` reads its choices and default from the network run."""
    return _run_flags()


def _runs_text(runs: Sequence[str]) -> str:
    names = [RUNS[run] for run in runs]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


class RunParser(argparse.ArgumentParser):
    """The parser of one run: a flag of another run is refused naming the runs that take
    it (``ValueError``, which the command line reports with status 2)."""

    def __init__(self, run: str, **settings: Any) -> None:
        super().__init__(**settings)
        self.run = run

    def error(self, message: str) -> NoReturn:
        if message.startswith("unrecognized arguments: "):
            flags = {flag.flag: flag for flag in run_flags()}
            for word in message.removeprefix("unrecognized arguments: ").split():
                other = flags.get(word.split("=", 1)[0])
                if other is not None:
                    raise ValueError(
                        f"{other.flag} applies to {_runs_text(other.runs)}, not to {RUNS[self.run]}"
                    )
        super().error(message)


def _add_flags(parser: argparse.ArgumentParser, flags: Sequence[RunFlag]) -> None:
    exclusive: dict[str, Any] = {}
    for flag in flags:
        adder: Any = parser
        if flag.exclusive is not None:
            if flag.exclusive not in exclusive:
                exclusive[flag.exclusive] = parser.add_mutually_exclusive_group()
            adder = exclusive[flag.exclusive]
        adder.add_argument(flag.flag, **flag.settings)


def run_parser(run: str) -> RunParser:
    """The parser of ``run`` (a key of :data:`RUNS`): its flags, and no other."""
    parser = RunParser(
        run, prog="vmstack simulate", description=f"{DESCRIPTION} This is {RUNS[run]}."
    )
    _add_flags(parser, [flag for flag in run_flags() if run in flag.runs])
    return parser


def help_parser() -> argparse.ArgumentParser:
    """A parser that only prints ``vmstack simulate --help``: every flag, under the runs
    that take it."""
    parser = argparse.ArgumentParser(
        prog="vmstack simulate",
        description=DESCRIPTION,
        usage="vmstack simulate [-h] [the flags of one run]",
    )
    groups: dict[tuple[str, ...], argparse._ArgumentGroup] = {}
    for flag in run_flags():
        if flag.runs not in groups:
            title = "every run" if flag.runs == ALL_RUNS else _runs_text(flag.runs)
            groups[flag.runs] = parser.add_argument_group(title)
        groups[flag.runs].add_argument(flag.flag, **flag.settings)
    return parser


def selected_run(argv: Sequence[str]) -> str:
    """The run ``argv`` (``simulate``'s arguments) asks for: a history run with
    ``--history``, a network run with ``--nodes`` other than 2 or with ``--engine``, else
    the two-node run. The run's own parser checks the values."""
    selector = argparse.ArgumentParser(add_help=False)
    for name in ("--history", "--nodes", "--engine"):
        selector.add_argument(name)
    known, _ = selector.parse_known_args(argv)
    if known.history is not None:
        return HISTORY
    if known.engine is not None:
        return NETWORK
    if known.nodes is not None:
        try:
            two = int(known.nodes) == 2
        except ValueError:
            two = False  # the network run's parser says what is wrong with it
        if not two:
            return NETWORK
    return TWO_NODE


def add_simulate_parser(commands: Any) -> None:
    """Add ``simulate`` to ``commands`` (the top parser's subparsers); its arguments are
    left to :func:`run_simulate`, which picks the run's parser."""
    commands.add_parser(
        "simulate",
        help="build a chain, then bootstrap a second node from it (or a network, or history)",
        add_help=False,
        description=DESCRIPTION,
    )


def run_simulate(arguments: Sequence[str], console: Console) -> int:
    """Run the simulation ``arguments`` (what follows ``simulate``) ask for."""
    if "-h" in arguments or "--help" in arguments:
        help_parser().print_help()
        raise SystemExit(0)
    run = selected_run(arguments)
    args = run_parser(run).parse_args(arguments)
    runner: Callable[[argparse.Namespace, Console], int] = {
        TWO_NODE: _simulate_two_nodes,
        NETWORK: _simulate_network,
        HISTORY: _simulate_history,
    }[run]
    return runner(args, console)


def _simulate_network(args: argparse.Namespace, console: Console) -> int:
    from vmstack.cli.network import simulate_network_from_args

    check_output(args.json, "--json")
    check_plot(args.plot)
    return simulate_network_from_args(
        args, console, costs=None if args.costs is None else read_costs(args.costs)
    )


def _simulate_two_nodes(args: argparse.Namespace, console: Console) -> int:
    from vmstack.sim.costs import REFERENCE_COSTS
    from vmstack.sim.report import plural, print_report, show_and_write, write_json, write_plot
    from vmstack.sim.run import MODES, SimulationConfig, calibrate, simulate, stored_chain

    check_output(args.json, "--json")
    check_plot(args.plot)
    check_data_dir(args.data_dir)
    config = SimulationConfig(
        blocks=args.blocks,
        txs_per_block=args.txs_per_block,
        peers=args.peers,
        seed=args.seed,
        modes=("serial",) if args.serial else MODES,
        out_of_process=args.out_of_process,
    )
    costs = REFERENCE_COSTS if args.costs is None else read_costs(args.costs)
    if args.data_dir is not None and stored_chain(config, args.data_dir):
        console.print(
            f"reusing the chain of {plural(config.blocks, 'block')} stored in "
            f"{args.data_dir} (built by an earlier run with this configuration)",
            markup=False,
        )
    with damage_named(args.data_dir), progress_bars(console) as progress:
        if args.calibrate:
            with console.status("measuring this machine's call costs"):
                costs = calibrate(config)
        build = progress.add_task("building chain", total=config.blocks)
        # Setting up many peers takes a while: then it has a bar of its own.
        peers = (
            progress.add_task("peers set up", total=config.peers)
            if config.peers >= PEERS_PROGRESS_FROM or config.out_of_process
            else None
        )
        fetch = {
            mode: progress.add_task(f"bootstrap ({mode})", total=config.blocks)
            for mode in config.modes
        }
        report = simulate(
            config,
            data_dir=args.data_dir,
            costs=costs,
            on_build=lambda n: progress.update(build, completed=n),
            on_fetch=lambda mode, n: progress.update(fetch[mode], completed=n),
            on_peer=None if peers is None else lambda n: progress.update(peers, completed=n),
        )
        progress.update(build, completed=config.blocks)
    show_and_write(
        report,
        console,
        show=print_report,
        json_path=args.json,
        write_json=write_json,
        plot_path=args.plot,
        write_plot=write_plot,
    )
    return 0


def _simulate_history(args: argparse.Namespace, console: Console) -> int:
    from vmstack.sim.costs import REFERENCE_COSTS
    from vmstack.sim.era1_bootstrap import simulate_history
    from vmstack.sim.report import print_report, show_and_write, write_json, write_plot
    from vmstack.sim.run import MODES

    check_output(args.json, "--json")
    check_plot(args.plot)
    costs = REFERENCE_COSTS if args.costs is None else read_costs(args.costs)
    modes = ("serial",) if args.serial else MODES
    with progress_bars(console) as progress:
        fetch = {
            mode: progress.add_task(f"bootstrap ({mode})", total=args.blocks) for mode in modes
        }
        report = simulate_history(
            args.history,
            blocks=args.blocks,
            peers=args.peers,
            seed=args.seed,
            modes=modes,
            costs=costs,
            on_fetch=lambda mode, n: progress.update(fetch[mode], completed=n),
        )
    show_and_write(
        report,
        console,
        show=print_report,
        json_path=args.json,
        write_json=write_json,
        plot_path=args.plot,
        write_plot=write_plot,
    )
    return 0
