"""``vmstack plugin`` driven as an avalanchego node drives a plugin, with nothing of vmstack's
client: the node's runtime service takes the handshake, and the node's calls are vm.VM
messages over a plain gRPC channel, as avalanchego's rpcchainvm client sends them."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import grpc
import pytest
from google.protobuf import empty_pb2
from google.protobuf.message import Message
from grpc_health.v1 import health_pb2

from tests.support.processes import wait_ended
from tests.wrappers.rpc.node_side import GENESIS, Runtime, call_vm
from vmstack.errors import VMUnavailable
from vmstack.wrappers.rpc import PROTOCOL_VERSION, VMClient, start_plugin, vm_pb2
from vmstack.wrappers.rpc.plugin import (
    ENGINE_ADDRESS_VARIABLE,
    PROTOCOL_VARIABLE,
    TERMINATION_GRACE,
)

pytestmark = pytest.mark.processes


@attrs.define
class Node:
    """The node's side of one plugin: its process, and vm.VM calls on its channel."""

    process: subprocess.Popen[bytes]
    channel: grpc.Channel
    address: str
    protocol_version: int

    def call(self, method: str, request: Message, response: type[Message]) -> Message:
        return call_vm(self.channel, method, request, response)


@contextlib.contextmanager
def start_node(tmp_path: Path, environment: dict[str, str] | None = None) -> Iterator[Node]:
    """A plugin started as a node starts it (with ``environment`` added), its handshake
    taken; the plugin is killed if it still runs at the end."""
    runtime = Runtime()
    environment = {
        **os.environ,
        ENGINE_ADDRESS_VARIABLE: f"127.0.0.1:{runtime.port}",
        **(environment or {}),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "vmstack", "plugin"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=environment,
        cwd=tmp_path,
        start_new_session=True,
    )
    try:
        assert runtime.received.wait(60), "the plugin made no handshake"
        handshake = runtime.handshake
        assert handshake is not None
        assert handshake.addr.startswith("127.0.0.1:")
        with grpc.insecure_channel(handshake.addr) as channel:
            yield Node(process, channel, handshake.addr, handshake.protocol_version)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(30)
        runtime.server.stop(None).wait(10)


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    with start_node(tmp_path) as started:
        assert started.protocol_version == PROTOCOL_VERSION == 45
        yield started


