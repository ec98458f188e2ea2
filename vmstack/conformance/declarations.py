"""What a kit test class declares about its layer, the named rules, and their checking.

A kit test checks one named *rule* (``"forwarding.one-call"``, ``"decisions.reach-below"``,
...). :data:`RULES` maps each name to what a layer must do; every failure of a kit test
starts with ``[kit rule NAME]`` and says what was expected, so a failing layer's author
knows which promise broke. :func:`rule` marks a test as the check of one rule.

A layer describes itself with two class attributes of its test class, both checked:

- :attr:`KitDeclarations.declarations`, a set of :class:`Declaration` (or their string
  values): what kind of layer it is. Each declaration changes what the kit checks, never
  whether it checks, and the kit also checks that the declaration is true (a stale
  declaration fails :data:`DECLARATIONS_HOLD`).
- :attr:`KitDeclarations.not_applicable`, ``{rule name: reason}`` for rules the layer
  cannot meet by design. Such a rule still runs: if it fails, the test is skipped with the
  reason; if it passes, the declaration is stale and the test fails.

An unknown declaration or rule name (a misspelling, or a name of an older kit) is a
:class:`KitDeclarationError` at the set-up of every test of the class.

This module imports pytest: it is for test suites.
"""

from __future__ import annotations

import difflib
import enum
import functools
from collections.abc import Callable, Collection, Mapping
from typing import Any, ClassVar, TypeVar

import pytest

from vmstack.batching import DEFAULT_MAX_BLOCKS_NUM
from vmstack.errors import KitDeclarationError

__all__ = [
    "DECLARATIONS_HOLD",
    "Declaration",
    "KitDeclarations",
    "RULES",
    "rule",
]

#: Every rule of the kit: name -> what a layer must do.
RULES: dict[str, str] = {}
#: The rule that checks a layer's declarations are true.
DECLARATIONS_HOLD = "kit.declarations-hold"
RULES[DECLARATIONS_HOLD] = (
    "every declaration of the test class is true of the layer (a "
    "declaration that no longer holds must be removed)"
)


class Declaration(enum.StrEnum):
    """What kind of layer a test class describes; each changes what the kit checks."""

    #: The layer answers batched calls itself and never refuses them: over a VM that
    #: cannot batch it answers (the same answer the engine's fallback gives) instead of
    #: raising ``BatchingNotImplemented``, and ``supports_batching`` says so. Over a VM
    #: that batches it still makes at most one batched call below and no per-block call.
    #: A process-boundary client whose server runs the engine helper is one.
    ANSWERS_BATCHED_CALLS_ITSELF = "answers-batched-calls-itself"
    #: ``get_block`` may answer from the layer's own memory (a read-through cache), so the
    #: kit does not count the calls below it; it checks instead that a repeated
    #: ``get_block`` is answered without one, that answers are the same, that decisions on
    #: cached blocks reach below and that nothing rejected or replaced is served.
    SERVES_BLOCKS_FROM_MEMORY = "serves-blocks-from-memory"
    #: The layer's blocks have IDs and bytes of their own (an envelope around the block
    #: below, as a proposer layer's post-fork blocks), and it answers part of
    #: ``get_ancestors`` from its own store: decisions are matched below by height and order
    #: instead of by ID, and calls below are not compared argument by argument.
    BLOCKS_OF_ITS_OWN = "blocks-of-its-own"
    #: The layer reaches the VM below through another process (a gRPC client): errors come
    #: up as equal copies (same type, message and ``index``) instead of the very object,
    #: errors outside vmstack's error tree come up as ``VMStackError`` carrying the message,
    #: and the VM below is not reachable as ``inner``.
    PROCESS_BOUNDARY = "process-boundary"


F = TypeVar("F", bound=Callable[..., None])


def rule(name: str, expectation: str) -> Callable[[F], F]:
    """Mark a kit test as the check of rule ``name`` (registered in :data:`RULES`).

    Every failure of the test is prefixed with the rule's name and what it expects. When
    the test class declares the rule not applicable, the test still runs: a failure
    becomes a skip with the declared reason, a pass fails as a stale declaration.
    """
    if name in RULES and RULES[name] != expectation:
        raise ValueError(f"kit rule {name!r} registered twice with different expectations")
    RULES[name] = expectation

    def decorate(test: F) -> F:
        @functools.wraps(test)
        def run(self: KitDeclarations, *args: Any, **kwargs: Any) -> None:
            reason = type(self).not_applicable.get(name)
            self._kit_expecting_failure = reason is not None
            try:
                test(self, *args, **kwargs)
            except (Exception, pytest.fail.Exception) as failure:
                if reason is not None:
                    pytest.skip(
                        f"kit rule {name} does not apply to {type(self).__name__}: {reason}"
                    )
                _name_the_rule(failure, name, expectation)
                raise
            finally:
                self._kit_expecting_failure = False
            if reason is not None:
                pytest.fail(
                    f"[kit rule {DECLARATIONS_HOLD}] {type(self).__name__} declares rule "
                    f"{name} not applicable ({reason}), but the layer meets it: remove it "
                    "from not_applicable"
                )

        run.kit_rule = name  # type: ignore[attr-defined]
        return run  # type: ignore[return-value]

    return decorate


