"""The kit fails broken layers, each with the rule its mistake breaks, and passes correct
ones of every kind (the layers are in ``corpus.py``).

Each layer runs in its own pytester session, with few Hypothesis examples and no shrinking:
finding a failing example is the point, not minimising it. A correct layer runs the whole
kit; a broken one runs the tests of the rule its mistake breaks (what catches it), and a
few broken ones (``FULL_RUNS``) run the whole kit too, which also shows that no other
test fails without naming its rule.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterator

import pytest
from hypothesis import settings

from tests.conformance.corpus import BROKEN, CORRECT
from vmstack.conformance import LayerConformance

#: Every layer of the corpus runs the kit in a pytester session: a minute in all.
pytestmark = pytest.mark.slow

pytest_plugins = ["pytester"]

CONFTEST = textwrap.dedent("""
    from hypothesis import Phase, settings

    settings.register_profile("kit-corpus", phases=[Phase.explicit, Phase.generate],
                              database=None)
    settings.load_profile("kit-corpus")
""")

_RULE = re.compile(r"\[kit rule ([\w.-]+)\]")

#: Broken layers that run the whole kit: one of each family of mistakes. A declaration's
#: truth is checked across the kit, so the stale declarations run it whole too.
FULL_RUNS = frozenset(
    {
        "PerBlockWalk",
        "SwallowsVerifyErrors",
        "IgnoresTime",
        "ParseDropsBadElements",
        "StaleMemoryDeclaration",
        "StaleBoundaryDeclaration",
    }
)


def rule_tests(rule: str) -> list[str]:
    """The names of the kit's tests that check ``rule``."""
    return sorted(
        name
        for name in dir(LayerConformance)
        if name.startswith("test_")
        and getattr(getattr(LayerConformance, name), "kit_rule", None) == rule
    )


@pytest.fixture(autouse=True)
def _keep_hypothesis_profile() -> Iterator[None]:
    """Restore the Hypothesis profile the in-process runs load."""
    profile = settings.get_current_profile_name()
    yield
    settings.load_profile(profile)


def _run_kit(
    pytester: pytest.Pytester, test_module: str, tests: list[str] | None = None
) -> pytest.HookRecorder:
    """Run ``test_module`` (source) in a fresh pytester session, only ``tests`` (test
    names) when given, with Hypothesis seeded, and return its records."""
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_layer=textwrap.dedent(test_module))
    selection = ["-k", " or ".join(tests)] if tests else []
    return pytester.inline_run(
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
        "--vmstack-max-examples=4",
        # One seed for every run: which broken layers four examples catch must not depend
        # on the draw of the day.
        "--hypothesis-seed=0",
        *selection,
        "test_layer.py",
    )


def _run_layer(
    pytester: pytest.Pytester, name: str, tests: list[str] | None = None
) -> pytest.HookRecorder:
    return _run_kit(
        pytester,
        f"""
        from tests.conformance.corpus import kit_class

        TestLayer = kit_class({name!r})
    """,
        tests,
    )


def _broken_rules(records: pytest.HookRecorder) -> dict[str, list[str]]:
    """The rules named by the failed tests of a run: rule -> the tests that named it."""
    named: dict[str, list[str]] = {}
    for report in records.getreports("pytest_runtest_logreport"):
        if report.failed:
            rules = _RULE.findall(report.longreprtext) or ["(no rule named)"]
            named.setdefault(rules[0], []).append(report.nodeid)
    return named


def test_the_corpus_is_large_and_distinct() -> None:
    """At least 30 broken layers, each a class of its own; three kinds of correct ones."""
    assert len(BROKEN) >= 30
    assert len({factory for factory, _, _ in BROKEN.values()}) >= 30
    assert len(CORRECT) >= 3


@pytest.mark.parametrize("name", sorted(CORRECT))
def test_a_correct_layer_passes_the_whole_kit(pytester: pytest.Pytester, name: str) -> None:
    """A correct layer of each kind passes every test of the kit."""
    records = _run_layer(pytester, name)
    passed, skipped, failed = records.listoutcomes()
    assert not failed, _broken_rules(records)
    assert not skipped
    assert len(passed) >= 100


def test_every_rule_a_broken_layer_breaks_has_tests() -> None:
    """Each rule the corpus breaks is checked by tests of the kit, so running a broken
    layer against them runs something; the full runs are broken layers of the corpus."""
    assert all(rule_tests(rule) for _, _, rule in BROKEN.values())
    assert set(BROKEN) >= FULL_RUNS


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_broken_layer_fails_the_kit(pytester: pytest.Pytester, name: str) -> None:
    """A layer with one mistake fails the tests of the rule it breaks (the whole kit, for
    a few), and a failure names that rule."""
    expected = BROKEN[name][2]
    records = _run_layer(pytester, name, None if name in FULL_RUNS else rule_tests(expected))
    broken = _broken_rules(records)
    assert expected in broken, (
        f"{name} must fail rule {expected}; the failures named {sorted(broken)}"
    )
    assert "(no rule named)" not in broken, broken["(no rule named)"]


def test_a_stale_not_applicable_entry_fails(pytester: pytest.Pytester) -> None:
    """A rule declared not applicable that the layer meets fails as a stale declaration."""
    records = _run_kit(
        pytester,
        """
        from tests.conformance.corpus import StaleNotApplicable as TestLayer
    """,
    )
    broken = _broken_rules(records)
    assert list(broken) == ["kit.declarations-hold"]
    assert all(
        "errors.mid-walk" in nodeid or "mid_walk" in nodeid
        for nodeid in broken["kit.declarations-hold"]
    )


@pytest.mark.parametrize(
    ("layer", "message"),
    [
        (
            "MisspeltDeclaration",
            "unknown declaration 'answers-batched-itself' (did you mean "
            "answers-batched-calls-itself?)",
        ),
        ("OldKitAttributes", "pass_through is no longer read"),
    ],
)
def test_an_unknown_declaration_is_an_error(
    pytester: pytest.Pytester, layer: str, message: str
) -> None:
    """A misspelt declaration, or one of an older kit, is an error of every test."""
    records = _run_kit(
        pytester,
        f"""
        from tests.conformance.corpus import {layer} as TestLayer
    """,
    )
    reports = records.getreports("pytest_runtest_logreport")
    errors = [report for report in reports if report.when == "setup" and report.failed]
    assert errors and len(errors) == len([r for r in reports if r.when == "setup"])
    assert all(
        "KitDeclarationError" in report.longreprtext and message in report.longreprtext
        for report in errors
    )
