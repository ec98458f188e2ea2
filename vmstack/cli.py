"""The ``vmstack`` command line: ``vmstack simulate``, ``vmstack bench`` and ``vmstack serve``."""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, NoReturn

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from vmstack.defaults import DEFAULT_CACHE_SIZE, DEFAULT_CHAIN_ID
from vmstack.errors import StoreCorrupted, VMStackError
from vmstack.sim.bounds import MAX_PEERS, MAX_PEERS_OUT_OF_PROCESS

if TYPE_CHECKING:
    from vmstack.sim.costs import CostModel
    from vmstack.store.history import EraArchive

__all__ = ["main"]


class IntegerAtLeast:
    """An argparse type: an integer of at least ``least``. ``__name__`` is what argparse
    prints for a value that is not an integer ("invalid positive integer value: 'x'")."""

    def __init__(self, least: int, name: str) -> None:
        self.least = least
        self.__name__ = name

    def __call__(self, text: str) -> int:
        value = int(text)
        if value < self.least:
            raise argparse.ArgumentTypeError(f"must be at least {self.least}, got {value}")
        return value


positive_int = IntegerAtLeast(1, "positive integer")
non_negative_int = IntegerAtLeast(0, "non-negative integer")


def non_negative_float(text: str) -> float:
    """An argparse type: a finite number of at least 0."""
    value = float(text)
    if not (value >= 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a finite number of at least 0, got {text}")
    return value


non_negative_float.__name__ = "non-negative number"


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("vmstack")
    except PackageNotFoundError:
        return "(not installed)"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vmstack",
        description="An Avalanche-style chain-VM stack with the batched protocol forwarded "
        "through every layer.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", required=True)

    simulate = commands.add_parser(
        "simulate",
        help="build a chain, then bootstrap a second node from it",
        description="Build a chain on the full stack over an embedded LMDB store, then "
        "bootstrap a second node from it through get_ancestors / "
        "batched_parse_block over a simulated network, batched and serial.",
    )
    simulate.add_argument(
        "--blocks",
        type=positive_int,
        default=600,
        metavar="N",
        help="blocks in the chain (default: %(default)s)",
    )
    simulate.add_argument(
        "--txs-per-block",
        type=non_negative_int,
        default=10,
        metavar="K",
        help="signed transactions per block (default: %(default)s)",
    )
    simulate.add_argument(
        "--peers",
        type=positive_int,
        default=3,
        metavar="P",
        help=f"peers serving the chain (default: %(default)s; at most "
        f"{MAX_PEERS}, {MAX_PEERS_OUT_OF_PROCESS} with "
        "--out-of-process)",
    )
    simulate.add_argument(
        "--seed",
        type=int,
        default=1,
        metavar="S",
        help="seed of the chain and the network (default: %(default)s)",
    )
    simulate.add_argument(
        "--data-dir",
        type=Path,
        metavar="DIR",
        help="keep the serving store here and reuse it on the next run",
    )
    simulate.add_argument(
        "--serial", action="store_true", help="run only the serial (fallback) bootstrap"
    )
    simulate.add_argument(
        "--out-of-process",
        action="store_true",
        help="run each node's C-chain VM in a process of its own behind "
        "the gRPC boundary (vmstack serve), and report the round "
        "trips",
    )
    simulate.add_argument(
        "--nodes",
        type=positive_int,
        default=2,
        metavar="N",
        help="nodes in the network (default: %(default)s, one serving "
        "chain and one bootstrapping node); more, or an explicit "
        "--engine, runs a network of nodes: builders extend the "
        "chain while the others bootstrap from random peers",
    )
    simulate.add_argument(
        "--engine",
        choices=("local", "ray"),
        help="where the network's nodes live: this process (local), or "
        "Ray actors (ray; needs vmstack[ray]) (default: local)",
    )
    simulate.add_argument(
        "--ray-address", metavar="ADDR", help="join this Ray cluster (default: start a local Ray)"
    )
    simulate.add_argument(
        "--workers",
        type=positive_int,
        metavar="W",
        help="Ray actors to spread the nodes over, in total over the "
        "cluster's hosts, which take them in turn (default: one per "
        "node)",
    )
    simulate.add_argument(
        "--node-store",
        choices=("auto", "lmdb", "memory"),
        help="where each network node keeps its chain: its own LMDB "
        "environment (a few file descriptors each), memory, or auto: "
        "LMDB while the nodes' descriptors fit in ulimit -n, else "
        "memory (default: auto)",
    )
    simulate.add_argument(
        "--builders",
        type=positive_int,
        metavar="B",
        help="network nodes that start with the chain and serve it "
        "(default: an eighth of the nodes, 2 to 4)",
    )
    simulate.add_argument(
        "--live-blocks",
        type=non_negative_int,
        default=20,
        metavar="L",
        help="blocks the network's validators build in their proposer "
        "windows and gossip during the run (default: %(default)s)",
    )
    simulate.add_argument(
        "--tx-rate",
        type=non_negative_float,
        metavar="R",
        help="a network: transactions a simulated second, across the network, submitted "
        "at random nodes while blocks are built; they travel by push and pull gossip "
        "(docs/gossip.md) and builders build from their own pool (default: none, each "
        "block takes --txs-per-block from the seed's pool)",
    )
    simulate.add_argument(
        "--stake",
        choices=("equal", "skewed"),
        help="the network's validator weights, drawn from the seed: equal, "
        "or skewed (Pareto, shape 1.16) (default: equal)",
    )
    simulate.add_argument(
        "--consensus",
        choices=("snowman", "coordinator"),
        help="what decides a network's blocks: every node's Snowman engine, or the "
        "coordinator (a block is final once built) (default: snowman)",
    )
    simulate.add_argument("--k", type=positive_int, metavar="K", help="Snowman's sample size")
    simulate.add_argument(
        "--alpha", type=positive_int, metavar="A", help="Snowman's alpha (both alphas)"
    )
    simulate.add_argument("--beta", type=positive_int, metavar="B", help="Snowman's beta")
    simulate.add_argument(
        "--partition",
        metavar="FRACTION@START-END",
        help="cut the nodes holding FRACTION of the stake off from the others between "
        "those simulated seconds (with --consensus snowman)",
    )
    simulate.add_argument("--json", type=Path, metavar="FILE", help="write every figure here")
    simulate.add_argument(
        "--plot",
        type=Path,
        metavar="FILE",
        help="write a PNG of blocks fetched over time (a network: "
        "heights over time and blocks built against stake) here",
    )
    simulate.add_argument(
        "--history",
        type=Path,
        metavar="DIR",
        help="bootstrap real history instead of a built chain: peers serve "
        "the era1 files in DIR, the node fetches up to --blocks of "
        "the archive's last contiguous run of files, from its first "
        "block (genesis, or a checkpoint)",
    )
    costs = simulate.add_mutually_exclusive_group()
    costs.add_argument(
        "--calibrate",
        action="store_true",
        help="measure this machine's call costs first and use them",
    )
    costs.add_argument(
        "--costs",
        type=Path,
        metavar="FILE",
        help="use this cost model: a JSON file, or a report written by --json",
    )

    serve = commands.add_parser(
        "serve",
        help="serve a stack over gRPC (the plugin side of a process boundary)",
        description="Open the LMDB store in DIR, build the stack the options describe and "
        "serve it over gRPC until standard input closes or SIGTERM/SIGINT "
        "arrives (then the status is 143/130). The first line of output is "
        "the handshake: 'vmstack-serve 45 ADDRESS PID' (45: the RPC chain VM protocol "
        "version served).",
    )
    serve.add_argument(
        "--data-dir",
        type=Path,
        required=True,
        metavar="DIR",
        help="the LMDB store to serve (created if absent)",
    )
    serve.add_argument(
        "--address",
        metavar="ADDR",
        help="where to listen: unix:/path or 127.0.0.1:PORT (default: a Unix "
        "socket in a private directory); a port in use is an error",
    )
    serve.add_argument(
        "--token-file",
        type=Path,
        metavar="FILE",
        help="the token every call must present (created with mode 0600 if "
        "absent); on TCP without it the server creates one in a private "
        "directory and prints where",
    )
    serve.add_argument(
        "--chain-id",
        type=positive_int,
        metavar="ID",
        help=f"the EVM chain ID (default: {DEFAULT_CHAIN_ID})",
    )
    serve.add_argument(
        "--fork-time",
        type=float,
        metavar="T",
        help="unix time of the proposer fork (default: no proposer layer)",
    )
    serve.add_argument(
        "--transition-time",
        type=float,
        metavar="T",
        help="unix time of the transition (default: no transition layer)",
    )
    serve.add_argument(
        "--settle-lag",
        type=non_negative_int,
        metavar="N",
        help="blocks an accepted block waits before it is settled (default: 0)",
    )
    serve.add_argument(
        "--cache-size",
        type=non_negative_int,
        metavar="N",
        help=f"entries of the canonical hash cache (default: {DEFAULT_CACHE_SIZE})",
    )
    serve.add_argument(
        "--flavour", choices=("avalanche", "ethereum"), help="block format (default: avalanche)"
    )
    serve.add_argument(
        "--key-prefix", metavar="HEX", help="hex prefix of every store key (default: none)"
    )
    serve.add_argument(
        "--sim-clock",
        type=float,
        metavar="START",
        help="run the stack on a simulated clock starting at START that "
        "follows the time callers send",
    )
    serve.add_argument(
        "--parse-workers",
        type=non_negative_int,
        metavar="N",
        help="worker processes that check a large batch's envelope "
        "signatures, with --fork-time (default: 0, serial)",
    )
    serve.add_argument(
        "--readonly",
        action="store_true",
        help="open an existing store for reading only (beside its writer)",
    )
    serve.add_argument(
        "--no-stdin-watch", action="store_true", help="keep serving when standard input closes"
    )
    serve.add_argument(
        "--history",
        type=Path,
        metavar="DIR",
        help="serve settled history from the era1 files in DIR beneath the store",
    )

    commands.add_parser(
        "plugin",
        help="the VM as an avalanchego plugin (started by a node)",
        description="Serve the C-chain VM as an avalanchego plugin: needs "
        "AVALANCHE_VM_RUNTIME_ENGINE_ADDR (the node's runtime service), "
        "announces RPC chain VM protocol 45 and its address there, serves "
        "vm.VM on 127.0.0.1 and exits after Shutdown.",
    )
    history = commands.add_parser("history", help="era1 history archives")
    history_commands = history.add_subparsers(dest="history_command", required=True)
    verify = history_commands.add_parser(
        "verify", help="check every file and record of a directory of era1 files"
    )
    verify.add_argument("directory", type=Path, metavar="DIR")
    verify.add_argument(
        "--sparse", action="store_true", help="accept missing epochs between the files"
    )
    _state_arguments(verify)
    importing = history_commands.add_parser(
        "import",
        help="verify an era1 archive and make a store over it",
        description="Verify every block of the era1 files in DIR (roots, parent hashes, "
        "transactions root, uncles hash, withdrawals root, receipts root, "
        "bloom), then write the last N blocks into the LMDB store in --data-dir; "
        "the rest is served from DIR (vmstack serve --history DIR).",
    )
    importing.add_argument("directory", type=Path, metavar="DIR")
    importing.add_argument(
        "--data-dir",
        type=Path,
        required=True,
        metavar="D",
        help="the LMDB store to create (empty or absent)",
    )
    importing.add_argument(
        "--recent",
        type=non_negative_int,
        default=256,
        metavar="N",
        help="blocks kept in the store (default: %(default)s)",
    )
    importing.add_argument(
        "--chain-id",
        type=positive_int,
        metavar="ID",
        help="the EVM chain ID (default: the network's, for mainnet, sepolia and holesky)",
    )
    importing.add_argument(
        "--sparse", action="store_true", help="accept missing epochs between the files"
    )
    _state_arguments(importing)
    exporting = history_commands.add_parser(
        "export",
        help="write a chain's settled blocks as era1 files",
        description="Write the settled blocks of the Ethereum-flavoured chain in the LMDB "
        "store in --data-dir as era1 files in --out (which vmstack history "
        "verify accepts).",
    )
    exporting.add_argument("--data-dir", type=Path, required=True, metavar="D")
    exporting.add_argument("--out", type=Path, required=True, metavar="DIR")
    exporting.add_argument(
        "--network",
        default="vmstack",
        metavar="NAME",
        help="the network name in the files' names (default: %(default)s)",
    )
    exporting.add_argument(
        "--history",
        type=Path,
        metavar="DIR",
        help="the era1 files beneath the store (a store made by vmstack history import)",
    )

    bench = commands.add_parser("bench", help="the benchmarks side by side, as ratios")
    bench.add_argument("--quick", action="store_true", help="fewer rounds (under 30 s)")
    bench.add_argument("--json", type=Path, metavar="FILE", help="write every row here")
    bench.add_argument(
        "--only",
        metavar="CASES",
        help="run only these case modules, comma-separated (e.g. "
        "boundary,history; default: all of them)",
    )
    return parser


