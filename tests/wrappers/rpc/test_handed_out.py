"""The blocks a server hands out: a decision reaches the block whose bytes the caller holds,
what the server keeps of them is bounded by bytes, and a rejected block stays rejected."""

from __future__ import annotations

import gc
import tracemalloc
from typing import Any

import attrs
import grpc
import pytest
from google.protobuf import empty_pb2
from google.protobuf.message import Message

from tests.wrappers.rpc.conftest import BLOCKS, ServedChain, build_served_chain
from vmstack.cchain import AVALANCHE, block_bytes, header_slice, split_block
from vmstack.cchain.rlpbytes import encode_item, list_prefix
from vmstack.errors import BlockNotFound, InvalidBlock
from vmstack.interfaces import ChainVM
from vmstack.rlpreader import list_items
from vmstack.store import MemoryStore
from vmstack.wrappers.proposer.envelope import PostForkBlock, build_unsigned, decode_block
from vmstack.wrappers.rpc import VMClient, VMServer, vm_pb2
from vmstack.wrappers.rpc.handed import HANDED_OUT_BYTES, HANDED_OUT_OVERHEAD


@attrs.frozen
class NextBlock:
    """The block after a served chain's tip, unknown to it, with a forgery of it: the same
    C-chain header (so the same ID) over another block's body. ``inner`` and ``forged``
    are C-chain bytes, ``envelope`` and ``forged_envelope`` the post-fork blocks over them
    (the forged one unsigned, as any peer can make it)."""

    inner: bytes
    forged: bytes
    envelope: bytes
    forged_envelope: bytes


def with_body_of(block: bytes, other: bytes) -> bytes:
    """``block``'s header (so its ID) over ``other``'s body."""
    return block_bytes(bytes(header_slice(block)), split_block(other)[1])


@pytest.fixture
def chain() -> ServedChain:
    """A fresh chain of BLOCKS blocks (the tests decide blocks on it)."""
    return build_served_chain(MemoryStore())


@pytest.fixture(scope="module")
def next_block() -> NextBlock:
    """Block BLOCKS + 1 of the same chain, built on a twin that went one block further."""
    twin = build_served_chain(MemoryStore(), blocks=BLOCKS + 1)
    c_part = twin.c_part()
    inner = bytes(c_part.get_block(c_part.get_block_id_at_height(BLOCKS + 1)))
    before = bytes(c_part.get_block(c_part.get_block_id_at_height(BLOCKS)))
    forged = with_body_of(inner, before)
    envelope = bytes(twin.full_stack().get_block(twin.tip))
    decoded = decode_block(envelope)
    assert isinstance(decoded, PostForkBlock) and decoded.inner == inner
    forged_envelope = bytes(
        build_unsigned(decoded.parent_id, decoded.timestamp, decoded.pchain_height, forged)
    )
    return NextBlock(inner, forged, envelope, forged_envelope)


def test_a_peers_body_under_a_handed_out_id_never_replaces_the_block(
    chain: ServedChain, next_block: NextBlock
) -> None:
    """The engine parses G; a peer sends G's header over another body, which parses under
    G's ID; G still verifies and is accepted over the boundary, as in process."""
    in_process = chain.c_part()
    honest, forged = (
        in_process.parse_block(next_block.inner),
        in_process.parse_block(next_block.forged),
    )
    assert forged.id == honest.id
    honest.verify()  # in process: the engine's own object
    with (
        VMServer(chain.c_part(), clock=chain.clock) as server,
        VMClient(server.address, clock=chain.clock) as client,
    ):
        honest, forged = (
            client.parse_block(next_block.inner),
            client.parse_block(next_block.forged),
        )
        assert forged.id == honest.id
        honest.verify()
        with pytest.raises(InvalidBlock):
            forged.verify()
        forged.reject()  # the forgery's rejection does not reach the honest block
        honest.accept()
        assert client.last_accepted() == honest.id
        assert bytes(client.get_block(honest.id)) == next_block.inner


