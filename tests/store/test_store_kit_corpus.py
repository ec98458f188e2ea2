"""The store kit fails broken stores, each with the rule its mistake breaks (the stores are
in ``broken_stores.py``); every test of the kit checks a named rule.

The kit's tests run in process here, each on a new store, as pytest would run them for a
``StoreConformance`` subclass; Hypothesis is derandomized so which examples are drawn does
not depend on the day, and does not shrink.
"""

from __future__ import annotations

import contextlib
import inspect
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import Phase, settings

from tests.store.broken_stores import BROKEN_STORES
from vmstack.conformance import StoreConformance
from vmstack.conformance.store_rules import STORE_RULES
from vmstack.store import KeyValueStore, MemoryStore, StoreError

_RULE = re.compile(r"\[kit rule ([\w.-]+)\]")

#: Broken stores that run the whole kit, not only their rule's tests: every failure must
#: name a rule, the expected one among them.
FULL_RUNS = frozenset({"NonAtomicStore", "SnapshotsReadLiveData", "IteratesInWriteOrder"})

#: Derandomized, and no shrinking: finding a failing example is the point, not minimising it.
settings.register_profile(
    "store-kit-corpus",
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate],
)


def kit_tests(rule: str | None = None) -> list[str]:
    """The names of the kit's tests (of ``rule``, when given)."""
    return sorted(
        name
        for name in dir(StoreConformance)
        if name.startswith("test_")
        and (rule is None or getattr(getattr(StoreConformance, name), "kit_rule", None) == rule)
    )


def _parameter_sets(test: Callable[..., None]) -> list[dict[str, Any]]:
    """The keyword arguments of each case of ``test`` (one, with none, if it is not
    parametrized)."""
    marks = [mark for mark in getattr(test, "pytestmark", []) if mark.name == "parametrize"]
    assert len(marks) <= 1, "a kit test with more than one parametrize mark"
    if not marks:
        return [{}]
    names, values = marks[0].args
    names = [name.strip() for name in names.split(",")] if isinstance(names, str) else names
    return [dict(zip(names, case if len(names) > 1 else (case,), strict=True)) for case in values]


def _close(store: KeyValueStore) -> None:
    with contextlib.suppress(StoreError):
        store.close()


def failures_of(factory: Callable[[], KeyValueStore], tests: list[str]) -> list[BaseException]:
    """Every failure of ``tests`` (kit test names) run on stores from ``factory``, each
    case on a new store."""

    class Kit(StoreConformance):
        def make_store(self) -> KeyValueStore:
            return factory()

        def close_store(self, store: KeyValueStore) -> None:
            _close(store)

    failures: list[BaseException] = []
    for name in tests:
        test = getattr(Kit, name)
        takes_store = "store" in inspect.signature(test).parameters
        for arguments in _parameter_sets(test):
            store = factory() if takes_store else None
            try:
                if store is None:
                    test(Kit(), **arguments)
                else:
                    test(Kit(), store, **arguments)
            except (Exception, pytest.fail.Exception) as failure:
                failures.append(failure)
            finally:
                if store is not None:
                    _close(store)
    return failures


def rules_named(failure: BaseException) -> list[str]:
    """The rules a failure names, in its message or its notes."""
    text = "\n".join([str(failure), *getattr(failure, "__notes__", [])])
    return _RULE.findall(text) or ["(no rule named)"]


@pytest.fixture(autouse=True)
def _derandomized() -> Iterator[None]:
    profile = settings.get_current_profile_name()
    settings.load_profile("store-kit-corpus")
    yield
    settings.load_profile(profile)


def test_every_kit_test_checks_a_registered_rule() -> None:
    """Each test of the kit carries a rule of STORE_RULES, and each rule has tests."""
    rules = {getattr(StoreConformance, name).kit_rule for name in kit_tests()}
    assert rules == set(STORE_RULES)
    assert len(kit_tests()) >= 25


def test_the_corpus_is_large_and_its_rules_have_tests() -> None:
    """At least a dozen broken stores, each a class of its own, over most of the rules."""
    assert len(BROKEN_STORES) >= 12
    assert len({kind for kind, _ in BROKEN_STORES.values()}) == len(BROKEN_STORES)
    assert {rule for _, rule in BROKEN_STORES.values()} <= set(STORE_RULES)
    assert len({rule for _, rule in BROKEN_STORES.values()}) >= 12
    assert set(BROKEN_STORES) >= FULL_RUNS


def test_a_correct_store_passes_every_rule() -> None:
    """MemoryStore passes every test of the kit run this way (the runner finds no fault of
    its own making)."""
    assert failures_of(MemoryStore, kit_tests()) == []


@pytest.mark.parametrize("name", sorted(BROKEN_STORES))
def test_a_broken_store_fails_the_rule_it_breaks(name: str) -> None:
    """A store with one mistake fails the tests of the rule it breaks (the whole kit, for
    a few), and every failure names a rule, the expected one among them."""
    kind, expected = BROKEN_STORES[name]
    tests = kit_tests() if name in FULL_RUNS else kit_tests(expected)
    named = [rule for failure in failures_of(kind, tests) for rule in rules_named(failure)]
    assert expected in named, f"{name} must fail rule {expected}; the failures named {named}"
    assert "(no rule named)" not in named