#: From this many peers (and always out of process) the set-up of the peers has a bar.
PEERS_PROGRESS_FROM = 32

#: The figure formats ``--plot`` writes (matplotlib's, by file suffix).
PLOT_FORMATS = (".png", ".svg", ".pdf")


def _check_output(path: Path | None, flag: str) -> None:
    """Refuse an output path that cannot be written, before any work is done."""
    if path is None:
        return
    if path.is_dir():
        raise ValueError(f"{flag} {path} is a directory")
    folder = path.parent
    if not folder.is_dir():
        raise ValueError(f"{flag} {path}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise ValueError(f"{flag} {path} cannot be written")


def _check_plot(path: Path | None) -> None:
    """Refuse a plot that could not be drawn, before any work is done."""
    if path is None:
        return
    _check_output(path, "--plot")
    if path.suffix.lower() not in PLOT_FORMATS:
        raise ValueError(
            f"--plot {path}: the format is chosen by the suffix, one of {', '.join(PLOT_FORMATS)}"
        )
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ValueError("--plot needs matplotlib: pip install 'vmstack[plot]'") from None


def _check_data_dir(path: Path | None) -> None:
    if path is None:
        return
    if path.exists() and not path.is_dir():
        raise ValueError(f"--data-dir {path} is not a directory")
    existing = next((folder for folder in (path, *path.parents) if folder.exists()), None)
    if existing is not None and not os.access(existing, os.W_OK):
        raise ValueError(f"--data-dir {path} cannot be written")


def _read_costs(path: Path) -> CostModel:
    """The cost model in ``path`` (a model, or a report written by ``--json``), or a
    ValueError naming the file and what is wrong in it."""
    from vmstack.sim.costs import CostModel

    try:
        data = json.loads(path.read_text())
    except OSError as error:
        raise ValueError(f"--costs {path}: {error.strerror or error}") from None
    except ValueError as error:
        raise ValueError(f"--costs {path} is not JSON: {error}") from None
    # A report written by --json carries its cost model under "costs".
    if isinstance(data, dict) and "costs" in data:
        data = data["costs"]
    try:
        return CostModel.from_dict(data)
    except ValueError as error:
        raise ValueError(f"--costs {path} is not a cost model: {error}") from None


@contextmanager
def _damage_named(data_dir: Path | None) -> Iterator[None]:
    """Turn a damaged store in ``data_dir`` (``StoreCorrupted``) into one message naming
    the directory, the damage and how to rebuild."""
    try:
        yield
    except StoreCorrupted as error:
        if data_dir is None:
            raise
        raise VMStackError(
            f"--data-dir {data_dir} holds a damaged store ({error}); remove "
            f"{data_dir}, or give another --data-dir, and the next run "
            "builds the chain anew"
        ) from None


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )


