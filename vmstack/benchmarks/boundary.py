"""Benchmark cases across the process boundary: what batching saves when every call is a
gRPC round trip to a VM in another process, and what crossing costs beside a bare gRPC call.

A chain of 2000 blocks of 10 signed transactions (300 in quick mode) is generated on an
:class:`~vmstack.store.LMDBStore`; then :func:`~vmstack.wrappers.rpc.spawn` serves its
C-chain VM from a child process (``vmstack serve``), and the engine's side calls it through
a :class:`~vmstack.wrappers.rpc.VMClient`:

- GetAncestors: fast is one batched ``get_ancestors`` of the whole chain (one round trip);
  the baseline is the fallback walk, one ``get_block`` round trip per block (each restoring
  the block the honest way on the served side), timed on the newest ``SERIAL_BLOCKS``
  blocks and scaled to the request;
- BatchedParseBlock at 4, 10 and 100 blocks: fast is one ``batched_parse_block`` round trip
  for the batch; the baseline is one ``parse_block`` round trip per block.

The floor of each of those rows is the same call on the same chain in this process, with
no boundary at all (a VM over the same store, opened read-only), so ``vs floor`` is what
crossing costs on top of the work itself. ``round_trip_us`` is one GetBlockIDAtHeight round
trip (a call the served VM answers from its index).

The crossing rows (group "crossing vs a bare gRPC call") go over a second chain of
:data:`BLOCKS` blocks of one transaction each (a batch of 2000 of them fits one request,
which 2000 blocks of 10 transactions do not), for GetAncestors and BatchedParseBlock of 4,
100 and 2000 blocks (300 in quick mode):

- fast: what crossing costs, the served call less the time the served stack itself spent
  on it, as the stack's own metered layer (``served``) records it in the child, read
  (Describe) before and after each round of calls, so both figures are of the very same
  calls and the work's own jitter does not enter the difference;
- baseline: the served call itself, work included (so ``speedup`` here is only the share of
  the call that is crossing, not a goal);
- floor: a bare gRPC call of the same bytes: a trivial servicer in another process
  returning the pre-built response message (and reading the request) over the same channel
  kind, a Unix socket, called with the same request message.

Each row's notes split what the crossing costs beyond the bare call, a block's share, by
side: ``client_us_per_block`` is the served call's client (a
:class:`~vmstack.wrappers.rpc.VMClient`, through the same engine helper) calling the bare
server, which answers ``vm.VM``'s own method with the same pre-built response, less the
bare call: the client's work on the request and the answer, nothing of the server's;
``server_us_per_block`` is the rest of the crossing, what the server does outside the
served stack's metered layer. A row that misses its goal says both, and says so when the
client's share alone is over what the goal leaves (the bare call's own time again).

Every row's sides (the served call, the bare call, and the client calling the bare server)
are timed alternately, round by round, so a machine that slows down in the middle of a row
slows all its sides alike.
"""

from __future__ import annotations

import contextlib
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import attrs
import grpc
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from vmstack.batching import (
    batched_parse_block,
    get_ancestors,
    serial_get_ancestors,
    serial_parse_block,
)
from vmstack.benchmarks import Comparison, alternated_medians, calls_filling
from vmstack.benchmarks.parse import BATCH_SIZES
from vmstack.cchain.generate import generate_chain
from vmstack.cchain.vm import CChainVM
from vmstack.clock import SimClock
from vmstack.store import LMDBStore
from vmstack.wrappers.rpc import VMClient, spawn, vm_pb2
from vmstack.wrappers.rpc.protocol import MAX_REQUEST_SIZE, MAX_RESPONSE_SIZE

__all__ = [
    "ANCESTORS_GOAL",
    "BLOCKS",
    "CROSSING_GOAL",
    "CROSSING_SIZES",
    "PARSE_GOAL",
    "QUICK_BLOCKS",
    "SERIAL_BLOCKS",
    "run",
    "serve_bare",
]

#: Blocks in the chain and in the GetAncestors request.
BLOCKS = 2000
#: Blocks in quick mode.
QUICK_BLOCKS = 300
#: Blocks the serial walk is timed on.
SERIAL_BLOCKS = 150
#: Signed transactions per block.
TXS_PER_BLOCK = 10
#: Signed transactions per block of the crossing rows' chain.
CROSSING_TXS_PER_BLOCK = 1
#: Blocks per call in the crossing rows (the largest is the chain: BLOCKS, or QUICK_BLOCKS).
CROSSING_SIZES = (4, 100)
ANCESTORS_GOAL = ">= 100x serial walk"
PARSE_GOAL = ">= 5x at 100 blocks, >= 1x from 4"
CROSSING_GOAL = "crossing <= 2x a bare gRPC call of the same bytes"

