"""``vmstack plugin``: the VM as an avalanchego plugin, started by a node. Its stack
options come from the node's ``config_bytes`` (:mod:`vmstack.serving`), not from flags."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

__all__ = ["add_plugin_parser", "run_plugin_command"]


def add_plugin_parser(commands: Any) -> None:
    """Add ``plugin`` to ``commands`` (the top parser's subparsers)."""
    commands.add_parser(
        "plugin",
        help="the VM as an avalanchego plugin (started by a node)",
        description="Serve the C-chain VM as an avalanchego plugin: needs "
        "AVALANCHE_VM_RUNTIME_ENGINE_ADDR (the node's runtime service), "
        "announces RPC chain VM protocol 45 and its address there, serves "
        "vm.VM on 127.0.0.1 and exits after Shutdown. A node's config_bytes (a JSON "
        "object) sets the stack's options by the JSON keys of vmstack.options.",
    )


def run_plugin_command(args: argparse.Namespace, console: Console) -> int:
    """Serve as a plugin until the node shuts it down (:func:`vmstack.serving.run_plugin`)."""
    from vmstack.serving import run_plugin

    return run_plugin()
