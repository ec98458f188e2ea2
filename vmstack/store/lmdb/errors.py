"""Which LMDB errors mean a damaged store and which an operational failure: the one place
that decides.

Errors that mean the files are damaged or are not an LMDB database (corrupted page, bad
meta page, checksum or version mismatch) become :class:`~vmstack.errors.StoreCorrupted`;
every other LMDB failure becomes :class:`~vmstack.errors.StoreError`.
"""

from __future__ import annotations

import lmdb

from vmstack.errors import StoreCorrupted, StoreError, VMStackError

__all__ = ["CORRUPTION_ERRORS", "translate_error"]

CORRUPTION_ERRORS: tuple[type[lmdb.Error], ...] = tuple(
    getattr(lmdb, name)
    for name in (
        "CorruptedError",
        "PageNotFoundError",
        "InvalidError",
        "VersionMismatchError",
        "BadChecksumError",
        "PanicError",
        "ProblemError",
    )
    if hasattr(lmdb, name)
)


def translate_error(exc: lmdb.Error, what: str) -> VMStackError:
    """The project error for an LMDB error: corruption or an operational failure."""
    if isinstance(exc, CORRUPTION_ERRORS):
        return StoreCorrupted(f"{what}: {exc}")
    return StoreError(f"{what}: {exc}")
