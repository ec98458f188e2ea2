"""Child processes as Linux's ``/proc`` shows them, for the tests that check what a child
does: whether it ended, whether every thread of it stopped, what it started; a call made
with a deadline, for the tests of what must not hang on a child; and the two ways tests run
a Python program of their own in a child: for what it prints, and to kill it mid-write."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

__all__ = [
    "descendants",
    "ended",
    "kill_once_ready",
    "parent_and_state",
    "python_child_output",
    "returns_within",
    "wait_ended",
    "wait_stopped",
]


def parent_and_state(entry: Path) -> tuple[int, str] | None:
    """``(parent ID, state letter)`` from a ``/proc`` process or thread entry's ``stat``;
    None once it is gone."""
    try:
        # The fields follow the command name, which is in parentheses and may hold spaces.
        state, parent = (entry / "stat").read_text().rpartition(")")[2].split()[:2]
    except (FileNotFoundError, ProcessLookupError):
        return None
    return int(parent), state


def ended(pid: int) -> bool:
    """Whether ``pid`` has exited: gone, or a zombie (exited, not reaped yet, or whose
    parent died first under an init that does not reap; it runs nothing)."""
    facts = parent_and_state(Path(f"/proc/{pid}"))
    return facts is None or facts[1] == "Z"


def wait_ended(pid: int, seconds: float = 15.0) -> bool:
    """Whether ``pid`` ended within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if ended(pid):
            return True
        time.sleep(0.05)
    return False


def wait_stopped(pid: int, seconds: float = 15.0) -> bool:
    """Whether every thread of ``pid`` reached the stopped state within ``seconds``.

    SIGSTOP is delivered to one thread, which then stops the others: until it has run,
    another thread may still answer a call. A test of a stopped child waits for this.
    """
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        # A thread that ended (no state) answers nothing either.
        facts = [parent_and_state(task) for task in Path(f"/proc/{pid}/task").iterdir()]
        if facts and all(fact is None or fact[1] in {"T", "t"} for fact in facts):
            return True
        time.sleep(0.01)
    return False


def descendants(pid: int) -> set[int]:
    """Every living process below ``pid``."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            facts = parent_and_state(Path("/proc", entry))
            if facts is not None:
                parents[int(entry)] = facts[0]
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier}
        found |= frontier
    return found


def returns_within(seconds: float, call: Callable[[], T]) -> T:
    """``call()``'s answer (or its exception), made on a thread of its own; an
    ``AssertionError`` if it has not returned within ``seconds`` (the thread, a daemon, is
    left to whatever holds it)."""
    outcome: list[tuple[bool, object]] = []

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as error:  # handed to the caller below
            outcome.append((False, error))

    thread = threading.Thread(target=run, name="returns-within", daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, f"the call did not return within {seconds:g} s (it hangs)"
    returned, value = outcome[0]
    if not returned:
        assert isinstance(value, BaseException)
        raise value
    return value  # type: ignore[return-value]


def python_child_output(program: str, *args: str, seconds: float) -> str:
    """What ``python -c PROGRAM ARGS`` printed (stripped), the child importing this
    checkout's code; the test fails, with the child's standard error, if it died, and
    ``subprocess.TimeoutExpired`` is raised if it ran past ``seconds``."""
    child = subprocess.run(
        [sys.executable, "-c", program, *args],
        capture_output=True,
        text=True,
        timeout=seconds,
        check=False,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    assert child.returncode == 0, f"the child died (rc {child.returncode}): {child.stderr}"
    return child.stdout.strip()


def kill_once_ready(writer: subprocess.Popen[bytes], pause: float) -> None:
    """SIGKILL ``writer`` ``pause`` seconds after it printed ``ready`` (its first line),
    and reap it; the test fails with the child's standard error if its first line was
    another."""
    try:
        assert writer.stdout is not None
        line = writer.stdout.readline()
        assert line == b"ready\n", writer.stderr.read() if writer.stderr else line
        time.sleep(pause)
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait()
    assert writer.returncode == -signal.SIGKILL