def test_a_decision_names_the_bytes_it_decides(chain: ServedChain, next_block: NextBlock) -> None:
    """A decision for bytes the server does not hold, under the ID of a served block with
    other bytes, is refused: it never reaches that block."""
    with (
        VMServer(chain.c_part(), clock=chain.clock, handed_out_bytes=0) as server,
        VMClient(server.address, clock=chain.clock) as client,
    ):
        forged = client.parse_block(next_block.forged)
        honest = client.parse_block(next_block.inner)
        honest.verify()  # processing in the served VM; the server kept nothing
        with pytest.raises(InvalidBlock, match="other bytes"):
            forged.accept()
        with pytest.raises(InvalidBlock, match="other bytes"):
            forged.reject()
        honest.accept()
        assert client.last_accepted() == honest.id


def test_a_peers_body_does_not_poison_the_full_stack_over_the_boundary(
    chain: ServedChain, next_block: NextBlock
) -> None:
    """The same through the engine-side stack: the proposer layer over the client parses
    the honest envelope, then a forged envelope over G's header with another body; the
    honest one verifies and is accepted."""
    with (
        VMServer(chain.c_part(), clock=chain.clock) as server,
        VMClient(server.address, clock=chain.clock) as client,
    ):
        stack = chain.full_stack(out_of_process=client)
        honest = stack.parse_block(next_block.envelope)
        forged = stack.parse_block(next_block.forged_envelope)
        assert forged.id != honest.id
        honest.verify()
        with pytest.raises(InvalidBlock):
            forged.verify()
        honest.accept()
        assert stack.last_accepted() == honest.id
        assert bytes(client.get_block(client.last_accepted())) == next_block.inner


