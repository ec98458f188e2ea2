"""The examples run as written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _run(script: str) -> subprocess.CompletedProcess[str]:
    """Run ``examples/<script>`` with this interpreter, from the examples folder."""
    return subprocess.run([sys.executable, str(EXAMPLES / script)], cwd=EXAMPLES,
                          capture_output=True, text=True, timeout=300, check=False)


def test_write_a_layer_passes_its_conformance_tests() -> None:
    """The layer example prints its stack and passes the kit, exiting 0."""
    result = _run("write_a_layer.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "CountingVM(counting)  batched" in result.stdout
    assert "calls seen: {'get_ancestors': 1}" in result.stdout
    assert " passed" in result.stdout
    assert "failed" not in result.stdout
