"""A VM in a child process: :func:`spawn` on the engine's side, :func:`serve_vm` in the child.

:func:`spawn` starts ``vmstack serve`` over the LMDB store in a data directory, reads the
child's handshake line from its standard output (``vmstack-serve 45 ADDRESS PID``, 45 the
RPC chain VM protocol version it serves), and yields a connected
:class:`~vmstack.wrappers.rpc.VMClient`. The protocol version is a setting, as for the
plugin: ``vmstack serve`` serves the one :data:`~vmstack.wrappers.rpc.plugin.
PROTOCOL_VARIABLE` names in its environment (45 when unset, or 46), and ``spawn(...,
protocol_version=46)`` sets it for its child, holds the handshake to it and gives it to
the client. The child holds the read end of a pipe on its
standard input; it stops serving and closes its store when that pipe closes, which happens
when ``spawn``'s block ends and also when the parent dies in any way (a SIGKILL included),
so no served process outlives its parent.

Stack options cross as command-line options of ``vmstack serve``: those of
:data:`vmstack.options.STACK_OPTIONS` that cross, each as its flag
(:func:`vmstack.options.option_arguments`; an era1 archive as its directory); options that
are objects (a tracer, a registry, a staking key) cannot cross and are refused
(:class:`~vmstack.errors.InvalidOption`).
A clock can: with a :class:`~vmstack.clock.SimClock`, the child runs its stack on a
simulated clock of its own and the client sends the caller's time with every request, so
both sides share one simulated time.

On a TCP address the child requires a token: :func:`spawn` makes a private directory
holding a fresh token file (mode 0600), passes it to the child with ``--token-file`` and
gives it to the client; the directory goes when the block ends.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from vmstack.clock import Clock, SimClock
from vmstack.errors import VMUnavailable
from vmstack.options import option_arguments
from vmstack.wrappers.rpc.client import VMClient
from vmstack.wrappers.rpc.local import create_token_file, make_private_dir
from vmstack.wrappers.rpc.plugin import PROTOCOL_VARIABLE
from vmstack.wrappers.rpc.protocol import PROTOCOL_VERSION, check_protocol_version

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from vmstack.interfaces import ChainVM

__all__ = ["HANDSHAKE", "serve_vm", "served_protocol_version", "spawn"]

#: The first word of the child's first line of output.
HANDSHAKE = "vmstack-serve"


def _command(
    data_dir: Path,
    address: str | None,
    clock: Clock | None,
    readonly: bool,
    stack_options: Mapping[str, object],
    token_file: Path | None = None,
) -> list[str]:
    command = [sys.executable, "-m", "vmstack", "serve", "--data-dir", str(data_dir)]
    command += option_arguments(stack_options, taker="spawn")
    if address is not None:
        command += ["--address", address]
    if token_file is not None:
        command += ["--token-file", str(token_file)]
    if readonly:
        command.append("--readonly")
    if isinstance(clock, SimClock):
        command += ["--sim-clock", repr(clock())]
    elif clock is not None:
        raise ValueError(
            "spawn's clock is a SimClock (the child follows it) or None "
            "(both sides on the wall clock)"
        )
    return command


def served_protocol_version(
    protocol_version: int | str | None = None, environ: Mapping[str, str] | None = None
) -> int:
    """The protocol version a served VM speaks: ``protocol_version`` when given, else the
    one :data:`~vmstack.wrappers.rpc.plugin.PROTOCOL_VARIABLE` names in ``environ`` (the
    process's environment by default; 45 when unset); ``ValueError`` for one this boundary
    does not speak."""
    if protocol_version is not None:
        return check_protocol_version(protocol_version)
    text = (os.environ if environ is None else environ).get(PROTOCOL_VARIABLE)
    if text is None:
        return PROTOCOL_VERSION
    try:
        return check_protocol_version(text)
    except ValueError as error:
        raise ValueError(f"{PROTOCOL_VARIABLE}: {error}") from None


def _read_handshake(process: subprocess.Popen[bytes], timeout: float, version: int) -> str:
    """The address from the child's handshake line (of protocol ``version``), or
    ``VMUnavailable``."""
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    line = b""
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not selector.select(left):
                raise VMUnavailable(f"vmstack serve gave no handshake within {timeout:g} s")
            chunk = os.read(process.stdout.fileno(), 4096)
            if not chunk:
                raise VMUnavailable("vmstack serve exited before its handshake")
            line += chunk
    words = line.decode(errors="replace").split()
    if len(words) != 4 or words[0] != HANDSHAKE or words[1] != str(version):
        raise VMUnavailable(f"vmstack serve gave a malformed handshake: {line[:200]!r}")
    return words[2]


def _stop(process: subprocess.Popen[bytes], grace: float) -> None:
    """Close the child's standard input (it stops by itself), then insist."""
    if process.stdin is not None:
        with contextlib.suppress(OSError):
            process.stdin.close()
    for stop in (None, process.terminate, process.kill):
        if stop is not None:
            with contextlib.suppress(ProcessLookupError):
                stop()
        try:
            process.wait(grace)
            return
        except subprocess.TimeoutExpired:
            continue
    process.wait()


def _stderr_tail(log: IO[bytes]) -> str:
    log.seek(0)
    text = log.read()[-2000:].decode(errors="replace").strip()
    return f": {text}" if text else ""


@contextlib.contextmanager
def spawn(
    data_dir: str | os.PathLike[str],
    *,
    timeout: float = 10.0,
    startup_timeout: float = 60.0,
    address: str | None = None,
    clock: Clock | None = None,
    readonly: bool = False,
    protocol_version: int = PROTOCOL_VERSION,
    **stack_options: Any,
) -> Iterator[VMClient]:
    """Serve the stack over the LMDB store in ``data_dir`` from a child process.

    The child runs ``vmstack serve``: it opens the store (creating it if need be; with
    ``readonly``, an existing store for reading only, beside a writer that may hold it),
    builds ``build_stack(store, **stack_options)`` and serves it at ``address`` (default: a
    Unix socket in a private directory). Yields a :class:`VMClient` of it with ``timeout`` and
    ``clock``, whose ``pid`` is the child's. On leaving the block the client closes and
    the child stops (its store closed cleanly); a child that does not start within
    ``startup_timeout`` seconds is killed and ``VMUnavailable`` raised with what it said.
    On a TCP ``address`` the child and the client share a fresh token (see the module's
    docstring). ``protocol_version`` (45 or 46) is the RPC chain VM protocol version the
    child serves and the client speaks.
    """
    version = check_protocol_version(protocol_version)
    with contextlib.ExitStack() as cleanup:
        token_file = None
        if address is not None and not address.startswith("unix:"):
            private_dir = make_private_dir()
            cleanup.callback(shutil.rmtree, private_dir, ignore_errors=True)
            token_file = private_dir / "token"
            create_token_file(token_file)
        command = _command(Path(data_dir), address, clock, readonly, stack_options, token_file)
        yield from _run_child(command, timeout, startup_timeout, clock, token_file, version)


def _run_child(
    command: list[str],
    timeout: float,
    startup_timeout: float,
    clock: Clock | None,
    token_file: Path | None,
    version: int,
) -> Iterator[VMClient]:
    with tempfile.TemporaryFile(prefix="vmstack-serve-") as log:
        process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            start_new_session=True,
            env={**os.environ, PROTOCOL_VARIABLE: str(version)},
        )
        try:
            try:
                served_at = _read_handshake(process, startup_timeout, version)
            except VMUnavailable as error:
                _stop(process, 1.0)
                raise VMUnavailable(f"{error}{_stderr_tail(log)}") from None
            client = VMClient(
                served_at,
                timeout=timeout,
                clock=clock,
                token_file=token_file,
                protocol_version=version,
            )
            client.pid = process.pid
            try:
                yield client
            finally:
                client.close()
        finally:
            _stop(process, 5.0)


