"""VMServer: serve any ``ChainVM`` (usually a whole stack) over gRPC.

The server is the plugin side of the boundary. It answers the batched protocol with ONE
round trip whatever the served VM can do: it runs the engine helpers
(:func:`vmstack.get_ancestors`, :func:`vmstack.batched_parse_block`) against its VM, so a VM
that cannot batch falls back on the server's side of the boundary, not across it.

Blocks cross as their facts (id, parent id, height, timestamp, bytes). The server keeps the
blocks it has handed out and not yet seen decided, so ``verify``, ``accept`` and ``reject``
reach the very block object the served VM returned, as they would in process; a block it no
longer holds is found again by parsing its bytes (verify) or by ``get_block`` (decisions).

Every request is answered, never raised out of: an error of the served VM travels in the
response's ``failure`` (see :mod:`vmstack.wrappers.rpc.protocol`), a request that cannot be
read is refused before it reaches the VM, and one lock keeps the VM to one call at a time.
"""

from __future__ import annotations

import os
import shutil
import tempfile
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
from vmstack.interfaces import Block, ChainVM
from vmstack.wrappers.rpc import vm_pb2
from vmstack.wrappers.rpc.protocol import (
    MAX_REQUEST_SIZE,
    MAX_RESPONSE_SIZE,
    METHODS,
    SERVICE,
    MalformedRequest,
    decode_request,
    facts_of,
    failure_of,
)

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

__all__ = ["HANDED_OUT_BLOCKS", "VMServer"]

#: How many handed-out, undecided blocks the server keeps for their decisions.
HANDED_OUT_BLOCKS = 65_536

_Handler = Callable[[Message], Message]


class VMServer:
    """Serve ``vm`` over gRPC at ``address`` until :meth:`close` (or the ``with`` block ends).

    ``address`` defaults to a Unix socket in a fresh private directory (mode 0700), so
    nothing listens on the network unless the caller asks for ``"127.0.0.1:PORT"`` (port 0
    picks a free one; :attr:`address` says which). ``clock``, when the served VM runs on a
    :class:`~vmstack.clock.SimClock`, is that clock: each request that carries its caller's
    time moves it forward to that time first, so both sides share one simulated time.
    ``registry`` is the Prometheus registry of the served stack, reported by ``Describe``.
    """

    def __init__(self, vm: ChainVM, *, address: str | None = None,
                 clock: SimClock | None = None,
                 registry: CollectorRegistry | None = None, workers: int = 4) -> None:
        self._vm = vm
        self._clock = clock
        self._registry = registry
        self._lock = threading.Lock()
        self._handed: OrderedDict[bytes, Block] = OrderedDict()
        self._private_dir: Path | None = None
        if address is None:
            self._private_dir = Path(tempfile.mkdtemp(prefix="vmstack-vm-"))
            os.chmod(self._private_dir, 0o700)
            address = f"unix:{self._private_dir / 'vm.sock'}"
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
        }
        if self._handlers.keys() != METHODS.keys():
            raise RuntimeError("VMServer's handlers do not match vm.proto's methods")
        self._server = grpc.server(
            ThreadPoolExecutor(max_workers=workers, thread_name_prefix="vmstack-vm"),
            options=[("grpc.max_receive_message_length", MAX_REQUEST_SIZE),
                     ("grpc.max_send_message_length", MAX_RESPONSE_SIZE)])
        rpc_handlers = {
            name: grpc.unary_unary_rpc_method_handler(self._rpc(name))
            for name in METHODS
        }
        self._server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(SERVICE, rpc_handlers),))
        try:
            port = self._server.add_insecure_port(address)
        except RuntimeError as error:
            self._remove_private_dir()
            raise ValueError(f"cannot serve at {address}: {error}") from None
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
        now: float = request.now  # type: ignore[attr-defined]
        if now > clock():
            clock.advance(now - clock())

    # --- handed-out blocks --------------------------------------------------------------

    def _hand_out(self, block: Block) -> Block:
        handed = self._handed
        handed[block.id] = block
        handed.move_to_end(block.id)
        while len(handed) > HANDED_OUT_BLOCKS:
            handed.popitem(last=False)
        return block

    def _block(self, block_id: bytes) -> Block:
        block = self._handed.get(block_id)
        return self._vm.get_block(block_id) if block is None else block

    # --- handlers -----------------------------------------------------------------------

    def _get_block(self, request: Message) -> Message:
        assert isinstance(request, vm_pb2.GetBlockRequest)
        block = self._hand_out(self._vm.get_block(request.id))
        return vm_pb2.BlockResponse(block=facts_of(block, with_bytes=True))

    def _parse_block(self, request: Message) -> Message:
        assert isinstance(request, vm_pb2.ParseBlockRequest)
        block = self._hand_out(self._vm.parse_block(request.bytes))
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
        block = self._handed.get(request.id)
        if block is None:
            block = self._hand_out(self._vm.parse_block(request.bytes))
            if block.id != request.id:
                raise ValueError(f"BlockVerify: the bytes sent are block {block.id.hex()}, "
                                 f"not {request.id.hex()}")
        block.verify()
        return vm_pb2.EmptyResponse()

    def _decide(self, request: Message, decision: Callable[[Block], None]) -> Message:
        assert isinstance(request, vm_pb2.BlockDecisionRequest)
        decision(self._block(request.id))
        self._handed.pop(request.id, None)
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
        parsed: Sequence[Block] = batching.batched_parse_block(self._vm, list(request.blocks))
        return vm_pb2.BatchedParseBlockResponse(
            blocks=[facts_of(self._hand_out(block), with_bytes=False) for block in parsed])

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