def _simulate(args: argparse.Namespace, console: Console) -> int:
    from vmstack.sim.costs import REFERENCE_COSTS
    from vmstack.sim.report import plural, print_report, show_and_write, write_json, write_plot
    from vmstack.sim.run import MODES, SimulationConfig, calibrate, simulate, stored_chain

    if args.history is not None:
        return _simulate_history(args, console)
    if args.nodes != 2 or args.engine is not None:
        from vmstack.sim.network.cli import simulate_network_from_args

        _check_output(args.json, "--json")
        _check_plot(args.plot)
        return simulate_network_from_args(
            args, console, costs=None if args.costs is None else _read_costs(args.costs)
        )
    _check_output(args.json, "--json")
    _check_plot(args.plot)
    _check_data_dir(args.data_dir)
    if args.stake is not None:
        raise ValueError("--stake applies to a network (--nodes N other than 2, or --engine)")
    for flag in ("consensus", "k", "alpha", "beta", "partition"):
        if getattr(args, flag, None) is not None:
            raise ValueError(f"--{flag} applies to a network (--nodes N other than 2, or --engine)")
    if args.tx_rate is not None:
        raise ValueError("--tx-rate applies to a network (--nodes N other than 2, or --engine)")
    config = SimulationConfig(
        blocks=args.blocks,
        txs_per_block=args.txs_per_block,
        peers=args.peers,
        seed=args.seed,
        modes=("serial",) if args.serial else MODES,
        out_of_process=args.out_of_process,
    )
    costs = REFERENCE_COSTS if args.costs is None else _read_costs(args.costs)
    if args.data_dir is not None and stored_chain(config, args.data_dir):
        console.print(
            f"reusing the chain of {plural(config.blocks, 'block')} stored in "
            f"{args.data_dir} (built by an earlier run with this configuration)",
            markup=False,
        )
    with _damage_named(args.data_dir), _progress(console) as progress:
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
    from vmstack.sim.report import print_report, show_and_write, write_json, write_plot
    from vmstack.sim.run import MODES

    refused = [
        flag
        for flag, given in (
            ("--nodes", args.nodes != 2),
            ("--engine", args.engine is not None),
            ("--out-of-process", args.out_of_process),
            ("--data-dir", args.data_dir is not None),
            ("--calibrate", args.calibrate),
        )
        if given
    ]
    if refused:
        raise ValueError(
            f"--history bootstraps two nodes over the archive: {', '.join(refused)} do not apply"
        )
    from vmstack.sim.history import simulate_history

    _check_output(args.json, "--json")
    _check_plot(args.plot)
    costs = REFERENCE_COSTS if args.costs is None else _read_costs(args.costs)
    modes = ("serial",) if args.serial else MODES
    with _progress(console) as progress:
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