@pytest.mark.slow
def test_a_node_drives_the_plugin_from_handshake_to_shutdown(node: Node, tmp_path: Path) -> None:
    health = node.channel.unary_unary(
        "/grpc.health.v1.Health/Check",
        request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
        response_deserializer=health_pb2.HealthCheckResponse.FromString,
    )
    assert health(health_pb2.HealthCheckRequest(), timeout=30).status == (
        health_pb2.HealthCheckResponse.SERVING
    )

    started = node.call(
        "Initialize",
        vm_pb2.InitializeRequest(
            network_id=12345,
            chain_data_dir=str(tmp_path / "chain"),
            genesis_bytes=GENESIS,
            config_bytes=b"{}",
        ),
        vm_pb2.InitializeResponse,
    )
    assert isinstance(started, vm_pb2.InitializeResponse)
    assert (started.height, len(started.last_accepted_id)) == (0, 32)
    assert started.bytes
    state = node.call(
        "SetState", vm_pb2.SetStateRequest(state=vm_pb2.STATE_NORMAL_OP), vm_pb2.SetStateResponse
    )
    assert isinstance(state, vm_pb2.SetStateResponse)
    assert state.last_accepted_id == started.last_accepted_id

    # Build, verify by bytes, prefer and accept three blocks; the mempool is empty, so the
    # blocks are empty (the protocol carries no transactions).
    chain = [started.bytes]
    tip = started.last_accepted_id
    for height in (1, 2, 3):
        built = node.call("BuildBlock", vm_pb2.BuildBlockRequest(), vm_pb2.BuildBlockResponse)
        assert isinstance(built, vm_pb2.BuildBlockResponse)
        assert (built.parent_id, built.height) == (tip, height)
        verified = node.call(
            "BlockVerify", vm_pb2.BlockVerifyRequest(bytes=built.bytes), vm_pb2.BlockVerifyResponse
        )
        assert isinstance(verified, vm_pb2.BlockVerifyResponse)
        assert verified.timestamp.seconds == built.timestamp.seconds
        node.call("SetPreference", vm_pb2.SetPreferenceRequest(id=built.id), empty_pb2.Empty)
        node.call("BlockAccept", vm_pb2.BlockAcceptRequest(id=built.id), empty_pb2.Empty)
        chain.append(built.bytes)
        tip = built.id
    at = node.call(
        "GetBlockIDAtHeight",
        vm_pb2.GetBlockIDAtHeightRequest(height=3),
        vm_pb2.GetBlockIDAtHeightResponse,
    )
    assert isinstance(at, vm_pb2.GetBlockIDAtHeightResponse)
    assert (at.blk_id, at.err) == (tip, vm_pb2.ERROR_UNSPECIFIED)

    # The batched protocol, with avalanchego's int32 budgets and nanoseconds.
    ancestors = node.call(
        "GetAncestors",
        vm_pb2.GetAncestorsRequest(
            blk_id=tip,
            max_blocks_num=3,
            max_blocks_size=(1 << 31) - 1,
            max_blocks_retrival_time=5 * 10**9,
        ),
        vm_pb2.GetAncestorsResponse,
    )
    assert isinstance(ancestors, vm_pb2.GetAncestorsResponse)
    assert list(ancestors.blks_bytes) == chain[:0:-1]
    parsed = node.call(
        "BatchedParseBlock",
        vm_pb2.BatchedParseBlockRequest(request=chain),
        vm_pb2.BatchedParseBlockResponse,
    )
    assert isinstance(parsed, vm_pb2.BatchedParseBlockResponse)
    assert [block.height for block in parsed.response] == [0, 1, 2, 3]
    assert parsed.response[-1].id == tip

    unknown = node.call(
        "GetBlock", vm_pb2.GetBlockRequest(id=b"\x01" * 32), vm_pb2.GetBlockResponse
    )
    assert isinstance(unknown, vm_pb2.GetBlockResponse)
    assert unknown.err == vm_pb2.ERROR_NOT_FOUND
    summary = node.call(
        "GetLastStateSummary", empty_pb2.Empty(), vm_pb2.GetLastStateSummaryResponse
    )
    assert isinstance(summary, vm_pb2.GetLastStateSummaryResponse)
    assert summary.err == vm_pb2.ERROR_STATE_SYNC_NOT_IMPLEMENTED
    gathered = node.call("Gather", empty_pb2.Empty(), vm_pb2.GatherResponse)
    assert isinstance(gathered, vm_pb2.GatherResponse)
    assert any(family.metric for family in gathered.metric_families)

    # SIGTERM and SIGINT before Shutdown are ignored, as avalanchego's plugins ignore them.
    os.kill(node.process.pid, signal.SIGTERM)
    os.kill(node.process.pid, signal.SIGINT)
    time.sleep(0.5)
    assert node.process.poll() is None
    node.call("Shutdown", empty_pb2.Empty(), empty_pb2.Empty)
    assert node.process.wait(30) == 0
    assert wait_ended(node.process.pid)


@pytest.mark.slow
def test_a_bad_config_is_a_status_with_the_reason(node: Node, tmp_path: Path) -> None:
    """An Initialize the plugin cannot follow fails with a message a node logs; the plugin
    still stops on Shutdown."""
    with pytest.raises(grpc.RpcError) as refused:
        node.call(
            "Initialize",
            vm_pb2.InitializeRequest(
                chain_data_dir=str(tmp_path / "chain"), config_bytes=b'{"fork_tme": 5}'
            ),
            vm_pb2.InitializeResponse,
        )
    assert "unknown option 'fork_tme'" in str(refused.value.details())
    node.call("Shutdown", empty_pb2.Empty(), empty_pb2.Empty)
    assert node.process.wait(30) == 0


