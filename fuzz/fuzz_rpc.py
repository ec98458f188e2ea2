"""Coverage-guided fuzzing of the process boundary's request handling (atheris).

A :class:`~vmstack.wrappers.rpc.VMServer` serves a full stack (transition, proposer layer)
over a ``MemoryStore`` holding a short chain. The first byte of each input picks one of the
service's methods; the rest is that method's request, handed to ``VMServer.answer`` as the
transport would hand it over (Shutdown, which closes the stack, and WaitForEvent, which waits
on a live call, are left out). Every answer must decode as the method's response; a refusal
must be of the project's error tree (a wire form of kind ``""`` means an exception from
outside the tree escaped the served VM: a crash); and no request may change the store. See
fuzz/README.md for how to run it.
"""

from __future__ import annotations

from collections.abc import Iterator

from harness import main
from opentelemetry.trace import NoOpTracer
from prometheus_client import CollectorRegistry

from vmstack import SimClock
from vmstack.cchain import generate_chain
from vmstack.stack import build_stack
from vmstack.store import MemoryStore
from vmstack.wrappers.proposer import StakingKey
from vmstack.wrappers.rpc import VMServer, vm_pb2, vmstack_pb2
from vmstack.wrappers.rpc.protocol import METHODS, NOW_METADATA_KEY, wire_error_of

START = 1_000.0
BLOCKS = 13
#: The methods by the first byte of an input (modulo their number).
NAMES = sorted(set(METHODS) - {"Shutdown", "WaitForEvent"})


def _setup() -> tuple[VMServer, MemoryStore, list[bytes], list[bytes]]:
    """The served node with ``BLOCKS`` accepted blocks; its block IDs and block bytes."""
    store, clock = MemoryStore(), SimClock(START)
    vm = build_stack(
        store,
        clock=clock,
        fork_time=START + 20,
        transition_time=START + 10,
        tracer=NoOpTracer(),
        registry=CollectorRegistry(),
        staking_key=StakingKey.generate(seed=b"fuzz"),
    )
    ids = generate_chain(vm, blocks=BLOCKS, txs_per_block=2, seed=7, clock=clock)
    blocks = [bytes(vm.get_block(block_id)) for block_id in ids]
    return VMServer(vm, clock=clock), store, ids, blocks


SERVER, STORE, IDS, BLOCKS_BYTES = _setup()


def _items() -> dict[bytes, bytes]:
    return {bytes(key): bytes(value) for key, value in STORE.iterate(b"")}


BEFORE = _items()


def one_input(data: bytes) -> None:
    """``data[1:]`` as a request of method ``NAMES[data[0] % len(NAMES)]``; raise on an
    answer that does not decode, a refusal from outside the error tree, or a changed
    store."""
    if not data:
        return
    method = METHODS[NAMES[data[0] % len(NAMES)]]
    try:
        method.response.FromString(
            SERVER.answer(method.name, data[1:], {NOW_METADATA_KEY: repr(START + 40)})
        )
    except Exception as error:
        wire = wire_error_of(error)
        assert wire.kind, f"{method.name}: {wire.message}"
    assert _items() == BEFORE, f"{method.name} changed the store"


def _request(name: str, request: object) -> bytes:
    payload = request if isinstance(request, bytes) else request.SerializeToString()  # type: ignore[attr-defined]
    return bytes([NAMES.index(name)]) + payload


def seeds() -> Iterator[bytes]:
    """A valid request of every method (decisions of blocks that are not processing)."""
    tip, block = IDS[-1], BLOCKS_BYTES[-1]
    yield _request("GetBlock", vm_pb2.GetBlockRequest(id=tip))
    yield _request("ParseBlock", vm_pb2.ParseBlockRequest(bytes=block))
    yield _request("BuildBlock", vm_pb2.BuildBlockRequest())
    yield _request("SetPreference", vm_pb2.SetPreferenceRequest(id=tip))
    yield _request("Initialize", vm_pb2.InitializeRequest())
    yield _request("GetBlockIDAtHeight", vm_pb2.GetBlockIDAtHeightRequest(height=3))
    yield _request("BlockVerify", vm_pb2.BlockVerifyRequest(bytes=block, p_chain_height=1))
    yield _request("BlockReject", vm_pb2.BlockRejectRequest(id=bytes(32)))
    yield _request("BlockReject", vm_pb2.BlockRejectRequest(id=tip))
    yield _request(
        "GetAncestors",
        vm_pb2.GetAncestorsRequest(
            blk_id=tip, max_blocks_num=5, max_blocks_size=100_000, max_blocks_retrival_time=10**9
        ),
    )
    yield _request("BatchedParseBlock", vm_pb2.BatchedParseBlockRequest(request=BLOCKS_BYTES[-3:]))
    yield _request("Gather", b"")
    yield _request("Describe", vmstack_pb2.DescribeRequest())


if __name__ == "__main__":
    main(one_input, seeds)
