"""VMServer: serve any ``ChainVM`` (usually a whole stack) over gRPC.

The server is the plugin side of the boundary. It answers the batched protocol with ONE
round trip whatever the served VM can do: it runs the engine helpers
(:func:`vmstack.get_ancestors`, :func:`vmstack.batched_parse_block`) against its VM, so a VM
that cannot batch falls back on the server's side of the boundary, not across it.

Blocks cross as their facts (id, parent id, height, timestamp, bytes). The server keeps the
blocks it has handed out and not yet seen decided, under their ID AND the digest of the
bytes the caller holds, so ``verify``, ``accept`` and ``reject`` reach the very block object
the served VM returned for those bytes, as they would in process, and a block with the
same ID and another body (a peer's) never takes its place. What it keeps is bounded by
bytes (:data:`HANDED_OUT_BYTES`, least recently handed out first to go): a block it no
longer holds is found again by parsing its bytes (verify) or by ``get_block`` (decisions,
which refuse a block whose bytes are not the caller's).

Every request is answered, never raised out of: an error of the served VM travels in the
response's ``failure`` (see :mod:`vmstack.wrappers.rpc.protocol`), a request that cannot be
read is refused before it reaches the VM, and one lock keeps the VM to one call at a time.

A server on TCP requires a token (:mod:`vmstack.wrappers.rpc.local`): every call must
present it as call metadata, and one that does not is refused (``UNAUTHENTICATED``) before
its request is read. A port another server holds is an error, never shared.
"""

from __future__ import annotations

import hmac
import os
import shutil
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

import grpc
from google.protobuf.message import Message

from vmstack import batching
from vmstack.clock import SimClock
from vmstack.errors import InvalidBlock, InvalidTransaction
from vmstack.interfaces import Block, ChainVM
from vmstack.wrappers.rpc import vm_pb2
from vmstack.wrappers.rpc.local import (
    TOKEN_METADATA_KEY,
    create_token_file,
    make_private_dir,
    read_token_file,
)
from vmstack.wrappers.rpc.protocol import (
    MAX_REQUEST_SIZE,
    MAX_RESPONSE_SIZE,
    METHODS,
    SERVICE,
    MalformedRequest,
    block_digest,
    decode_request,
    facts_of,
    failure_of,
)

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

__all__ = ["HANDED_OUT_BYTES", "HANDED_OUT_OVERHEAD", "VMServer"]

#: The bytes of handed-out, undecided blocks the server keeps for their decisions (each
#: costs its length and :data:`HANDED_OUT_OVERHEAD`): 32 MiB, 16 messages' worth, so a
#: flood of parsed blocks that are never decided leaves no more than this behind.
HANDED_OUT_BYTES = 32 * 1024 * 1024
#: What a kept block costs beyond its bytes (the block object, its decoded header, its
#: place in the map), in the count against :data:`HANDED_OUT_BYTES`; it also bounds how
#: many small blocks are kept.
HANDED_OUT_OVERHEAD = 2048
#: The longest path a Unix socket can have (``sun_path`` holds 108 bytes with its NUL).
MAX_SOCKET_PATH = 107

_Handler = Callable[[Message], Message]


