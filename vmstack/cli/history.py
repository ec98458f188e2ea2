"""``vmstack history``: era1 history archives (verify, import, export)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from vmstack.cli.common import damage_named, non_negative_int, positive_int, progress_bars

if TYPE_CHECKING:
    from vmstack.store.history import EraArchive

__all__ = ["add_history_parser", "run_history"]


def add_history_parser(commands: Any) -> None:
    """Add ``history`` and its commands to ``commands`` (the top parser's subparsers)."""
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
    from vmstack.cchain.era1.state_roots import recompute_state_roots

    text = args.genesis.read_bytes()
    with progress_bars(console) as progress:
        task = progress.add_task("recomputing state roots", total=len(archive))
        return recompute_state_roots(archive, text, on_block=lambda number: progress.advance(task))


def run_history(args: argparse.Namespace, console: Console) -> int:
    """Run the ``history`` command asked for."""
    from vmstack.cchain.era1 import verify_archive
    from vmstack.store.history import EraArchive

    if args.history_command in ("verify", "import"):
        _check_state_arguments(args)
    if args.history_command == "import":
        return _history_import(args, console)
    if args.history_command == "export":
        return _history_export(args, console)
    with EraArchive(args.directory, sparse=args.sparse) as archive:
        with progress_bars(console) as progress:
            task = progress.add_task(
                f"verifying {len(archive.files)} era1 files", total=len(archive)
            )
            size = verify_archive(archive, on_block=lambda number: progress.advance(task))
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
    from vmstack.cchain.era1 import NETWORK_CHAIN_IDS, import_history
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
        with LMDBStore(args.data_dir) as store, progress_bars(console) as progress:
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
    from vmstack.cchain.era1 import export_history
    from vmstack.store import LMDBStore
    from vmstack.store.configuration import stored_configuration
    from vmstack.store.history import EraArchive

    if not args.data_dir.is_dir():
        raise ValueError(f"--data-dir {args.data_dir} is not a directory")
    args.out.mkdir(parents=True, exist_ok=True)
    with (
        damage_named(args.data_dir),
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
        with progress_bars(console) as progress:
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