def _name_the_rule(failure: BaseException, name: str, expectation: str) -> None:
    """Prefix ``failure``'s message with the rule it broke, in place."""
    prefix = f"[kit rule {name}] expected: {expectation}"
    if isinstance(failure, AssertionError) and failure.args:
        failure.args = (f"{prefix}\n{failure.args[0]}", *failure.args[1:])
    elif isinstance(failure, pytest.fail.Exception):
        failure.msg = f"{prefix}\n{failure.msg}"
        failure.args = (failure.msg,)
    elif isinstance(failure, AssertionError):
        failure.args = (prefix,)
    else:
        failure.add_note(f"{prefix}\n(the layer raised {type(failure).__name__})")


class KitDeclarations:
    """What a test class sets: its declarations, its not-applicable rules and the sizes of
    its runs, with the check that they are all known and well formed."""

    #: What kind of layer this is (see :class:`Declaration`); checked to be true.
    declarations: ClassVar[Collection[Declaration | str]] = ()
    #: ``{rule name: reason}`` for the rules the layer cannot meet by design (see
    #: :data:`RULES`); each still runs and must fail, or the declaration is stale.
    not_applicable: ClassVar[Mapping[str, str]] = {}
    #: Hypothesis examples per property (``--vmstack-max-examples`` overrides it).
    max_examples: ClassVar[int] = 15
    #: Blocks above genesis in the chain of the tests that do not draw a length.
    chain_length: ClassVar[int] = 24
    #: The longest chain (blocks above genesis) Hypothesis draws.
    max_chain_length: ClassVar[int] = 40
    #: Blocks above genesis in the long-answer tests: count and size mistakes that show
    #: only on long answers. It must exceed the engine's default count of 2,000 blocks.
    long_chain_length: ClassVar[int] = 2_500

    _kit_expecting_failure: bool = False

    @classmethod
    def kit_check_declarations(cls) -> None:
        """Raise :class:`KitDeclarationError` for an unknown declaration or rule name, or
        for an attribute of an older kit."""
        problems: list[str] = []
        for old, new in (
            ("pass_through", "declarations (a pass-through layer declares nothing)"),
            (
                "refuses_without_batching",
                "declarations = {Declaration.ANSWERS_BATCHED_CALLS_ITSELF} "
                "for a layer that never refuses",
            ),
        ):
            if any(old in vars(klass) for klass in cls.__mro__):
                problems.append(f"{old} is no longer read: use {new}")
        if not (
            isinstance(cls.long_chain_length, int)
            and cls.long_chain_length > DEFAULT_MAX_BLOCKS_NUM
        ):
            problems.append(
                f"long_chain_length must exceed {DEFAULT_MAX_BLOCKS_NUM} blocks "
                f"(the engine's default count), got {cls.long_chain_length!r}"
            )
        known = {str(declaration) for declaration in Declaration}
        declared = cls.declarations
        if isinstance(declared, str):
            problems.append(
                f"declarations must be a collection of names, got the string {declared!r}"
            )
            declared = ()
        for declaration in declared:
            if str(declaration) not in known:
                problems.append(_unknown("declaration", str(declaration), known))
        if not isinstance(cls.not_applicable, Mapping):
            problems.append("not_applicable must map rule names to reasons")
        else:
            for name, reason in cls.not_applicable.items():
                if name not in RULES:
                    problems.append(_unknown("rule", str(name), RULES))
                elif name == DECLARATIONS_HOLD:
                    problems.append(f"{DECLARATIONS_HOLD} cannot be declared not applicable")
                if not isinstance(reason, str) or not reason.strip():
                    problems.append(f"not_applicable[{name!r}] needs a reason (a sentence)")
        if problems:
            raise KitDeclarationError(f"{cls.__name__}: " + "; ".join(problems))

    def declares(self, declaration: Declaration) -> bool:
        """Whether the test class declares ``declaration``."""
        return declaration in {str(item) for item in self.declarations}

    @property
    def answers_itself(self) -> bool:
        return self.declares(Declaration.ANSWERS_BATCHED_CALLS_ITSELF)

    @property
    def has_memory(self) -> bool:
        """Whether the layer may answer some block reads without reading below."""
        return self.declares(Declaration.SERVES_BLOCKS_FROM_MEMORY) or self.declares(
            Declaration.BLOCKS_OF_ITS_OWN
        )

    @property
    def own_blocks(self) -> bool:
        return self.declares(Declaration.BLOCKS_OF_ITS_OWN)

    @property
    def boundary(self) -> bool:
        return self.declares(Declaration.PROCESS_BOUNDARY)

    @property
    def counts_calls(self) -> bool:
        """Whether each call through the layer must be one call below with the same
        arguments (a layer without memory or blocks of its own)."""
        return not self.has_memory


def _unknown(kind: str, name: str, known: Collection[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"unknown {kind} {name!r}{hint}; the kit knows {sorted(known)}"