def _bench(args: argparse.Namespace, console: Console) -> int:
    from vmstack.bench import print_comparisons, run_benchmarks, select_modules, write_json

    _check_output(args.json, "--json")
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
    return 0


def _state_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--state",
        action="store_true",
        help="also recompute every block's state root from --genesis (blocks without "
        "transactions: rewards and withdrawals) and name the first height that differs",
    )
    parser.add_argument(
        "--genesis",
        type=Path,
        metavar="FILE",
        help="the geth-style genesis JSON the state starts from (with --state)",
    )


def _check_state_arguments(args: argparse.Namespace) -> None:
    if args.genesis is not None and not args.state:
        raise ValueError("--genesis is the state's start: give it with --state")
    if args.state and args.genesis is None:
        raise ValueError("--state recomputes the state from a genesis: give --genesis FILE")


def _verify_state(args: argparse.Namespace, archive: EraArchive, console: Console) -> int | None:
    """With ``--state``, the state roots recomputed over ``archive`` (how many)."""
    _check_state_arguments(args)
    if not args.state:
        return None
    from vmstack.cchain.history_state import recompute_state_roots

    text = args.genesis.read_bytes()
    with _progress(console) as progress:
        task = progress.add_task("recomputing state roots", total=len(archive))
        return recompute_state_roots(archive, text, on_block=lambda number: progress.advance(task))


