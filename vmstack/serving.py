"""The stacks vmstack serves across the process boundary: ``vmstack serve`` and
``vmstack plugin`` (also the ``vmstack-plugin`` executable).

This module builds the stack a process serves from the options it is given (command-line
options for ``vmstack serve``, a node's ``Initialize`` for the plugin) and hands it to the
process boundary (:mod:`vmstack.wrappers.rpc`), which serves a ready VM and never builds
one: the layer order (:mod:`vmstack.stack`) sits above every layer, the boundary included
(ARCHITECTURE.md, section 1).
"""

from __future__ import annotations

import contextlib
import gc
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from vmstack.interfaces import ChainVM
    from vmstack.store import KeyValueStore
    from vmstack.wrappers.rpc import vm_pb2

__all__ = [
    "build_from_initialize",
    "build_served_stack",
    "plugin_main",
    "run_plugin",
    "serve",
]


def build_served_stack(
    store: KeyValueStore, stack_options: Mapping[str, Any], **objects: Any
) -> ChainVM:
    """The stack a process serves over ``store``: ``build_stack(store, **stack_options,
    **objects)``, the C-chain part alone (``served_part``) unless the options give a
    ``fork_time``. ``stack_options`` are those read from a command line or a node's
    ``config_bytes``; ``objects`` those that cannot cross (a clock, a genesis)."""
    from vmstack.stack import build_stack

    return build_stack(
        store, served_part="fork_time" not in stack_options, **stack_options, **objects
    )


def serve(
    data_dir: Path,
    *,
    address: str | None = None,
    sim_clock: float | None = None,
    readonly: bool = False,
    stack_options: Mapping[str, Any],
    out: IO[str] = sys.stdout,
    stop_on_stdin_close: bool = True,
    token_file: Path | None = None,
) -> int:
    """What ``vmstack serve`` does: build ``build_stack(store, **stack_options)`` over the
    LMDB store in ``data_dir`` (created if need be; with ``readonly``, an existing one for
    reading only), on a :class:`~vmstack.clock.SimClock` starting at ``sim_clock`` when
    given, and serve it until stopped with
    :func:`~vmstack.wrappers.rpc.process.serve_vm` (which says what stops it and what the
    handshake line is). Closes the stack (:func:`~vmstack.closing.close_stack`: a parse
    pool's workers stop), the store and the era1 archive of a ``history`` option once
    serving ends; returns 0. The process serves and does nothing else, so once the stack
    is built every object made so far is frozen out of garbage collection (``gc.freeze``):
    a full collection while serving costs what serving keeps alive, not the whole process.
    """
    from prometheus_client import CollectorRegistry

    from vmstack.clock import SimClock
    from vmstack.closing import close_stack
    from vmstack.stack import wrap_layers
    from vmstack.store import LMDBStore
    from vmstack.wrappers.rpc.process import serve_vm

    clock = None if sim_clock is None else SimClock(sim_clock)
    registry = CollectorRegistry()
    with contextlib.ExitStack() as closing:
        archive = stack_options.get("history")
        if archive is not None:
            closing.callback(archive.close)
        store = closing.enter_context(LMDBStore(data_dir, readonly=readonly))
        vm = build_served_stack(store, stack_options, clock=clock)
        closing.callback(close_stack, vm)  # a parse pool's workers stop with the server
        vm = wrap_layers(vm, name="served", registry=registry)
        # A process that only serves: what start-up made (modules, the stack and its
        # caches) leaves the garbage collector's passes, which then follow only what
        # serving makes (the blocks handed out among them) instead of every object anew.
        gc.freeze()
        serve_vm(
            vm,
            source=str(data_dir),
            address=address,
            clock=clock,
            registry=registry,
            out=out,
            stop_on_stdin_close=stop_on_stdin_close,
            token_file=token_file,
        )
    return 0


def _config(data: bytes) -> dict[str, Any]:
    """The stack options of ``config_bytes`` (:func:`vmstack.options.options_from_json`)."""
    from vmstack.options import options_from_json

    if not data.strip():
        return {}
    try:
        config = json.loads(data)
    except ValueError as error:
        raise ValueError(f"config_bytes is not JSON: {error}") from None
    return options_from_json(config, source="config_bytes")


def build_from_initialize(
    request: vm_pb2.InitializeRequest, closing: list[Any]
) -> tuple[ChainVM, CollectorRegistry]:
    """The stack a node's ``Initialize`` asks for: over the LMDB store in the folder
    ``vmstack`` of ``chain_data_dir`` (created if absent), from the geth-style genesis JSON
    in ``genesis_bytes`` (empty: the default genesis) with the stack options of the JSON
    object in ``config_bytes`` (each key an option's JSON key in
    :data:`vmstack.options.STACK_OPTIONS`, ``"history"`` the directory of era1 files;
    empty: none). The store (and an archive opened) is appended to ``closing``, for the
    plugin to close after ``Shutdown``; a request that cannot be
    followed (a genesis balance beyond uint256 or nonce beyond 2^64 - 1 among them) is
    ``ValueError`` saying why, and leaves the store closed."""
    from prometheus_client import CollectorRegistry

    from vmstack.cchain.genesis import Genesis
    from vmstack.stack import wrap_layers
    from vmstack.store import LMDBStore

    if not request.chain_data_dir:
        raise ValueError("Initialize: chain_data_dir names the folder of the VM's store")
    config = _config(request.config_bytes)
    archive = config.get("history")
    try:
        genesis = Genesis.from_json(request.genesis_bytes) if request.genesis_bytes else None
        directory = Path(request.chain_data_dir) / "vmstack"
        directory.mkdir(parents=True, exist_ok=True)
        store = LMDBStore(directory)
    except BaseException:
        if archive is not None:
            archive.close()
        raise
    try:
        registry = CollectorRegistry()
        vm = build_served_stack(store, config, genesis=genesis)
        served = wrap_layers(vm, name="served", registry=registry)
    except BaseException:
        # A refused Initialize leaves nothing open: the store's writer lock goes with it,
        # so the node's corrected retry opens the same store.
        store.close()
        if archive is not None:
            archive.close()
        raise
    closing.append(store)
    if archive is not None:
        closing.append(archive)
    return served, registry


def run_plugin(environ: Mapping[str, str] | None = None, err: IO[str] = sys.stderr) -> int:
    """What ``vmstack plugin`` does: :func:`vmstack.wrappers.rpc.plugin.run` with the stack
    a node's ``Initialize`` asks for (:func:`build_from_initialize`); its exit status."""
    from vmstack.wrappers.rpc.plugin import run

    return run(build_from_initialize, environ, err)


def plugin_main(argv: Sequence[str] | None = None) -> int:
    """The ``vmstack-plugin`` executable: takes no arguments."""
    from vmstack.wrappers.rpc.plugin import ENGINE_ADDRESS_VARIABLE

    arguments = sys.argv[1:] if argv is None else list(argv)
    if arguments:
        print(
            "vmstack plugin takes no arguments; a node starts it with "
            f"{ENGINE_ADDRESS_VARIABLE} set",
            file=sys.stderr,
        )
        return 2
    return run_plugin()


if __name__ == "__main__":
    sys.exit(plugin_main())
