"""The command line's own promises: SIGTERM stops `vmstack serve` as it stops
`vmstack simulate` (status 143, one line, temporary files removed, children stopped), and
what a new user meets first (bounds, messages, names) reads as it should."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.sim.commands import first_line, signal_and_wait, start_command
from tests.support.processes import descendants, wait_ended
from vmstack.cchain import rawdb
from vmstack.cli import PEERS_PROGRESS_FROM, main
from vmstack.sim.bounds import MAX_PEERS, MAX_PEERS_OUT_OF_PROCESS
from vmstack.sim.run import SimulationConfig, simulate
from vmstack.store import LMDBStore

#: These tests run the command line in child processes.
pytestmark = pytest.mark.processes


def _after_serving(stderr: str) -> list[str]:
    """The lines of serve's standard error after its "serving" line (which a signal that
    arrives right after the handshake may forestall)."""
    lines = stderr.strip().splitlines()
    return lines[1:] if lines and lines[0].startswith("vmstack serve: serving ") else lines


@pytest.mark.slow
def test_sigterm_stops_serve_with_143_one_line_and_its_socket_folder_removed(
    tmp_path: Path, short_tmp_path: Path
) -> None:
    temporary = short_tmp_path
    store = tmp_path / "store"
    process = start_command(
        "serve", "--data-dir", str(store), "--no-stdin-watch", temporary=temporary
    )
    handshake = first_line(process).split()
    assert handshake[0] == "vmstack-serve" and int(handshake[3]) == process.pid
    assert any(temporary.glob("vmstack-*"))  # the socket's private folder
    children = descendants(process.pid)
    terminated = signal_and_wait(process, signal.SIGTERM)
    assert terminated.returncode == 143, terminated.stderr
    assert _after_serving(terminated.stderr) == ["vmstack serve: terminated"]
    assert list(temporary.iterdir()) == []
    assert all(wait_ended(child) for child in children)
    # The store was closed: a writer opens it at once.
    with LMDBStore(store):
        pass


@pytest.mark.slow
def test_ctrl_c_stops_serve_with_130(tmp_path: Path, short_tmp_path: Path) -> None:
    process = start_command(
        "serve",
        "--data-dir",
        str(tmp_path / "store"),
        "--no-stdin-watch",
        temporary=short_tmp_path,
    )
    first_line(process)
    interrupted = signal_and_wait(process, signal.SIGINT)
    assert interrupted.returncode == 130, interrupted.stderr
    assert _after_serving(interrupted.stderr) == ["vmstack serve: interrupted"]
    assert list(short_tmp_path.iterdir()) == []


def _damage_the_tip_header(data_dir: Path, height: int) -> None:
    schema = rawdb.Schema(b"")
    with LMDBStore(data_dir / "serving") as store:
        block_hash = store.get(schema.canonical_hash_key(height))
        key = schema.header_key(height, block_hash)
        header = bytearray(store.get(key))
        header[10] ^= 0xFF
        store.put(key, bytes(header))


@pytest.mark.slow
def test_a_damaged_data_dir_is_one_line_naming_it_and_how_to_rebuild(tmp_path: Path) -> None:
    config = SimulationConfig(blocks=30, txs_per_block=1, peers=1)
    simulate(config, data_dir=tmp_path)
    _damage_the_tip_header(tmp_path, config.blocks)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "vmstack",
            "simulate",
            "--blocks",
            "30",
            "--txs-per-block",
            "1",
            "--peers",
            "1",
            "--data-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"vmstack simulate: --data-dir {tmp_path} holds a damaged store")
    assert "does not hash to its key" in line
    assert f"remove {tmp_path}" in line


def test_a_count_that_is_not_a_number_names_its_type_readably(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["simulate", "--blocks", "many"])
    assert stopped.value.code == 2
    error = capsys.readouterr().err
    assert "argument --blocks: invalid positive integer value: 'many'" in error
    assert "_positive" not in error
    with pytest.raises(SystemExit):
        main(["simulate", "--nodes", "4", "--live-blocks", "-1"])
    assert "argument --live-blocks: must be at least 0, got -1" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--peers", str(MAX_PEERS + 1)], f"peers must be at most {MAX_PEERS}, got"),
        (
            ["--peers", str(MAX_PEERS_OUT_OF_PROCESS + 1), "--out-of-process"],
            f"peers must be at most {MAX_PEERS_OUT_OF_PROCESS} out of process",
        ),
    ],
)
def test_peers_beyond_the_documented_bound_are_refused_before_any_work(
    options: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", "--blocks", "4", *options]) == 2
    out = capsys.readouterr()
    assert message in out.err
    assert out.out == ""


@pytest.mark.slow
def test_many_peers_show_their_set_up_progress(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "simulate",
                "--blocks",
                "3",
                "--txs-per-block",
                "0",
                "--serial",
                "--peers",
                str(PEERS_PROGRESS_FROM),
            ]
        )
        == 0
    )
    bar = re.compile(
        rf"^peers set up +\S+ +{PEERS_PROGRESS_FROM}/{PEERS_PROGRESS_FROM} ", re.MULTILINE
    )
    assert bar.search(capsys.readouterr().out)


@pytest.mark.parametrize(
    ("module", "options", "hint"),
    [
        ("matplotlib", ["--plot", "figure.png"], "pip install 'vmstack[plot]'"),
        ("ray", ["--engine", "ray"], "pip install 'vmstack[ray]'"),
    ],
)
def test_install_hints_keep_their_extras(
    module: str,
    options: list[str],
    hint: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # importing it fails
    monkeypatch.chdir(tmp_path)
    assert main(["simulate", "--blocks", "4", *options]) == 2
    assert hint in capsys.readouterr().err


@pytest.mark.slow
def test_the_headline_gives_the_transactions_built_not_those_asked_for(
    capsys: pytest.CaptureFixture[str],
) -> None:
    exact = simulate(SimulationConfig(blocks=4, txs_per_block=3, peers=1, modes=("serial",)))
    assert exact.transactions == 12
    asked = 100_000
    assert (
        main(
            ["simulate", "--blocks", "4", "--txs-per-block", str(asked), "--serial", "--peers", "1"]
        )
        == 0
    )
    headline = next(
        line for line in capsys.readouterr().out.splitlines() if line.startswith("chain: ")
    )
    assert f"{asked:,} txs" not in headline.split("(")[0]
    assert f"({asked:,} asked for" in headline
    report = simulate(SimulationConfig(blocks=4, txs_per_block=asked, peers=1, modes=("serial",)))
    assert report.transactions is not None and 0 < report.transactions < 4 * asked
    per_block = f"{report.transactions / 4:,.0f} txs on average"
    assert headline.startswith(f"chain: 4 blocks x {per_block}")


@pytest.mark.slow
def test_the_network_headline_gives_the_transactions_built(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert (
        main(
            [
                "simulate",
                "--nodes",
                "3",
                "--blocks",
                "3",
                "--txs-per-block",
                "100000",
                "--live-blocks",
                "0",
            ]
        )
        == 0
    )
    headline = next(
        line for line in capsys.readouterr().out.splitlines() if line.startswith("network: ")
    )
    assert "chain 3 blocks x " in headline and "(100,000 asked for" in headline
    assert "x 100,000 txs" not in headline