def _variants(block: bytes, count: int, size: int) -> list[bytes]:
    """``count`` blocks of about ``size`` bytes that parse: ``block``'s header with another
    nonce (so another ID; two blocks per nonce) over a transactions list of one junk item
    (a body's transactions are read only by ``verify``), distinct in every block."""
    header = AVALANCHE.decode_header(header_slice(block))
    items = [bytes(item) for item in list_items(split_block(block)[1])]
    variants = []
    for index in range(count):
        nonce = (index // 2).to_bytes(8, "big")
        items[0] = encode_item([index.to_bytes(4, "big") * (size // 4)])
        payload = b"".join(items)
        variants.append(
            block_bytes(
                AVALANCHE.encode_header(attrs.evolve(header, nonce=nonce)),
                list_prefix(len(payload)) + payload,
            )
        )
    return variants


@pytest.mark.slow
def test_what_the_server_keeps_of_handed_out_blocks_is_bounded_by_bytes(
    chain: ServedChain, next_block: NextBlock
) -> None:
    """Parsed blocks that are never decided (1.5 MB each, 3 times the bound in all, under
    new IDs and under IDs already handed out) leave at most the bound behind in the
    serving process, and the first block, no longer kept, still verifies from its bytes."""
    size = 1_500_000
    count = 3 * HANDED_OUT_BYTES // size
    with (
        VMServer(chain.c_part(), clock=chain.clock) as server,
        VMClient(server.address, clock=chain.clock) as client,
    ):
        first = client.parse_block(next_block.inner)
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for data in _variants(next_block.inner, count, size):
                client.parse_block(data)
                del data
            gc.collect()
            left = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        kept, counted = server.handed_out
        assert counted <= HANDED_OUT_BYTES
        assert kept <= HANDED_OUT_BYTES // HANDED_OUT_OVERHEAD
        assert kept < count
        # What is left in this process (server and client alike) is the kept blocks, with
        # room for what the interpreter and gRPC hold on to.
        assert left <= HANDED_OUT_BYTES + 8 * 1024 * 1024, f"{left / 1e6:.1f} MB left"
        first.verify()
        first.accept()
        assert client.last_accepted() == first.id


def test_a_rejected_remote_block_refuses_verify_and_accept_as_in_process(
    chain: ServedChain, next_block: NextBlock
) -> None:
    """verify and accept of a rejected block fail over the boundary as they do in process,
    and the block is not served again."""
    outcomes = []
    for over_boundary in (False, True):
        fresh = build_served_chain(MemoryStore())
        with (
            VMServer(fresh.c_part(), clock=fresh.clock) as server,
            VMClient(server.address, clock=fresh.clock) as client,
        ):
            vm: ChainVM = client if over_boundary else fresh.c_part()
            block = vm.parse_block(next_block.inner)
            block.verify()
            block.reject()
            with pytest.raises(InvalidBlock) as verify_error:
                block.verify()
            with pytest.raises(InvalidBlock) as accept_error:
                block.accept()
            with pytest.raises(BlockNotFound):
                vm.get_block(block.id)
            assert vm.get_ancestors(block.id, 10, 1 << 20, 1.0) == []  # type: ignore[attr-defined]
            outcomes.append((str(verify_error.value), str(accept_error.value)))
    assert outcomes[0] == outcomes[1]


def _plain_call(
    channel: grpc.Channel, method: str, request: Message, response: type[Message]
) -> Any:
    """One vm.VM call as avalanchego's client makes it: no vmstack metadata (no digest)."""
    stub = channel.unary_unary(
        f"/vm.VM/{method}",
        request_serializer=type(request).SerializeToString,
        response_deserializer=response.FromString,
    )
    return stub(request, timeout=30)


def test_avalanchegos_accept_by_id_reaches_the_block_it_verified(
    chain: ServedChain, next_block: NextBlock
) -> None:
    """avalanchego's exact sequence, with no digest beside the decision: ParseBlock(G),
    ParseBlock(B: G's header over another body, from a peer), BlockVerify(G's bytes),
    BlockAccept(G's ID). G is accepted, as vm_server.go accepts the block it verified."""
    with (
        VMServer(chain.c_part(), clock=chain.clock) as server,
        grpc.insecure_channel(server.address) as channel,
    ):
        parsed = [
            _plain_call(
                channel,
                "ParseBlock",
                vm_pb2.ParseBlockRequest(bytes=data),
                vm_pb2.ParseBlockResponse,
            )
            for data in (next_block.inner, next_block.forged)
        ]
        assert parsed[0].id == parsed[1].id
        _plain_call(
            channel,
            "BlockVerify",
            vm_pb2.BlockVerifyRequest(bytes=next_block.inner),
            vm_pb2.BlockVerifyResponse,
        )
        _plain_call(
            channel, "BlockAccept", vm_pb2.BlockAcceptRequest(id=parsed[0].id), empty_pb2.Empty
        )
        assert server.vm.last_accepted() == parsed[0].id
        assert bytes(server.vm.get_block(parsed[0].id)) == next_block.inner


def test_avalanchegos_reject_by_id_reaches_the_block_it_verified(
    chain: ServedChain, next_block: NextBlock
) -> None:
    """The same with BlockReject(G's ID): G, the verified block, is rejected and no longer
    served."""
    with (
        VMServer(chain.c_part(), clock=chain.clock) as server,
        grpc.insecure_channel(server.address) as channel,
    ):
        first = _plain_call(
            channel,
            "ParseBlock",
            vm_pb2.ParseBlockRequest(bytes=next_block.inner),
            vm_pb2.ParseBlockResponse,
        )
        _plain_call(
            channel,
            "ParseBlock",
            vm_pb2.ParseBlockRequest(bytes=next_block.forged),
            vm_pb2.ParseBlockResponse,
        )
        _plain_call(
            channel,
            "BlockVerify",
            vm_pb2.BlockVerifyRequest(bytes=next_block.inner),
            vm_pb2.BlockVerifyResponse,
        )
        _plain_call(channel, "BlockReject", vm_pb2.BlockRejectRequest(id=first.id), empty_pb2.Empty)
        with pytest.raises(BlockNotFound):
            server.vm.get_block(first.id)
