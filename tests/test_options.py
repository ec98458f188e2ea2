"""Every stack option through every entry point: ``build_stack``, ``vmstack serve``'s flags,
the plugin's ``config_bytes`` and ``spawn``, each from the one record of
:mod:`vmstack.options`; a bad value is an error naming the option at each of them."""

from __future__ import annotations

import inspect
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from vmstack import build_stack
from vmstack.cchain import ETHEREUM, CChainVM
from vmstack.cchain.era1 import export_history
from vmstack.cli import _parser
from vmstack.cli.serve import stack_options_of
from vmstack.cli.simulate import RUNS, run_parser
from vmstack.clock import SimClock
from vmstack.closing import close_stack
from vmstack.errors import InvalidOption
from vmstack.interfaces import ChainVM
from vmstack.options import STACK_OPTIONS, crossing_options, option_arguments
from vmstack.serving import build_from_initialize, build_served_stack
from vmstack.store import LMDBStore, MemoryStore
from vmstack.store.configuration import stored_configuration
from vmstack.store.history import EraArchive
from vmstack.transition import TransitionVM
from vmstack.wrappers.proposer import ProposerVM
from vmstack.wrappers.rpc import vm_pb2
from vmstack.wrappers.rpc.process import _command, spawn

from .cchain.chains import START, build_chain, new_vm

BY_NAME = {option.name: option for option in STACK_OPTIONS}


def _find(stack: ChainVM, kind: type) -> Any:
    """The first layer of ``stack`` (down its ``inner`` chain) that is a ``kind``."""
    vm: Any = stack
    while vm is not None:
        if isinstance(vm, kind):
            return vm
        vm = getattr(vm, "inner", None)
    raise AssertionError(f"no {kind.__name__} in the stack")


def _pchain_height(stack: ChainVM) -> int:
    height = _find(stack, ProposerVM)._pchain_height
    return int(height())


#: How each option that crosses is read back from a built stack.
READ: dict[str, Callable[[ChainVM], object]] = {
    "flavour": lambda stack: _find(stack, CChainVM).flavour.name,
    "chain_id": lambda stack: _find(stack, CChainVM).chain_id,
    "fork_time": lambda stack: _find(stack, ProposerVM).fork_time,
    "transition_time": lambda stack: _find(stack, TransitionVM).transition_time,
    "key_prefix": lambda stack: _find(stack, CChainVM).schema.prefix,
    "settle_lag": lambda stack: _find(stack, CChainVM).settle_lag,
    "cache_size": lambda stack: _find(stack, CChainVM).cache.capacity,
    "parse_workers": lambda stack: _find(stack, ProposerVM).parse_pool.workers,
    "durango_time": lambda stack: _find(stack, ProposerVM).durango_time,
    "pchain_height": _pchain_height,
    "history": lambda stack: _find(stack, CChainVM).history.directory,
}


@dataclass(frozen=True)
class Case:
    """One option's value in its three spellings, what the stack reads back, and the
    options it needs beside it (a proposer option needs a fork time)."""

    name: str
    value: object
    text: str
    json_value: object
    expected: object
    needs: tuple[str, ...] = ()
    #: Makes the value afresh for each stack (an archive, which each stack's reader closes).
    make: Callable[[], object] | None = None

    def python_value(self, closing: list[Any]) -> object:
        if self.make is None:
            return self.value
        value = self.make()
        closing.append(value)
        return value


#: Companions in the three spellings: (value, flag text, JSON value).
NEEDS: dict[str, tuple[object, str, object]] = {
    "fork_time": (0.0, "0.0", 0.0),
    "flavour": (ETHEREUM, "ethereum", "ethereum"),
}


