"""A stack's options, one record: :data:`STACK_OPTIONS` holds one :class:`StackOption` per
keyword of :func:`~vmstack.stack.build_stack`.

Each entry says what the option is (its name, the kind of value it takes and its default),
how it is checked, and where it appears besides ``build_stack``: the ``vmstack serve`` flag
that sets it, its key in the JSON object a node gives the plugin as ``config_bytes``,
whether :func:`~vmstack.wrappers.rpc.spawn` can pass it to another process, and which part
of the store's recorded configuration (:mod:`vmstack.store.configuration`) holds it. Every
one of those places reads this record: ``build_stack`` checks its keywords here,
``vmstack serve`` makes its stack flags from it, the plugin reads ``config_bytes`` with
:func:`options_from_json`, and ``spawn`` writes the child's command line with
:func:`option_arguments`. Adding an option is one entry here and its use in
``build_stack``.

A value's kind (a :class:`ValueKind`) knows the three spellings of a value: the Python
value ``build_stack`` takes, the text of a command-line flag, and the JSON value of
``config_bytes``. A bad value in any of them is :class:`~vmstack.errors.InvalidOption`
naming the option.

The C-chain code and the era1 archive are imported only when a flavour or an archive is
read, so the command line can name the options without loading the VM.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from vmstack.defaults import DEFAULT_CACHE_SIZE, DEFAULT_CHAIN_ID
from vmstack.errors import InvalidOption

if TYPE_CHECKING:
    from vmstack.cchain.codec import Flavour

__all__ = [
    "STACK_OPTIONS",
    "StackOption",
    "ValueKind",
    "add_option_flags",
    "check_stack_options",
    "crossing_options",
    "option_arguments",
    "options_from_json",
    "recorded_settings",
    "served_part_options",
]

#: The part of a stack an option shapes: the C-chain part (built on the serving side of a
#: process boundary), the proposer layer, or the whole stack.
Part = Literal["chain", "proposer", "stack"]


def _number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidOption(name, f"{name} must be a finite number, got {value!r}")
    return float(value) if isinstance(value, float) else value


class ValueKind:
    """The kind of value an option takes, in its three spellings. ``description`` is what
    a message says the value must be; ``metavar`` the flag's placeholder."""

    description = "any object"
    metavar: str | None = None

    def check(self, name: str, value: Any) -> Any:
        """``value`` as ``build_stack`` takes it, or :class:`InvalidOption`."""
        return value

    def from_text(self, name: str, text: str) -> Any:
        """The value a flag's ``text`` means (its kind checked)."""
        raise InvalidOption(name, f"{name} cannot be given as text")

    def to_text(self, name: str, value: Any) -> str:
        """The flag text meaning ``value`` (checked first)."""
        raise InvalidOption(name, f"{name} cannot cross to another process")

    def from_json(self, name: str, value: Any) -> Any:
        """The value a ``config_bytes`` JSON ``value`` means."""
        return self.check(name, value)

    def recorded(self, value: Any) -> object:
        """``value`` as the store's configuration record holds it (JSON)."""
        return value

    def is_default(self, value: Any, default: object) -> bool:
        """Whether ``value`` is the option's ``default`` (given or not)."""
        return value is None or value == default

    def refuse(self, name: str, value: object) -> InvalidOption:
        return InvalidOption(name, f"{name} must be {self.description}, got {value!r}")


