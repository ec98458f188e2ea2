"""What every harness here shares: the command line, seed corpora, and the one rule checked.

Each harness defines ``one_input(data: bytes) -> None`` that feeds ``data`` to some decoders
and lets any exception except :class:`vmstack.InvalidBlock` escape (atheris reports an
escaped exception as a crash and saves the input). The command line::

    python fuzz/<harness>.py [libFuzzer options] [CORPUS_DIR ...]   fuzz (needs atheris)
    python fuzz/<harness>.py --write-seeds DIR                      write the seed corpus
    python fuzz/<harness>.py --replay FILE ...                      re-run saved inputs

``--write-seeds`` and ``--replay`` need no atheris, so a crash found on one machine can be
replayed on any other with only vmstack installed.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from vmstack.errors import InvalidBlock

__all__ = ["attempt", "main", "vector_files"]

T = TypeVar("T")

INSTALL_HINT = (
    "atheris is not installed. It is not a vmstack dependency; install it by hand with\n"
    "    pip install atheris\n"
    "(prebuilt wheels exist for CPython 3.8-3.11 on x86-64 Linux; elsewhere pip builds it\n"
    "from source, which needs clang and libFuzzer). --write-seeds and --replay work without it."
)


def attempt(call: Callable[..., T], *args: Any) -> T | None:
    """``call(*args)``, or ``None`` when it raises ``InvalidBlock``; anything else escapes."""
    try:
        return call(*args)
    except InvalidBlock:
        return None


def vector_files() -> Path | None:
    """The block vectors folder (``$VMSTACK_VECTORS``, else ``../shared/vectors`` beside the
    repository), or ``None`` where it is absent."""
    default = Path(__file__).resolve().parents[2] / "shared" / "vectors"
    path = Path(os.environ.get("VMSTACK_VECTORS", default))
    return path if path.is_dir() else None


def main(
    one_input: Callable[[bytes], None],
    seeds: Callable[[], Iterable[bytes]],
    argv: Sequence[str] | None = None,
) -> None:
    """Run a harness from the command line (see the module docstring)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--write-seeds"]:
        if len(args) != 2:
            sys.exit("usage: --write-seeds DIR")
        folder = Path(args[1])
        folder.mkdir(parents=True, exist_ok=True)
        count = 0
        for count, seed in enumerate(seeds(), 1):
            (folder / f"seed-{count:04d}").write_bytes(seed)
        print(f"wrote {count} seeds to {folder}")
        return
    if args[:1] == ["--replay"]:
        for name in args[1:]:
            one_input(Path(name).read_bytes())
            print(f"{name}: ok")
        return
    try:
        import atheris  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError:
        sys.exit(INSTALL_HINT)
    atheris.instrument_all()
    atheris.Setup([sys.argv[0], *args], one_input)
    atheris.Fuzz()
