"""Decisions under consensus over the process boundary: two ``vmstack plugin`` processes,
a builder and a peer, driven with plain protocol-45 vm.VM messages as avalanchego's engine
sends them. A child of the processing transition block verifies on both before either
accepts the transition block; an envelope rejected on the builder leaves its inner block
to a second envelope, which both accept; of two siblings the one accepted wins on both."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import attrs
import grpc
import pytest
from google.protobuf import empty_pb2
from google.protobuf.message import Message

from tests.wrappers.rpc.node_side import GENESIS, Runtime, call_vm
from vmstack.wrappers.proposer.envelope import PostForkBlock, build_unsigned
from vmstack.wrappers.rpc import PROTOCOL_VERSION, vm_pb2
from vmstack.wrappers.rpc.plugin import ENGINE_ADDRESS_VARIABLE

pytestmark = pytest.mark.processes

#: Genesis is at 0 and every block the plugins build is stamped with the wall clock, so the
#: first block built is the transition block, and the last pre-fork block too.
CONFIG = json.dumps({"transition_time": 1, "fork_time": 1}).encode()


@attrs.define
class Node:
    """The node's side of one plugin: vm.VM calls on its channel."""

    channel: grpc.Channel

    def call(self, method: str, request: Message, response: type[Message]) -> Message:
        return call_vm(self.channel, method, request, response)


@contextmanager
def plugin(tmp_path: Path, name: str) -> Iterator[Node]:
    """A plugin process, handshaken and initialized over its own chain folder."""
    runtime = Runtime()
    environment = {**os.environ, ENGINE_ADDRESS_VARIABLE: f"127.0.0.1:{runtime.port}"}
    folder = tmp_path / name
    folder.mkdir()
    process = subprocess.Popen(
        [sys.executable, "-m", "vmstack", "plugin"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=environment,
        cwd=folder,
        start_new_session=True,
    )
    try:
        assert runtime.received.wait(60), "the plugin made no handshake"
        handshake = runtime.handshake
        assert handshake is not None and handshake.protocol_version == PROTOCOL_VERSION
        with grpc.insecure_channel(handshake.addr) as channel:
            node = Node(channel)
            node.call(
                "Initialize",
                vm_pb2.InitializeRequest(
                    network_id=12345,
                    chain_data_dir=str(folder / "chain"),
                    genesis_bytes=GENESIS,
                    config_bytes=CONFIG,
                ),
                vm_pb2.InitializeResponse,
            )
            node.call(
                "SetState",
                vm_pb2.SetStateRequest(state=vm_pb2.STATE_NORMAL_OP),
                vm_pb2.SetStateResponse,
            )
            yield node
            node.call("Shutdown", empty_pb2.Empty(), empty_pb2.Empty)
            assert process.wait(30) == 0
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(30)
        runtime.server.stop(None).wait(10)


def build(node: Node) -> vm_pb2.BuildBlockResponse:
    built = node.call("BuildBlock", vm_pb2.BuildBlockRequest(), vm_pb2.BuildBlockResponse)
    assert isinstance(built, vm_pb2.BuildBlockResponse)
    return built


def verify(node: Node, data: bytes) -> None:
    answer = node.call(
        "BlockVerify", vm_pb2.BlockVerifyRequest(bytes=data), vm_pb2.BlockVerifyResponse
    )
    assert isinstance(answer, vm_pb2.BlockVerifyResponse)


def prefer(node: Node, block_id: bytes) -> None:
    node.call("SetPreference", vm_pb2.SetPreferenceRequest(id=block_id), empty_pb2.Empty)


def accept(node: Node, block_id: bytes) -> None:
    node.call("BlockAccept", vm_pb2.BlockAcceptRequest(id=block_id), empty_pb2.Empty)


def reject(node: Node, block_id: bytes) -> None:
    node.call("BlockReject", vm_pb2.BlockRejectRequest(id=block_id), empty_pb2.Empty)


def parse(node: Node, data: bytes) -> vm_pb2.ParseBlockResponse:
    parsed = node.call(
        "ParseBlock", vm_pb2.ParseBlockRequest(bytes=data), vm_pb2.ParseBlockResponse
    )
    assert isinstance(parsed, vm_pb2.ParseBlockResponse)
    return parsed


def at_height(node: Node, height: int) -> bytes:
    answer = node.call(
        "GetBlockIDAtHeight",
        vm_pb2.GetBlockIDAtHeightRequest(height=height),
        vm_pb2.GetBlockIDAtHeightResponse,
    )
    assert isinstance(answer, vm_pb2.GetBlockIDAtHeightResponse)
    return answer.blk_id


def served(node: Node, block_id: bytes) -> bool:
    answer: Message = node.call(
        "GetBlock", vm_pb2.GetBlockRequest(id=block_id), vm_pb2.GetBlockResponse
    )
    assert isinstance(answer, vm_pb2.GetBlockResponse)
    return answer.err == vm_pb2.ERROR_UNSPECIFIED


@pytest.mark.slow
def test_decisions_across_the_transition_and_the_fork_over_the_wire(tmp_path: Path) -> None:
    """Builder and peer agree through a child of the processing transition block, a second
    envelope of a rejected envelope's inner block, and a rejected sibling."""
    with ExitStack() as stack:
        builder = stack.enter_context(plugin(tmp_path, "builder"))
        peer = stack.enter_context(plugin(tmp_path, "peer"))

        # The transition block (the last pre-fork block) and a child built on it while it
        # is processing (the first post-fork block): both verify on builder and peer.
        transition = build(builder)
        verify(builder, transition.bytes)
        prefer(builder, transition.id)
        child = build(builder)
        assert child.parent_id == transition.id
        verify(builder, child.bytes)
        verify(peer, transition.bytes)
        verify(peer, child.bytes)
        for node in (builder, peer):
            prefer(node, child.id)
            accept(node, transition.id)
            accept(node, child.id)
            assert at_height(node, child.height) == child.id

        # An envelope rejected on the builder; a second envelope of its inner block is
        # accepted on both (the inner block was never rejected below).
        first = build(builder)
        verify(builder, first.bytes)
        envelope = PostForkBlock.decode(first.bytes)
        second = build_unsigned(
            envelope.parent_id, envelope.timestamp + 1, envelope.pchain_height, envelope.inner
        )
        assert second.id != first.id
        reject(builder, first.id)
        assert not served(builder, first.id)
        for node in (builder, peer):
            verify(node, bytes(second))
            prefer(node, second.id)
            accept(node, second.id)
            assert at_height(node, first.height) == second.id

        # Two siblings, one from each node: the builder's is accepted on both, the peer's
        # rejected on both, and the next block builds on the winner.
        winner = build(builder)
        time.sleep(1.1)
        loser = build(peer)
        assert winner.parent_id == loser.parent_id == second.id and winner.id != loser.id
        for node in (builder, peer):
            for block in (winner, loser):
                assert parse(node, block.bytes).id == block.id
                verify(node, block.bytes)
            prefer(node, winner.id)
            accept(node, winner.id)
            reject(node, loser.id)
            assert not served(node, loser.id)
            assert at_height(node, winner.height) == winner.id
        assert build(peer).parent_id == winner.id
