"""The kit's own machinery: rules, declarations, assertion rewriting, and the doubles'
clock that moves with every block read."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import time
from collections.abc import Iterator
from types import ModuleType
from typing import ClassVar, cast

import pytest
from _pytest.assertion.rewrite import AssertionRewritingHook

import vmstack.conformance.base as kit_base
from tests.conformance.corpus import kit_class
from vmstack import get_ancestors
from vmstack.clock import SimClock
from vmstack.conformance import (
    Declaration,
    Fetch,
    KitDeclarationError,
    LayerConformance,
    memory_vm,
)
from vmstack.conformance.checks import timed_expected
from vmstack.conformance.declarations import RULES
from vmstack.conformance.plugin import KIT_MODULES
from vmstack.conformance.stacks import KIT_FETCH_COST
from vmstack.errors import InvalidBlock
from vmstack.interfaces import ChainVM


def _kit_tests() -> dict[str, object]:
    return {
        name: getattr(LayerConformance, name)
        for name in dir(LayerConformance)
        if name.startswith("test_")
    }


def test_every_kit_test_checks_a_registered_rule() -> None:
    """Each test of the kit names its rule, and every rule has a test."""
    rules = {name: getattr(test, "kit_rule", None) for name, test in _kit_tests().items()}
    assert None not in rules.values(), [name for name, rule in rules.items() if rule is None]
    assert set(rules.values()) == set(RULES)
    assert all(expectation.strip() for expectation in RULES.values())


def test_the_kit_asserts_are_rewritten() -> None:
    """The plugin registers the kit's modules for assertion rewriting before they load."""
    assert isinstance(kit_base.__loader__, AssertionRewritingHook)


def _conformance_modules() -> Iterator[ModuleType]:
    package = importlib.import_module("vmstack.conformance")
    yield package
    for found in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
        yield importlib.import_module(found.name)


def test_every_module_with_kit_asserts_is_rewritten() -> None:
    """Each module of the kit that holds an assert statement is registered with the plugin
    and was loaded by pytest's rewriting hook (a module added later must be registered)."""
    holding_asserts = []
    for module in _conformance_modules():
        tree = ast.parse(inspect.getsource(module))
        if any(isinstance(node, ast.Assert) for node in ast.walk(tree)):
            holding_asserts.append(module.__name__)
            assert any(
                module.__name__ == name or module.__name__.startswith(f"{name}.")
                for name in KIT_MODULES
            ), f"{module.__name__} is not in KIT_MODULES"
            assert isinstance(module.__loader__, AssertionRewritingHook), module.__name__
    assert "vmstack.conformance.contracts.budgets" in holding_asserts
    assert "vmstack.conformance.checks" in holding_asserts


def test_a_kit_failure_shows_the_compared_values() -> None:
    """A failing rule names itself and, below its message, shows pytest's rewritten detail:
    the expression compared and the values it had."""
    kit = kit_class("HeightIndexOffByOne")()
    with pytest.raises(AssertionError) as raised:
        kit.test_get_block_id_at_height_forwards(inner_batches=True)
    shown = str(raised.value)
    assert shown.startswith("[kit rule forwarding.height-index] expected: ")
    assert "get_block_id_at_height(1) must name the block at that height" in shown
    assert "\nassert b" in shown and "At index 0 diff: b" in shown
    with pytest.raises(AssertionError) as raised:
        kit.check_answer_types("not a list", "get_ancestors")
    assert "where False = isinstance('not a list', list)" in str(raised.value)


class _Layer(LayerConformance):
    def wrap(self, inner: ChainVM) -> ChainVM:
        return inner


