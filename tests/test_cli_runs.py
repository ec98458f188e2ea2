"""``vmstack simulate``'s runs each take only their own flags: argparse refuses another
run's flag, naming the runs that take it."""

from __future__ import annotations

import pytest

from vmstack.cli import main
from vmstack.cli.simulate import RUNS, run_flags, run_parser, selected_run
from vmstack.sim.network.consensus import DEFAULT_CONSENSUS


@pytest.mark.parametrize(
    ("arguments", "run"),
    [
        ([], "two-node"),
        (["--nodes", "2", "--blocks", "4"], "two-node"),
        (["--nodes", "3"], "network"),
        (["--nodes=16"], "network"),
        (["--nodes", "02"], "two-node"),
        (["--nodes", "many"], "network"),
        (["--engine", "local"], "network"),
        (["--nodes", "2", "--engine", "ray"], "network"),
        (["--history", "DIR"], "history"),
        (["--history", "DIR", "--nodes", "5"], "history"),
    ],
)
def test_the_run_is_read_from_history_nodes_and_engine(arguments: list[str], run: str) -> None:
    assert selected_run(arguments) == run


def test_every_flag_belongs_to_a_run_and_the_others_refuse_it() -> None:
    """Each run's parser holds exactly its flags; given another run's flag it raises
    ValueError naming the flag, the runs that take it and this run."""
    flags = run_flags()
    assert len({flag.flag for flag in flags}) == len(flags)
    for run, title in RUNS.items():
        parser = run_parser(run)
        taken = {option for action in parser._actions for option in action.option_strings}
        assert taken - {"-h", "--help"} == {flag.flag for flag in flags if run in flag.runs}
        for flag in flags:
            if run in flag.runs:
                continue
            store_true = flag.settings.get("action") == "store_true"
            with pytest.raises(ValueError) as refused:
                parser.parse_args([flag.flag] if store_true else [flag.flag, "1"])
            message = str(refused.value)
            assert message.startswith(f"{flag.flag} applies to "), message
            assert message.endswith(f"not to {title}")
            assert all(RUNS[other] in message for other in flag.runs)


def test_a_refused_flag_is_status_2_and_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--blocks", "4", "--tx-rate", "5"]) == 2
    assert capsys.readouterr().err.strip() == (
        "vmstack simulate: --tx-rate applies to a network run (--nodes N other than 2, or "
        "--engine), not to the two-node run"
    )
    with pytest.raises(SystemExit) as stopped:
        main(["simulate", "--no-such-flag"])
    assert stopped.value.code == 2
    assert "unrecognized arguments: --no-such-flag" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stopped:
        main(["serve", "--data-dir", "D", "--blocks", "4"])
    assert stopped.value.code == 2
    assert "unrecognized arguments: --blocks 4" in capsys.readouterr().err


def test_simulate_help_lists_every_flag_under_its_runs(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["simulate", "--help"])
    assert stopped.value.code == 0
    text = capsys.readouterr().out
    for flag in run_flags():
        assert flag.flag in text
    for heading in ("every run:", "the two-node run:", "a history run (--history DIR)"):
        assert heading in text
    assert f"(default: {DEFAULT_CONSENSUS})" in " ".join(text.split())