_START = 1_700_000_000.0
#: No byte budget to speak of: the largest one avalanchego's protocol carries (an int32).
_NO_LIMIT = (1 << 31) - 1
_TIME_BUDGET = 600.0
_BARE_SERVICE = "vmstack.bench.Bare"
_GRPC_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_RESPONSE_SIZE),
    ("grpc.max_send_message_length", MAX_RESPONSE_SIZE),
]


def _medians(
    operations: Sequence[Callable[[], object]], *, repeat: int, budget: float
) -> list[float]:
    """The median seconds of one call of each operation, timed by
    :func:`~vmstack.benchmarks.alternated_medians` in rounds of about ``budget`` seconds of
    the slowest."""
    number = min(calls_filling(operation, budget) for operation in operations)
    return alternated_medians(operations, repeat=repeat, number=number)


def _generate(data_dir: Path, blocks: int, txs_per_block: int) -> list[bytes]:
    clock = SimClock(_START)
    with LMDBStore(data_dir, sync=False) as store:
        return generate_chain(
            CChainVM(store, clock=clock),
            blocks=blocks,
            txs_per_block=txs_per_block,
            seed=3,
            clock=clock,
        )


def run(quick: bool) -> list[Comparison]:
    """One GetAncestors row and one BatchedParseBlock row per batch size, over a served
    process; then the crossing rows against a bare gRPC call."""
    blocks = QUICK_BLOCKS if quick else BLOCKS
    with tempfile.TemporaryDirectory(prefix="vmstack-bench-rpc-") as directory:
        rows = _batching_rows(Path(directory) / "chain", blocks, quick)
        rows += _crossing_rows(Path(directory), blocks, quick)
    return rows


def _batching_rows(data_dir: Path, blocks: int, quick: bool) -> list[Comparison]:
    serial_blocks = 40 if quick else SERIAL_BLOCKS
    repeat = 5 if quick else 9
    budget = 0.01 if quick else 0.05
    ids = _generate(data_dir, blocks, TXS_PER_BLOCK)
    tip = ids[-1]
    with (
        LMDBStore(data_dir, readonly=True) as store,
        spawn(data_dir, readonly=True, timeout=120.0) as client,
    ):
        local = CChainVM(store, clock=SimClock(_START))

        def ancestors_over(vm: object, count: int = blocks) -> list[bytes]:
            return get_ancestors(
                vm,  # type: ignore[arg-type]
                tip,
                max_blocks_num=count,
                max_blocks_size=_NO_LIMIT,
                max_retrieval_time=_TIME_BUDGET,
            )

        def walk() -> list[bytes]:
            return serial_get_ancestors(
                client,
                tip,
                max_blocks_num=serial_blocks,
                max_blocks_size=_NO_LIMIT,
                max_retrieval_time=_TIME_BUDGET,
            )

        answer = ancestors_over(client)
        if answer != ancestors_over(local) or walk() != answer[:serial_blocks]:
            raise ValueError("the answers across the boundary differ from in process")
        fast, walked, floor = _medians(
            (lambda: ancestors_over(client), walk, lambda: ancestors_over(local)),
            repeat=repeat,
            budget=budget,
        )
        serial = walked * blocks / serial_blocks
        tip_height = blocks

        def round_trip() -> bytes:
            return client.get_block_id_at_height(tip_height)

        round_trip_seconds = _medians((round_trip,), repeat=repeat, budget=budget)[0]
        notes_round_trip = round(round_trip_seconds * 1e6, 1)
        rows = [
            Comparison(
                group="GetAncestors over gRPC",
                case=f"{blocks} blocks x {TXS_PER_BLOCK} txs, served process",
                fast_seconds=fast,
                baseline_seconds=serial,
                floor_seconds=floor,
                fast_label="get_ancestors: one round trip",
                baseline_label="get_block round trip per block (scaled)",
                floor_label="get_ancestors in process, no boundary",
                goal=ANCESTORS_GOAL,
                notes={
                    "blocks": blocks,
                    "answer_bytes": sum(map(len, answer)),
                    "serial_walk_timed_on_blocks": serial_blocks,
                    "round_trip_us": notes_round_trip,
                },
            ).judged(min_speedup=100.0)
        ]
        for size in BATCH_SIZES:
            batch = answer[:size]

            def batched(data: list[bytes] = batch) -> object:
                return batched_parse_block(client, data)

            def one_by_one(data: list[bytes] = batch) -> object:
                return serial_parse_block(client, data)

            def in_process(data: list[bytes] = batch) -> object:
                return batched_parse_block(local, data)

            fast, serial, floor = _medians(
                (batched, one_by_one, in_process), repeat=repeat, budget=budget
            )
            rows.append(
                Comparison(
                    group="BatchedParseBlock over gRPC",
                    case=f"{size} blocks x {TXS_PER_BLOCK} txs, served process",
                    fast_seconds=fast,
                    baseline_seconds=serial,
                    floor_seconds=floor,
                    fast_label="batched_parse_block: one round trip",
                    baseline_label="parse_block round trip per block",
                    floor_label="batched_parse_block in process, no boundary",
                    goal=PARSE_GOAL,
                    notes={
                        "blocks": size,
                        "batch_bytes": sum(map(len, batch)),
                        "round_trip_us": notes_round_trip,
                    },
                ).judged(min_speedup=5.0 if size >= 100 else 1.0)
            )
    return rows


