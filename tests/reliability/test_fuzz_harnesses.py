"""The atheris harnesses under fuzz/ run without atheris: each replays its seed corpus and
a few mutations of it cleanly, so the harnesses cannot rot between hand-run fuzzing sessions."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tests.reliability.mutations import BitFlip, SetLength, Truncate

#: Fuzzing: the full suite runs it.
pytestmark = pytest.mark.thorough

FUZZ = Path(__file__).resolve().parents[2] / "fuzz"
HARNESSES = ["fuzz_codec", "fuzz_proposer", "fuzz_rpc", "fuzz_stack"]


@pytest.fixture(scope="module", params=HARNESSES)
def harness(request: pytest.FixtureRequest) -> Iterator[ModuleType]:
    sys.path.insert(0, str(FUZZ))
    try:
        spec = importlib.util.spec_from_file_location(request.param, FUZZ / f"{request.param}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(FUZZ))


def test_seeds_replay_cleanly(harness: ModuleType) -> None:
    """Every seed of the harness goes through its checks without an error."""
    seeds = list(harness.seeds())
    assert len(seeds) >= 5
    for seed in seeds:
        harness.one_input(seed)


def test_mutated_seeds_replay_cleanly(harness: ModuleType) -> None:
    """Truncated, bit-flipped and length-corrupted seeds go through the harness's checks
    with nothing but InvalidBlock handled inside it."""
    for seed in list(harness.seeds())[:8]:
        for mutation in (
            Truncate(len(seed) // 2),
            BitFlip(len(seed) // 3, 5),
            SetLength(1, 2**60),
            Truncate(3),
        ):
            harness.one_input(mutation.apply(seed))


def test_write_seeds_and_replay_from_the_command_line(
    harness: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--write-seeds writes the corpus and --replay runs saved inputs, without atheris."""
    harness.main(harness.one_input, harness.seeds, ["--write-seeds", str(tmp_path)])
    files = sorted(tmp_path.iterdir())
    assert files
    harness.main(harness.one_input, harness.seeds, ["--replay", *map(str, files[:2])])
    assert capsys.readouterr().out.count(": ok") == min(2, len(files))
