"""spawn and vmstack serve: a VM in a child process, killed and restarted."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import vmstack
from tests.reliability.stacks import check_store
from tests.support.processes import ended, wait_ended, wait_stopped
from tests.wrappers.rpc.conftest import START, TRANSITION_TIME
from vmstack.batching import serial_get_ancestors
from vmstack.clock import SimClock
from vmstack.conformance import memory_vm
from vmstack.errors import VMStackError, VMUnavailable
from vmstack.stack import build_stack
from vmstack.store import LMDBStore
from vmstack.wrappers.rpc import VMClient, VMServer, spawn
from vmstack.wrappers.rpc.local import (
    MAX_SOCKET_PATH,
    PRIVATE_DIR_PREFIX,
    SocketPathTooLong,
    _base36,
    check_socket_path,
    make_private_dir,
    remove_stale_private_dirs,
)

#: These tests spawn, stop and kill served child processes.
pytestmark = pytest.mark.processes


@pytest.mark.slow
def test_spawn_serves_the_store_and_stops_with_the_block(lmdb_chain: Path) -> None:
    """The child serves the C-chain part of the stored chain; leaving the block stops it
    and its store reopens intact."""
    clock = SimClock(START)
    with spawn(lmdb_chain, clock=clock, transition_time=TRANSITION_TIME) as client:
        assert client.pid is not None and not ended(client.pid)
        assert f"pid {client.pid}" in client.health()
        tip = client.last_accepted()
        answer = vmstack.get_ancestors(client, tip, max_retrieval_time=60.0)
        assert answer == serial_get_ancestors(client, tip, max_retrieval_time=60.0)
        kinds = [layer.kind for layer in vmstack.describe_stack(client)]
        assert kinds == ["VMClient", "MeteredVM", "TransitionVM", "CChainVM"]
        with LMDBStore(lmdb_chain, readonly=True) as store:
            local = build_stack(
                store, clock=clock, transition_time=TRANSITION_TIME, served_part=True
            )
            for count, size in ((1, 0), (7, 5_000), (30, 40_000), (2000, 1 << 30)):
                for block_id in (tip, local.get_block_id_at_height(9)):
                    budget: dict[str, Any] = {
                        "max_blocks_num": count,
                        "max_blocks_size": size,
                        "max_retrieval_time": 60.0,
                        "clock": clock,
                    }
                    assert vmstack.get_ancestors(client, block_id, **budget) == (
                        vmstack.get_ancestors(local, block_id, **budget)
                    )
            parsed = vmstack.batched_parse_block(client, answer)
            assert [block.id for block in parsed] == [
                block.id for block in vmstack.batched_parse_block(local, answer)
            ]
        pid = client.pid
    assert wait_ended(pid)
    with LMDBStore(lmdb_chain) as store:
        assert check_store(store) == len(answer) - 1


@pytest.mark.slow
def test_sigkill_between_calls_is_vm_unavailable_and_the_store_survives(lmdb_chain: Path) -> None:
    """After the child is killed, every call that crosses raises VMUnavailable (the last
    accepted block is tracked and crosses no more); a new spawn serves the same chain."""
    with spawn(lmdb_chain, timeout=5.0, transition_time=TRANSITION_TIME) as client:
        tip = client.last_accepted()
        expected = vmstack.get_ancestors(client, tip, max_retrieval_time=60.0)
        assert client.pid is not None
        os.kill(client.pid, signal.SIGKILL)
        assert wait_ended(client.pid)
        started = time.monotonic()
        for call in (
            lambda: client.get_block_id_at_height(0),
            lambda: client.get_block(tip[::-1]),
            lambda: client.get_ancestors(tip, 10, 10_000, 1.0),
        ):
            with pytest.raises(VMUnavailable):
                call()
        assert time.monotonic() - started < 15
    with spawn(lmdb_chain, transition_time=TRANSITION_TIME) as client:
        assert vmstack.get_ancestors(client, tip, max_retrieval_time=60.0) == expected


@pytest.mark.slow
def test_sigkill_mid_call_is_vm_unavailable(lmdb_chain: Path) -> None:
    """Calls in flight when the child dies fail with VMUnavailable, nothing else."""
    outcomes: list[BaseException] = []
    with spawn(lmdb_chain, timeout=5.0, transition_time=TRANSITION_TIME) as client:
        tip = client.last_accepted()
        running = threading.Event()

        def walk() -> None:
            try:
                while True:
                    running.set()
                    serial_get_ancestors(client, tip, max_retrieval_time=60.0)
                    client.batched_parse_block(
                        vmstack.get_ancestors(client, tip, max_retrieval_time=60.0)[:1]
                    )
            except BaseException as error:  # reported by the main thread
                outcomes.append(error)

        worker = threading.Thread(target=walk)
        worker.start()
        assert running.wait(10)
        time.sleep(0.2)
        assert client.pid is not None
        os.kill(client.pid, signal.SIGKILL)
        worker.join(30)
        assert not worker.is_alive()
    assert len(outcomes) == 1
    assert isinstance(outcomes[0], VMUnavailable), repr(outcomes[0])


@pytest.mark.slow
def test_a_stopped_child_is_a_deadline_not_a_hang(lmdb_chain: Path) -> None:
    """A child that stops answering (SIGSTOP) makes calls fail within the timeout."""
    with spawn(lmdb_chain, timeout=0.5, transition_time=TRANSITION_TIME) as client:
        assert client.pid is not None
        client.last_accepted()
        os.kill(client.pid, signal.SIGSTOP)
        try:
            assert wait_stopped(client.pid), "the child did not stop"
            started = time.monotonic()
            with pytest.raises(VMUnavailable, match="did not answer within"):
                client.get_block_id_at_height(0)
            assert time.monotonic() - started < 10
        finally:
            os.kill(client.pid, signal.SIGCONT)


@pytest.mark.slow
def test_the_child_dies_with_its_parent(lmdb_chain: Path) -> None:
    """A parent killed with SIGKILL takes its served process with it."""
    program = (
        "import sys, time\n"
        "from vmstack.wrappers.rpc import spawn\n"
        f"with spawn({str(lmdb_chain)!r}, transition_time={TRANSITION_TIME!r}) as client:\n"
        "    print(client.pid, flush=True)\n"
        "    time.sleep(120)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert not ended(child)
        parent.kill()
        parent.wait(10)
        assert wait_ended(child), "the served process outlived its parent"
    finally:
        parent.kill()
        parent.wait()


def test_spawn_refuses_options_that_cannot_cross(tmp_path: Path) -> None:
    """Objects (a tracer, a registry) cannot be handed to another process."""
    with pytest.raises(ValueError, match="tracer"), spawn(tmp_path, tracer=object()):
        pass
    with pytest.raises(ValueError, match="SimClock"), spawn(tmp_path, clock=time.time):
        pass


def test_a_child_that_cannot_start_says_why(tmp_path: Path) -> None:
    """A data directory that is a file: the child's own error reaches the caller."""
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    with (
        pytest.raises(VMStackError, match=r"exited before its handshake.*not a directory"),
        spawn(not_a_dir),
    ):
        pass