def serve_bare(directory: str) -> None:
    """The bare gRPC server of the crossing rows' floor (run in a child process): for each
    ``NAME.request`` / ``NAME.response`` pair of files in ``directory`` (``NAME`` being
    ``METHOD-SIZE``), method ``NAME`` of a trivial service reads a request of ``METHOD``
    and answers the pre-built response; ``vm.VM``'s own ``METHOD`` (what a
    :class:`~vmstack.wrappers.rpc.VMClient` calls) answers the same response for a request
    of ``SIZE`` blocks (a GetAncestors request's ``max_blocks_num``, a BatchedParseBlock
    request's elements). Serves on ``directory/sock`` until its standard input closes,
    having printed ``ready``."""
    from concurrent.futures import ThreadPoolExecutor

    from vmstack.wrappers.rpc.protocol import METHODS

    handlers: dict[str, grpc.RpcMethodHandler[Message, Message]] = {}
    by_size: dict[str, dict[int, Message]] = {}
    for path in sorted(Path(directory).glob("*.response")):
        name = path.stem
        method_name, size = name.split("-")
        method = METHODS[method_name]
        response = method.response.FromString(path.read_bytes())
        by_size.setdefault(method_name, {})[int(size)] = response

        def answer(request: Message, context: object, response: Message = response) -> Message:
            return response

        handlers[name] = grpc.unary_unary_rpc_method_handler(
            answer,
            request_deserializer=method.request.FromString,
            response_serializer=method.response.SerializeToString,
        )
    vm_handlers: dict[str, grpc.RpcMethodHandler[Message, Message]] = {}
    for method_name, responses in by_size.items():
        method = METHODS[method_name]

        def sized(
            request: Message, context: object, responses: dict[int, Message] = responses
        ) -> Message:
            if isinstance(request, vm_pb2.GetAncestorsRequest):
                return responses[request.max_blocks_num]
            assert isinstance(request, vm_pb2.BatchedParseBlockRequest)
            return responses[len(request.request)]

        vm_handlers[method_name] = grpc.unary_unary_rpc_method_handler(
            sized,
            request_deserializer=method.request.FromString,
            response_serializer=method.response.SerializeToString,
        )
    server = grpc.server(
        ThreadPoolExecutor(max_workers=4),
        options=[
            ("grpc.max_receive_message_length", MAX_REQUEST_SIZE),
            ("grpc.max_send_message_length", MAX_RESPONSE_SIZE),
        ],
    )
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(_BARE_SERVICE, handlers),
            grpc.method_handlers_generic_handler("vm.VM", vm_handlers),
        )
    )
    server.add_insecure_port(f"unix:{Path(directory) / 'sock'}")
    server.start()
    print("ready", flush=True)
    with contextlib.suppress(OSError, ValueError):
        sys.stdin.buffer.read()
    server.stop(1.0).wait()


