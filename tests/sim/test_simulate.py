"""Tests for the main job: `vmstack simulate` over the full stack, and `vmstack bench`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import attrs
import pytest

from tests.sim.commands import live_processes_naming, signal_and_wait, start_command, wait_for
from tests.support.reports import reported
from vmstack.sim.costs import REFERENCE_COSTS, CostModel
from vmstack.sim.run import SimulationConfig, calibrate, simulate

#: These tests run `vmstack simulate` and `bench`, most in child processes.
pytestmark = pytest.mark.processes

SMALL = SimulationConfig(blocks=45, txs_per_block=2, peers=2, seed=11)


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vmstack.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.mark.slow
def test_simulate_cli_end_to_end(tmp_path: Path) -> None:
    """`vmstack simulate --blocks 200` bootstraps both ways and writes every figure."""
    out = tmp_path / "sim.json"
    plot = tmp_path / "sim.png"
    result = run_cli("simulate", "--blocks", "200", "--json", str(out), "--plot", str(plot))
    assert result.returncode == 0, result.stderr + result.stdout
    report = json.loads(out.read_text())
    assert report["seed"] == 1 and report["config"]["blocks"] == 200
    for mode in ("batched", "serial"):
        assert report["simulated"][mode]["blocks"] == 200
        assert report["simulated"][mode]["total_seconds"] > 0
        assert report["measured"][mode]["wall_seconds"] > 0
    assert report["speedup"] > 1
    assert report["layers"]["batched"]["proposervm_get_ancestors"]["calls"] >= 1
    assert "proposervm_get_ancestors" not in report["layers"]["serial"]
    assert report["layers"]["serial"]["proposervm_get_block"]["calls"] >= 200
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "batched bootstrap is" in result.stdout


@pytest.mark.slow
def test_same_seed_gives_identical_simulated_figures(tmp_path: Path) -> None:
    """Two runs with the same seed and cost model agree on every simulated figure."""
    first = reported(simulate(SMALL))
    second = reported(simulate(SMALL))
    assert first["simulated"] == second["simulated"]
    assert first["layers"].keys() == second["layers"].keys()
    other = simulate(SimulationConfig(blocks=45, txs_per_block=2, peers=2, seed=12))
    assert reported(other)["simulated"] != first["simulated"]


@pytest.mark.slow
def test_data_dir_keeps_the_chain_for_the_next_run(tmp_path: Path) -> None:
    """With a data directory the serving chain is built once and reused, same answers."""
    first = simulate(SMALL, data_dir=tmp_path, costs=REFERENCE_COSTS)
    second = simulate(SMALL, data_dir=tmp_path, costs=REFERENCE_COSTS)
    assert not first.chain_reused and second.chain_reused
    assert reported(first)["simulated"] == reported(second)["simulated"]
    with pytest.raises(ValueError, match="different chain"):
        simulate(SimulationConfig(blocks=46, txs_per_block=2, peers=2, seed=11), data_dir=tmp_path)


@pytest.mark.slow
def test_serial_flag_runs_the_serial_bootstrap_alone(tmp_path: Path) -> None:
    """`--serial` runs only the fallback bootstrap; a bad cost file is a clear error."""
    out = tmp_path / "sim.json"
    result = run_cli(
        "simulate", "--blocks", "20", "--txs-per-block", "1", "--serial", "--json", str(out)
    )
    assert result.returncode == 0, result.stderr
    assert list(json.loads(out.read_text())["simulated"]) == ["serial"]
    again = tmp_path / "again.json"
    replay = run_cli(
        "simulate",
        "--blocks",
        "20",
        "--txs-per-block",
        "1",
        "--serial",
        "--costs",
        str(out),
        "--json",
        str(again),
    )
    assert replay.returncode == 0, replay.stderr
    assert json.loads(again.read_text())["simulated"] == json.loads(out.read_text())["simulated"]
    costs = tmp_path / "costs.json"
    costs.write_text('{"serve_batched": {}}')
    bad = run_cli("simulate", "--blocks", "5", "--costs", str(costs))
    assert bad.returncode == 2 and "not a cost model" in bad.stderr
    nowhere = run_cli("simulate", "--blocks", "5", "--json", str(tmp_path / "no" / "x.json"))
    assert nowhere.returncode == 2 and "does not exist" in nowhere.stderr
    assert "bootstrap" not in nowhere.stdout


def test_cost_model_round_trips_through_json() -> None:
    """A cost model written as JSON reads back equal."""
    assert CostModel.from_dict(json.loads(json.dumps(REFERENCE_COSTS.as_dict()))) == REFERENCE_COSTS


@pytest.mark.slow
def test_bench_quick_writes_every_row(tmp_path: Path) -> None:
    """`vmstack bench --quick --json` runs every benchmark and reports ratios and floors."""
    out = tmp_path / "bench.json"
    result = run_cli("bench", "--quick", "--json", str(out))
    assert result.returncode == 0, result.stderr + result.stdout
    rows = json.loads(out.read_text())["rows"]
    groups = {row["group"] for row in rows}
    assert {
        "block bytes",
        "GetAncestors",
        "BatchedParseBlock",
        "GetAncestors over gRPC",
        "BatchedParseBlock over gRPC",
    } <= groups
    for row in rows:
        assert row["fast_seconds"] > 0 and row["baseline_seconds"] > 0
        assert row["speedup"] == pytest.approx(row["baseline_seconds"] / row["fast_seconds"])
        assert row["goal_met"] in (True, False), f"{row['group']}: {row['case']} is not judged"
    assert "met" in result.stdout


@pytest.mark.slow
def test_bench_only_runs_the_named_cases(tmp_path: Path) -> None:
    """`vmstack bench --only windower` runs that case module alone; an unknown name is one
    line listing the known ones and status 2."""
    out = tmp_path / "bench.json"
    result = run_cli("bench", "--quick", "--only", "windower", "--json", str(out))
    assert result.returncode == 0, result.stderr + result.stdout
    assert {row["group"] for row in json.loads(out.read_text())["rows"]} == {"proposer windows"}
    refused = run_cli("bench", "--only", "windower,nosuchcase")
    assert refused.returncode == 2
    assert "unknown case nosuchcase; known: codec," in refused.stdout


@pytest.mark.slow
def test_out_of_process_gives_the_same_simulated_figures(tmp_path: Path) -> None:
    """Each node's C-chain VM in its own process: the same answers and simulated figures
    as in process, with the round trips measured beside them."""
    in_process = reported(simulate(SMALL, data_dir=tmp_path))
    out = reported(simulate(attrs.evolve(SMALL, out_of_process=True), data_dir=tmp_path))
    assert out["simulated"] == in_process["simulated"]
    assert in_process["round_trips"] == {}
    batched, serial = out["round_trips"]["batched"], out["round_trips"]["serial"]
    assert batched["serving"]["GetAncestors"]["calls"] == out["simulated"]["batched"]["requests"]
    assert "GetBlock" not in batched["serving"]
    assert serial["serving"]["GetBlock"]["calls"] >= SMALL.blocks
    assert batched["node"]["BatchedParseBlock"]["calls"] >= 1
    # avalanchego's protocol has no LastAccepted: the client tracks it, learnt once.
    for trips in (batched, serial):
        assert "LastAccepted" not in trips["node"]
        assert trips["node"].get("Initialize", {"calls": 1})["calls"] <= 1
    assert serial["node"]["ParseBlock"]["calls"] >= SMALL.blocks


@pytest.mark.slow
def test_a_serving_peer_whose_process_dies_is_dropped_out_of_process() -> None:
    """Out of process, a serving peer's process killed between the batched and the serial
    bootstrap is a dropped peer: the serial bootstrap times out on it once, asks the other
    peer from then on, and reaches the tip; the report says which peer was dropped."""
    import signal

    from tests.support.processes import descendants, wait_ended

    killed: list[int] = []

    def kill_a_serving_peer(mode: str, fetched: int) -> None:
        if mode == "batched" and fetched == SMALL.blocks and not killed:
            serving = [
                pid
                for pid in descendants(os.getpid())
                if b"--readonly" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            ]
            assert len(serving) == SMALL.peers
            os.kill(serving[0], signal.SIGKILL)
            assert wait_ended(serving[0])
            killed.append(serving[0])

    report = simulate(attrs.evolve(SMALL, out_of_process=True), on_fetch=kill_a_serving_peer)
    assert killed
    serial = report.results["serial"]
    assert serial.blocks == SMALL.blocks
    assert len(serial.peers_dropped) == 1
    assert "timeout" in {reason for _, reason in serial.retries_at}
    assert report.results["batched"].peers_dropped == ()
    assert reported(report)["simulated"]["serial"]["peers_dropped"] == list(serial.peers_dropped)


@pytest.mark.slow
def test_calibrating_out_of_process_learns_the_round_trips() -> None:
    """A cost model measured across the boundary says so, and charges a serial get_block
    at least the base of one round trip."""
    costs = calibrate(attrs.evolve(SMALL, out_of_process=True), blocks=20)
    assert costs.source.endswith("out of process")
    assert costs.serve_serial(1, 1000) > 0


def _start_and_interrupt(data_dir: Path, signum: int) -> subprocess.CompletedProcess[str]:
    """Start a long `vmstack simulate --data-dir` and send ``signum`` once it is building."""
    process = start_command(
        "simulate",
        "--blocks",
        "3000",
        "--txs-per-block",
        "2",
        "--data-dir",
        str(data_dir),
        temporary=data_dir / "tmp",
    )
    wait_for(process, (data_dir / "serving" / "data.mdb").exists, "the build started")
    time.sleep(1.0)
    return signal_and_wait(process, signum)


@pytest.mark.slow
def test_ctrl_c_exits_130_with_one_line_and_the_next_run_rebuilds(tmp_path: Path) -> None:
    """Ctrl-C mid-build: status 130, one line, no traceback; the same --data-dir then
    serves a run with another configuration (the interrupted chain was never finished)."""
    interrupted = _start_and_interrupt(tmp_path, signal.SIGINT)
    assert interrupted.returncode == 130, interrupted.stderr
    assert interrupted.stderr.strip() == "vmstack simulate: interrupted"
    assert "Traceback" not in interrupted.stdout + interrupted.stderr
    result = run_cli(
        "simulate",
        "--blocks",
        "30",
        "--txs-per-block",
        "1",
        "--peers",
        "1",
        "--data-dir",
        str(tmp_path),
    )
    assert result.returncode == 0, result.stderr + result.stdout
    assert "reusing" not in result.stdout


@pytest.mark.slow
def test_ctrl_c_reaches_the_command_when_the_suite_ignores_sigint(tmp_path: Path) -> None:
    """A suite run as a background job ignores SIGINT, and a child inherits that: the
    command is started with SIGINT at its default, so Ctrl-C still stops it."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        interrupted = _start_and_interrupt(tmp_path, signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert interrupted.returncode == 130, interrupted.stderr
    assert interrupted.stderr.strip() == "vmstack simulate: interrupted"