def _history(args: argparse.Namespace, console: Console) -> int:
    from vmstack.store.history import EraArchive

    if args.history_command in ("verify", "import"):
        _check_state_arguments(args)
    if args.history_command == "import":
        return _history_import(args, console)
    if args.history_command == "export":
        return _history_export(args, console)
    with EraArchive(args.directory, sparse=args.sparse) as archive:
        with _progress(console) as progress:
            task = progress.add_task(
                f"verifying {len(archive.files)} era1 files", total=len(archive)
            )
            size = archive.verify(on_block=lambda number: progress.advance(task))
        roots = _verify_state(args, archive, console)
    state = "" if roots is None else f", {roots:,} state roots recomputed from {args.genesis}"
    console.print(
        f"{args.directory}: {len(archive.files)} era1 files, blocks {archive.first}"
        f"-{archive.last} ({len(archive)} blocks, {size / 1e6:.1f} MB) verified{state}",
        markup=False,
        highlight=False,
    )
    return 0


def _history_import(args: argparse.Namespace, console: Console) -> int:
    from vmstack.cchain.history import NETWORK_CHAIN_IDS, import_history
    from vmstack.store import LMDBStore
    from vmstack.store.history import EraArchive

    if args.data_dir.exists() and not args.data_dir.is_dir():
        raise ValueError(f"--data-dir {args.data_dir} is not a directory")
    with EraArchive(args.directory, sparse=args.sparse) as archive:
        chain_id = args.chain_id or NETWORK_CHAIN_IDS.get(archive.network)
        if chain_id is None:
            raise ValueError(
                f"the network {archive.network!r} has no known chain ID: give --chain-id"
            )
        recent = min(args.recent, len(archive))
        roots = _verify_state(args, archive, console)
        with LMDBStore(args.data_dir) as store, _progress(console) as progress:
            verifying = progress.add_task(
                f"verifying {len(archive.files)} era1 files", total=len(archive)
            )
            writing = progress.add_task(f"writing the last {recent:,} blocks", total=recent)
            result = import_history(
                archive,
                store,
                recent=recent,
                chain_id=chain_id,
                on_verified=lambda number: progress.advance(verifying),
                on_written=lambda number: progress.advance(writing),
            )
        where = (
            "none" if result.written is None else f"blocks {result.written[0]}-{result.written[1]}"
        )
        console.print(
            f"{args.data_dir}: {result.verified:,} blocks verified "
            f"({result.archive_bytes / 1e6:.1f} MB), {where} in the store, the "
            f"rest served from {args.directory} (chain ID {chain_id}; serve with "
            f"--flavour ethereum --chain-id {chain_id} --history {args.directory})"
            + ("" if roots is None else f"; {roots:,} state roots recomputed from {args.genesis}"),
            markup=False,
            highlight=False,
        )
    return 0


