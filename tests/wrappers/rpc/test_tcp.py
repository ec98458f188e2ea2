"""A VM served on TCP: a port another server holds is an error, and every call must
present the server's token."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.support.processes import wait_ended
from tests.wrappers.rpc.conftest import TRANSITION_TIME
from vmstack.conformance import memory_vm
from vmstack.errors import VMUnavailable
from vmstack.wrappers.rpc import VMClient, VMServer, spawn
from vmstack.wrappers.rpc.local import create_token_file

#: These tests listen on TCP ports; one spawns a served child process.
pytestmark = pytest.mark.processes


def test_a_port_in_use_is_an_error() -> None:
    """A second server on a port the first holds fails to start instead of sharing it, so
    every client reaches the one chain that started first."""
    first_vm, second_vm = memory_vm(blocks=3), memory_vm(blocks=5)
    with VMServer(first_vm, address="127.0.0.1:0") as first:
        with pytest.raises(ValueError, match="in use"):
            VMServer(second_vm, address=first.address).close()
        for _ in range(20):
            with VMClient(first.address, token_file=first.token_file) as client:
                assert client.last_accepted() == first_vm.last_accepted()


def test_a_tcp_server_requires_the_token_of_its_file(tmp_path: Path) -> None:
    """A TCP server makes a 0600 token file; a call without the token, or with another,
    is refused with a message saying what is missing and changes nothing."""
    vm = memory_vm(blocks=3)
    preferred = vm.last_accepted()
    with VMServer(vm, address="127.0.0.1:0") as server:
        token_file = server.token_file
        assert token_file is not None
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        assert stat.S_IMODE(token_file.parent.stat().st_mode) == 0o700
        other = tmp_path / "other-token"
        create_token_file(other)
        for client in (VMClient(server.address), VMClient(server.address, token_file=other)):
            with client:
                for call in (
                    client.last_accepted,
                    lambda c=client: c.set_preference(b"\1" * 32),
                    client.build_block,
                ):
                    with pytest.raises(VMUnavailable, match=r"refused the call.*token"):
                        call()
        with VMClient(server.address, token_file=token_file) as client:
            assert client.last_accepted() == preferred
            built = client.build_block()
            assert built.parent_id == preferred
    assert not token_file.exists()  # it went with the server's private directory


def test_a_token_file_others_may_read_is_refused(tmp_path: Path) -> None:
    """The token is only as secret as its file: a given token file of mode 0644 is refused
    by the server and by the client; a missing one is created 0600."""
    readable = tmp_path / "token"
    create_token_file(readable)
    os.chmod(readable, 0o644)
    with pytest.raises(ValueError, match="other users may read it"):
        VMServer(memory_vm(blocks=1), address="127.0.0.1:0", token_file=readable)
    with pytest.raises(ValueError, match="other users may read it"):
        VMClient("127.0.0.1:1", token_file=readable)
    fresh = tmp_path / "fresh-token"
    vm = memory_vm(blocks=2)
    with (
        VMServer(vm, address="127.0.0.1:0", token_file=fresh) as server,
        VMClient(server.address, token_file=fresh) as client,
    ):
        assert stat.S_IMODE(fresh.stat().st_mode) == 0o600
        assert client.last_accepted() == vm.last_accepted()


@pytest.mark.slow
def test_spawn_on_tcp_shares_a_token_with_its_child(lmdb_chain: Path) -> None:
    """spawn on a TCP address gives the child and its client one fresh token; a client
    without it is refused; the token's directory goes with the block."""
    with spawn(lmdb_chain, address="127.0.0.1:0", transition_time=TRANSITION_TIME) as client:
        assert not client.address.startswith("unix:")
        tip = client.last_accepted()
        with VMClient(client.address) as stranger, pytest.raises(VMUnavailable, match="token"):
            stranger.last_accepted()
        assert client.get_block(tip).id == tip
        pid = client.pid
        assert pid is not None
    assert wait_ended(pid)
