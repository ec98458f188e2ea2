"""The store kit's rules (:data:`STORE_RULES`), each a name and what it expects of a store,
and :func:`store_rule`, which tags a test of :class:`~vmstack.conformance.StoreConformance`
with its rule so that every failure names it (``[kit rule NAME] expected: ...``)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from vmstack.conformance.declarations import _name_the_rule

__all__ = [
    "BATCH_ATOMIC",
    "BATCH_ONCE",
    "BATCH_ORDER",
    "CLOSE",
    "COPIES",
    "ITERATE_ARGUMENTS",
    "ITERATE_ORDER",
    "KEYS_RULE",
    "MODEL",
    "PREFIXED",
    "PROTOCOL",
    "READ_WRITE",
    "SNAPSHOT_CLOSES",
    "SNAPSHOT_ISOLATION",
    "SNAPSHOT_VALUES",
    "STORE_RULES",
    "VALUES_RULE",
    "store_rule",
]

#: Every rule of the store kit: its name and what it expects of a store.
STORE_RULES: dict[str, str] = {}

F = TypeVar("F", bound=Callable[..., None])


def store_rule(name: str, expectation: str) -> Callable[[F], F]:
    """Mark a store-kit test as the check of rule ``name`` (registered in
    :data:`STORE_RULES`): every failure of the test is prefixed with
    ``[kit rule NAME] expected: EXPECTATION``, and the test carries ``kit_rule``."""
    if STORE_RULES.setdefault(name, expectation) != expectation:
        raise ValueError(f"store kit rule {name!r} registered twice with different expectations")

    def decorate(test: F) -> F:
        @functools.wraps(test)
        def run(*args: Any, **kwargs: Any) -> None:
            try:
                test(*args, **kwargs)
            except (Exception, pytest.fail.Exception) as failure:
                _name_the_rule(failure, name, expectation)
                raise

        run.kit_rule = name  # type: ignore[attr-defined]
        return run  # type: ignore[return-value]

    return decorate


PROTOCOL = store_rule(
    "store.protocol", "the store, its batches and its snapshots satisfy the runtime protocols"
)
READ_WRITE = store_rule(
    "store.read-write",
    "a put value reads back until it is deleted; a missing key raises KeyError; an empty "
    "value is a value",
)
COPIES = store_rule(
    "store.copies-values", "a bytes-like value is stored as a bytes copy taken at put time"
)
KEYS_RULE = store_rule(
    "store.keys",
    "a key is non-empty bytes of at most MAX_KEY_LEN; any other key raises TypeError or "
    "ValueError on every operation",
)
VALUES_RULE = store_rule(
    "store.values", "a value that is not bytes-like raises TypeError and writes nothing"
)
BATCH_ATOMIC = store_rule(
    "store.batch.atomic",
    "a batch's writes appear together when its with-block exits, and not at all if it raises",
)
BATCH_ORDER = store_rule("store.batch.order", "within a batch, the later operation on a key wins")
BATCH_ONCE = store_rule(
    "store.batch.once", "a batch takes writes only inside its with-block, and only once"
)
ITERATE_ORDER = store_rule(
    "store.iterate.order",
    "iterate yields every pair once, in ascending key order, within its prefix from its start",
)
ITERATE_ARGUMENTS = store_rule(
    "store.iterate.arguments",
    "a prefix or start that is not bytes raises TypeError, an over-long one ValueError, at "
    "the call",
)
SNAPSHOT_ISOLATION = store_rule(
    "store.snapshot.isolation",
    "a snapshot keeps the view it opened with, whole, while others write",
)
SNAPSHOT_VALUES = store_rule(
    "store.snapshot.values",
    "a snapshot's values slice, compare and copy like bytes inside its with-block",
)
SNAPSHOT_CLOSES = store_rule(
    "store.snapshot.closes", "a snapshot used after its with-block raises StoreClosed"
)
CLOSE = store_rule(
    "store.close", "every operation on a closed store raises StoreClosed; close is idempotent"
)
PREFIXED = store_rule(
    "store.prefixed-views",
    "PrefixedStore views over the store are isolated, strip their prefix, batch atomically, "
    "snapshot consistently, compose, and close alone",
)
MODEL = store_rule(
    "store.model", "any sequence of puts, deletes and batches leaves the store equal to a dict"
)