@pytest.mark.slow
def test_sigterm_exits_143_with_one_line_and_removes_the_temporary_store(tmp_path: Path) -> None:
    """SIGTERM mid-build, as Ctrl-C: status 143, one line, and the temporary store (in
    the folder the command's TMPDIR names) is removed."""
    temporary = tmp_path / "tmp"
    process = start_command(
        "simulate", "--blocks", "3000", "--txs-per-block", "2", temporary=temporary
    )
    wait_for(
        process, lambda: any(temporary.glob("vmstack-sim-*/serving/data.mdb")), "the build started"
    )
    time.sleep(1.0)
    terminated = signal_and_wait(process, signal.SIGTERM)
    assert terminated.returncode == 143, terminated.stderr
    assert terminated.stderr.strip() == "vmstack simulate: terminated"
    assert list(temporary.iterdir()) == []


@pytest.mark.slow
def test_sigterm_out_of_process_stops_every_served_child(tmp_path: Path) -> None:
    """SIGTERM while the served processes of an out-of-process run start: status 143,
    one line, no served process left, the temporary stores removed."""
    temporary = tmp_path / "tmp"
    process = start_command(
        "simulate",
        "--blocks",
        "300",
        "--txs-per-block",
        "1",
        "--out-of-process",
        temporary=temporary,
    )
    wait_for(
        process, lambda: bool(live_processes_naming(str(temporary))), "a served process started"
    )
    terminated = signal_and_wait(process, signal.SIGTERM)
    assert terminated.returncode == 143, terminated.stderr
    assert terminated.stderr.strip() == "vmstack simulate: terminated"
    assert live_processes_naming(str(temporary)) == []
    assert list(temporary.iterdir()) == []


