"""The kit can fail: run with pytester, it catches deliberately broken layers."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator

import pytest
from hypothesis import settings

import vmstack.conformance.kit  # noqa: F401  (imported once here, not again in every run)

pytest_plugins = ["pytester"]

#: A correct pass-through layer written from scratch, and broken variants of it.
LAYERS = textwrap.dedent('''
    from vmstack.batching import AncestorBudget, walk_ancestors
    from vmstack.conformance import LayerConformance
    from vmstack.errors import BatchingNotImplemented, VMStackError
    from vmstack.wrappers.base import WrappedBlock, batched_inner, refusal


    class PassBlock(WrappedBlock):
        def verify(self):
            self._inner.verify()

        def accept(self):
            self._inner.accept()

        def reject(self):
            self._inner.reject()


    class PassVM:
        def __init__(self, inner):
            self.inner = inner
            self._batched = batched_inner(inner)
            self.batching = self._batched is not None

        def get_block(self, block_id):
            return PassBlock(self.inner.get_block(block_id))

        def parse_block(self, data):
            return PassBlock(self.inner.parse_block(data))

        def build_block(self):
            return PassBlock(self.inner.build_block())

        def set_preference(self, block_id):
            self.inner.set_preference(block_id)

        def last_accepted(self):
            return self.inner.last_accepted()

        def get_block_id_at_height(self, height):
            return self.inner.get_block_id_at_height(height)

        def get_ancestors(self, block_id, max_blocks_num, max_blocks_size, max_retrieval_time):
            if self._batched is None:
                raise refusal("PassVM", self.inner)
            return self._batched.get_ancestors(block_id, max_blocks_num, max_blocks_size,
                                               max_retrieval_time)

        def batched_parse_block(self, blocks):
            if self._batched is None:
                raise refusal("PassVM", self.inner)
            return [PassBlock(block) for block in self._batched.batched_parse_block(blocks)]


    class PerBlockWalkVM(PassVM):
        """Answers get_ancestors by walking get_block below, one call per block."""

        def get_ancestors(self, block_id, max_blocks_num, max_blocks_size, max_retrieval_time):
            if self._batched is None:
                raise refusal("PerBlockWalkVM", self.inner)

            def fetch(wanted):
                block = self.inner.get_block(wanted)
                return bytes(block), block.parent_id

            budget = AncestorBudget(max_blocks_num, max_blocks_size, max_retrieval_time)
            return walk_ancestors(fetch, block_id, budget)


    class SwallowingVM(PassVM):
        """Turns BatchingNotImplemented into an empty answer."""

        def get_ancestors(self, *args):
            try:
                return PassVM.get_ancestors(self, *args)
            except BatchingNotImplemented:
                return []


    class RewrappingVM(PassVM):
        """Raises its own BatchingNotImplemented in place of the one from below."""

        def get_ancestors(self, *args):
            try:
                return PassVM.get_ancestors(self, *args)
            except BatchingNotImplemented as error:
                raise BatchingNotImplemented(f"RewrappingVM: {error}") from error


    class ForeignErrorVM(PassVM):
        """Re-wraps BatchingNotImplemented as a generic VMStackError."""

        def batched_parse_block(self, blocks):
            try:
                return PassVM.batched_parse_block(self, blocks)
            except BatchingNotImplemented as error:
                raise VMStackError(str(error)) from error


    class UnwrappedVM(PassVM):
        """Returns the inner VM's own blocks from get_block and batched_parse_block."""

        def get_block(self, block_id):
            return self.inner.get_block(block_id)

        def batched_parse_block(self, blocks):
            if self._batched is None:
                raise refusal("UnwrappedVM", self.inner)
            return self._batched.batched_parse_block(blocks)


    class DropLastVM(PassVM):
        """Drops the oldest block of every batched answer of two or more blocks."""

        def get_ancestors(self, *args):
            answer = PassVM.get_ancestors(self, *args)
            return answer[:-1] if len(answer) > 1 else answer
