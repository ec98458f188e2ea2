"""The ``vmstack`` command line: one module per command.

``vmstack simulate`` (:mod:`vmstack.cli.simulate`, its network run in
:mod:`vmstack.cli.network`), ``vmstack serve`` (:mod:`vmstack.cli.serve`), ``vmstack
plugin`` (:mod:`vmstack.cli.plugin`), ``vmstack history`` (:mod:`vmstack.cli.history`) and
``vmstack bench`` (:mod:`vmstack.cli.bench`); what they share is in
:mod:`vmstack.cli.common`. :func:`main` runs one.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence
from types import FrameType
from typing import NoReturn

from rich.console import Console

from vmstack.cli.bench import add_bench_parser, run_bench
from vmstack.cli.history import add_history_parser, run_history
from vmstack.cli.plugin import add_plugin_parser, run_plugin_command
from vmstack.cli.serve import add_serve_parser, run_serve
from vmstack.cli.simulate import PEERS_PROGRESS_FROM, add_simulate_parser, run_simulate
from vmstack.errors import VMStackError

__all__ = [
    "INTERRUPTED_STATUS",
    "PEERS_PROGRESS_FROM",
    "TERMINATED_STATUS",
    "Terminated",
    "main",
]


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
    add_simulate_parser(commands)
    add_serve_parser(commands)
    add_plugin_parser(commands)
    add_history_parser(commands)
    add_bench_parser(commands)
    return parser


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


def _run(args: argparse.Namespace, rest: list[str], console: Console) -> int:
    if args.command == "simulate":
        return run_simulate(rest, console)
    if args.command == "serve":
        return run_serve(args, console)
    if args.command == "plugin":
        return run_plugin_command(args, console)
    if args.command == "history":
        return run_history(args, console)
    return run_bench(args, console)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status: 2 for bad usage or input, 130 after
    Ctrl-C and 143 after SIGTERM (each with one line on standard error, once every
    temporary file is removed and every child process stopped)."""
    parser = _parser()
    args, rest = parser.parse_known_args(argv)
    if rest and args.command != "simulate":
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    # Tables stay readable when the output goes to a file or a pipe.
    console = Console(width=None if sys.stdout.isatty() else 140)
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        return _run(args, rest, console)
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