@pytest.mark.slow
def test_sigkill_mid_build_leaves_a_directory_the_next_run_uses(tmp_path: Path) -> None:
    """A run killed mid-build (SIGKILL) leaves a directory the next run rebuilds and then
    reuses, never one that fails for good."""
    killed = _start_and_interrupt(tmp_path, signal.SIGKILL)
    assert killed.returncode == -signal.SIGKILL
    for reused in (False, True):
        result = run_cli(
            "simulate",
            "--blocks",
            "30",
            "--txs-per-block",
            "1",
            "--peers",
            "1",
            "--data-dir",
            str(tmp_path),
            "--json",
            str(tmp_path / "r.json"),
        )
        assert result.returncode == 0, result.stderr + result.stdout
        assert ("reusing the chain of 30 blocks" in result.stdout) is reused
        assert json.loads((tmp_path / "r.json").read_text())["chain"]["reused"] is reused


@pytest.mark.slow
@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--plot", "out.gif"], "--plot out.gif: the format is chosen by the suffix"),
        (["--json", "missing/out.json"], "folder missing does not exist"),
        (["--costs", "absent.json"], "--costs absent.json: No such file"),
    ],
)
def test_bad_outputs_and_inputs_fail_before_any_work(
    tmp_path: Path, arguments: list[str], message: str
) -> None:
    """Outputs and the cost file are checked first: status 2, one message on stderr,
    nothing on stdout (no progress bar before the error)."""
    result = subprocess.run(
        [sys.executable, "-m", "vmstack", "simulate", *arguments],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2
    assert message in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"execute": {"base": -1.0}}, "'execute'"),
        ({"parse_serial": {"per_block": float("nan")}}, "'parse_serial'"),
        ({"serve_serial": {"per_byte": "fast"}}, "'serve_serial'"),
        ({"serve_batched": {"per_blocks": 1e-5}}, "unknown costs"),
    ],
)
def test_cost_files_name_the_bad_field(change: dict[str, object], field: str) -> None:
    """A cost model with a negative, NaN, non-numeric or unknown cost is refused, naming
    the field."""
    data = REFERENCE_COSTS.as_dict()
    data.update(change)
    with pytest.raises(ValueError, match=field):
        CostModel.from_dict(data)
    incomplete = REFERENCE_COSTS.as_dict()
    incomplete.pop("execute")
    with pytest.raises(ValueError, match="'execute' is missing"):
        CostModel.from_dict(incomplete)