''')


#: The runs stop at the first failing example of each property: finding one is the point,
#: shrinking it is not.
CONFTEST = textwrap.dedent('''
    from hypothesis import Phase, settings

    settings.register_profile("kit-catches", phases=[Phase.explicit, Phase.generate],
                              database=None)
    settings.load_profile("kit-catches")
''')


@pytest.fixture(autouse=True)
def _keep_hypothesis_profile() -> Iterator[None]:
    """Restore the Hypothesis profile the in-process runs load."""
    profile = settings.get_current_profile_name()
    yield
    settings.load_profile(profile)


def _run_kit(pytester: pytest.Pytester, layer: str) -> pytest.RunResult:
    """Run the whole kit against ``layer`` (a class of LAYERS) and return the result."""
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(**{
        "layers": LAYERS,
        "test_layer": textwrap.dedent(f'''
            from layers import {layer}
            from vmstack.conformance import LayerConformance


            class TestLayer(LayerConformance):
                def wrap(self, inner):
                    return {layer}(inner)
        '''),
    })
    pytester.syspathinsert()
    return pytester.runpytest("-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                              "--vmstack-max-examples=5", "test_layer.py")


def _failed(result: pytest.RunResult) -> int:
    return result.parseoutcomes().get("failed", 0)


def test_a_correct_layer_passes(pytester: pytest.Pytester) -> None:
    """A correct pass-through layer passes every test of the kit."""
    result = _run_kit(pytester, "PassVM")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0, result.stdout.str()
    assert outcomes.get("passed", 0) >= 40


def test_a_per_block_walk_is_caught(pytester: pytest.Pytester) -> None:
    """A layer that walks get_block per block instead of forwarding fails the kit."""
    result = _run_kit(pytester, "PerBlockWalkVM")
    assert _failed(result) >= 1
    result.stdout.fnmatch_lines(["FAILED *test_get_ancestors_is_one_forwarded_call*"])


def test_swallowing_batching_not_implemented_is_caught(pytester: pytest.Pytester) -> None:
    """A layer that swallows BatchingNotImplemented fails the kit."""
    result = _run_kit(pytester, "SwallowingVM")
    assert _failed(result) >= 1
    result.stdout.fnmatch_lines([
        "FAILED *test_refuses_batched_calls_when_the_inner_vm_cannot_batch*"])
    result.stdout.fnmatch_lines(["FAILED *test_fallback_answers_equal_batched_answers*"])


def test_rewrapping_batching_not_implemented_is_caught(pytester: pytest.Pytester) -> None:
    """A layer that raises its own BatchingNotImplemented in place of the one from below
    fails the kit, though its answers are right."""
    result = _run_kit(pytester, "RewrappingVM")
    assert _failed(result) >= 1
    result.stdout.fnmatch_lines([
        "FAILED *test_batching_not_implemented_from_below_passes_up_unchanged*"])


def test_rewrapping_into_another_error_is_caught(pytester: pytest.Pytester) -> None:
    """A layer that turns BatchingNotImplemented into another error fails the kit."""
    result = _run_kit(pytester, "ForeignErrorVM")
    assert _failed(result) >= 1
    result.stdout.fnmatch_lines([
        "FAILED *test_refuses_batched_calls_when_the_inner_vm_cannot_batch*"])


def test_unwrapped_blocks_are_caught(pytester: pytest.Pytester) -> None:
    """A layer that returns the inner VM's own blocks fails the kit."""
    result = _run_kit(pytester, "UnwrappedVM")
    assert _failed(result) >= 1
    result.stdout.fnmatch_lines(["FAILED *test_returned_blocks_are_wrapped*"])


def test_dropping_the_last_ancestor_is_caught(pytester: pytest.Pytester) -> None:
    """A layer that drops the oldest block of its answers fails the kit."""
    result = _run_kit(pytester, "DropLastVM")
    assert _failed(result) >= 1
    result.stdout.fnmatch_lines(["FAILED *test_get_ancestors_is_one_forwarded_call*"])
    result.stdout.fnmatch_lines(["FAILED *test_fallback_answers_equal_batched_answers*"])