def serve_vm(
    vm: ChainVM,
    *,
    source: str,
    address: str | None = None,
    clock: SimClock | None = None,
    registry: CollectorRegistry | None = None,
    out: IO[str] = sys.stdout,
    stop_on_stdin_close: bool = True,
    token_file: Path | None = None,
    protocol_version: int | None = None,
) -> None:
    """Serve the ready ``vm`` (built over ``source``, which the log line names) until
    stopped: the serving side of :func:`spawn`, which ``vmstack serve`` runs
    (:func:`vmstack.serving.serve` builds the stack and calls this).

    ``clock`` is the simulated clock the client's time moves, ``registry`` the metrics
    served beside the VM, ``token_file`` the token every call must present (see
    :class:`~vmstack.wrappers.rpc.VMServer`); on TCP without one the server makes its own
    and says where on standard error.

    ``protocol_version`` is the RPC chain VM protocol version the handshake names (by
    default :func:`served_protocol_version`'s: the environment's, else 45; ``ValueError``
    before anything is served for one this boundary does not speak).

    Prints the handshake line on ``out`` once serving, then waits: for its standard input
    to close (when ``stop_on_stdin_close``, as under :func:`spawn`), for a client's
    ``Shutdown`` (as a node ends a plugin), or for SIGTERM or SIGINT, which the command
    line (:mod:`vmstack.cli`) turns into an exception raised out of the wait. Either way it
    stops serving (the socket's folder removed) before returning or raising; closing the
    VM and its store is the caller's.
    """
    from vmstack.describe import describe_stack
    from vmstack.wrappers.rpc.server import VMServer

    version = served_protocol_version(protocol_version)
    stopped = threading.Event()
    with VMServer(
        vm, address=address, clock=clock, registry=registry, token_file=token_file
    ) as server:
        print(f"{HANDSHAKE} {version} {server.address} {os.getpid()}", file=out, flush=True)
        layers = " > ".join(layer.label for layer in describe_stack(vm))
        print(
            f"vmstack serve: serving {layers} from {source} at {server.address}; "
            "SIGTERM or Ctrl-C stops it",
            file=sys.stderr,
            flush=True,
        )
        if server.token_file is not None:
            print(
                f"vmstack serve: every call must present the token in "
                f"{server.token_file} (VMClient(address, token_file=...))",
                file=sys.stderr,
                flush=True,
            )
        if stop_on_stdin_close:
            threading.Thread(target=_wait_for_eof, args=(stopped,), daemon=True).start()
        while not (stopped.wait(0.5) or server.shut_down.is_set()):
            pass


def _wait_for_eof(stopped: threading.Event) -> None:
    with contextlib.suppress(OSError, ValueError):
        while os.read(sys.stdin.fileno(), 4096):
            pass
    stopped.set()