@contextlib.contextmanager
def _bare_server(directory: Path, calls: Mapping[str, tuple[Message, Message]]) -> Iterator[str]:
    """A child process running :func:`serve_bare` over ``calls`` (name: request and the
    pre-built response); yields its address."""
    directory.mkdir()
    for name, (_, response) in calls.items():
        (directory / f"{name}.response").write_bytes(response.SerializeToString())
    code = "import sys; from vmstack.benchmarks.boundary import serve_bare; serve_bare(sys.argv[1])"
    process = subprocess.Popen(
        [sys.executable, "-c", code, str(directory)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert process.stdout is not None
        if process.stdout.readline().strip() != b"ready":
            raise RuntimeError("the bare gRPC server did not start")
        yield f"unix:{directory / 'sock'}"
    finally:
        assert process.stdin is not None
        process.stdin.close()
        try:
            process.wait(10.0)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _crossing_rows(directory: Path, blocks: int, quick: bool) -> list[Comparison]:
    """GetAncestors and BatchedParseBlock of each crossing size: the served call less the
    served stack's own time on it, against a bare gRPC call of the same bytes."""
    repeat = 7 if quick else 11
    budget = 0.01 if quick else 0.05
    data_dir = directory / "crossing-chain"
    tip = _generate(data_dir, blocks, CROSSING_TXS_PER_BLOCK)[-1]
    sizes = (*CROSSING_SIZES, blocks)
    with spawn(data_dir, readonly=True, timeout=120.0) as client:
        chain = client.get_ancestors(tip, blocks, _NO_LIMIT, _TIME_BUDGET)
        calls: dict[str, tuple[Message, Message]] = {}
        served: dict[str, Callable[[], object]] = {}
        for size in sizes:
            batch = chain[:size]
            request = vm_pb2.GetAncestorsRequest(
                blk_id=tip,
                max_blocks_num=size,
                max_blocks_size=_NO_LIMIT,
                max_blocks_retrival_time=int(_TIME_BUDGET * 1e9),
            )
            calls[f"GetAncestors-{size}"] = (request, vm_pb2.GetAncestorsResponse(blks_bytes=batch))
            parsed = client.batched_parse_block(batch)
            calls[f"BatchedParseBlock-{size}"] = (
                vm_pb2.BatchedParseBlockRequest(request=batch),
                vm_pb2.BatchedParseBlockResponse(
                    response=[
                        vm_pb2.ParseBlockResponse(
                            id=block.id,
                            parent_id=block.parent_id,
                            height=block.height,
                            timestamp=Timestamp(seconds=block.timestamp),
                        )
                        for block in parsed
                    ]
                ),
            )
            served[f"GetAncestors-{size}"] = _ancestors_call(client, tip, size)
            served[f"BatchedParseBlock-{size}"] = _parse_call(client, batch)
            if served[f"GetAncestors-{size}"]() != batch:
                raise ValueError("the served answer is not the chain's newest blocks")
        rows = []
        with (
            _bare_server(directory / "bare", calls) as address,
            grpc.insecure_channel(address, options=_GRPC_OPTIONS) as channel,
            VMClient(address, timeout=120.0) as bare_client,
        ):
            for name, (sent, answered) in calls.items():
                stub = channel.unary_unary(
                    f"/{_BARE_SERVICE}/{name}",
                    request_serializer=type(sent).SerializeToString,
                    response_deserializer=type(answered).FromString,
                )

                def bare(stub: Callable[..., Message] = stub, request: Message = sent) -> object:
                    return stub(request, timeout=120.0)

                method, count = name.split("-")
                size = int(count)
                client_side = (
                    _ancestors_call(bare_client, tip, size)
                    if method == "GetAncestors"
                    else _parse_call(bare_client, chain[:size])
                )
                metric = _SERVED_METRICS[method]
                operations = (served[name], bare, client_side)
                number = min(calls_filling(operation, budget) for operation in operations)
                over: list[float] = []
                work: list[float] = []
                floor: list[float] = []
                client_side_times: list[float] = []
                for operation in operations:
                    operation()
                for round_index in range(repeat):
                    # Alternated: the bare sides first every other round.
                    if round_index % 2:
                        floor.append(_per_call(bare, number))
                        client_side_times.append(_per_call(client_side, number))
                    before = _served_seconds(client, metric)
                    over.append(_per_call(served[name], number))
                    work.append((_served_seconds(client, metric) - before) / number)
                    if not round_index % 2:
                        client_side_times.append(_per_call(client_side, number))
                        floor.append(_per_call(bare, number))
                crossings = [whole - part for whole, part in zip(over, work, strict=True)]
                crossing = statistics.median(crossings)
                bare_seconds = statistics.median(floor)
                per_block_us = (crossing - bare_seconds) / size * 1e6
                client_us = (statistics.median(client_side_times) - bare_seconds) / size * 1e6
                server_us = (
                    statistics.median(
                        whole - own for whole, own in zip(crossings, client_side_times, strict=True)
                    )
                    / size
                    * 1e6
                )
                rows.append(
                    Comparison(
                        group="crossing vs a bare gRPC call",
                        case=f"{method}, {count} blocks x {CROSSING_TXS_PER_BLOCK} tx",
                        fast_seconds=crossing,
                        baseline_seconds=statistics.median(over),
                        floor_seconds=bare_seconds,
                        fast_label="served call less the served stack's own time",
                        baseline_label="served call, work included",
                        floor_label="bare gRPC call of the same bytes, trivial servicer",
                        goal=CROSSING_GOAL,
                        notes={
                            "blocks": size,
                            "request_bytes": sent.ByteSize(),
                            "response_bytes": answered.ByteSize(),
                            "served_stack_us": round(statistics.median(work) * 1e6, 1),
                            "over_bare_us_per_block": round(per_block_us, 2),
                            "client_us_per_block": round(client_us, 2),
                            "server_us_per_block": round(server_us, 2),
                        },
                    ).judged(
                        max_over_floor=2.0,
                        unmet_reason=_crossing_reason(
                            method,
                            size,
                            _Shares(per_block_us, client_us, server_us, bare_seconds / size * 1e6),
                        ),
                    )
                )
    return rows


def _per_call(operation: Callable[[], object], number: int) -> float:
    """Seconds per call of ``number`` calls of ``operation``."""
    start = time.perf_counter()
    for _ in range(number):
        operation()
    return (time.perf_counter() - start) / number


@attrs.frozen
class _Shares:
    """What a crossing row's call costs beyond the bare call, in microseconds a block: in
    all (``over``), on the client's side (``client``: the same client calling the bare
    server, less the bare call) and on the server's (``server``: the rest, outside the
    served stack's metered layer); ``bare`` is the bare call itself, a block's share."""

    over: float
    client: float
    server: float
    bare: float


def _crossing_reason(method: str, blocks: int, shares: _Shares) -> str:
    """Why a crossing row misses its goal: what the served call does in Python, per call
    and per block, that the bare call (protobuf's C runtime on both sides, no Python object
    per block) does not, each side's share as timed; and, when the client's share alone is
    over what the goal leaves (the bare call's own time again), that no server can meet
    it."""
    if method == "BatchedParseBlock":
        client = (
            "writes the request, reads each block's four facts out of the answer's "
            "protobuf messages and makes one RemoteBlock per block"
        )
        server = (
            "makes each element of the request a bytes object, the metered layer wraps each "
            "parsed block (its own time ends before), the server reads each block's facts "
            "once, keeps the block for its decisions (freeing the one it held for the same "
            "bytes) and writes its answer, and the garbage collector's passes over the "
            "parsed blocks that fall after the metered layer's time are counted here"
        )
    else:
        client = "makes each block of the answer a bytes object and checks the budget"
        server = "writes the blocks' answer outside its metered layer"
    reason = (
        f"the crossing costs {shares.over * blocks:,.0f} us more than the bare call "
        f"({shares.over:.2f} us a block, where the goal leaves {shares.bare:.2f}): the "
        f"client's side {shares.client:.2f} us a block (the same client calling the bare "
        f"server: per call its checks and count; per block it {client}), the server's "
        f"{shares.server:.2f} us a block (per call its dispatch, lock and clock; per block "
        f"it {server}); the bare call makes no Python object per block on either side"
    )
    if shares.client > shares.bare:
        reason += "; the client's side alone is over what the goal leaves, so no server meets it"
    return reason


#: The served stack's metered layer's histogram of each crossing method (its sum, in seconds).
_SERVED_METRICS = {
    "GetAncestors": 'served_get_ancestors_duration_seconds_sum{outcome="success"}',
    "BatchedParseBlock": 'served_batched_parse_block_duration_seconds_sum{outcome="success"}',
}


def _served_seconds(client: VMClient, metric: str) -> float:
    """The seconds the served stack's metered layer has recorded in ``metric``."""
    for line in client.served_metrics().splitlines():
        name, _, value = line.rpartition(" ")
        if name == metric:
            return float(value)
    raise ValueError(f"the served stack records no {metric}")


def _ancestors_call(vm: object, tip: bytes, size: int) -> Callable[[], list[bytes]]:
    def call() -> list[bytes]:
        return get_ancestors(
            vm,  # type: ignore[arg-type]
            tip,
            max_blocks_num=size,
            max_blocks_size=_NO_LIMIT,
            max_retrieval_time=_TIME_BUDGET,
        )

    return call


def _parse_call(vm: object, batch: list[bytes]) -> Callable[[], object]:
    def call() -> object:
        return batched_parse_block(vm, batch)  # type: ignore[arg-type]

    return call