@pytest.mark.slow
def test_version_and_integer_counts(tmp_path: Path) -> None:
    """--version names the package version; the JSON report counts calls as integers."""
    version = run_cli("--version")
    assert version.returncode == 0 and version.stdout.startswith("vmstack ")
    report = reported(simulate(attrs.evolve(SMALL, modes=("serial",))))
    calls = [entry["calls"] for figures in report["layers"].values() for entry in figures.values()]
    assert calls and all(type(count) is int for count in calls)


@pytest.mark.slow
def test_bench_markdown_writes_the_docs_table(tmp_path: Path) -> None:
    """`vmstack bench --markdown FILE` writes docs/benchmarks.md's table: a row per
    comparison under the module that printed it, and a reason under the table for every
    missed goal."""
    from tests.test_benchmarks_doc import ROW

    out = tmp_path / "bench.md"
    result = run_cli("bench", "--quick", "--only", "windower", "--markdown", str(out))
    assert result.returncode == 0, result.stderr + result.stdout
    text = out.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert lines[0].startswith("| module | benchmark | speedup | vs floor |")
    rows = [match.groups() for line in lines if (match := ROW.match(line))]
    assert [(module, group) for module, group, _ in rows] == [("windower", "proposer windows")]
    for line, (_, group, case) in zip(lines[2:], rows, strict=False):
        if line.endswith("| no |"):
            assert f"- **{group}: {case}**: " in text
        else:
            assert line.endswith("| yes |") and "## Goals not met" not in text