class IntegerKind(ValueKind):
    """An int of at least ``least``."""

    def __init__(self, least: int) -> None:
        self.least = least
        self.description = "a positive int" if least == 1 else f"an int of at least {least}"
        self.metavar = "N"

    def check(self, name: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < self.least:
            raise self.refuse(name, value)
        return value

    def from_text(self, name: str, text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise self.refuse(name, text) from None
        return self.check(name, value)

    def to_text(self, name: str, value: Any) -> str:
        return str(self.check(name, value))


class TimeKind(ValueKind):
    """A unix time (a finite number of seconds); ``optional``: or ``None``, for a layer
    left out."""

    description = "a finite number (unix seconds)"
    metavar = "T"

    def __init__(self, *, optional: bool) -> None:
        self.optional = optional

    def check(self, name: str, value: Any) -> float | None:
        if value is None and self.optional:
            return None
        return _number(name, value)

    def from_text(self, name: str, text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise self.refuse(name, text) from None
        return _number(name, value)

    def to_text(self, name: str, value: Any) -> str:
        return repr(self.check(name, value))


class HeightKind(IntegerKind):
    """A P-chain height: an int of at least 0, or (in process only) a zero-argument
    callable giving one."""

    def __init__(self) -> None:
        super().__init__(0)
        self.description = "an int of at least 0 or a callable giving one"

    def check(self, name: str, value: Any) -> Any:
        if callable(value):
            return value
        return super().check(name, value)

    def to_text(self, name: str, value: Any) -> str:
        if callable(value):
            raise InvalidOption(
                name, f"{name} crosses to another process as an int, not a callable"
            )
        return super().to_text(name, value)


class FlavourKind(ValueKind):
    """A block format: ``AVALANCHE`` or ``ETHEREUM`` (``vmstack.cchain``); as text and
    JSON its name."""

    description = "a flavour (AVALANCHE or ETHEREUM of vmstack.cchain)"
    names = ("avalanche", "ethereum")

    def check(self, name: str, value: Any) -> Flavour | None:
        from vmstack.cchain.codec import AVALANCHE, ETHEREUM

        if value is None or value is AVALANCHE or value is ETHEREUM:
            return value
        raise self.refuse(name, value)

    def from_text(self, name: str, text: str) -> Flavour:
        from vmstack.cchain.codec import AVALANCHE, ETHEREUM

        flavours = {"avalanche": AVALANCHE, "ethereum": ETHEREUM}
        if not isinstance(text, str) or text not in flavours:
            raise InvalidOption(name, f"{name} is one of {', '.join(self.names)}, got {text!r}")
        return flavours[text]

    def to_text(self, name: str, value: Any) -> str:
        flavour = self.check(name, value)
        return "avalanche" if flavour is None else flavour.name

    def from_json(self, name: str, value: Any) -> Flavour:
        return self.from_text(name, value)

    def recorded(self, value: Any) -> object:
        return "avalanche" if value is None else value.name

    def is_default(self, value: Any, default: object) -> bool:
        return value is None or value.name == "avalanche"


class PrefixKind(ValueKind):
    """Bytes; as text and JSON, hex."""

    description = "bytes (hex as text)"
    metavar = "HEX"

    def check(self, name: str, value: Any) -> bytes:
        if not isinstance(value, bytes):
            raise self.refuse(name, value)
        return value

    def from_text(self, name: str, text: str) -> bytes:
        try:
            return bytes.fromhex(text)
        except (TypeError, ValueError):
            raise InvalidOption(name, f"{name} must be hex, got {text!r}") from None

    def to_text(self, name: str, value: Any) -> str:
        return self.check(name, value).hex()

    def from_json(self, name: str, value: Any) -> bytes:
        return self.from_text(name, value)

    def recorded(self, value: Any) -> object:
        return value.hex()


class ArchiveKind(ValueKind):
    """An era1 archive (``EraArchive``); as text and JSON, its directory, opened with
    missing epochs allowed. Whoever reads one from text or JSON closes it."""

    description = "an EraArchive (a directory of era1 files as text; spawn: either)"
    metavar = "DIR"

    def check(self, name: str, value: Any) -> Any:
        from vmstack.store.history import EraArchive

        if value is None or isinstance(value, EraArchive):
            return value
        raise self.refuse(name, value)

    def from_text(self, name: str, text: str) -> Any:
        from vmstack.store.history import EraArchive

        if not isinstance(text, str):
            raise self.refuse(name, text)
        try:
            return EraArchive(Path(text), sparse=True)
        except (OSError, ValueError) as error:
            raise InvalidOption(name, f"{name} {text}: {error}") from None

    def to_text(self, name: str, value: Any) -> str:
        from vmstack.store.history import EraArchive

        if isinstance(value, EraArchive):
            return str(value.directory)
        if isinstance(value, str | os.PathLike):
            if not Path(value).is_dir():
                raise InvalidOption(name, f"{name} {os.fspath(value)} is not a directory")
            return os.fspath(value)
        raise self.refuse(name, value)

    def from_json(self, name: str, value: Any) -> Any:
        return self.from_text(name, value)


OBJECT = ValueKind()


@dataclass(frozen=True)
class StackOption:
    """One option of a stack.

    ``name`` is ``build_stack``'s keyword, ``kind`` the value it takes, ``default`` what
    leaving it out means. ``flag`` is the ``vmstack serve`` flag and ``json_key`` the
    ``config_bytes`` key (``None``: no such spelling); ``crosses`` says ``spawn`` passes
    it to its child (as ``flag``); ``recorded`` names the parts of the store's
    configuration record holding it; ``part`` the part of the stack it shapes (a
    ``"chain"`` option belongs to the serving side of a process boundary). ``help`` is
    what the option does, ``default_text`` how a flag's help names the default (else the
    default itself).
    """

    name: str
    kind: ValueKind
    default: object
    help: str
    part: Part = "stack"
    flag: str | None = None
    json_key: str | None = None
    crosses: bool = False
    recorded: tuple[str, ...] = ()
    default_text: str | None = None

    @property
    def flag_help(self) -> str:
        """The flag's help: :attr:`help` and the default (``default_text``, else the
        default itself)."""
        text = self.default_text if self.default_text is not None else str(self.default)
        return f"{self.help} (default: {text})"

    def check(self, value: object) -> Any:
        """``value`` checked (:class:`~vmstack.errors.InvalidOption` naming the option)."""
        return self.kind.check(self.name, value)

    def from_text(self, text: str) -> Any:
        """The value the flag's ``text`` means."""
        return self.kind.from_text(self.name, text)

    def given(self, value: object) -> bool:
        """Whether ``value`` differs from leaving the option out."""
        return not self.kind.is_default(value, self.default)


_NON_NEGATIVE = IntegerKind(0)

#: Every option of ``build_stack``, in its order.
STACK_OPTIONS: tuple[StackOption, ...] = (
    StackOption(
        "flavour",
        FlavourKind(),
        None,
        "block format: avalanche or ethereum",
        default_text="avalanche",
        part="chain",
        flag="--flavour",
        json_key="flavour",
        crosses=True,
        recorded=("chain",),
    ),
    StackOption(
        "chain_id",
        IntegerKind(1),
        DEFAULT_CHAIN_ID,
        "the EVM chain ID",
        flag="--chain-id",
        json_key="chain_id",
        crosses=True,
        recorded=("chain", "proposer"),
    ),
    StackOption(
        "fork_time",
        TimeKind(optional=True),
        None,
        "unix time of the proposer fork",
        default_text="no proposer layer",
        part="proposer",
        flag="--fork-time",
        json_key="fork_time",
        crosses=True,
        recorded=("proposer",),
    ),
    StackOption(
        "transition_time",
        TimeKind(optional=True),
        None,
        "unix time of the transition",
        default_text="no transition layer",
        part="chain",
        flag="--transition-time",
        json_key="transition_time",
        crosses=True,
        recorded=("chain",),
    ),
    StackOption("tracer", OBJECT, None, "OpenTelemetry tracer of the traced layers"),
    StackOption("registry", OBJECT, None, "prometheus registry of the metered layers"),
    StackOption(
        "clock", OBJECT, None, "the clock of every layer (spawn takes a SimClock of its own)"
    ),
    StackOption("staking_key", OBJECT, None, "the key the proposer layer signs with", "proposer"),
    StackOption(
        "key_prefix",
        PrefixKind(),
        b"",
        "hex prefix of every store key",
        default_text="none",
        part="chain",
        flag="--key-prefix",
        json_key="key_prefix",
        crosses=True,
        recorded=("chain",),
    ),
    StackOption(
        "settle_lag",
        _NON_NEGATIVE,
        0,
        "blocks an accepted block waits before it is settled",
        part="chain",
        flag="--settle-lag",
        json_key="settle_lag",
        crosses=True,
        recorded=("chain",),
    ),
    StackOption(
        "cache_size",
        _NON_NEGATIVE,
        DEFAULT_CACHE_SIZE,
        "entries of the canonical hash cache",
        part="chain",
        flag="--cache-size",
        json_key="cache_size",
        crosses=True,
    ),
    StackOption("out_of_process", OBJECT, None, "the client of a C-chain part served elsewhere"),
    StackOption("served_part", OBJECT, False, "the stack is a C-chain part served elsewhere"),
    StackOption(
        "parse_workers",
        _NON_NEGATIVE,
        0,
        "worker processes that check a large batch's envelope signatures, with --fork-time",
        default_text="0, serial",
        part="proposer",
        flag="--parse-workers",
        json_key="parse_workers",
        crosses=True,
    ),
    StackOption("validators", OBJECT, None, "the proposer windows' validator set", "proposer"),
    StackOption(
        "durango_time",
        TimeKind(optional=False),
        0.0,
        "unix time of Durango for the proposer layer, with --fork-time",
        part="proposer",
        flag="--durango-time",
        json_key="durango_time",
        crosses=True,
    ),
    StackOption(
        "pchain_height",
        HeightKind(),
        0,
        "the P-chain height the proposer layer's blocks name, with --fork-time",
        part="proposer",
        flag="--pchain-height",
        json_key="pchain_height",
        crosses=True,
    ),
    StackOption(
        "genesis",
        OBJECT,
        None,
        "what an empty store's chain starts from (the plugin: genesis_bytes)",
        part="chain",
    ),
    StackOption("extra_layers", OBJECT, None, "the caller's own layers"),
    StackOption(
        "history",
        ArchiveKind(),
        None,
        "serve settled history from the era1 files in DIR beneath the store",
        default_text="none",
        part="chain",
        flag="--history",
        json_key="history",
        crosses=True,
    ),
)

_BY_NAME: Mapping[str, StackOption] = {option.name: option for option in STACK_OPTIONS}
_BY_JSON_KEY: Mapping[str, StackOption] = {
    option.json_key: option for option in STACK_OPTIONS if option.json_key is not None
}


def crossing_options() -> tuple[StackOption, ...]:
    """The options ``spawn`` passes to another process (each has a flag)."""
    return tuple(option for option in STACK_OPTIONS if option.crosses)


def check_stack_options(values: Mapping[str, object]) -> dict[str, Any]:
    """``values`` (a mapping of option names to values) checked against the record; each
    checked value by name. An unknown name or a bad value is
    :class:`~vmstack.errors.InvalidOption` naming it."""
    checked = {}
    for name, value in values.items():
        option = _BY_NAME.get(name)
        if option is None:
            raise InvalidOption(name, f"build_stack has no option {name!r}")
        checked[name] = option.check(value)
    return checked


def served_part_options(values: Mapping[str, object]) -> list[str]:
    """The names, sorted, of the options in ``values`` given that shape the C-chain part
    (which the serving side of a process boundary builds)."""
    return sorted(
        name
        for name, value in values.items()
        if _BY_NAME[name].part == "chain" and _BY_NAME[name].given(value)
    )


def recorded_settings(part: str, values: Mapping[str, object]) -> dict[str, object]:
    """What the store's configuration record of ``part`` (``"chain"`` or
    ``"proposer"``) holds for these option ``values``: each option the record names
    under ``part``, in its recorded form."""
    return {
        option.name: option.kind.recorded(values.get(option.name, option.default))
        for option in STACK_OPTIONS
        if part in option.recorded
    }


def options_from_json(config: object, *, source: str = "config_bytes") -> dict[str, Any]:
    """The stack options of a decoded JSON object (the plugin's ``config_bytes``): each
    key an option's :attr:`~StackOption.json_key`, each value read by its kind. Anything
    else is :class:`~vmstack.errors.InvalidOption` (or ``ValueError`` for what is not an
    object) saying so under ``source``."""
    if not isinstance(config, dict):
        raise ValueError(f"{source} is a JSON object of stack options")
    options = {}
    for key, value in config.items():
        option = _BY_JSON_KEY.get(key)
        if option is None:
            raise InvalidOption(
                str(key),
                f"{source}: unknown option {key!r}; the options are {', '.join(_BY_JSON_KEY)}",
            )
        try:
            options[option.name] = option.kind.from_json(option.name, value)
        except InvalidOption as error:
            raise InvalidOption(option.name, f"{source}: {error}") from None
    return options


def option_arguments(values: Mapping[str, object], *, taker: str = "spawn") -> list[str]:
    """The ``vmstack serve`` arguments passing these option ``values`` to another process
    (options left at ``None`` are left out). An option that cannot cross is
    :class:`~vmstack.errors.InvalidOption` naming ``taker`` and the options that can."""
    crossing = {option.name: option for option in crossing_options()}
    unknown = sorted(set(values) - set(crossing))
    if unknown:
        raise InvalidOption(
            unknown[0],
            f"{taker} cannot pass {', '.join(unknown)} to another process; it takes "
            f"{', '.join(crossing)} and clock",
        )
    arguments = []
    for name, value in values.items():
        if value is not None:
            option = crossing[name]
            assert option.flag is not None
            arguments += [option.flag, option.kind.to_text(name, value)]
    return arguments


def add_option_flags(
    add_argument: Callable[..., object], options: Iterable[StackOption] | None = None
) -> None:
    """Add each crossing option's flag with ``add_argument`` (an argparse parser's or
    group's): its value read by the option's kind (argparse reports a bad one), left
    ``None`` (destination: the option's name) when absent."""
    import argparse

    for option in crossing_options() if options is None else options:
        kind = option.kind

        def parse(text: str, option: StackOption = option) -> object:
            try:
                return option.from_text(text)
            except InvalidOption as error:
                raise argparse.ArgumentTypeError(str(error)) from None

        parse.__name__ = kind.description
        extra: dict[str, object] = {}
        if isinstance(kind, FlavourKind):
            extra["metavar"] = "{" + ",".join(kind.names) + "}"
        else:
            extra["metavar"] = kind.metavar
        add_argument(option.flag, dest=option.name, type=parse, help=option.flag_help, **extra)
