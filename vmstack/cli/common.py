"""What the commands of the ``vmstack`` command line share: argparse types, checks of
output paths made before any work, the cost model a run reads, and progress bars."""

from __future__ import annotations

import argparse
import json
import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from vmstack.errors import StoreCorrupted, VMStackError

if TYPE_CHECKING:
    from vmstack.sim.costs import CostModel

__all__ = [
    "IntegerAtLeast",
    "PLOT_FORMATS",
    "check_data_dir",
    "check_output",
    "check_plot",
    "damage_named",
    "non_negative_float",
    "non_negative_int",
    "positive_int",
    "progress_bars",
    "read_costs",
]


class IntegerAtLeast:
    """An argparse type: an integer of at least ``least``. ``__name__`` is what argparse
    prints for a value that is not an integer ("invalid positive integer value: 'x'")."""

    def __init__(self, least: int, name: str) -> None:
        self.least = least
        self.__name__ = name

    def __call__(self, text: str) -> int:
        value = int(text)
        if value < self.least:
            raise argparse.ArgumentTypeError(f"must be at least {self.least}, got {value}")
        return value


positive_int = IntegerAtLeast(1, "positive integer")
non_negative_int = IntegerAtLeast(0, "non-negative integer")


def non_negative_float(text: str) -> float:
    """An argparse type: a finite number of at least 0."""
    value = float(text)
    if not (value >= 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a finite number of at least 0, got {text}")
    return value


non_negative_float.__name__ = "non-negative number"


#: The figure formats ``--plot`` writes (matplotlib's, by file suffix).
PLOT_FORMATS = (".png", ".svg", ".pdf")


def check_output(path: Path | None, flag: str) -> None:
    """Refuse an output path that cannot be written, before any work is done."""
    if path is None:
        return
    if path.is_dir():
        raise ValueError(f"{flag} {path} is a directory")
    folder = path.parent
    if not folder.is_dir():
        raise ValueError(f"{flag} {path}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise ValueError(f"{flag} {path} cannot be written")


def check_plot(path: Path | None) -> None:
    """Refuse a plot that could not be drawn, before any work is done."""
    if path is None:
        return
    check_output(path, "--plot")
    if path.suffix.lower() not in PLOT_FORMATS:
        raise ValueError(
            f"--plot {path}: the format is chosen by the suffix, one of {', '.join(PLOT_FORMATS)}"
        )
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ValueError("--plot needs matplotlib: pip install 'vmstack[plot]'") from None


def check_data_dir(path: Path | None) -> None:
    """Refuse a ``--data-dir`` that is not a directory or cannot be written."""
    if path is None:
        return
    if path.exists() and not path.is_dir():
        raise ValueError(f"--data-dir {path} is not a directory")
    existing = next((folder for folder in (path, *path.parents) if folder.exists()), None)
    if existing is not None and not os.access(existing, os.W_OK):
        raise ValueError(f"--data-dir {path} cannot be written")


def read_costs(path: Path) -> CostModel:
    """The cost model in ``path`` (a model, or a report written by ``--json``), or a
    ValueError naming the file and what is wrong in it."""
    from vmstack.sim.costs import CostModel

    try:
        data = json.loads(path.read_text())
    except OSError as error:
        raise ValueError(f"--costs {path}: {error.strerror or error}") from None
    except ValueError as error:
        raise ValueError(f"--costs {path} is not JSON: {error}") from None
    # A report written by --json carries its cost model under "costs".
    if isinstance(data, dict) and "costs" in data:
        data = data["costs"]
    try:
        return CostModel.from_dict(data)
    except ValueError as error:
        raise ValueError(f"--costs {path} is not a cost model: {error}") from None


@contextmanager
def damage_named(data_dir: Path | None) -> Iterator[None]:
    """Turn a damaged store in ``data_dir`` (``StoreCorrupted``) into one message naming
    the directory, the damage and how to rebuild."""
    try:
        yield
    except StoreCorrupted as error:
        if data_dir is None:
            raise
        raise VMStackError(
            f"--data-dir {data_dir} holds a damaged store ({error}); remove "
            f"{data_dir}, or give another --data-dir, and the next run "
            "builds the chain anew"
        ) from None


def progress_bars(console: Console) -> Progress:
    """The progress bars every command shows: a description, a bar, done of total and the
    time elapsed."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )
