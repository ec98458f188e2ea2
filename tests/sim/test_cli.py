"""The command line's own promises: SIGTERM stops `vmstack serve` as it stops
`vmstack simulate` (status 143, one line, temporary files removed, children stopped), and
what a new user meets first (bounds, messages, names) reads as it should."""

from __future__ import annotations

import signal
from pathlib import Path

from tests.processes import descendants, wait_ended
from tests.sim.commands import first_line, signal_and_wait, start_command
from vmstack.store import LMDBStore


def test_sigterm_stops_serve_with_143_one_line_and_its_socket_folder_removed(
        tmp_path: Path) -> None:
    temporary = tmp_path / "tmp"
    store = tmp_path / "store"
    process = start_command("serve", "--data-dir", str(store), "--no-stdin-watch",
                            temporary=temporary)
    handshake = first_line(process).split()
    assert handshake[0] == "vmstack-serve" and int(handshake[3]) == process.pid
    assert any(temporary.glob("vmstack-vm-*"))  # the socket's private folder
    children = descendants(process.pid)
    terminated = signal_and_wait(process, signal.SIGTERM)
    assert terminated.returncode == 143, terminated.stderr
    lines = terminated.stderr.strip().splitlines()
    assert lines[0].startswith("vmstack serve: serving ")
    assert lines[1:] == ["vmstack serve: terminated"]
    assert list(temporary.iterdir()) == []
    assert all(wait_ended(child) for child in children)
    # The store was closed: a writer opens it at once.
    with LMDBStore(store):
        pass


def test_ctrl_c_stops_serve_with_130(tmp_path: Path) -> None:
    process = start_command("serve", "--data-dir", str(tmp_path / "store"),
                            "--no-stdin-watch", temporary=tmp_path / "tmp")
    first_line(process)
    interrupted = signal_and_wait(process, signal.SIGINT)
    assert interrupted.returncode == 130, interrupted.stderr
    assert interrupted.stderr.strip().splitlines()[1:] == ["vmstack serve: interrupted"]
    assert list((tmp_path / "tmp").iterdir()) == []
