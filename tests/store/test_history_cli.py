"""`vmstack history import / export`, `vmstack serve --history` and `vmstack simulate
--history` over the shared Sepolia era1 files and generated chains."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.conftest import ERA1_FIRST as FIRST
from tests.conftest import ERA1_SECOND as SECOND
from tests.sim.commands import first_line, signal_and_wait, start_command
from vmstack.cchain import ETHEREUM, CChainVM, generate_chain
from vmstack.cli import main
from vmstack.clock import SimClock
from vmstack.stack import build_stack
from vmstack.store import LMDBStore
from vmstack.store.history import EraArchive
from vmstack.wrappers.rpc import VMClient

#: Seconds each (commands over the real era1 files): the quick loop leaves them out.
pytestmark = pytest.mark.slow

SEPOLIA_CHAIN_ID = 11155111


def _epoch21(era_dir: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "era"
    folder.mkdir()
    (folder / SECOND).symlink_to(era_dir / SECOND)
    return folder


@pytest.mark.slow
def test_import_verifies_then_keeps_the_recent_blocks(
    era_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The store holds the last 50 blocks, the archive serves the rest; a second import
    into the same store is refused with one line."""
    folder = _epoch21(era_dir, tmp_path)
    data_dir = tmp_path / "db"
    assert (
        main(["history", "import", str(folder), "--data-dir", str(data_dir), "--recent", "50"]) == 0
    )
    out = capsys.readouterr().out
    assert "8,192 blocks verified" in out and "blocks 180174-180223 in the store" in out
    with EraArchive(folder) as archive, LMDBStore(data_dir) as store:
        vm = CChainVM(store, flavour=ETHEREUM, chain_id=SEPOLIA_CHAIN_ID, history=archive)
        assert vm.last_accepted() == archive.hash(180223)
        assert len(vm.get_ancestors(vm.last_accepted(), 120, 2**40, 60.0)) == 120
    assert main(["history", "import", str(folder), "--data-dir", str(data_dir)]) == 2
    assert "already holds a chain" in capsys.readouterr().err


def test_export_then_verify_round_trips(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A generated Ethereum chain in an LMDB data dir exports as era1 that verify accepts."""
    clock = SimClock(1_700_000_000.0)
    with LMDBStore(tmp_path / "db", sync=False) as store:
        vm = build_stack(store, flavour=ETHEREUM, clock=clock)
        generate_chain(vm, blocks=30, txs_per_block=3, seed=5, clock=clock)
        tip = vm.last_accepted()
    out = tmp_path / "out"
    assert main(["history", "export", "--data-dir", str(tmp_path / "db"), "--out", str(out)]) == 0
    assert "1 era1 files, blocks up to 30" in capsys.readouterr().out
    assert main(["history", "verify", str(out)]) == 0
    assert "(31 blocks" in capsys.readouterr().out
    with EraArchive(out) as exported:
        assert exported.hash(30) == tip


def test_export_refuses_an_avalanche_chain_and_an_empty_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One line each: era1 holds Ethereum blocks; a data dir must hold a chain."""
    with LMDBStore(tmp_path / "db", sync=False) as store:
        build_stack(store)
    assert (
        main(
            [
                "history",
                "export",
                "--data-dir",
                str(tmp_path / "db"),
                "--out",
                str(tmp_path / "out"),
            ]
        )
        == 2
    )
    assert "Ethereum blocks" in capsys.readouterr().err
    with LMDBStore(tmp_path / "empty", sync=False):
        pass
    assert (
        main(
            [
                "history",
                "export",
                "--data-dir",
                str(tmp_path / "empty"),
                "--out",
                str(tmp_path / "out"),
            ]
        )
        == 2
    )
    assert "holds no chain" in capsys.readouterr().err


def test_simulate_history_bootstraps_real_blocks(
    era_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two nodes over the shared files: the node fetches 300 real blocks above a checkpoint
    (the last run, epoch 21) and, over epoch 0 alone, from genesis; batched and serially."""
    assert main(["simulate", "--history", str(era_dir), "--blocks", "300"]) == 0
    out = capsys.readouterr().out
    assert "sepolia blocks 172033-172332" in out and "checkpoint at block 172032" in out
    assert "batched bootstrap is" in out
    folder = tmp_path / "era"
    folder.mkdir()
    (folder / FIRST).symlink_to(era_dir / FIRST)
    assert main(["simulate", "--history", str(folder), "--blocks", "300"]) == 0
    out = capsys.readouterr().out
    assert "sepolia blocks 1-300" in out and "bootstrapped from genesis" in out


def test_simulate_history_refuses_options_that_do_not_apply(
    era_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", "--history", str(era_dir), "--out-of-process"]) == 2
    assert (
        "--out-of-process applies to the two-node run, not to a history run"
        in capsys.readouterr().err
    )


@pytest.mark.slow
def test_serve_history_serves_the_archive_beneath_the_store(
    era_dir: Path, tmp_path: Path, short_tmp_path: Path
) -> None:
    """`vmstack serve --history DIR` over an empty store serves the archive's chain."""
    folder = tmp_path / "era"
    folder.mkdir()
    (folder / FIRST).symlink_to(era_dir / FIRST)
    process = start_command(
        "serve",
        "--data-dir",
        str(tmp_path / "db"),
        "--flavour",
        "ethereum",
        "--chain-id",
        str(SEPOLIA_CHAIN_ID),
        "--history",
        str(folder),
        "--no-stdin-watch",
        temporary=short_tmp_path,
    )
    try:
        address = first_line(process).split()[2]
        client = VMClient(address, timeout=30.0)
        with EraArchive(folder) as archive:
            assert client.last_accepted() == archive.hash(8191)
            assert len(client.get_ancestors(archive.hash(8191), 100, 2**30, 30.0)) == 100
        client.close()
    finally:
        stopped = signal_and_wait(process, signal.SIGTERM)
    assert stopped.returncode == 143, stopped.stderr


@pytest.mark.slow
def test_import_then_export_gives_back_the_file(
    era_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Epoch 21 imported (100 blocks in LMDB) then exported with its archive beneath: the
    file written has the original's accumulator root, so its name, and verifies."""
    folder = _epoch21(era_dir, tmp_path)
    data_dir = tmp_path / "db"
    assert (
        main(["history", "import", str(folder), "--data-dir", str(data_dir), "--recent", "100"])
        == 0
    )
    out = tmp_path / "out"
    assert (
        main(
            [
                "history",
                "export",
                "--data-dir",
                str(data_dir),
                "--out",
                str(out),
                "--history",
                str(folder),
                "--network",
                "sepolia",
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert [path.name for path in out.iterdir()] == [SECOND]
    assert main(["history", "verify", str(out)]) == 0
