"""VMClient: the engine's side of the process boundary, speaking avalanchego's ``vm.VM``.

It is the bottom of the in-process part of a stack, the way avalanchego's rpcchainvm client
sits under the node's metering and tracing layers, and it talks to any server of the
protocol: a :class:`~vmstack.wrappers.rpc.VMServer`, or a plugin VM of avalanchego's. Each
``ChainVM`` call is one round trip but one: as avalanchego's ``chain.State`` does, the client
tracks the last accepted block (from Initialize, SetState and each accept it makes) and
answers ``last_accepted()`` without a round trip, and it keeps the blocks it saw accepted
(:data:`DECIDED_CACHE_SIZE` of them) so ``get_block`` of one needs none either. Each batched
call is ONE round trip, always: the server runs the engine helpers against its VM, falling
back there when that VM cannot batch, so this layer never refuses a batched call.

Blocks come back as :class:`RemoteBlock`: id, parent id, height, timestamp and bytes.
``verify`` sends the bytes (BlockVerify goes by bytes); ``accept`` and ``reject`` send the
ID, and beside it, in the call's metadata, the digest of the bytes, so a vmstack server
decides the block of those very bytes. A rejected block refuses ``verify`` and ``accept`` as
a block in process does. Budgets cross as avalanchego's client casts them: counts as int32
(a count that does not fit is ``ValueError`` here), the time in nanoseconds.

Answers are checked against the protocol before anything is returned: an ancestors answer
within the budget (rule 4 of ARCHITECTURE.md section 3: the count and the size), a batch
answered one block per element and an ``InvalidBlock`` naming one of its elements (rule
7), block IDs of 32 bytes, a fetched or built block with its bytes, an in-band ``err`` one of
``vm.Error``'s values and never beside data, a typed error one of the error tree's own
(:func:`~vmstack.wrappers.rpc.protocol.error_of_wire`: bounded, each attribute of its
declared type). A server that breaks one is :class:`~vmstack.errors.VMUnavailable` naming
the rule: its answers are not passed on (the rules: :mod:`vmstack.wrappers.rpc.answer_rules`).

Failures: a vmstack server's errors arrive as themselves (the typed error rides in the
call's trailing metadata: ``BlockNotFound``, ``InvalidBlock`` with its index,
``StoreCorrupted``, ``ValueError``, every class of the error tree); a server that is not
vmstack's gives only a message, which arrives as ``VMStackError`` (and ``ERROR_NOT_FOUND``
as ``BlockNotFound``). A server that is gone, a broken connection or a passed deadline is
:class:`~vmstack.errors.VMUnavailable`, raised within ``timeout`` seconds of the call.
vmstack's extras (``describe_served``, ``served_metrics``, ``submit_transactions``) use the
``vmstack.Extras`` service; against a server without it they are ``VMStackError`` saying so.

A server that requires a token (every TCP server of vmstack's) refuses a call without it;
the client presents the one in ``token_file``. A refused call is ``VMUnavailable``.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import grpc
from google.protobuf import empty_pb2
from google.protobuf.message import DecodeError, Message

from vmstack.batching import (
    CONTAINER_LEN_OVERHEAD,
    AncestorBudget,
    check_block_id,
    check_parse_batch,
)
from vmstack.clock import Clock
from vmstack.describe import LayerInfo, StackDescription
from vmstack.errors import BlockNotFound, InvalidBlock, VMUnavailable
from vmstack.wrappers.rpc import metrics_pb2, vm_pb2, vmstack_pb2
from vmstack.wrappers.rpc.answer_rules import (
    ID_LENGTH,
    AnswerRules,
    read_health,
)
from vmstack.wrappers.rpc.local import TOKEN_METADATA_KEY, read_token_file
from vmstack.wrappers.rpc.protocol import (
    MAX_REQUEST_SIZE,
    MAX_RESPONSE_SIZE,
    METHODS,
    NOW_METADATA_KEY,
    PROTOCOL_VERSION,
    check_protocol_version,
)
from vmstack.wrappers.rpc.remote import RemoteBlock, RoundTrips
from vmstack.wrappers.rpc.wire import encode_repeated_bytes

if TYPE_CHECKING:
    from vmstack.cchain.types import Transaction

__all__ = [
    "DECIDED_CACHE_SIZE",
    "INT32_MAX",
    "VMClient",
]

#: Accepted blocks the client keeps, as avalanchego's ``chain.State`` keeps decided ones.
DECIDED_CACHE_SIZE = 2048
#: The largest count a GetAncestors budget carries (its fields are int32).
INT32_MAX = (1 << 31) - 1
_INT64_MAX = (1 << 63) - 1
_UINT64_LIMIT = 1 << 64


def _wire_id(block_id: object) -> bytes:
    """A block ID as a request carries it: ``bytes`` as given (the served VM judges its
    length); anything else as :func:`~vmstack.batching.check_block_id` reads it."""
    return block_id if type(block_id) is bytes else check_block_id(block_id)


class VMClient:
    """A ``ChainVM`` (and ``BatchedChainVM``) whose VM is served at ``address`` over
    avalanchego's ``vm.VM`` protocol, usually in another process.

    ``timeout`` bounds every call, in seconds. ``clock``, when given, is the caller's clock:
    every call carries its time, so a vmstack server running its VM on simulated time
    follows it. ``pid`` is the served process's ID when :func:`~vmstack.wrappers.rpc.spawn`
    started it. ``token_file`` holds the token a server that requires one wants with each
    call (see :mod:`vmstack.wrappers.rpc.local`). ``protocol_version`` is the RPC chain VM
    protocol version it speaks (45, the default, or 46). :attr:`round_trips` counts the
    calls made.
    The client learns the last accepted block from the first call that needs it
    (``Initialize`` with an empty request, which a vmstack server serving a built stack
    answers) unless :meth:`initialize` was called first.
    """

    batching = True

    def __init__(
        self,
        address: str,
        *,
        timeout: float = 10.0,
        clock: Clock | None = None,
        token_file: str | os.PathLike[str] | None = None,
        protocol_version: int = PROTOCOL_VERSION,
    ) -> None:
        self._protocol_version = check_protocol_version(protocol_version)
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not (math.isfinite(timeout) and timeout > 0)
        ):
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        if not isinstance(address, str) or not address:
            raise ValueError(f"address must be a non-empty string, got {address!r}")
        self._metadata: tuple[tuple[str, str], ...] = ()
        if token_file is not None:
            self._metadata = ((TOKEN_METADATA_KEY, read_token_file(Path(token_file))),)
        self._address = address
        self._timeout = float(timeout)
        self._rules = AnswerRules(address, self._timeout)
        self._clock = clock
        self.pid: int | None = None
        self.round_trips = RoundTrips()
        self._lock = threading.Lock()
        self._last_accepted: bytes | None = None
        self._decided: OrderedDict[bytes, RemoteBlock] = OrderedDict()
        self._channel = grpc.insecure_channel(
            address,
            options=[
                ("grpc.max_receive_message_length", MAX_RESPONSE_SIZE),
                ("grpc.max_send_message_length", MAX_REQUEST_SIZE),
            ],
        )
        # Serialized here, not by gRPC: the batched calls build and read their messages in
        # one go (vmstack.wrappers.rpc.wire), the others through the protobuf runtime.
        self._stubs: dict[str, Callable[..., bytes]] = {
            name: self._channel.unary_unary(
                method.path, request_serializer=None, response_deserializer=None
            )
            for name, method in METHODS.items()
        }
        self._closed = False

    @property
    def address(self) -> str:
        """Where the served VM listens."""
        return self._address

    @property
    def protocol_version(self) -> int:
        """The RPC chain VM protocol version this client speaks (45 or 46; ``vm.proto`` is
        the same for both): the one :func:`~vmstack.wrappers.rpc.launch.start_plugin` holds
        a plugin's handshake to."""
        return self._protocol_version

    @property
    def clock(self) -> Clock | None:
        """The caller's clock sent with every call (``None``: the server's own)."""
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

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"VMClient({self._address!r})"

    @property
    def name(self) -> str:
        """The address, which names this boundary in :func:`vmstack.describe_stack`."""
        return self._address

    # --- one round trip -----------------------------------------------------------------

    def call(
        self, method: str, request: Message, metadata: Iterable[tuple[str, str | bytes]] = ()
    ) -> Message:
        """One round trip of ``method`` with ``request`` (and call ``metadata``); the
        response, or the served VM's error raised here (see the module's docstring)."""
        response, _ = self._call(method, request, metadata)
        return response

    def _call(
        self, method: str, request: Message, metadata: Iterable[tuple[str, str | bytes]] = ()
    ) -> tuple[Message, Exception | None]:
        """The response and the typed error a vmstack server sent in band with it."""
        answer, in_band = self._exchange(method, request.SerializeToString(), metadata)
        try:
            response = METHODS[method].response.FromString(answer)
        except DecodeError:
            raise self._rules.broken(
                method,
                f"an answer is a {METHODS[method].response.__name__}",
                "bytes that do not decode",
            ) from None
        return response, in_band

    def _exchange(
        self, method: str, request: bytes, metadata: Iterable[tuple[str, str | bytes]] = ()
    ) -> tuple[bytes, Exception | None]:
        """One round trip of the serialized ``request``: the serialized response and the
        typed error a vmstack server sent in band with it."""
        if self._closed:
            raise VMUnavailable(f"the client of {self._address} is closed")
        sent: list[tuple[str, str | bytes]] = [*self._metadata, *metadata]
        if self._clock is not None:
            sent.append((NOW_METADATA_KEY, repr(float(self._clock()))))
        size = len(request)
        if size > MAX_REQUEST_SIZE:
            raise ValueError(
                f"{method} request of {size} bytes is over the "
                f"{MAX_REQUEST_SIZE}-byte message limit"
            )
        started = time.perf_counter()
        try:
            response, rpc = self._stubs[method].with_call(  # type: ignore[attr-defined]
                request, timeout=self._timeout, metadata=sent
            )
        except grpc.RpcError as error:
            raise self._rules.failure(method, error) from None
        finally:
            with self._lock:
                self.round_trips.add(method, time.perf_counter() - started)
        in_band = self._rules.typed(method, rpc.trailing_metadata())
        if in_band is not None and not isinstance(in_band, BlockNotFound):
            raise self._rules.broken(
                method,
                "an answer carries no error beside it but BlockNotFound",
                type(in_band).__name__,
            )
        return response, in_band

    def _remote(self, method: str, block_id: bytes, facts: Any, data: bytes) -> RemoteBlock:
        """A block from an answer's facts (``parent_id``, ``height``, ``timestamp``)."""
        self._rules.check_id(method, "a block ID", block_id)
        self._rules.check_id(method, "a parent ID", facts.parent_id)
        return RemoteBlock(
            self, block_id, facts.parent_id, facts.height, facts.timestamp.seconds, data
        )

    # --- the last accepted block, as chain.State tracks it ----------------------------

    def _learn(self, method: str, response: Any) -> RemoteBlock:
        block_id = response.last_accepted_id
        if not response.bytes:
            raise self._rules.broken(
                method,
                "the last accepted block is sent with its bytes",
                f"block {block_id.hex()} without bytes",
            )
        block = self._remote(method, block_id, _LastAcceptedFacts(response), response.bytes)
        self._accepted(block)
        return block

    def _accepted(self, block: RemoteBlock) -> None:
        with self._lock:
            self._last_accepted = block.id
            self._decided[block.id] = block
            self._decided.move_to_end(block.id)
            while len(self._decided) > DECIDED_CACHE_SIZE:
                self._decided.popitem(last=False)

    def initialize(self, request: vm_pb2.InitializeRequest | None = None) -> RemoteBlock:
        """Initialize the served VM with ``request`` (a plugin builds its VM from it; a
        vmstack server serving a built stack only answers) and learn its last accepted
        block, which this returns."""
        response = self.call("Initialize", request or vm_pb2.InitializeRequest())
        return self._learn("Initialize", response)

    def set_state(self, state: vm_pb2.State.ValueType) -> RemoteBlock:
        """Tell the served VM its state (bootstrapping, normal operation, ...) and learn its
        last accepted block, which this returns."""
        return self._learn("SetState", self.call("SetState", vm_pb2.SetStateRequest(state=state)))

    # --- ChainVM ------------------------------------------------------------------------

    def get_block(self, block_id: bytes) -> RemoteBlock:
        wire_id = _wire_id(block_id)
        with self._lock:
            decided = self._decided.get(wire_id)
        if decided is not None:
            return decided
        response, in_band = self._call("GetBlock", vm_pb2.GetBlockRequest(id=wire_id))
        assert isinstance(response, vm_pb2.GetBlockResponse)
        self._rules.check_in_band(
            "GetBlock",
            response.err,
            in_band,
            bool(response.parent_id or response.bytes or response.height)
            or response.HasField("timestamp"),
            f"block {wire_id.hex()} is not served",
        )
        if not response.bytes:
            raise self._rules.broken(
                "GetBlock", "a block is sent with its bytes", f"block {wire_id.hex()} without bytes"
            )
        self._rules.check_id("GetBlock", "a block ID", wire_id)
        return self._remote("GetBlock", wire_id, response, response.bytes)

    def parse_block(self, data: bytes) -> RemoteBlock:
        if not isinstance(data, bytes | bytearray | memoryview):
            raise InvalidBlock(f"block bytes must be bytes, not {type(data).__name__}")
        data = bytes(data)
        response = self.call("ParseBlock", vm_pb2.ParseBlockRequest(bytes=data))
        assert isinstance(response, vm_pb2.ParseBlockResponse)
        return self._remote("ParseBlock", response.id, response, data)

    def build_block(self) -> RemoteBlock:
        response = self.call("BuildBlock", vm_pb2.BuildBlockRequest())
        assert isinstance(response, vm_pb2.BuildBlockResponse)
        if not response.bytes:
            raise self._rules.broken(
                "BuildBlock",
                "a block is sent with its bytes",
                f"block {response.id.hex()} without bytes",
            )
        return self._remote("BuildBlock", response.id, response, response.bytes)

    def set_preference(self, block_id: bytes) -> None:
        self.call("SetPreference", vm_pb2.SetPreferenceRequest(id=_wire_id(block_id)))

    def last_accepted(self) -> bytes:
        """The last accepted block's ID, as the client tracks it: no round trip once known
        (the first call learns it with ``Initialize``)."""
        if self._last_accepted is None:
            self.initialize()
        assert self._last_accepted is not None
        return self._last_accepted

    def get_block_id_at_height(self, height: int) -> bytes:
        if isinstance(height, bool) or not isinstance(height, int) or height < 0:
            raise ValueError(f"a height is a non-negative int, got {height!r}")
        if height >= _UINT64_LIMIT:
            raise BlockNotFound(f"no block at height {height}")
        response, in_band = self._call(
            "GetBlockIDAtHeight", vm_pb2.GetBlockIDAtHeightRequest(height=height)
        )
        assert isinstance(response, vm_pb2.GetBlockIDAtHeightResponse)
        self._rules.check_in_band(
            "GetBlockIDAtHeight",
            response.err,
            in_band,
            bool(response.blk_id),
            f"no block at height {height}",
        )
        self._rules.check_id("GetBlockIDAtHeight", "a block ID", response.blk_id)
        return response.blk_id

    # --- BatchedChainVM: one round trip each ------------------------------------------

    def get_ancestors(
        self, block_id: bytes, max_blocks_num: int, max_blocks_size: int, max_retrieval_time: float
    ) -> list[bytes]:
        # The rule's own checks judge what a request cannot carry; the answer is held to it.
        budget = AncestorBudget(max_blocks_num, max_blocks_size, max_retrieval_time, clock=_zero)
        for name, count in (
            ("max_blocks_num", max_blocks_num),
            ("max_blocks_size", max_blocks_size),
        ):
            if count > INT32_MAX:
                raise ValueError(
                    f"{name}={count} does not fit the protocol's int32 (at most {INT32_MAX})"
                )
        # An int64 of nanoseconds, as a Go Duration; a longer budget (infinite included) is
        # the longest one the field holds.
        nanoseconds = (
            _INT64_MAX if max_retrieval_time * 1e9 >= _INT64_MAX else int(max_retrieval_time * 1e9)
        )
        request = vm_pb2.GetAncestorsRequest(
            blk_id=_wire_id(block_id),
            max_blocks_num=max_blocks_num,
            max_blocks_size=max_blocks_size,
            max_blocks_retrival_time=nanoseconds,
        )
        answer, _ = self._exchange("GetAncestors", request.SerializeToString())
        # Read by the protobuf runtime: its C decoder makes the list's byte strings faster
        # than a slice per element in Python does.
        try:
            blocks = list(vm_pb2.GetAncestorsResponse.FromString(answer).blks_bytes)
        except DecodeError:
            raise self._rules.broken(
                "GetAncestors", "an answer is a GetAncestorsResponse", "bytes that do not decode"
            ) from None
        # The budget's admission rule, for the whole answer at once: the first block is
        # always in; the others within the count and, every block's length and overhead
        # summed, within the size.
        count = len(blocks)
        if count > 1 and (
            count > budget.max_blocks_num
            or sum(map(len, blocks)) + count * CONTAINER_LEN_OVERHEAD > budget.max_blocks_size
        ):
            raise self._rules.broken(
                "GetAncestors",
                "rule 4: the budget",
                f"{count} blocks of {sum(map(len, blocks))} bytes for "
                f"max_blocks_num={max_blocks_num}, max_blocks_size={max_blocks_size}",
            )
        return blocks

    def batched_parse_block(self, blocks: Sequence[bytes]) -> list[RemoteBlock]:
        batch = check_parse_batch(blocks)
        if not batch:
            return []
        if set(map(type, batch)) != {bytes}:  # else each element is bytes already
            batch = [bytes(data) for data in batch]
        try:
            # BatchedParseBlockRequest(request=batch), serialized in one join.
            answer, _ = self._exchange("BatchedParseBlock", encode_repeated_bytes(batch))
        except InvalidBlock as error:
            self._rules.check_batch_failure(error, len(batch))
            raise
        try:
            response = vm_pb2.BatchedParseBlockResponse.FromString(answer)
        except DecodeError:
            raise self._rules.broken(
                "BatchedParseBlock",
                "an answer is a BatchedParseBlockResponse",
                "bytes that do not decode",
            ) from None
        facts = response.response
        if len(facts) != len(batch):
            raise self._rules.broken(
                "BatchedParseBlock",
                "rule 7: one block per element, in input order",
                f"{len(facts)} blocks for {len(batch)}",
            )
        remote: list[RemoteBlock] = []
        append = remote.append
        for fact, data in zip(facts, batch, strict=True):
            block_id, parent_id = fact.id, fact.parent_id
            if len(block_id) != ID_LENGTH or len(parent_id) != ID_LENGTH:
                self._remote("BatchedParseBlock", block_id, fact, data)  # raises, naming it
            append(
                RemoteBlock(self, block_id, parent_id, fact.height, fact.timestamp.seconds, data)
            )
        return remote

    # --- the server itself --------------------------------------------------------------

    def health(self) -> str:
        """The server's word on itself (vm.VM/Health's details); ``VMUnavailable`` if it
        does not answer."""
        response = self.call("Health", empty_pb2.Empty())
        assert isinstance(response, vm_pb2.HealthResponse)
        return read_health(response.details)

    def version(self) -> str:
        """The served VM's version."""
        response = self.call("Version", empty_pb2.Empty())
        assert isinstance(response, vm_pb2.VersionResponse)
        return response.version

    def gather(self) -> list[metrics_pb2.MetricFamily]:
        """The served VM's metrics as Prometheus ``MetricFamily`` messages (vm.VM/Gather)."""
        response = self.call("Gather", empty_pb2.Empty())
        assert isinstance(response, vm_pb2.GatherResponse)
        return list(response.metric_families)

    def shutdown(self) -> None:
        """Tell the served VM the node is shutting down (a plugin then exits)."""
        self.call("Shutdown", empty_pb2.Empty())

    def submit_transactions(self, transactions: Iterable[Transaction]) -> int:
        """Queue signed ``transactions`` in the served stack's mempool in one round trip
        (what :func:`vmstack.submission.submit_transactions` does for a stack over this client);
        the number queued. The served mempool's refusal arrives as
        :class:`~vmstack.errors.InvalidTransaction` with its reason, nothing queued."""
        request = vmstack_pb2.SubmitTransactionsRequest(
            transactions=[tx.encode() for tx in transactions]
        )
        response = self.call("SubmitTransactions", request)
        assert isinstance(response, vmstack_pb2.SubmitTransactionsResponse)
        if response.queued != len(request.transactions):
            raise VMUnavailable(
                f"SubmitTransactions: the VM at {self._address} broke the "
                f"protocol (all or none): it queued {response.queued} of "
                f"{len(request.transactions)}"
            )
        return response.queued

    def _describe(self) -> vmstack_pb2.DescribeResponse:
        response = self.call("Describe", vmstack_pb2.DescribeRequest())
        assert isinstance(response, vmstack_pb2.DescribeResponse)
        return response

    def describe_served(self) -> StackDescription:
        """The served stack, top to bottom, as :func:`vmstack.describe_stack` reads it on
        the server; ``describe_stack`` of a stack over this client includes it."""
        return StackDescription(
            tuple(
                LayerInfo(
                    kind=layer.kind,
                    name=layer.name if layer.HasField("name") else None,
                    batching=layer.batching,
                )
                for layer in self._describe().layers
            )
        )

    def served_metrics(self) -> str:
        """The served stack's Prometheus metrics, in the text exposition format ("" when
        the server has no registry)."""
        return self._describe().metrics


class _LastAcceptedFacts:
    """An Initialize or SetState answer read as a block's facts."""

    __slots__ = ("height", "parent_id", "timestamp")

    def __init__(self, response: Any) -> None:
        self.parent_id = response.last_accepted_parent_id
        self.height = response.height
        self.timestamp = response.timestamp


def _zero() -> float:
    return 0.0