@pytest.fixture(scope="module")
def era1_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding the era1 file of a generated 12-block Ethereum chain."""
    folder = tmp_path_factory.mktemp("era1")
    vm = new_vm(MemoryStore(), flavour=ETHEREUM)
    build_chain(vm, 12, txs=1)
    export_history(vm, folder, network="vmstack")
    return folder


def _cases(era1: Path) -> list[Case]:
    return [
        Case("flavour", ETHEREUM, "ethereum", "ethereum", "ethereum"),
        Case("chain_id", 7, "7", 7, 7),
        Case("fork_time", 5.0, "5.0", 5.0, 5.0),
        Case("transition_time", 9.0, "9.0", 9.0, 9.0),
        Case("key_prefix", b"\x01\x02", "0102", "0102", b"\x01\x02"),
        Case("settle_lag", 3, "3", 3, 3),
        Case("cache_size", 17, "17", 17, 17),
        Case("parse_workers", 1, "1", 1, 1, ("fork_time",)),
        Case("durango_time", 3.5, "3.5", 3.5, 3.5, ("fork_time",)),
        Case("pchain_height", 4, "4", 4, 4, ("fork_time",)),
        Case(
            "history",
            None,
            str(era1),
            str(era1),
            era1,
            ("flavour",),
            make=lambda: EraArchive(era1, sparse=True),
        ),
    ]


def test_the_record_holds_build_stacks_keywords_and_defaults() -> None:
    """``build_stack``'s keywords are the record's, in its order, with its defaults."""
    parameters = list(inspect.signature(build_stack).parameters.values())[1:]
    assert [parameter.name for parameter in parameters] == [o.name for o in STACK_OPTIONS]
    for parameter in parameters:
        assert parameter.kind is inspect.Parameter.KEYWORD_ONLY
        assert parameter.default == BY_NAME[parameter.name].default, parameter.name


def test_every_crossing_option_has_a_flag_a_json_key_and_a_case(era1_folder: Path) -> None:
    """What crosses has a serve flag and a config_bytes key; this file drives each."""
    crossing = {option.name for option in crossing_options()}
    assert crossing == set(READ) == {case.name for case in _cases(era1_folder)}
    for option in crossing_options():
        assert option.flag == "--" + option.name.replace("_", "-")
        assert option.json_key == option.name
    for option in STACK_OPTIONS:
        if not option.crosses:
            assert option.flag is None and option.json_key is None, option.name


def test_serve_takes_the_record_flags_and_no_simulate_run_does() -> None:
    """``vmstack serve``'s stack flags are the record's; no simulate run takes a record
    option (the history run's ``--history`` is its own: the archive its peers serve)."""
    commands = next(a for a in _parser()._actions if a.dest == "command")
    assert isinstance(commands.choices, dict)
    serve = commands.choices["serve"]
    dests = {action.dest: action.option_strings for action in serve._actions}
    for option in crossing_options():
        assert dests[option.name] == [option.flag]
    for run in RUNS:
        taken = {flag for action in run_parser(run)._actions for flag in action.option_strings}
        shared = taken & {option.flag for option in crossing_options()}
        assert shared == ({"--history"} if run == "history" else set())


def _entry_points() -> list[str]:
    return ["build_stack", "serve flags", "config_bytes", "spawn"]


def _build(entry: str, case: Case, tmp_path: Path, closing: list[Any]) -> ChainVM:
    needs = {name: NEEDS[name] for name in case.needs}
    if entry == "build_stack":
        options: dict[str, Any] = {name: value for name, (value, _, _) in needs.items()}
        value = case.python_value(closing)
        options[case.name] = value
        return build_stack(MemoryStore(), clock=SimClock(START), **options)
    if entry == "config_bytes":
        config = {name: value for name, (_, _, value) in needs.items()}
        config[case.name] = case.json_value
        request = vm_pb2.InitializeRequest(
            chain_data_dir=str(tmp_path), config_bytes=json.dumps(config).encode()
        )
        stack, _ = build_from_initialize(request, closing)
        return stack
    if entry == "serve flags":
        arguments = [
            word for name, (_, text, _) in needs.items() for word in (str(BY_NAME[name].flag), text)
        ]
        arguments += [str(BY_NAME[case.name].flag), case.text]
    else:  # spawn: the child's command line, read as the child reads it
        given: dict[str, Any] = {name: value for name, (value, _, _) in needs.items()}
        given[case.name] = case.python_value(closing)
        command = _command(tmp_path / "db", None, None, False, given)
        assert command[1:4] == ["-m", "vmstack", "serve"]
        arguments = command[6:]
    args, rest = _parser().parse_known_args(["serve", "--data-dir", str(tmp_path), *arguments])
    assert rest == []
    options = stack_options_of(args)
    if options.get("history") is not None:
        closing.append(options["history"])
    return build_served_stack(MemoryStore(), options, clock=SimClock(START))


@pytest.mark.parametrize("entry", _entry_points())
def test_every_option_reaches_the_stack_through_every_entry_point(
    entry: str, era1_folder: Path, tmp_path: Path
) -> None:
    """Each crossing option, given alone (with what it needs), ends up in the built stack."""
    for number, case in enumerate(_cases(era1_folder)):
        closing: list[Any] = []
        stack = _build(entry, case, tmp_path / str(number), closing)
        try:
            assert READ[case.name](stack) == case.expected, (entry, case.name)
        finally:
            close_stack(stack)
            for resource in closing:
                resource.close()


#: A bad value of each crossing option: (value, flag text, JSON value).
BAD: dict[str, tuple[object, str, object]] = {
    "flavour": ("ethereum", "bogus", "bogus"),
    "chain_id": (0, "0", True),
    "fork_time": ("soon", "soon", "soon"),
    "transition_time": (math.inf, "inf", "later"),
    "key_prefix": ("0102", "zz", "zz"),
    "settle_lag": (-1, "-1", -1),
    "cache_size": (1.5, "x", 1.5),
    "parse_workers": (-1, "-1", -1),
    "durango_time": (math.nan, "nan", None),
    "pchain_height": (-1, "-2", "4"),
    "history": ("/no/such/era1", "/no/such/era1", 5),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_value_is_an_error_naming_the_option_everywhere(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """build_stack, config_bytes and spawn raise InvalidOption naming the option; the serve
    flag is argparse's usage error naming the flag and the option."""
    value, text, json_value = BAD[name]
    with pytest.raises(InvalidOption, match=name) as raised:
        build_stack(MemoryStore(), **{name: value})  # type: ignore[arg-type]
    assert raised.value.option == name
    with pytest.raises(InvalidOption, match=name) as raised:
        _command(tmp_path, None, None, False, {name: value})
    assert raised.value.option == name
    request = vm_pb2.InitializeRequest(
        chain_data_dir=str(tmp_path), config_bytes=json.dumps({name: json_value}).encode()
    )
    with pytest.raises(InvalidOption, match=f"config_bytes: {name}") as raised:
        build_from_initialize(request, [])
    assert raised.value.option == name
    assert not (tmp_path / "vmstack").exists(), "refused before a store is opened"
    with pytest.raises(SystemExit) as stopped:
        _parser().parse_args(["serve", "--data-dir", str(tmp_path), str(BY_NAME[name].flag), text])
    assert stopped.value.code == 2
    error = capsys.readouterr().err
    assert f"argument {BY_NAME[name].flag}: {name}" in error


def test_what_cannot_cross_is_refused_by_spawn_naming_it(tmp_path: Path) -> None:
    """An option that is an object (a tracer, a validator set) does not cross: spawn says so."""
    for option in STACK_OPTIONS:
        if not option.crosses:
            with pytest.raises(InvalidOption, match=f"cannot pass {option.name}"):
                option_arguments({option.name: object()})
    with pytest.raises(InvalidOption, match="as an int, not a callable"):
        _command(tmp_path, None, None, False, {"fork_time": 0.0, "pchain_height": lambda: 3})


def test_config_bytes_refuses_an_unknown_key_naming_the_options(tmp_path: Path) -> None:
    request = vm_pb2.InitializeRequest(chain_data_dir=str(tmp_path), config_bytes=b'{"tracer": 1}')
    with pytest.raises(InvalidOption, match=r"unknown option 'tracer'.*durango_time.*history"):
        build_from_initialize(request, [])


@pytest.mark.slow
def test_spawn_carries_every_option_to_its_child(era1_folder: Path, tmp_path: Path) -> None:
    """Through a real child: the recorded options land in the store's configuration, and an
    archive given to spawn is served beneath the child's empty store."""
    options: dict[str, Any] = {
        "chain_id": 7,
        "fork_time": 0.0,
        "transition_time": 1e12,
        "key_prefix": b"\x09",
        "settle_lag": 2,
        "cache_size": 5,
        "parse_workers": 1,
        "durango_time": 1.0,
        "pchain_height": 3,
    }
    with spawn(tmp_path / "a", startup_timeout=60, timeout=20, **options) as client:
        assert client.get_block(client.last_accepted()).height == 0
    with LMDBStore(tmp_path / "a", readonly=True) as store:
        assert stored_configuration(store, "chain") == {
            "flavour": "avalanche",
            "chain_id": 7,
            "transition_time": 1e12,
            "settle_lag": 2,
            "key_prefix": "09",
        }
        assert stored_configuration(store, "proposer") == {"fork_time": 0.0, "chain_id": 7}
    with EraArchive(era1_folder) as archive:
        last = archive.hash(archive.last)
        with spawn(
            tmp_path / "b", startup_timeout=60, timeout=20, flavour=ETHEREUM, history=archive
        ) as client:
            assert client.last_accepted() == last


def _documented_rows() -> list[str]:
    """The table of docs/options.md as the record gives it."""
    rows = [
        "| option | default | `vmstack serve` flag | `config_bytes` key | recorded in |",
        "|---|---|---|---|---|",
    ]
    for option in crossing_options():
        default = option.default_text if option.default_text is not None else str(option.default)
        rows.append(
            f"| `{option.name}` | {default} | `{option.flag} {option.kind.metavar or 'NAME'}` "
            f"| `{option.json_key}` | {', '.join(option.recorded) or '-'} |"
        )
    return rows


def test_the_options_page_shows_the_record() -> None:
    """docs/options.md's table is the record's, row for row, and it names every option
    that stays in one process."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "options.md").read_text()
    assert "\n".join(_documented_rows()) in text
    for option in STACK_OPTIONS:
        if not option.crosses:
            assert f"`{option.name}`" in text.split("## The options that stay in one process")[1]


@pytest.mark.parametrize(
    ("given", "genesis_id", "runs"),
    [
        (None, 5, 5),
        (5, 5, 5),
        (7, None, 7),
        (None, None, BY_NAME["chain_id"].default),
        (7, 5, None),
    ],
)
def test_the_chain_id_with_a_genesis_is_decided_once(
    given: int | None, genesis_id: int | None, runs: int | None
) -> None:
    """``build_stack`` and ``CChainVM`` run the chain ID ``Genesis.chain_id_for`` decides:
    the genesis's unless another is given, which is refused."""
    from vmstack.cchain import Genesis

    genesis = Genesis(chain_id=genesis_id)
    keywords: dict[str, Any] = {} if given is None else {"chain_id": given}
    if runs is None:
        with pytest.raises(ValueError, match="differs from the genesis's 5"):
            build_stack(MemoryStore(), genesis=genesis, **keywords)
        with pytest.raises(ValueError, match="differs from the genesis's 5"):
            CChainVM(MemoryStore(), genesis=genesis, **keywords)
        return
    stack = build_stack(MemoryStore(), genesis=genesis, fork_time=0.0, **keywords)
    assert _find(stack, CChainVM).chain_id == runs
    assert stored_configuration(_find(stack, CChainVM).store, "proposer") == {
        "fork_time": 0.0,
        "chain_id": runs,
    }
    assert CChainVM(MemoryStore(), genesis=genesis, **keywords).chain_id == runs