def _history_export(args: argparse.Namespace, console: Console) -> int:
    import contextlib

    from vmstack.cchain import AVALANCHE, ETHEREUM, CChainVM, rawdb
    from vmstack.cchain.history import export_history
    from vmstack.store import LMDBStore
    from vmstack.store.configuration import stored_configuration
    from vmstack.store.history import EraArchive

    if not args.data_dir.is_dir():
        raise ValueError(f"--data-dir {args.data_dir} is not a directory")
    args.out.mkdir(parents=True, exist_ok=True)
    with (
        _damage_named(args.data_dir),
        LMDBStore(args.data_dir, readonly=True) as store,
        contextlib.ExitStack() as closing,
    ):
        config = stored_configuration(store, "chain") or {}
        flavour = {"avalanche": AVALANCHE, "ethereum": ETHEREUM}.get(
            str(config.get("flavour", "avalanche"))
        )
        if flavour is None:
            raise ValueError(f"--data-dir {args.data_dir} records an unknown flavour")
        key_prefix = bytes.fromhex(str(config.get("key_prefix") or ""))
        if rawdb.read_last_accepted_hash(store, rawdb.Schema(key_prefix)) is None:
            raise ValueError(f"--data-dir {args.data_dir} holds no chain")
        options: dict[str, object] = {"flavour": flavour, "key_prefix": key_prefix}
        if args.history is not None:
            options["history"] = closing.enter_context(EraArchive(args.history, sparse=True))
        for name in ("chain_id", "settle_lag"):
            if isinstance(config.get(name), int):
                options[name] = config[name]
        vm = CChainVM(store, **options)  # type: ignore[arg-type]
        settled = vm.get_block(vm.last_settled()).height
        with _progress(console) as progress:
            task = progress.add_task("exporting", total=settled + 1)
            paths = export_history(
                vm,
                args.out,
                network=args.network,
                on_block=lambda number: progress.update(task, completed=number + 1),
            )
    console.print(
        f"{args.out}: {len(paths)} era1 files, blocks up to {settled}: "
        + ", ".join(path.name for path in paths),
        markup=False,
        highlight=False,
    )
    return 0