def _socket_dir(client: VMClient) -> Path:
    assert client.address.startswith("unix:")
    return Path(client.address.removeprefix("unix:")).parent


@pytest.mark.slow
def test_the_socket_folder_of_a_sigkilled_child_goes_at_the_next_start(lmdb_chain: Path) -> None:
    """A child killed with SIGKILL cannot remove its socket's private directory; the next
    server to start removes it, and leaves the directories of live processes alone."""
    with spawn(lmdb_chain, transition_time=TRANSITION_TIME) as client:
        left = _socket_dir(client)
        assert client.pid is not None
        os.kill(client.pid, signal.SIGKILL)
        assert wait_ended(client.pid)
    assert left.is_dir()
    live = make_private_dir()  # this process's, which runs
    try:
        with spawn(lmdb_chain, transition_time=TRANSITION_TIME) as client:
            assert client.last_accepted()
            assert not left.exists()
            assert live.is_dir()
    finally:
        shutil.rmtree(live)


def test_only_stale_private_directories_of_this_user_are_removed(tmp_path: Path) -> None:
    """A directory named for a process that is gone (an ID that exited, or one reused by a
    process started later) and marked as made in this namespace goes; one named for a live
    process, one marked for another PID namespace, one not marked yet, one named otherwise
    and a file of the same name stay."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    assert dead.wait(60) == 0
    namespace_number = os.stat("/proc/self/ns/pid").st_ino
    namespace, other_namespace = _base36(namespace_number), _base36(namespace_number + 1)
    start = _base36(int(Path("/proc/self/stat").read_text().rpartition(")")[2].split()[19]))
    dead_pid, own_pid = _base36(dead.pid), _base36(os.getpid())
    gone = tmp_path / f"{PRIVATE_DIR_PREFIX}{dead_pid}-1-a"
    reused = tmp_path / f"{PRIVATE_DIR_PREFIX}{own_pid}-1-b"
    live = tmp_path / f"{PRIVATE_DIR_PREFIX}{own_pid}-{start}-c"
    elsewhere = tmp_path / f"{PRIVATE_DIR_PREFIX}{dead_pid}-1-d"
    unmarked = tmp_path / f"{PRIVATE_DIR_PREFIX}{dead_pid}-1-e"
    other = tmp_path / "vmstack-vm-abc"
    for directory in (gone, reused, live, elsewhere, unmarked, other):
        directory.mkdir()
        (directory / "sock").write_bytes(b"")
        mark = other_namespace if directory == elsewhere else namespace
        if directory != unmarked:
            (directory / f"ns-{mark}").write_bytes(b"")
    lookalike = tmp_path / f"{PRIVATE_DIR_PREFIX}{dead_pid}-1-f"
    lookalike.write_bytes(b"")
    assert sorted(remove_stale_private_dirs(tmp_path)) == sorted([gone, reused])
    assert all(path.is_dir() for path in (live, elsewhere, unmarked, other))
    assert lookalike.is_file()


def test_a_socket_path_over_its_limit_says_so(tmp_path: Path) -> None:
    """A Unix socket whose path is longer than the kernel takes is refused with a project
    error naming the limit and a way out, not as an address in use."""
    deep = tmp_path / ("d" * 80)
    deep.mkdir()
    with pytest.raises(SocketPathTooLong, match="at most 107 bytes") as refused:
        VMServer(memory_vm(blocks=1), address=f"unix:{deep / 'vm.sock'}")
    assert isinstance(refused.value, VMStackError) and isinstance(refused.value, ValueError)
    assert refused.value.length > MAX_SOCKET_PATH
    assert "TMPDIR" in str(refused.value)
    assert check_socket_path(tmp_path / "vm.sock") == str(tmp_path / "vm.sock")
    with pytest.raises(SocketPathTooLong, match="this one 108"):
        check_socket_path("/" + "s" * 107)


def test_the_private_directory_leaves_a_socket_room_under_a_deep_temporary_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The private directory's name is short (about 20 bytes), so a server's socket fits
    under a temporary directory as deep as pytest's under ``-n 2`` with a long test name
    (``/tmp/pytest-of-runner/pytest-100/popen-gw1/`` and a 31-character test folder, with a
    ``tmp`` folder in it: 78 bytes): the default address serves."""
    deep_length = len("/tmp/pytest-of-runner/pytest-100/popen-gw1/") + 31 + len("/tmp")
    deep = tmp_path / "t".ljust(max(1, deep_length - len(str(tmp_path)) - 1), "t")
    deep.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    made = make_private_dir()
    try:
        assert made.parent == deep and made.name.startswith(PRIVATE_DIR_PREFIX)
        assert len(made.name) <= 23 and len(str(made / "sock")) <= MAX_SOCKET_PATH
        with VMServer(memory_vm(blocks=1)) as server:
            assert server.address.startswith(f"unix:{deep}/")
            with VMClient(server.address, timeout=10) as client:
                assert len(client.last_accepted()) == 32
    finally:
        shutil.rmtree(made)


