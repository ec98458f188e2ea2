"""VMClient: the engine's side of the process boundary, a layer over a VM in another process.

It is the bottom of the in-process part of a stack, the way avalanchego's rpcchainvm
client sits under the node's metering and tracing layers. Each ``ChainVM`` call is one
round trip; each batched call is ONE round trip too, always: the server runs the engine
helpers against its VM, falling back there when that VM cannot batch, so this layer never
refuses a batched call (``batching`` is always true).

Blocks come back as :class:`RemoteBlock`: id, parent id, height, timestamp and bytes, with
``verify``, ``accept`` and ``reject`` as calls that reach the served block whose bytes these
are (the calls name the bytes, not only the ID). A rejected block refuses ``verify`` and
``accept`` as a block in process does.

Answers are checked against the protocol before anything is returned: an ancestors answer
within the budget (rule 4 of ARCHITECTURE.md section 3: the count and the size), a batch
answered one block per element and an ``InvalidBlock`` naming one of its elements (rule
7), the block asked for by ``get_block``, block IDs of 32 bytes, a fetched or built block
with its bytes. A server that breaks one is :class:`~vmstack.errors.VMUnavailable` naming
the rule: its answers are not passed on.

Failures: the served VM's errors arrive as themselves (``BlockNotFound``, ``InvalidBlock``
with its index, ``StoreCorrupted``, ``BatchingNotImplemented``, ``ValueError``; anything
else as ``VMStackError``). A server that is gone, a broken connection or a passed deadline
is :class:`~vmstack.errors.VMUnavailable`, raised within ``timeout`` seconds of the call.
Arguments that cannot be put in a request are judged here, with the errors the served VMs
give for them, and a request over the message limit is refused before it is sent.

A server that requires a token (every TCP server) refuses a call without it; the client
presents the one in ``token_file``. A refused call is ``VMUnavailable`` saying so.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

import attrs
import grpc
from google.protobuf.message import Message

from vmstack.batching import AncestorBudget, check_block_id, check_parse_batch
from vmstack.clock import Clock
from vmstack.errors import BlockNotFound, InvalidBlock, VMUnavailable
from vmstack.stack import LayerInfo, StackDescription
from vmstack.wrappers.rpc import vm_pb2
from vmstack.wrappers.rpc.local import TOKEN_METADATA_KEY, read_token_file
from vmstack.wrappers.rpc.protocol import (
    MAX_REQUEST_SIZE,
    MAX_RESPONSE_SIZE,
    METHODS,
    block_digest,
    error_of,
)

if TYPE_CHECKING:
    from vmstack.cchain.types import Transaction

__all__ = ["RemoteBlock", "RoundTrips", "VMClient"]

_UINT64_LIMIT = 1 << 64
_ID_LENGTH = 32


@attrs.define
class RoundTrips:
    """Round trips made by one client: how many, and their wall seconds, per method."""

    calls: dict[str, int] = attrs.field(factory=dict)
    seconds: dict[str, float] = attrs.field(factory=dict)

    def add(self, method: str, seconds: float) -> None:
        self.calls[method] = self.calls.get(method, 0) + 1
        self.seconds[method] = self.seconds.get(method, 0.0) + seconds

    @property
    def total(self) -> int:
        """Round trips of every method together."""
        return sum(self.calls.values())

    def as_dict(self) -> dict[str, dict[str, float]]:
        """``{method: {"calls": n, "seconds": s}}``, for JSON output."""
        return {method: {"calls": count, "seconds": self.seconds[method]}
                for method, count in sorted(self.calls.items())}


class RemoteBlock:
    """A block of the served VM: its facts, and decisions that are calls to the server."""

    __slots__ = ("_bytes", "_client", "_digest", "_rejected", "height", "id", "parent_id",
                 "timestamp")

    def __init__(self, client: VMClient, facts: vm_pb2.BlockFacts, data: bytes) -> None:
        self._client = client
        self.id: bytes = facts.id
        self.parent_id: bytes = facts.parent_id
        self.height: int = facts.height
        self.timestamp: int = facts.timestamp
        self._bytes = data
        self._digest: bytes | None = None
        self._rejected = False

    def __bytes__(self) -> bytes:
        return self._bytes

    def _decision(self) -> vm_pb2.BlockDecisionRequest:
        if self._digest is None:
            self._digest = block_digest(self._bytes)
        return vm_pb2.BlockDecisionRequest(id=self.id, digest=self._digest)

    def verify(self) -> None:
        """Verify the served block with these bytes (they travel with the call, so the
        server finds that block, or parses them again if it no longer holds it);
        ``InvalidBlock`` once this block is rejected."""
        if self._rejected:
            raise InvalidBlock(f"block {self.id.hex()} was rejected")
        self._client.call("BlockVerify", vm_pb2.BlockVerifyRequest(id=self.id, bytes=self._bytes))

    def accept(self) -> None:
        """Accept the served block with these bytes; ``InvalidBlock`` once this block is
        rejected."""
        if self._rejected:
            raise InvalidBlock(f"block {self.id.hex()} is rejected: only a verified block "
                               "can be accepted")
        self._client.call("BlockAccept", self._decision())

    def reject(self) -> None:
        """Reject the served block with these bytes (again: nothing)."""
        if self._rejected:
            return
        self._client.call("BlockReject", self._decision())
        self._rejected = True

    def __repr__(self) -> str:
        return f"RemoteBlock(id={self.id.hex()[:16]}…, height={self.height})"


def _wire_id(block_id: object) -> bytes:
    """A block ID as a request carries it: ``bytes`` as given (the served VM judges its
    length); anything else as :func:`~vmstack.batching.check_block_id` reads it."""
    return block_id if type(block_id) is bytes else check_block_id(block_id)


class VMClient:
    """A ``ChainVM`` (and ``BatchedChainVM``) whose VM is served at ``address`` by a
    :class:`~vmstack.wrappers.rpc.VMServer`, usually in another process.

    ``timeout`` bounds every call, in seconds. ``clock``, when given, is the caller's clock:
    every request carries its time, so a server running its VM on simulated time follows
    it. ``pid`` is the served process's ID when :func:`~vmstack.wrappers.rpc.spawn` started
    it. ``token_file`` holds the token a server that requires one (every TCP server) wants
    with each call (see :mod:`vmstack.wrappers.rpc.local`). :attr:`round_trips` counts the
    calls made.
    """

    batching = True

    def __init__(self, address: str, *, timeout: float = 10.0,
                 clock: Clock | None = None,
                 token_file: str | os.PathLike[str] | None = None) -> None:
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not (
                math.isfinite(timeout) and timeout > 0):
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        if not isinstance(address, str) or not address:
            raise ValueError(f"address must be a non-empty string, got {address!r}")
        self._metadata: tuple[tuple[str, str], ...] = ()
        if token_file is not None:
            self._metadata = ((TOKEN_METADATA_KEY, read_token_file(Path(token_file))),)
        self._address = address
        self._timeout = float(timeout)
        self._clock = clock
        self.pid: int | None = None
        self.round_trips = RoundTrips()
        self._lock = threading.Lock()
        self._channel = grpc.insecure_channel(
            address, options=[("grpc.max_receive_message_length", MAX_RESPONSE_SIZE),
                              ("grpc.max_send_message_length", MAX_REQUEST_SIZE)])
        self._stubs: dict[str, Callable[..., Message]] = {
            name: self._channel.unary_unary(
                method.path, request_serializer=method.request.SerializeToString,
                response_deserializer=method.response.FromString)
            for name, method in METHODS.items()
        }
        self._closed = False

    @property
    def address(self) -> str:
        """Where the served VM listens."""
        return self._address

    @property
    def clock(self) -> Clock | None:
        """The caller's clock sent with every request (``None``: the server's own)."""
        return self._clock

    @property
    def timeout(self) -> float:
        """Seconds each call may take before it fails with ``VMUnavailable``."""
        return self._timeout

    def close(self) -> None:
        """Close the connection; later calls raise ``VMUnavailable``. Closing twice is
        harmless."""
        self._closed = True
        self._channel.close()

    def __enter__(self) -> VMClient:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"VMClient({self._address!r})"

    @property
    def name(self) -> str:
        """The address, which names this boundary in :func:`vmstack.describe_stack`."""
        return self._address

    # --- one round trip -----------------------------------------------------------------

    def call(self, method: str, request: Message) -> Message:
        """One round trip of ``method`` with ``request``; the response, or the served VM's
        error raised here (see the module's docstring)."""
        if self._closed:
            raise VMUnavailable(f"the client of {self._address} is closed")
        if self._clock is not None and "now" in type(request).DESCRIPTOR.fields_by_name:
            request.now = self._clock()  # type: ignore[attr-defined]
        size = request.ByteSize()
        if size > MAX_REQUEST_SIZE:
            raise ValueError(f"{method} request of {size} bytes is over the "
                             f"{MAX_REQUEST_SIZE}-byte message limit")
        started = time.perf_counter()
        try:
            response = self._stubs[method](request, timeout=self._timeout,
                                           metadata=self._metadata)
        except grpc.RpcError as error:
            raise self._transport_error(method, error) from None
        finally:
            with self._lock:
                self.round_trips.add(method, time.perf_counter() - started)
        if response.HasField("failure"):
            raise error_of(response.failure)  # type: ignore[attr-defined]
        return response

    def _transport_error(self, method: str, error: grpc.RpcError) -> Exception:
        code = error.code() if isinstance(error, grpc.Call) else None
        details = error.details() if isinstance(error, grpc.Call) else str(error)
        if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
            return ValueError(f"{method}: a message is over the limit: {details}")
        if code == grpc.StatusCode.UNAUTHENTICATED:
            return VMUnavailable(f"{method}: the VM at {self._address} refused the call: "
                                 f"{details}")
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return VMUnavailable(f"{method}: the VM at {self._address} did not answer within "
                                 f"{self._timeout:g} s")
        status = code.name if code is not None else "no status"
        return VMUnavailable(f"{method}: the VM at {self._address} is unavailable "
                             f"({status}: {details})")

    # --- what an answer must be -------------------------------------------------------

    def _broken(self, method: str, rule: str, what: str) -> VMUnavailable:
        """The error for an answer that breaks the protocol: it is not passed on."""
        return VMUnavailable(f"{method}: the VM at {self._address} broke the protocol "
                             f"({rule}): {what}")

    def _check_id(self, method: str, what: str, block_id: bytes) -> None:
        if len(block_id) != _ID_LENGTH:
            raise self._broken(method, "a block ID is 32 bytes",
                               f"{what} of {len(block_id)} bytes")

    def _block(self, method: str, response: Message, data: bytes | None = None,
               asked: bytes | None = None) -> RemoteBlock:
        """The block of a ``BlockResponse``: ``data`` are its bytes when the caller sent
        them (parse), else the answer must carry them; ``asked`` is the ID asked for."""
        assert isinstance(response, vm_pb2.BlockResponse)
        facts = response.block
        self._check_facts(method, facts)
        if asked is not None and facts.id != asked:
            raise self._broken(method, "the block asked for",
                               f"block {facts.id.hex()} for {asked.hex()}")
        if data is None:
            if not facts.bytes:
                raise self._broken(method, "a block is sent with its bytes",
                                   f"block {facts.id.hex()} without bytes")
            data = facts.bytes
        return RemoteBlock(self, facts, data)

    def _check_facts(self, method: str, facts: vm_pb2.BlockFacts) -> None:
        self._check_id(method, "a block ID", facts.id)
        self._check_id(method, "a parent ID", facts.parent_id)

    def _check_batch_failure(self, error: Exception, size: int) -> None:
        if not isinstance(error, InvalidBlock):
            return
        if error.index is None or error.index >= size:
            raise self._broken("BatchedParseBlock", "rule 7: InvalidBlock names the index of "
                               "the bad element",
                               f"index {error.index} in a batch of {size}") from None

    # --- ChainVM ------------------------------------------------------------------------

    def get_block(self, block_id: bytes) -> RemoteBlock:
        wire_id = _wire_id(block_id)
        response = self.call("GetBlock", vm_pb2.GetBlockRequest(id=wire_id))
        return self._block("GetBlock", response, asked=wire_id)

    def parse_block(self, data: bytes) -> RemoteBlock:
        if not isinstance(data, bytes | bytearray | memoryview):
            raise InvalidBlock(f"block bytes must be bytes, not {type(data).__name__}")
        data = bytes(data)
        response = self.call("ParseBlock", vm_pb2.ParseBlockRequest(bytes=data))
        return self._block("ParseBlock", response, data)

    def build_block(self) -> RemoteBlock:
        return self._block("BuildBlock", self.call("BuildBlock", vm_pb2.BuildBlockRequest()))

    def set_preference(self, block_id: bytes) -> None:
        self.call("SetPreference", vm_pb2.SetPreferenceRequest(id=_wire_id(block_id)))

    def last_accepted(self) -> bytes:
        response = self.call("LastAccepted", vm_pb2.LastAcceptedRequest())
        assert isinstance(response, vm_pb2.BlockIDResponse)
        self._check_id("LastAccepted", "a block ID", response.id)
        return response.id

    def get_block_id_at_height(self, height: int) -> bytes:
        if isinstance(height, bool) or not isinstance(height, int) or height < 0:
            raise ValueError(f"a height is a non-negative int, got {height!r}")
        if height >= _UINT64_LIMIT:
            raise BlockNotFound(f"no block at height {height}")
        response = self.call("GetBlockIDAtHeight",
                             vm_pb2.GetBlockIDAtHeightRequest(height=height))
        assert isinstance(response, vm_pb2.BlockIDResponse)
        self._check_id("GetBlockIDAtHeight", "a block ID", response.id)
        return response.id

    # --- BatchedChainVM: one round trip each ------------------------------------------

    def get_ancestors(self, block_id: bytes, max_blocks_num: int, max_blocks_size: int,
                      max_retrieval_time: float) -> list[bytes]:
        # The served VM judges the budget; only what a request cannot carry is judged here,
        # by the rule's own checks, and the answer is held to the same rule.
        budget = AncestorBudget(max_blocks_num, max_blocks_size, max_retrieval_time,
                                clock=_zero)
        response = self.call("GetAncestors", vm_pb2.GetAncestorsRequest(
            id=_wire_id(block_id), max_blocks_num=min(max_blocks_num, _INT64_MAX),
            max_blocks_size=min(max_blocks_size, _INT64_MAX),
            max_retrieval_time=max_retrieval_time))
        assert isinstance(response, vm_pb2.GetAncestorsResponse)
        blocks = list(response.blocks)
        for data in blocks:
            if not budget.admit(data):
                raise self._broken(
                    "GetAncestors", "rule 4: the budget",
                    f"{len(blocks)} blocks of {sum(map(len, blocks))} bytes for "
                    f"max_blocks_num={max_blocks_num}, max_blocks_size={max_blocks_size}")
        return blocks

    def batched_parse_block(self, blocks: Sequence[bytes]) -> list[RemoteBlock]:
        batch = [bytes(data) for data in check_parse_batch(blocks)]
        if not batch:
            return []
        try:
            response = self.call("BatchedParseBlock",
                                 vm_pb2.BatchedParseBlockRequest(blocks=batch))
        except InvalidBlock as error:
            self._check_batch_failure(error, len(batch))
            raise
        assert isinstance(response, vm_pb2.BatchedParseBlockResponse)
        if len(response.blocks) != len(batch):
            raise self._broken("BatchedParseBlock", "rule 7: one block per element, in "
                               "input order",
                               f"{len(response.blocks)} blocks for {len(batch)}")
        for facts in response.blocks:
            self._check_facts("BatchedParseBlock", facts)
        return [RemoteBlock(self, facts, data)
                for facts, data in zip(response.blocks, batch, strict=True)]

    # --- the server itself --------------------------------------------------------------

    def submit_transactions(self, transactions: Iterable[Transaction]) -> int:
        """Queue signed ``transactions`` in the served stack's mempool in one round trip
        (what :func:`vmstack.stack.submit_transactions` does for a stack over this client);
        the number queued. The served mempool's refusal arrives as
        :class:`~vmstack.errors.InvalidTransaction` with its reason, nothing queued."""
        request = vm_pb2.SubmitTransactionsRequest(
            transactions=[tx.encode() for tx in transactions])
        response = self.call("SubmitTransactions", request)
        assert isinstance(response, vm_pb2.SubmitTransactionsResponse)
        if response.queued != len(request.transactions):
            raise VMUnavailable(f"SubmitTransactions: the VM at {self._address} broke the "
                                f"protocol (all or none): it queued {response.queued} of "
                                f"{len(request.transactions)}")
        return response.queued

    def health(self) -> str:
        """The server's word on itself; ``VMUnavailable`` if it does not answer."""
        response = self.call("Health", vm_pb2.HealthRequest())
        assert isinstance(response, vm_pb2.HealthResponse)
        return f"{response.details} (pid {response.pid})"

    def describe_served(self) -> StackDescription:
        """The served stack, top to bottom, as :func:`vmstack.describe_stack` reads it on
        the server; ``describe_stack`` of a stack over this client includes it."""
        response = self.call("Describe", vm_pb2.DescribeRequest())
        assert isinstance(response, vm_pb2.DescribeResponse)
        return StackDescription(tuple(
            LayerInfo(kind=layer.kind, name=layer.name if layer.HasField("name") else None,
                      batching=layer.batching)
            for layer in response.layers))

    def served_metrics(self) -> str:
        """The served stack's Prometheus metrics, in the text exposition format ("" when
        the server has no registry)."""
        response = self.call("Describe", vm_pb2.DescribeRequest())
        assert isinstance(response, vm_pb2.DescribeResponse)
        return response.metrics


_INT64_MAX = (1 << 63) - 1


def _zero() -> float:
    return 0.0