@pytest.mark.parametrize(
    ("attributes", "message"),
    [
        (
            {"declarations": frozenset({"serves-blocks-from-memroy"})},
            "unknown declaration 'serves-blocks-from-memroy' (did you mean "
            "serves-blocks-from-memory?)",
        ),
        ({"declarations": "process-boundary"}, "a collection of names"),
        (
            {"not_applicable": {"errors.midwalk": "reason"}},
            "unknown rule 'errors.midwalk' (did you mean errors.mid-walk?)",
        ),
        ({"not_applicable": {"errors.mid-walk": " "}}, "needs a reason"),
        ({"not_applicable": {"kit.declarations-hold": "never"}}, "cannot be declared"),
        ({"refuses_without_batching": False}, "refuses_without_batching is no longer read"),
        ({"long_chain_length": 300}, "long_chain_length must exceed 2000"),
    ],
)
def test_a_bad_declaration_is_an_error(attributes: dict[str, object], message: str) -> None:
    """Misspelt, malformed or outdated declarations raise KitDeclarationError naming them."""
    declared = cast("type[_Layer]", type("TestDeclared", (_Layer,), attributes))
    with pytest.raises(KitDeclarationError, match="TestDeclared") as raised:
        declared.kit_check_declarations()
    assert message in str(raised.value)


def test_good_declarations_are_accepted() -> None:
    """Declarations as members or as their names, and known rules with reasons, pass."""

    class TestDeclared(_Layer):
        declarations = frozenset({Declaration.PROCESS_BOUNDARY, "blocks-of-its-own"})
        not_applicable: ClassVar[dict[str, str]] = {"errors.mid-walk": "a reason"}

    TestDeclared.kit_check_declarations()


def test_reads_cost_time_on_both_paths() -> None:
    """Every block read, by get_block or inside get_ancestors, moves the clock by the cost
    and is logged with the time it began."""
    clock = SimClock(100.0)
    vm = memory_vm(batching=True, blocks=5, clock=clock, fetch_cost=0.25)
    tip = vm.last_accepted()
    vm.get_block(tip)
    assert clock() == 100.25
    assert vm.fetches == [Fetch(tip, 100.0)]
    vm.forget_records()
    answer = vm.get_ancestors(tip, 3, 10_000, 10.0)  # type: ignore[attr-defined]
    assert len(answer) == 3 and clock() == 101.0
    assert [fetch.started for fetch in vm.fetches] == [100.25, 100.5, 100.75]
    assert vm.calls and not vm.calls_to("get_block")


def test_a_time_budget_limits_the_reads() -> None:
    """With reads costing time, a budget of k and a half reads gives k + 1 blocks, on both
    paths, as the kit's model says."""
    for batching in (True, False):
        clock = SimClock(0.0)
        vm = memory_vm(batching=batching, blocks=30, clock=clock, fetch_cost=KIT_FETCH_COST)
        answer = get_ancestors(
            vm, vm.last_accepted(), max_retrieval_time=7.5 * KIT_FETCH_COST, clock=clock
        )
        assert len(answer) == 8
        chain = [bytes(vm.get_block(vm.get_block_id_at_height(h))) for h in range(31)]
        assert timed_expected(chain, 30, 100, 10**6, 7.5 * KIT_FETCH_COST) == answer


def test_a_fetch_cost_needs_a_simulated_clock() -> None:
    """A fetch cost on a clock that cannot advance, or a bad cost, is refused."""
    with pytest.raises(ValueError, match="SimClock"):
        memory_vm(fetch_cost=0.5, clock=time.time)
    for cost in (-1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="fetch_cost"):
            memory_vm(fetch_cost=cost, clock=SimClock())


def test_bad_arguments_get_the_project_errors() -> None:
    """The doubles refuse what is not a block as a VM does: InvalidBlock, ValueError."""
    vm = memory_vm(batching=True, blocks=2)
    for argument in (None, 5, "text"):
        with pytest.raises(InvalidBlock):
            vm.parse_block(argument)  # type: ignore[arg-type]
    with pytest.raises(InvalidBlock) as raised:
        vm.batched_parse_block([bytes(vm.get_block(vm.last_accepted())), None])  # type: ignore[attr-defined]
    assert raised.value.index == 1
    with pytest.raises(ValueError):
        vm.batched_parse_block(None)  # type: ignore[attr-defined]


def test_known_block_records_nothing() -> None:
    """known_block looks a block up without a call, a read or time passing."""
    clock = SimClock(0.0)
    vm = memory_vm(blocks=2, clock=clock, fetch_cost=1.0)
    tip = vm.last_accepted()
    vm.forget_records()
    assert vm.known_block(tip) is not None and vm.known_block(bytes(32)) is None
    assert vm.calls == [] and vm.fetches == [] and clock() == 0.0
