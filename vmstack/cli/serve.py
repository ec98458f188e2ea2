"""``vmstack serve``: a stack served over gRPC, the plugin side of a process boundary.

The stack's flags are those of :data:`vmstack.options.STACK_OPTIONS` that cross a process
boundary, made from that record; the flags here are the serving's own.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console

from vmstack.options import add_option_flags, crossing_options

__all__ = [
    "add_serve_parser",
    "run_serve",
]


def add_serve_parser(commands: Any) -> None:
    """Add ``serve`` to ``commands`` (the top parser's subparsers)."""
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
        "--sim-clock",
        type=float,
        metavar="START",
        help="run the stack on a simulated clock starting at START that "
        "follows the time callers send",
    )
    serve.add_argument(
        "--readonly",
        action="store_true",
        help="open an existing store for reading only (beside its writer)",
    )
    serve.add_argument(
        "--no-stdin-watch", action="store_true", help="keep serving when standard input closes"
    )
    add_option_flags(serve.add_argument_group("the stack (options of build_stack)").add_argument)


def stack_options_of(args: argparse.Namespace) -> dict[str, object]:
    """The stack options the parsed ``serve`` flags give (those left out are absent)."""
    options = {option.name: getattr(args, option.name) for option in crossing_options()}
    return {name: value for name, value in options.items() if value is not None}


def run_serve(args: argparse.Namespace, console: Console) -> int:
    """Serve the stack the parsed flags describe (:func:`vmstack.serving.serve`)."""
    from vmstack.serving import serve

    options = stack_options_of(args)
    if args.data_dir.exists() and not args.data_dir.is_dir():
        history = options.get("history")
        if history is not None:
            history.close()  # type: ignore[attr-defined]
        raise ValueError(f"--data-dir {args.data_dir} is not a directory")
    return serve(
        args.data_dir,
        address=args.address,
        sim_clock=args.sim_clock,
        readonly=args.readonly,
        stack_options=options,
        stop_on_stdin_close=not args.no_stdin_watch,
        token_file=args.token_file,
    )