@pytest.mark.slow
def test_a_clients_shutdown_stops_the_served_child(lmdb_chain: Path) -> None:
    """Shutdown, as a node ends a plugin, stops vmstack serve: its process exits with 0."""
    with spawn(lmdb_chain, transition_time=TRANSITION_TIME) as client:
        assert client.pid is not None
        pid = client.pid
        client.shutdown()
        assert wait_ended(pid)


@pytest.mark.slow
def test_spawn_and_serve_take_the_protocol_version_setting(
    lmdb_chain: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """spawn(protocol_version=46) has its child serve 46 (the handshake says so and is held
    to it) and the client speak it; vmstack serve reads the setting as the plugin does,
    and refuses a version this boundary does not speak before serving anything."""
    from vmstack.wrappers.rpc.plugin import PROTOCOL_VARIABLE
    from vmstack.wrappers.rpc.process import serve_vm, served_protocol_version

    monkeypatch.setenv(PROTOCOL_VARIABLE, "45")  # the child's setting is spawn's, not this
    with spawn(lmdb_chain, protocol_version=46, transition_time=TRANSITION_TIME) as client:
        assert client.protocol_version == 46
        assert len(client.last_accepted()) == 32
    assert served_protocol_version(environ={}) == 45
    assert served_protocol_version(environ={PROTOCOL_VARIABLE: "46"}) == 46
    assert served_protocol_version(46, environ={PROTOCOL_VARIABLE: "45"}) == 46
    with pytest.raises(ValueError, match=PROTOCOL_VARIABLE):
        served_protocol_version(environ={PROTOCOL_VARIABLE: "44"})
    with pytest.raises(ValueError, match="45, 46"):
        spawn(lmdb_chain, protocol_version=47).__enter__()
    monkeypatch.setenv(PROTOCOL_VARIABLE, "forty-six")
    with pytest.raises(ValueError, match=PROTOCOL_VARIABLE):
        serve_vm(memory_vm(blocks=1), source="memory", stop_on_stdin_close=False)