def _serve(args: argparse.Namespace, console: Console) -> int:
    from vmstack.cchain import AVALANCHE, ETHEREUM
    from vmstack.serving import serve

    if args.data_dir.exists() and not args.data_dir.is_dir():
        raise ValueError(f"--data-dir {args.data_dir} is not a directory")
    options: dict[str, object] = {
        "chain_id": args.chain_id,
        "fork_time": args.fork_time,
        "transition_time": args.transition_time,
        "settle_lag": args.settle_lag,
        "cache_size": args.cache_size,
        "flavour": {"avalanche": AVALANCHE, "ethereum": ETHEREUM}.get(args.flavour or ""),
        "key_prefix": None if args.key_prefix is None else bytes.fromhex(args.key_prefix),
        "parse_workers": args.parse_workers,
        "history": None if args.history is None else _open_history(args.history),
    }
    return serve(
        args.data_dir,
        address=args.address,
        sim_clock=args.sim_clock,
        readonly=args.readonly,
        stack_options={name: value for name, value in options.items() if value is not None},
        stop_on_stdin_close=not args.no_stdin_watch,
        token_file=args.token_file,
    )


def _open_history(directory: Path) -> object:
    from vmstack.store.history import EraArchive

    return EraArchive(directory, sparse=True)


class Terminated(BaseException):
    """SIGTERM arrived. Raised in the main thread, as ``KeyboardInterrupt`` is for Ctrl-C,
    so that every ``with`` block unwinds: temporary stores are removed, served child
    processes and Ray are stopped, stores are closed."""


def _terminate(signum: int, frame: FrameType | None) -> NoReturn:
    # A second SIGTERM must not cut the clean-up the first one started.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated


#: Exit statuses of a command stopped by Ctrl-C and by SIGTERM (128 + the signal number,
#: as a shell reports a process the signal killed).
INTERRUPTED_STATUS = 128 + signal.SIGINT
TERMINATED_STATUS = 128 + signal.SIGTERM


def _say(text: str, *, style: str | None = None) -> None:
    """One line on standard error, printed as it is (no rich markup: an extra such as
    ``'vmstack[plot]'`` stays in)."""
    Console(stderr=True).print(text, style=style, markup=False, highlight=False, soft_wrap=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status: 2 for bad usage or input, 130 after
    Ctrl-C and 143 after SIGTERM (each with one line on standard error, once every
    temporary file is removed and every child process stopped)."""
    args = _parser().parse_args(argv)
    # Tables stay readable when the output goes to a file or a pipe.
    console = Console(width=None if sys.stdout.isatty() else 140)
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        if args.command == "simulate":
            return _simulate(args, console)
        if args.command == "serve":
            return _serve(args, console)
        if args.command == "plugin":
            from vmstack.serving import run_plugin

            return run_plugin()
        if args.command == "history":
            return _history(args, console)
        return _bench(args, console)
    except (VMStackError, ValueError, OSError) as error:
        _say(f"vmstack {args.command}: {error}", style="red")
        return 2
    except KeyboardInterrupt:
        _say(f"vmstack {args.command}: interrupted")
        return INTERRUPTED_STATUS
    except Terminated:
        _say(f"vmstack {args.command}: terminated")
        return TERMINATED_STATUS
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