class VMServer:
    """Serve ``vm`` over gRPC at ``address`` until :meth:`close` (or the ``with`` block ends).

    ``address`` defaults to a Unix socket in a fresh private directory (mode 0700), so
    nothing listens on the network unless the caller asks for ``"127.0.0.1:PORT"`` (port 0
    picks a free one; :attr:`address` says which). ``clock``, when the served VM runs on a
    :class:`~vmstack.clock.SimClock`, is that clock: each request that carries its caller's
    time moves it forward to that time first, so both sides share one simulated time.
    ``registry`` is the Prometheus registry of the served stack, reported by ``Describe``.

    ``token_file`` is the file of the token every call must present (created, mode 0600,
    if it does not exist; an existing one must be 0600). A TCP server always requires one:
    without ``token_file`` it creates its own in its private directory
    (:attr:`token_file` says where). A Unix socket requires one only when given.
    ``handed_out_bytes`` bounds what the server keeps of the blocks it handed out.
    """

    def __init__(self, vm: ChainVM, *, address: str | None = None,
                 clock: SimClock | None = None,
                 registry: CollectorRegistry | None = None, workers: int = 4,
                 token_file: str | os.PathLike[str] | None = None,
                 handed_out_bytes: int = HANDED_OUT_BYTES) -> None:
        if isinstance(handed_out_bytes, bool) or not isinstance(handed_out_bytes, int) or (
                handed_out_bytes < 0):
            raise ValueError("handed_out_bytes must be a non-negative int, got "
                             f"{handed_out_bytes!r}")
        self._vm = vm
        self._clock = clock
        self._registry = registry
        self._lock = threading.Lock()
        self._handed: OrderedDict[tuple[bytes, bytes], tuple[Block, int]] = OrderedDict()
        self._handed_bytes = 0
        self._handed_limit = handed_out_bytes
        self._private_dir: Path | None = None
        on_tcp = address is not None and not address.startswith("unix:")
        if address is None or (on_tcp and token_file is None):
            self._private_dir = make_private_dir()
            if address is None:
                address = f"unix:{self._private_dir / 'sock'}"
        self._token: str | None = None
        self._token_file: Path | None = None
        try:
            if token_file is not None:
                self._token_file = Path(token_file)
                self._token = (read_token_file(self._token_file)
                               if os.path.lexists(self._token_file)
                               else create_token_file(self._token_file))
            elif on_tcp:
                assert self._private_dir is not None
                self._token_file = self._private_dir / "token"
                self._token = create_token_file(self._token_file)
        except ValueError:
            self._remove_private_dir()
            raise
        self._handlers: dict[str, _Handler] = {
            "GetBlock": self._get_block,
            "ParseBlock": self._parse_block,
            "BuildBlock": self._build_block,
            "SetPreference": self._set_preference,
            "LastAccepted": self._last_accepted,
            "GetBlockIDAtHeight": self._get_block_id_at_height,
            "BlockVerify": self._block_verify,
            "BlockAccept": self._block_accept,
            "BlockReject": self._block_reject,
            "GetAncestors": self._get_ancestors,
            "BatchedParseBlock": self._batched_parse_block,
            "Health": self._health,
            "Describe": self._describe,
            "SubmitTransactions": self._submit_transactions,
        }
        if self._handlers.keys() != METHODS.keys():
            raise RuntimeError("VMServer's handlers do not match vm.proto's methods")
        self._server = grpc.server(
            ThreadPoolExecutor(max_workers=workers, thread_name_prefix="vmstack-vm"),
            options=[("grpc.max_receive_message_length", MAX_REQUEST_SIZE),
                     ("grpc.max_send_message_length", MAX_RESPONSE_SIZE),
                     # A port another server holds is an error, never shared.
                     ("grpc.so_reuseport", 0)])
        rpc_handlers = {
            name: grpc.unary_unary_rpc_method_handler(self._rpc(name))
            for name in METHODS
        }
        self._server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(SERVICE, rpc_handlers),))
        socket_path = address.removeprefix("unix:") if address.startswith("unix:") else ""
        if len(os.fsencode(socket_path)) > MAX_SOCKET_PATH:
            self._remove_private_dir()
            raise ValueError(f"cannot serve at {address}: a Unix socket's path holds at most "
                             f"{MAX_SOCKET_PATH} bytes (this one {len(os.fsencode(socket_path))}"
                             "); set TMPDIR to a shorter directory")
        try:
            port = self._server.add_insecure_port(address)
        except RuntimeError:  # grpcio raises where older versions returned port 0
            port = 0
        if port == 0:
            self._remove_private_dir()
            raise ValueError(f"cannot serve at {address}: the address is in use or cannot "
                             "be bound")
        if not address.startswith("unix:") and address.endswith(":0"):
            address = f"{address.rsplit(':', 1)[0]}:{port}"
        self._address = address
        self._closed = False
        self._server.start()

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
            return len(self._handed), self._handed_bytes

    @property
    def vm(self) -> ChainVM:
        """The VM served."""
        return self._vm

    def close(self, grace: float | None = 1.0) -> None:
        """Stop serving (calls in flight get ``grace`` seconds) and remove the socket's
        private directory. Closing twice is harmless."""
        if self._closed:
            return
        self._closed = True
        self._server.stop(grace).wait()
        self._remove_private_dir()

    def _remove_private_dir(self) -> None:
        if self._private_dir is not None:
            shutil.rmtree(self._private_dir, ignore_errors=True)

    def __enter__(self) -> VMServer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"VMServer({type(self._vm).__name__}, address={self._address!r})"

    # --- one request --------------------------------------------------------------------

    def _rpc(self, name: str) -> Callable[[bytes, grpc.ServicerContext], bytes]:
        def handle(request: bytes, context: grpc.ServicerContext) -> bytes:
            if self._token is not None and not self._presents_token(context):
                context.abort(grpc.StatusCode.UNAUTHENTICATED,
                              f"{name}: this VM server requires the token of its token file "
                              f"({self._token_file}) as the call's {TOKEN_METADATA_KEY!r} "
                              "metadata (VMClient(token_file=...))")
            return self.answer(name, request)

        return handle

    def answer(self, method: str, request: bytes) -> bytes:
        """The serialized response to the serialized ``request`` of ``method``.

        This is everything the server does for one call, transport aside; it never raises
        for anything a caller sends (an unknown ``method`` is ``KeyError``, which gRPC
        answers as an unimplemented method before it gets here).
        """
        spec = METHODS[method]
        try:
            message = decode_request(spec, request)
        except MalformedRequest as error:
            return self._failed(spec.response, error)
        with self._lock:
            try:
                self._follow_caller_time(message)
                return self._handlers[method](message).SerializeToString()
            except Exception as error:
                return self._failed(spec.response, error)

    def _presents_token(self, context: grpc.ServicerContext) -> bool:
        assert self._token is not None
        expected = self._token.encode()
        for key, value in context.invocation_metadata():
            if key == TOKEN_METADATA_KEY:
                presented = value.encode() if isinstance(value, str) else bytes(value)
                return hmac.compare_digest(presented, expected)
        return False

    @staticmethod
    def _failed(response: type[Message], error: BaseException) -> bytes:
        message = response()
        message.failure.CopyFrom(failure_of(error))  # type: ignore[attr-defined]
        return message.SerializeToString()

    def _follow_caller_time(self, request: Message) -> None:
        clock = self._clock
        if clock is None or "now" not in request.DESCRIPTOR.fields_by_name or (
                not request.HasField("now")):
            return
        now: float = request.now  # type: ignore[attr-defined]  # bounded by decode_request
        if now > clock():
            clock.advance(now - clock())

    # --- handed-out blocks --------------------------------------------------------------

    def _hand_out(self, block: Block, data: bytes | None = None) -> Block:
        """Keep ``block`` for its decisions, under its ID and the digest of ``data`` (the
        bytes its caller holds: those sent to parse it, else its own)."""
        data = bytes(block) if data is None else data
        key = (block.id, block_digest(data))
        handed = self._handed
        cost = len(data) + HANDED_OUT_OVERHEAD
        kept = handed.pop(key, None)
        if kept is not None:
            self._handed_bytes -= kept[1]
        handed[key] = (block, cost)
        self._handed_bytes += cost
        while self._handed_bytes > self._handed_limit:
            self._handed_bytes -= handed.popitem(last=False)[1][1]
        return block

    # --- handlers -----------------------------------------------------------------------

    def _get_block(self, request: Message) -> Message:
        assert isinstance(request, vm_pb2.GetBlockRequest)
        block = self._hand_out(self._vm.get_block(request.id))
        return vm_pb2.BlockResponse(block=facts_of(block, with_bytes=True))

    def _parse_block(self, request: Message) -> Message:
        assert isinstance(request, vm_pb2.ParseBlockRequest)
        block = self._hand_out(self._vm.parse_block(request.bytes), request.bytes)
        return vm_pb2.BlockResponse(block=facts_of(block, with_bytes=False))

    def _build_block(self, request: Message) -> Message:
        block = self._hand_out(self._vm.build_block())
        return vm_pb2.BlockResponse(block=facts_of(block, with_bytes=True))

    def _set_preference(self, request: Message) -> Message:
        assert isinstance(request, vm_pb2.SetPreferenceRequest)
        self._vm.set_preference(request.id)
        return vm_pb2.EmptyResponse()

    def _last_accepted(self, request: Message) -> Message:
        return vm_pb2.BlockIDResponse(id=self._vm.last_accepted())

    def _get_block_id_at_height(self, request: Message) -> Message:
        assert isinstance(request, vm_pb2.GetBlockIDAtHeightRequest)
        return vm_pb2.BlockIDResponse(id=self._vm.get_block_id_at_height(request.height))

    def _block_verify(self, request: Message) -> Message:
        assert isinstance(request, vm_pb2.BlockVerifyRequest)
        kept = self._handed.get((request.id, block_digest(request.bytes)))
        if kept is not None:
            block = kept[0]
        else:
            block = self._vm.parse_block(request.bytes)
            if block.id != request.id:
                raise ValueError(f"BlockVerify: the bytes sent are block {block.id.hex()}, "
                                 f"not {request.id.hex()}")
            self._hand_out(block, request.bytes)
        block.verify()
        return vm_pb2.EmptyResponse()

    def _decide(self, request: Message, decision: Callable[[Block], None]) -> Message:
        assert isinstance(request, vm_pb2.BlockDecisionRequest)
        if len(request.digest) != 32:
            raise MalformedRequest("a decision names its block's bytes by their 32-byte "
                                   f"SHA-256 digest, got {len(request.digest)} bytes")
        key = (request.id, request.digest)
        kept = self._handed.get(key)
        if kept is not None:
            block = kept[0]
        else:
            block = self._vm.get_block(request.id)
            if block_digest(bytes(block)) != request.digest:
                raise InvalidBlock(f"block {request.id.hex()}: the served block with this ID "
                                   "has other bytes than the caller's (verify those first)")
        decision(block)
        kept = self._handed.pop(key, None)
        if kept is not None:
            self._handed_bytes -= kept[1]
        return vm_pb2.EmptyResponse()

    def _block_accept(self, request: Message) -> Message:
        return self._decide(request, lambda block: block.accept())

    def _block_reject(self, request: Message) -> Message:
        return self._decide(request, lambda block: block.reject())

    def _get_ancestors(self, request: Message) -> Message:
        assert isinstance(request, vm_pb2.GetAncestorsRequest)
        clock = time.monotonic if self._clock is None else self._clock
        blocks = batching.get_ancestors(
            self._vm, request.id, max_blocks_num=request.max_blocks_num,
            max_blocks_size=request.max_blocks_size,
            max_retrieval_time=request.max_retrieval_time, clock=clock)
        return vm_pb2.GetAncestorsResponse(blocks=blocks)

    def _batched_parse_block(self, request: Message) -> Message:
        assert isinstance(request, vm_pb2.BatchedParseBlockRequest)
        batch = list(request.blocks)
        parsed: Sequence[Block] = batching.batched_parse_block(self._vm, batch)
        return vm_pb2.BatchedParseBlockResponse(
            blocks=[facts_of(self._hand_out(block, data), with_bytes=False)
                    for block, data in zip(parsed, batch, strict=True)])

    def _submit_transactions(self, request: Message) -> Message:
        from vmstack.cchain.types import decode_transaction
        from vmstack.stack import submit_transactions

        assert isinstance(request, vm_pb2.SubmitTransactionsRequest)
        transactions = []
        for index, data in enumerate(request.transactions):
            try:
                transactions.append(decode_transaction(data))
            except ValueError as error:
                raise InvalidTransaction(f"transaction {index} does not decode: {error}") from None
        queued = submit_transactions(self._vm, transactions)
        return vm_pb2.SubmitTransactionsResponse(queued=queued)

    def _health(self, request: Message) -> Message:
        return vm_pb2.HealthResponse(healthy=True, pid=os.getpid(),
                                     details=f"serving {type(self._vm).__name__}")

    def _describe(self, request: Message) -> Message:
        from vmstack.stack import describe_stack

        metrics = ""
        if self._registry is not None:
            from prometheus_client import generate_latest

            metrics = generate_latest(self._registry).decode()
        layers = [vm_pb2.LayerDescription(kind=layer.kind, name=layer.name,
                                          batching=layer.batching)
                  for layer in describe_stack(self._vm)]
        return vm_pb2.DescribeResponse(layers=layers, metrics=metrics)
