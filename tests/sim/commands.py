"""The ``vmstack`` command as a child process, for the tests that signal it: started with
Ctrl-C's default disposition (a suite run as a background job ignores SIGINT, and a child
would inherit that), its temporary files in a folder of the test's own, every wait
bounded, and the child killed if a wait runs out."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["first_line", "live_processes_naming", "signal_and_wait", "start_command", "wait_for"]


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_command(*args: str, temporary: Path) -> subprocess.Popen[str]:
    """``python -m vmstack ARGS`` with SIGINT at its default and ``TMPDIR`` at
    ``temporary`` (created)."""
    temporary.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [sys.executable, "-m", "vmstack", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(temporary)},
        preexec_fn=_default_sigint,
    )


def _finish(process: subprocess.Popen[str], seconds: float) -> subprocess.CompletedProcess[str]:
    try:
        stdout, stderr = process.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate(timeout=30)
        raise AssertionError(
            f"{process.args!r} did not end within {seconds:g} s: {stderr[-2000:]}"
        ) from None
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def wait_for(
    process: subprocess.Popen[str], condition: Callable[[], bool], what: str, seconds: float = 120.0
) -> None:
    """Wait until ``condition()`` holds; the child is killed, and the test fails naming
    ``what``, if it does not within ``seconds`` or the child ends first."""
    deadline = time.monotonic() + seconds
    while not condition():
        ended = process.poll() is not None
        if ended or time.monotonic() > deadline:
            if not ended:
                process.kill()
            result = _finish(process, 30)
            why = "the command ended first" if ended else f"not within {seconds:g} s"
            raise AssertionError(
                f"{what}: {why} (status {result.returncode}): {result.stderr[-2000:]}"
            )
        time.sleep(0.05)


def first_line(process: subprocess.Popen[str], seconds: float = 120.0) -> str:
    """The child's first line of standard output, read within ``seconds`` (else the child
    is killed and the test fails)."""
    assert process.stdout is not None
    deadline = time.monotonic() + seconds
    line = b""
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            chunk = (
                os.read(process.stdout.fileno(), 1) if left > 0 and selector.select(left) else b""
            )
            if not chunk:
                process.kill()
                result = _finish(process, 30)
                raise AssertionError(f"no first line within {seconds:g} s: {result.stderr[-2000:]}")
            line += chunk
    return line.decode()


def signal_and_wait(
    process: subprocess.Popen[str], signum: int, seconds: float = 120.0
) -> subprocess.CompletedProcess[str]:
    """Send ``signum`` and wait at most ``seconds`` for the child to end (killed if not)."""
    process.send_signal(signum)
    return _finish(process, seconds)


def live_processes_naming(text: str) -> list[int]:
    """Processes alive (not zombies) whose command line mentions ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text.encode() in command and state != "Z":
            found.append(int(entry.name))
    return found
