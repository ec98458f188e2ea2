"""VMServer: serve any ``ChainVM`` (usually a whole stack) as avalanchego's ``vm.VM``.

The server is the plugin side of the boundary, answering as avalanchego's ``vm_server.go``
does: Initialize and SetState answer the last accepted block (its id, parent, height, bytes
and timestamp), GetBlock of a block it does not serve answers ``err = ERROR_NOT_FOUND`` in
band (as does GetBlockIDAtHeight), BlockVerify goes by the block's bytes, GetAncestors takes
int32 budgets and nanoseconds, and the batched protocol is ONE round trip whatever the served
VM can do: the server runs the engine helpers (:func:`vmstack.get_ancestors`,
:func:`vmstack.batched_parse_block`) against its VM, so a VM that cannot batch falls back on
the server's side of the boundary, not across it. The rest answer as a plugin without the
feature: state sync is ``ERROR_STATE_SYNC_NOT_IMPLEMENTED``, App* messages and
Connected/Disconnected are taken and dropped (unless the server is built with ``app_gossip``
and the node's Initialize names its appsender: then they carry transaction gossip,
:mod:`vmstack.wrappers.rpc.app_gossip`), CreateHandlers serves none, WaitForEvent answers
``MESSAGE_BUILD_BLOCK`` once the mempool holds a transaction (or when the call is cancelled,
nothing). ``grpc.health.v1.Health`` answers ``SERVING`` beside it, and vmstack's ``Extras``
(Describe, served metrics, SubmitTransactions) for a client that knows them.

The block calls are answered by :mod:`vmstack.wrappers.rpc.block_calls`; this module holds
the server itself: where it listens, its token, one call's dispatch and its lock, the
lifecycle calls and the extras.

A failed call is a gRPC status with the error's message (what an avalanchego client reads),
and vmstack's typed error in its trailing metadata (see :mod:`vmstack.wrappers.rpc.protocol`).

The server keeps the blocks it has handed out and not yet seen decided, under the bytes
the caller holds (a decision names them by their SHA-256 digest), so ``verify``,
``accept`` and ``reject`` reach the very block object the served VM returned for those
bytes, as they would in process, and a block with the same ID and another body (a peer's)
never takes its place. A decision that names only
an ID (avalanchego's client sends no digest) reaches the block last verified under that ID,
as ``vm_server.go``'s verified blocks do, else the latest handed out under it. What it keeps
is bounded by bytes (:data:`HANDED_OUT_BYTES`, least recently handed out first to go;
:mod:`vmstack.wrappers.rpc.handed`): a block it no longer holds is found again by parsing
its bytes (verify) or by ``get_block`` (decisions, which refuse a block whose bytes are not
the caller's).

One lock keeps the VM to one call at a time (Health and Version answer without it).
WaitForEvent calls wait on threads of their own (at most :data:`MAX_WAITERS`), never on the
workers the other calls are answered on, so Health and Shutdown are answered however many
wait; ``on_refusal`` hears of every call the server refuses. A server on TCP requires a token
(:mod:`vmstack.wrappers.rpc.local`) unless told otherwise (the plugin, which a node calls
without one, on the loopback address): every call must present it as call metadata, and one
that does not is refused (``UNAUTHENTICATED``) before its request is read. A port another
server holds is an error, never shared.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import grpc
from google.protobuf import empty_pb2
from google.protobuf.message import Message

from vmstack.clock import SimClock
from vmstack.closing import close_stack
from vmstack.describe import describe_stack
from vmstack.errors import (
    InvalidTransaction,
    VMStackError,
)
from vmstack.interfaces import ChainVM
from vmstack.submission import submit_transactions
from vmstack.wrappers.rpc import vm_pb2, vmstack_pb2
from vmstack.wrappers.rpc.app_gossip import app_handlers
from vmstack.wrappers.rpc.block_calls import BlockCalls, Call, Handler, timestamp
from vmstack.wrappers.rpc.handed import HANDED_OUT_BYTES, HandedOut
from vmstack.wrappers.rpc.local import (
    SocketPathTooLong,
    TokenCheck,
    check_socket_path,
    create_token_file,
    make_private_dir,
    read_token_file,
)
from vmstack.wrappers.rpc.protocol import (
    ERROR_METADATA_KEY,
    MAX_REQUEST_SIZE,
    MAX_RESPONSE_SIZE,
    METHODS,
    caller_time,
    decode_request,
    status_of,
    wire_error_of,
)
from vmstack.wrappers.rpc.waiting import MAX_WAITERS, Waiters

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from vmstack.wrappers.rpc.app_gossip import PluginGossip

__all__ = [
    "Initializer",
    "RefusalLog",
    "VMServer",
]

#: The calls answered without the VM's lock, whatever the VM is doing.
_UNLOCKED = frozenset({"Health", "Version"})

#: What the server is told of each call it refuses: the method and the error.
RefusalLog = Callable[[str, BaseException], None]

#: What builds the served VM from an ``InitializeRequest`` when the server starts without
#: one (the plugin): the VM and the Prometheus registry of its stack.
Initializer = Callable[[vm_pb2.InitializeRequest], "tuple[ChainVM, CollectorRegistry | None]"]


@functools.cache
def _served_version() -> str:
    """``vmstack/VERSION``, the installed package's version read once (the metadata lookup
    takes milliseconds)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        number = version("vmstack")
    except PackageNotFoundError:
        number = "unknown"
    return f"vmstack/{number}"