def _run_plugin(environment: dict[str, str], folder: Path) -> subprocess.CompletedProcess[bytes]:
    """``vmstack plugin`` run to its end in ``folder`` with ``environment`` (standard input
    closed, its output captured), 60 seconds at most."""
    return subprocess.run(
        [sys.executable, "-m", "vmstack", "plugin"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=environment,
        cwd=folder,
        timeout=60,
        check=False,
    )


@pytest.mark.slow
def test_the_plugin_without_a_runtime_address_says_so(tmp_path: Path) -> None:
    environment = {
        name: value for name, value in os.environ.items() if name != ENGINE_ADDRESS_VARIABLE
    }
    result = _run_plugin(environment, tmp_path)
    assert result.returncode == 2
    assert ENGINE_ADDRESS_VARIABLE.encode() in result.stderr


@pytest.mark.slow
def test_vmstacks_client_drives_the_plugin(node: Node, tmp_path: Path) -> None:
    """VMClient is a node's client too: it initializes the plugin, builds a chain through
    it, tracks the last accepted block, and gets the batched answers in one round trip."""
    with VMClient(node.address, timeout=30.0) as client:
        genesis = client.initialize(
            vm_pb2.InitializeRequest(chain_data_dir=str(tmp_path / "chain"), genesis_bytes=GENESIS)
        )
        ids = [genesis.id]
        for _ in range(4):
            block = client.build_block()
            block.verify()
            client.set_preference(block.id)
            block.accept()
            ids.append(block.id)
        assert client.last_accepted() == ids[-1]
        before = client.round_trips.total
        ancestors = client.get_ancestors(ids[-1], 10, 1 << 20, 5.0)
        assert len(ancestors) == len(ids)
        parsed = client.batched_parse_block(ancestors)
        assert [block.id for block in parsed] == ids[::-1]
        assert client.round_trips.total == before + 2
        assert "CChainVM" in [layer.kind for layer in client.describe_served()]
        client.shutdown()
    assert node.process.wait(30) == 0


def _stderr(process: subprocess.Popen[bytes]) -> str:
    """What the plugin wrote to standard error, once it has exited."""
    assert process.stderr is not None
    return process.stderr.read().decode()


@pytest.mark.slow
def test_the_plugin_logs_its_address_and_every_refusal(node: Node, tmp_path: Path) -> None:
    """Standard error names where the plugin listens and each call it refused with why."""
    with pytest.raises(grpc.RpcError):
        node.call(
            "Initialize",
            vm_pb2.InitializeRequest(
                chain_data_dir=str(tmp_path / "chain"), config_bytes=b'{"fork_tme": 5}'
            ),
            vm_pb2.InitializeResponse,
        )
    node.call("Shutdown", empty_pb2.Empty(), empty_pb2.Empty)
    assert node.process.wait(30) == 0
    log = _stderr(node.process)
    assert f"serving vm.VM at {node.address}" in log
    assert f"pid {node.process.pid}" in log
    assert "Initialize refused: InvalidOption: config_bytes: unknown option 'fork_tme'" in log


@pytest.mark.slow
def test_a_refused_genesis_leaves_the_store_for_the_corrected_retry(
    node: Node, tmp_path: Path
) -> None:
    """A genesis balance of 2^256 is refused with the reason; the node's retry with a
    corrected genesis over the same chain_data_dir initializes."""
    chain_dir = str(tmp_path / "chain")
    for refused in (1 << 256, None):
        genesis = json.loads(GENESIS)
        if refused is not None:
            genesis["alloc"]["11" * 20] = {"balance": hex(refused)}
        request = vm_pb2.InitializeRequest(
            chain_data_dir=chain_dir, genesis_bytes=json.dumps(genesis).encode()
        )
        if refused is not None:
            with pytest.raises(grpc.RpcError) as error:
                node.call("Initialize", request, vm_pb2.InitializeResponse)
            assert "balance is an int from 0 to 0x" in str(error.value.details())
        else:
            started = node.call("Initialize", request, vm_pb2.InitializeResponse)
            assert isinstance(started, vm_pb2.InitializeResponse)
            assert started.height == 0
    node.call("Shutdown", empty_pb2.Empty(), empty_pb2.Empty)
    assert node.process.wait(30) == 0


@pytest.mark.slow
def test_sigterm_without_shutdown_stops_the_plugin_after_the_grace_period(
    node: Node, tmp_path: Path
) -> None:
    """A node that sends SIGTERM and never Shutdown: the plugin waits the grace period,
    shuts its stack down, closes its store and exits 0 (the store opens again at once)."""
    chain_dir = tmp_path / "chain"
    node.call(
        "Initialize",
        vm_pb2.InitializeRequest(chain_data_dir=str(chain_dir), genesis_bytes=GENESIS),
        vm_pb2.InitializeResponse,
    )
    os.kill(node.process.pid, signal.SIGTERM)
    assert node.process.wait(TERMINATION_GRACE + 30) == 0
    log = _stderr(node.process)
    assert "no Shutdown came; shutting down" in log
    from vmstack.store import LMDBStore

    with LMDBStore(chain_dir / "vmstack") as store:
        assert store is not None


@pytest.mark.slow
def test_the_plugin_answers_health_and_shutdown_while_eight_wait(node: Node) -> None:
    """Eight WaitForEvent calls from the node leave Health and Shutdown answered."""
    wait = node.channel.unary_unary(
        "/vm.VM/WaitForEvent",
        request_serializer=empty_pb2.Empty.SerializeToString,
        response_deserializer=vm_pb2.WaitForEventResponse.FromString,
    )
    waiting = [wait.future(empty_pb2.Empty(), timeout=60) for _ in range(8)]
    time.sleep(0.5)
    health = node.call("Health", empty_pb2.Empty(), vm_pb2.HealthResponse)
    assert isinstance(health, vm_pb2.HealthResponse)
    assert b"serving" in health.details
    node.call("Shutdown", empty_pb2.Empty(), empty_pb2.Empty)
    assert node.process.wait(30) == 0
    for future in waiting:
        with contextlib.suppress(grpc.RpcError):
            future.result(timeout=10)


@pytest.mark.slow
@pytest.mark.parametrize("version", [45, 46])
def test_the_plugin_announces_the_protocol_version_it_is_set_to(
    tmp_path: Path, version: int
) -> None:
    with start_node(tmp_path, {PROTOCOL_VARIABLE: str(version)}) as started:
        assert started.protocol_version == version
        started.call("Shutdown", empty_pb2.Empty(), empty_pb2.Empty)
        assert started.process.wait(30) == 0


@pytest.mark.slow
def test_a_protocol_version_it_does_not_speak_is_refused(tmp_path: Path) -> None:
    environment = {**os.environ, ENGINE_ADDRESS_VARIABLE: "127.0.0.1:1", PROTOCOL_VARIABLE: "47"}
    result = _run_plugin(environment, tmp_path)
    assert result.returncode == 2
    assert b"45, 46, got '47'" in result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("version", [45, 46])
def test_vmclient_takes_the_handshake_of_its_protocol_version(tmp_path: Path, version: int) -> None:
    """start_plugin is the node's side: the plugin set to the client's version hands over
    its address, and the client speaks to it; Shutdown at the end stops the plugin."""
    environment = {**os.environ, PROTOCOL_VARIABLE: str(version)}
    with start_plugin(
        [sys.executable, "-m", "vmstack", "plugin"],
        protocol_version=version,
        environ=environment,
        cwd=tmp_path,
        timeout=30.0,
    ) as client:
        assert client.protocol_version == version
        genesis = client.initialize(
            vm_pb2.InitializeRequest(chain_data_dir=str(tmp_path / "chain"), genesis_bytes=GENESIS)
        )
        assert genesis.height == 0
        pid = client.pid
    assert pid is not None and wait_ended(pid)


@pytest.mark.slow
def test_vmclient_refuses_a_plugin_of_another_protocol_version(tmp_path: Path) -> None:
    """A client of protocol 46 refuses a plugin announcing 45, as a node of avalanchego
    v1.15 refuses it; the plugin hears the refusal and exits."""
    with (
        pytest.raises(VMUnavailable, match="protocol version 45, this client 46"),
        start_plugin(
            [sys.executable, "-m", "vmstack", "plugin"], protocol_version=46, cwd=tmp_path
        ),
    ):
        pytest.fail("the handshake of another version was taken")


def test_vmclient_speaks_only_the_versions_it_knows() -> None:
    with pytest.raises(ValueError, match="45, 46, got 47"):
        VMClient("unix:/nowhere", protocol_version=47)
    with VMClient("unix:/nowhere") as client:
        assert client.protocol_version == PROTOCOL_VERSION == 45
