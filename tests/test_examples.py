"""The examples run as written, and print what the README and docs/ show of them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

#: Every example runs in a child process: seconds each.
pytestmark = pytest.mark.processes

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def _shown_after(page: str, marker: str) -> list[str]:
    """The lines of the first plain fenced block of ``page`` that holds ``marker`` or
    follows it."""
    text = (ROOT / page).read_text(encoding="utf-8")
    at = text.index(marker)
    for match in re.finditer(r"^```([^\n`]*)\n(.*?)^```$", text, re.DOTALL | re.MULTILINE):
        if match.group(1) == "" and match.end() > at:
            return match.group(2).splitlines()
    raise AssertionError(f"{page} shows no output after {marker!r}")


def _contiguous(shown: list[str], printed: list[str]) -> bool:
    """Whether ``shown`` is a run of consecutive lines of ``printed``."""
    return any(printed[at : at + len(shown)] == shown for at in range(len(printed)))


def _run(script: str) -> subprocess.CompletedProcess[str]:
    """Run ``examples/<script>`` with this interpreter, from the examples folder."""
    return subprocess.run(
        [sys.executable, str(EXAMPLES / script)],
        cwd=EXAMPLES,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.slow
def test_write_a_layer_passes_its_conformance_tests() -> None:
    """The layer example prints its stack and passes the kit, exiting 0."""
    result = _run("write_a_layer.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "CountingVM(counting)  batched" in result.stdout
    assert "calls seen: {'get_ancestors': 1}" in result.stdout
    assert " passed" in result.stdout
    assert "failed" not in result.stdout
    shown = _shown_after("README.md", "$ python examples/write_a_layer.py")
    assert shown[0] == "$ python examples/write_a_layer.py"
    printed = result.stdout.splitlines()
    assert printed[:3] == shown[1:4], "the README shows another start of the example's output"
    summary = re.compile(r"^\d+ passed in [\d.]+s$")
    assert summary.match(shown[-1]) and summary.match(printed[-1]), printed[-1]


@pytest.mark.slow
def test_embed_in_simulator_runs_and_the_peer_catches_up() -> None:
    """The simulator example gossips to four nodes, includes each transaction once, rejects
    the rival proposal, and a new node catches up through the full stack."""
    result = _run("embed_in_simulator.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "the rival proposal lost and was rejected" in result.stdout
    assert (
        "49 transactions gossiped to 4 nodes (192 duplicates refused), each included once"
        in result.stdout
    )
    assert "served 13 blocks" in result.stdout
    assert "new node caught up" in result.stdout


@pytest.mark.slow
def test_decisions_fork_agrees_through_two_forks_and_two_switches() -> None:
    """The decisions example forks at the transition height and after the fork, switches
    preference twice, rejects the losing branches, and every node agrees."""
    result = _run("decisions_fork.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "C1 built on T1" in result.stdout
    assert "T2 and C2 accepted, T1 and C1 rejected" in result.stdout
    assert "P2 and Q accepted, P1 rejected" in result.stdout
    assert "the rejected branches carried 10 transactions; all are on the accepted chain" in (
        result.stdout
    )
    assert "16 transactions, each included once" in result.stdout
    assert "4 nodes agree on every height" in result.stdout


@pytest.mark.slow
def test_inspect_store_lists_blocks_heads_and_sizes() -> None:
    """The store example lists heads and every block of its demo chain, newest first."""
    result = _run("inspect_store.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "last accepted: #12" in result.stdout
    assert "last settled:  #12" in result.stdout
    rows = [
        line.split()[0]
        for line in result.stdout.splitlines()
        if line.strip() and line.split()[0].isdigit()
    ]
    assert rows == [str(height) for height in range(12, -1, -1)]


@pytest.mark.slow
def test_out_of_process_serves_the_chain_from_a_child() -> None:
    """The boundary example serves the C-chain part from a child: two round trips batched,
    one per block on the fallback (but the tip: the client holds the last accepted block)."""
    result = _run("out_of_process.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "VMClient(unix:" in result.stdout
    assert "batched: 31 ancestors and 10 parsed blocks in 2 round trips" in result.stdout
    assert "fallback: 31 ancestors in 31 round trips" in result.stdout

    def comparable(line: str) -> str:
        line = re.sub(r"VMClient\([^)]*\)", "VMClient(ADDRESS)", line)
        return " ".join(re.sub(r"served by process \d+", "served by process PID", line).split())

    page = "docs/process-boundary.md"
    shown = [comparable(line) for line in _shown_after(page, "print(describe_stack(vm))\n```")]
    printed = [comparable(line) for line in result.stdout.splitlines()]
    assert _contiguous(shown, printed), f"{page} shows other lines than the example prints"
    code = (ROOT / page).read_text(encoding="utf-8")
    code = code[code.index("```python\nwith (") + len("```python\n") :]
    code = code[: code.index("```")]
    source = (EXAMPLES / "out_of_process.py").read_text(encoding="utf-8").splitlines()
    written = [line.strip() for line in source]
    excerpt = [line.strip() for line in code.splitlines()]
    assert _contiguous(excerpt, written), f"{page}'s code is not the example's"