class VMServer:
    """Serve ``vm`` as avalanchego's ``vm.VM`` at ``address`` until :meth:`close`.

    ``address`` defaults to a Unix socket in a fresh private directory (mode 0700), so
    nothing listens on the network unless the caller asks for ``"127.0.0.1:PORT"`` (port 0
    picks a free one; :attr:`address` says which). ``clock``, when the served VM runs on a
    :class:`~vmstack.clock.SimClock`, is that clock: each call that carries its caller's time
    moves it forward to that time first, so both sides share one simulated time.
    ``registry`` is the Prometheus registry of the served stack (``Gather``, ``Describe``).

    ``vm`` may be ``None`` with an ``initializer``: the VM is then built by the first
    ``Initialize`` call (the plugin); calls before it are refused. ``on_shutdown`` runs after
    a ``Shutdown`` call has closed the stack (:attr:`shut_down` is set either way).
    ``app_gossip`` true: an ``Initialize`` that names the node's appsender (``server_addr``)
    starts the served stack's transaction gossip over it
    (:class:`~vmstack.wrappers.rpc.app_gossip.PluginGossip`, :attr:`gossip`): the App*
    messages and Connected/Disconnected reach it, and SubmitTransactions queues for push.

    ``token_file`` is the file of the token every call must present (created, mode 0600,
    if it does not exist; an existing one must be 0600). A TCP server requires one unless
    ``require_token`` is false: without ``token_file`` it creates its own in its private
    directory (:attr:`token_file` says where). ``handed_out_bytes`` bounds what the server
    keeps of the blocks it handed out.
    """

    def __init__(
        self,
        vm: ChainVM | None = None,
        *,
        address: str | None = None,
        clock: SimClock | None = None,
        registry: CollectorRegistry | None = None,
        workers: int = 4,
        token_file: str | os.PathLike[str] | None = None,
        handed_out_bytes: int = HANDED_OUT_BYTES,
        initializer: Initializer | None = None,
        on_shutdown: Callable[[], None] | None = None,
        require_token: bool = True,
        on_refusal: RefusalLog | None = None,
        app_gossip: bool = False,
    ) -> None:
        if (
            isinstance(handed_out_bytes, bool)
            or not isinstance(handed_out_bytes, int)
            or (handed_out_bytes < 0)
        ):
            raise ValueError(
                f"handed_out_bytes must be a non-negative int, got {handed_out_bytes!r}"
            )
        if vm is None and initializer is None:
            raise ValueError("VMServer serves a vm, or builds one with an initializer")
        self._vm = vm
        self._initializer = initializer
        self._on_shutdown = on_shutdown
        self._on_refusal = on_refusal
        self._app_gossip = app_gossip
        self._gossip: PluginGossip | None = None
        self._clock = clock
        self._registry = registry
        self._lock = threading.Lock()
        self._handed = HandedOut(handed_out_bytes)
        self._blocks = BlockCalls(self._served, self._handed, clock)
        self._state = vm_pb2.STATE_UNSPECIFIED
        self.shut_down = threading.Event()
        self._closed = False
        self._waiters = Waiters(
            self._lock,
            served=lambda: None if self.shut_down.is_set() else self._vm,
            stopped=lambda: self._closed or self.shut_down.is_set(),
            stop_event=self.shut_down,
            on_refusal=on_refusal,
        )
        self._private_dir: Path | None = None
        on_tcp = address is not None and not address.startswith("unix:")
        needs_token = on_tcp and require_token
        if address is None or (needs_token and token_file is None):
            self._private_dir = make_private_dir()
            if address is None:
                address = f"unix:{self._private_dir / 'sock'}"
        self._token: str | None = None
        self._token_file: Path | None = None
        try:
            if token_file is not None:
                self._token_file = Path(token_file)
                self._token = (
                    read_token_file(self._token_file)
                    if os.path.lexists(self._token_file)
                    else create_token_file(self._token_file)
                )
            elif needs_token:
                assert self._private_dir is not None
                self._token_file = self._private_dir / "token"
                self._token = create_token_file(self._token_file)
        except ValueError:
            self._remove_private_dir()
            raise
        self._handlers: dict[str, Handler] = self._handler_table()
        if self._handlers.keys() | {"WaitForEvent"} != METHODS.keys():
            raise RuntimeError("VMServer's handlers do not match the services' methods")
        interceptors: list[grpc.ServerInterceptor[Any, Any]] = (
            [] if self._token is None else [TokenCheck(self._token, self._token_file)]
        )
        self._server = grpc.server(
            # The waiters' threads come on top of the workers, so waiting calls never take
            # the threads Health, Shutdown and the rest are answered on.
            ThreadPoolExecutor(max_workers=workers + MAX_WAITERS, thread_name_prefix="vmstack-vm"),
            interceptors=interceptors,
            options=[
                ("grpc.max_receive_message_length", MAX_REQUEST_SIZE),
                ("grpc.max_send_message_length", MAX_RESPONSE_SIZE),
                # A port another server holds is an error, never shared.
                ("grpc.so_reuseport", 0),
            ],
        )
        by_service: dict[str, dict[str, grpc.RpcMethodHandler[Any, Any]]] = {}
        for name, method in METHODS.items():
            by_service.setdefault(method.service, {})[name] = grpc.unary_unary_rpc_method_handler(
                self._rpc(name)
            )
        self._server.add_generic_rpc_handlers(
            tuple(
                grpc.method_handlers_generic_handler(service, handlers)
                for service, handlers in by_service.items()
            )
        )
        self._add_health_service()
        if address.startswith("unix:"):
            try:
                check_socket_path(address.removeprefix("unix:"))
            except SocketPathTooLong:
                self._remove_private_dir()
                raise
        try:
            port = self._server.add_insecure_port(address)
        except RuntimeError:  # grpcio raises where older versions returned port 0
            port = 0
        if port == 0:
            self._remove_private_dir()
            raise ValueError(f"cannot serve at {address}: the address is in use or cannot be bound")
        if not address.startswith("unix:") and address.endswith(":0"):
            address = f"{address.rsplit(':', 1)[0]}:{port}"
        self._address = address
        self._closed = False
        self._server.start()

    def _handler_table(self) -> dict[str, Handler]:
        return {
            "Initialize": self._initialize,
            "SetState": self._set_state,
            "Shutdown": self._shutdown,
            "CreateHandlers": self._create_handlers,
            "NewHTTPHandler": lambda request, call: vm_pb2.NewHTTPHandlerResponse(),
            **app_handlers(lambda: self._gossip),
            "Health": self._health,
            "Version": self._version,
            "Gather": self._gather,
            "StateSyncEnabled": lambda request, call: vm_pb2.StateSyncEnabledResponse(),
            "GetOngoingSyncStateSummary": self._no_state_sync(
                vm_pb2.GetOngoingSyncStateSummaryResponse
            ),
            "GetLastStateSummary": self._no_state_sync(vm_pb2.GetLastStateSummaryResponse),
            "ParseStateSummary": self._no_state_sync(vm_pb2.ParseStateSummaryResponse),
            "GetStateSummary": self._no_state_sync(vm_pb2.GetStateSummaryResponse),
            "StateSummaryAccept": self._no_state_sync(vm_pb2.StateSummaryAcceptResponse),
            "SubmitTransactions": self._submit_transactions,
            "Describe": self._describe,
            **self._blocks.handlers(),
        }

    def _add_health_service(self) -> None:
        from grpc_health.v1 import health, health_pb2, health_pb2_grpc

        servicer = health.HealthServicer()
        for service in ("", "vm.VM"):
            servicer.set(service, health_pb2.HealthCheckResponse.SERVING)
        health_pb2_grpc.add_HealthServicer_to_server(servicer, self._server)

    @property
    def address(self) -> str:
        """Where the server listens: ``"unix:/path"`` or ``"host:port"``."""
        return self._address

    @property
    def token_file(self) -> Path | None:
        """The file of the token every call must present; None when calls need none."""
        return self._token_file

    @property
    def handed_out(self) -> tuple[int, int]:
        """``(blocks, bytes)`` of the handed-out blocks kept, the bytes as counted against
        ``handed_out_bytes``."""
        with self._lock:
            return self._handed.counted

    @property
    def vm(self) -> ChainVM:
        """The VM served; ``VMStackError`` before an initializer built it."""
        if self._vm is None:
            raise VMStackError("the VM is not initialized yet: call Initialize first")
        return self._vm

    def close(self, grace: float | None = 1.0) -> None:
        """Stop serving (calls in flight get ``grace`` seconds) and remove the socket's
        private directory. Closing twice is harmless."""
        if self._closed:
            return
        self._closed = True
        self._stop_gossip()
        self._server.stop(grace).wait()
        self._remove_private_dir()

    def _remove_private_dir(self) -> None:
        if self._private_dir is not None:
            shutil.rmtree(self._private_dir, ignore_errors=True)

    def __enter__(self) -> VMServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        served = "not initialized" if self._vm is None else type(self._vm).__name__
        return f"VMServer({served}, address={self._address!r})"

    # --- one call -----------------------------------------------------------------------

    def _rpc(self, name: str) -> Callable[[bytes, grpc.ServicerContext], bytes]:
        def handle(request: bytes, context: grpc.ServicerContext) -> bytes:
            metadata = dict(context.invocation_metadata())
            call = Call(metadata)
            if name == "WaitForEvent":
                return self._waiters.wait(context).SerializeToString()
            try:
                answer = self._answer(name, request, call)
            except Exception as error:
                if self._on_refusal is not None:
                    self._on_refusal(name, error)
                context.set_trailing_metadata(
                    ((ERROR_METADATA_KEY, wire_error_of(error).SerializeToString()),)
                )
                context.abort(status_of(error), str(error) or type(error).__name__)
            if call.in_band_error is not None:
                context.set_trailing_metadata(
                    ((ERROR_METADATA_KEY, wire_error_of(call.in_band_error).SerializeToString()),)
                )
            return answer

        return handle

    def answer(
        self, method: str, request: bytes, metadata: Mapping[str, str | bytes] | None = None
    ) -> bytes:
        """The serialized response to the serialized ``request`` of ``method``, with the
        call's ``metadata``: everything the server does for one call, transport aside. An
        error the served VM (or the request) gives is raised, as the call's status would
        carry it; an unknown ``method`` is ``KeyError`` (gRPC answers it as unimplemented
        before it gets here)."""
        if method == "WaitForEvent":
            raise KeyError("WaitForEvent waits on its call; it has no answer without one")
        return self._answer(method, request, Call(metadata or {}))

    def _answer(self, method: str, request: bytes, call: Call) -> bytes:
        spec = METHODS[method]
        message = decode_request(spec, request)
        now = caller_time(method, call.metadata)
        if method in _UNLOCKED:
            answer = self._handlers[method](message, call)
        else:
            with self._lock:
                if now is not None and self._clock is not None and now > self._clock():
                    self._clock.advance(now - self._clock())
                answer = self._handlers[method](message, call)
        return answer if isinstance(answer, bytes) else answer.SerializeToString()

    # --- handlers -----------------------------------------------------------------------

    def _served(self) -> ChainVM:
        if self._vm is None:
            raise VMStackError("the VM is not initialized yet: call Initialize first")
        return self._vm

    def _last_accepted_fields(self) -> dict[str, Any]:
        vm = self._served()
        block = vm.get_block(vm.last_accepted())
        return {
            "last_accepted_id": block.id,
            "last_accepted_parent_id": block.parent_id,
            "height": block.height,
            "bytes": bytes(block),
            "timestamp": timestamp(block.timestamp),
        }

    def _initialize(self, request: Message, call: Call) -> Message:
        assert isinstance(request, vm_pb2.InitializeRequest)
        if self._vm is None:
            assert self._initializer is not None
            self._vm, registry = self._initializer(request)
            if registry is not None:
                self._registry = registry
        if self._app_gossip and request.server_addr and self._gossip is None:
            from vmstack.wrappers.rpc.app_gossip import PluginGossip

            self._gossip = PluginGossip(
                self._vm, request.server_addr, lock=self._lock, on_refusal=self._on_refusal
            )
            self._gossip.start()
        return vm_pb2.InitializeResponse(**self._last_accepted_fields())

    def _set_state(self, request: Message, call: Call) -> Message:
        assert isinstance(request, vm_pb2.SetStateRequest)
        self._served()
        self._state = request.state
        return vm_pb2.SetStateResponse(**self._last_accepted_fields())

    def shutdown(self) -> None:
        """What a ``Shutdown`` call does: close the served stack (once), end the waiting
        WaitForEvent calls, set :attr:`shut_down` and run ``on_shutdown``. The server
        itself still answers until :meth:`close`."""
        with self._lock:
            self._shutdown(empty_pb2.Empty(), Call({}))

    @property
    def gossip(self) -> PluginGossip | None:
        """The served stack's transaction gossip over the node's appsender; ``None`` until
        an ``Initialize`` names it (or without ``app_gossip``)."""
        return self._gossip

    def _stop_gossip(self) -> None:
        gossip, self._gossip = self._gossip, None
        if gossip is not None:
            gossip.close()

    def _shutdown(self, request: Message, call: Call) -> Message:
        if self._gossip is not None:
            # The cycle takes the lock this call holds: it is stopped without waiting.
            self._gossip.close(timeout=0)
        if self._vm is not None and not self.shut_down.is_set():
            close_stack(self._vm)
        self.shut_down.set()
        if self._on_shutdown is not None:
            self._on_shutdown()
        return empty_pb2.Empty()

    def _create_handlers(self, request: Message, call: Call) -> Message:
        return vm_pb2.CreateHandlersResponse()

    @staticmethod
    def _no_state_sync(response: Callable[..., Message]) -> Handler:
        def answer(request: Message, call: Call) -> Message:
            return response(err=vm_pb2.ERROR_STATE_SYNC_NOT_IMPLEMENTED)

        return answer

    def _health(self, request: Message, call: Call) -> Message:
        serving = "nothing yet" if self._vm is None else type(self._vm).__name__
        details = {"serving": serving, "pid": os.getpid()}
        return vm_pb2.HealthResponse(details=json.dumps(details).encode())

    def _version(self, request: Message, call: Call) -> Message:
        return vm_pb2.VersionResponse(version=_served_version())

    def _gather(self, request: Message, call: Call) -> Message:
        from vmstack.wrappers.rpc.gather import metric_families

        families = [] if self._registry is None else metric_families(self._registry)
        return vm_pb2.GatherResponse(metric_families=families)

    def _submit_transactions(self, request: Message, call: Call) -> Message:
        from vmstack.cchain.types import decode_transaction

        assert isinstance(request, vmstack_pb2.SubmitTransactionsRequest)
        transactions = []
        for index, data in enumerate(request.transactions):
            try:
                transactions.append(decode_transaction(data))
            except ValueError as error:
                raise InvalidTransaction(f"transaction {index} does not decode: {error}") from None
        if self._gossip is not None:
            queued = self._gossip.submit(transactions)
        else:
            queued = submit_transactions(self._served(), transactions)
        return vmstack_pb2.SubmitTransactionsResponse(queued=queued)

    def _describe(self, request: Message, call: Call) -> Message:
        metrics = ""
        if self._registry is not None:
            from prometheus_client import generate_latest

            metrics = generate_latest(self._registry).decode()
        layers = [
            vmstack_pb2.LayerDescription(kind=layer.kind, name=layer.name, batching=layer.batching)
            for layer in describe_stack(self._served())
        ]
        return vmstack_pb2.DescribeResponse(layers=layers, metrics=metrics, pid=os.getpid())
