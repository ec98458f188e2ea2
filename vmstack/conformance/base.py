"""What every contract mixin of the kit shares: rules, declarations, stacks and checks.

A kit test checks one named *rule* (``"forwarding.one-call"``, ``"decisions.reach-below"``,
...). :data:`RULES` maps each name to what a layer must do; every failure of a kit test
starts with ``[kit rule NAME]`` and says what was expected, so a failing layer's author
knows which promise broke.

A layer describes itself with two class attributes of its test class, both checked:

- :attr:`KitBase.declarations`, a set of :class:`Declaration` (or their string values):
  what kind of layer it is. Each declaration changes what the kit checks, never whether
  it checks, and the kit also checks that the declaration is true (a stale declaration
  fails :data:`DECLARATIONS_HOLD`).
- :attr:`KitBase.not_applicable`, ``{rule name: reason}`` for rules the layer cannot meet
  by design. Such a rule still runs: if it fails, the test is skipped with the reason; if
  it passes, the declaration is stale and the test fails.

An unknown declaration or rule name (a misspelling, or a name of an older kit) is a
:class:`KitDeclarationError` at the set-up of every test of the class.

This module imports pytest and Hypothesis: it is for test suites.
"""

from __future__ import annotations

import difflib
import enum
import functools
import hashlib
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

import attrs
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from vmstack.batching import (
    CONTAINER_LEN_OVERHEAD,
    DEFAULT_MAX_BLOCKS_NUM,
    AncestorBudget,
    has_batched_methods,
    supports_batching,
    walk_ancestors,
)
from vmstack.clock import SimClock
from vmstack.conformance.doubles import Call, MemoryVM, memory_vm
from vmstack.conformance.plugin import MAX_EXAMPLES_OPTION
from vmstack.errors import BatchingNotImplemented, BlockNotFound, KitDeclarationError
from vmstack.interfaces import BatchedChainVM, Block, ChainVM

__all__ = [
    "DECLARATIONS_HOLD",
    "KIT_FETCH_COST",
    "KIT_START_TIME",
    "KIT_TIME_BUDGET",
    "RULES",
    "Declaration",
    "KitBase",
    "KitDeclarationError",
    "KitFault",
    "KitStack",
    "rule",
]

#: Where the kit's simulated clock starts (seconds).
KIT_START_TIME = 1_700_000_000.0
#: What one block read below the layer costs on the kit's clock (seconds): a power of two,
#: so sums of it are exact in floating point.
KIT_FETCH_COST = 2.0 ** -10
#: The time budget of the kit's requests that are not about time: about a thousand block
#: reads, more than any of those requests needs.
KIT_TIME_BUDGET = 1.0

#: Every rule of the kit: name -> what a layer must do.
RULES: dict[str, str] = {}
#: The rule that checks a layer's declarations are true.
DECLARATIONS_HOLD = "kit.declarations-hold"
RULES[DECLARATIONS_HOLD] = ("every declaration of the test class is true of the layer (a "
                            "declaration that no longer holds must be removed)")

UNKNOWN_ID = hashlib.sha256(b"vmstack conformance: a block nobody has").digest()

CAPABILITIES = pytest.mark.parametrize(
    "inner_batches", [True, False], ids=["inner-batches", "inner-does-not-batch"])
INNER_BATCHES = pytest.mark.parametrize("inner_batches", [True], ids=["inner-batches"])
INNER_SERIAL = pytest.mark.parametrize("inner_batches", [False], ids=["inner-does-not-batch"])


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


class KitFault(RuntimeError):
    """An error the kit injects below the layer; the layer must let the very object up."""


@attrs.frozen
class KitStack:
    """One stack under test: the layer (``layer``) over the recording VM (``inner``).

    ``ids`` is the chain as the layer serves it, genesis first and the tip last, so
    ``ids[h]`` is the block at height ``h``. ``clock`` is the simulated clock of the inner VM;
    every block read below costs :data:`KIT_FETCH_COST` on it.
    """

    layer: ChainVM
    inner: MemoryVM
    ids: tuple[bytes, ...]
    clock: SimClock

    @property
    def tip(self) -> bytes:
        """The newest block of the chain (the last accepted one)."""
        return self.ids[-1]

    @property
    def below(self) -> object:
        """The VM directly below the layer, as the layer exposes it (``inner``, asked now),
        or the recording VM for a layer that exposes none."""
        return getattr(self.layer, "inner", self.inner)

    def settle(self) -> None:
        """Forget the inner VM's records, so a test sees only the calls it causes."""
        self.inner.forget_records()


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
        def run(self: KitBase, *args: Any, **kwargs: Any) -> None:
            reason = type(self).not_applicable.get(name)
            self._kit_expecting_failure = reason is not None
            try:
                test(self, *args, **kwargs)
            except (Exception, pytest.fail.Exception) as failure:
                if reason is not None:
                    pytest.skip(f"kit rule {name} does not apply to {type(self).__name__}: "
                                f"{reason}")
                _name_the_rule(failure, name, expectation)
                raise
            finally:
                self._kit_expecting_failure = False
            if reason is not None:
                pytest.fail(
                    f"[kit rule {DECLARATIONS_HOLD}] {type(self).__name__} declares rule "
                    f"{name} not applicable ({reason}), but the layer meets it: remove it "
                    "from not_applicable")

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


def cost(blocks: Sequence[bytes]) -> int:
    """What ``blocks`` cost against a size budget."""
    return sum(len(block) + CONTAINER_LEN_OVERHEAD for block in blocks)


def untimed_expected(chain: Sequence[bytes], index: int, max_blocks_num: int,
                     max_blocks_size: int) -> list[bytes]:
    """What the count and size budgets allow for a request of ``chain[index]`` (chain
    oldest first) when time never runs out."""
    budget = AncestorBudget(max_blocks_num, max_blocks_size, KIT_TIME_BUDGET, clock=SimClock())
    budget.extend(reversed(chain[: index + 1]))
    return budget.blocks


def timed_expected(chain: Sequence[bytes], index: int, max_blocks_num: int,
                   max_blocks_size: int, max_retrieval_time: float,
                   fetch_cost: float = KIT_FETCH_COST) -> list[bytes]:
    """The answer of a walk that reads every block below at ``fetch_cost`` seconds each."""
    clock = SimClock(KIT_START_TIME)
    newest_first = list(reversed(chain[: index + 1]))

    def fetch(position: bytes) -> tuple[bytes, bytes]:
        # A block is named by its position in the answer; reading it (even the missing
        # parent of genesis) costs what a read below costs.
        clock.advance(fetch_cost)
        at = int.from_bytes(position, "big")
        if at >= len(newest_first):
            raise BlockNotFound("the parent of genesis")
        return newest_first[at], (at + 1).to_bytes(32, "big")

    budget = AncestorBudget(max_blocks_num, max_blocks_size, max_retrieval_time, clock=clock)
    return walk_ancestors(fetch, bytes(32), budget).blocks


def batched(layer: ChainVM) -> BatchedChainVM:
    """``layer`` as a batched VM, failing the rule that asks for both batched methods."""
    assert has_batched_methods(layer), (
        f"{type(layer).__name__} lacks get_ancestors / batched_parse_block: a layer always "
        "has both, forwarding them (or answering them) when it can and raising "
        "BatchingNotImplemented when it cannot")
    return layer


def reaches(layer: object, inner: object) -> bool:
    """Whether following ``inner`` from ``layer`` arrives at ``inner``."""
    seen: set[int] = set()
    current: object = layer
    while current is not None and id(current) not in seen:
        if current is inner:
            return True
        seen.add(id(current))
        current = getattr(current, "inner", None)
    return False


class KitBase:
    """The hooks, declarations and helpers every contract mixin uses. Override :meth:`wrap`.

    Subclass :class:`~vmstack.conformance.LayerConformance` (all the contracts) or the
    contract mixins you want, in a module pytest collects, under a name pytest collects
    (``Test...``). The tests build fresh stacks with :meth:`kit_stack`; nothing is shared.
    """

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

    _kit_examples: int | None = None
    _kit_expecting_failure: bool = False

    # --- hooks ---------------------------------------------------------------------------

    def wrap(self, inner: ChainVM) -> ChainVM:
        """Put the layer under test over ``inner`` and return the top of the result.

        ``inner`` is a :class:`~vmstack.conformance.MemoryVM`; a layer that needs a clock
        takes ``inner.clock`` (the kit's simulated clock)."""
        raise NotImplementedError(
            f"{type(self).__name__} must override wrap(self, inner) to put its layer "
            "over inner")

    def make_inner(self, *, batching: bool, clock: SimClock) -> MemoryVM:
        """The recording VM under the layer, with or without the batched protocol, on
        ``clock``, each block read costing :data:`KIT_FETCH_COST`; it holds only its genesis
        block. Default: :func:`~vmstack.conformance.memory_vm`."""
        return memory_vm(batching=batching, clock=clock, fetch_cost=KIT_FETCH_COST)

    def extend_chain(self, layer: ChainVM, inner: MemoryVM, count: int) -> list[bytes]:
        """Add ``count`` accepted blocks to the chain; return their IDs as the layer serves
        them, oldest first. Default: :meth:`MemoryVM.extend_chain` on ``inner``. A layer
        with blocks of its own builds them through ``layer`` instead."""
        return inner.extend_chain(count)

    # --- declarations --------------------------------------------------------------------

    @pytest.fixture(autouse=True)
    def _vmstack_kit_setup(self, request: pytest.FixtureRequest) -> None:
        self._kit_examples = request.config.getoption(MAX_EXAMPLES_OPTION, default=None)
        self.kit_check_declarations()

    @classmethod
    def kit_check_declarations(cls) -> None:
        """Raise :class:`KitDeclarationError` for an unknown declaration or rule name, or
        for an attribute of an older kit."""
        problems: list[str] = []
        for old, new in (("pass_through", "declarations (a pass-through layer declares "
                                          "nothing)"),
                         ("refuses_without_batching",
                          "declarations = {Declaration.ANSWERS_BATCHED_CALLS_ITSELF} "
                          "for a layer that never refuses")):
            if any(old in vars(klass) for klass in cls.__mro__):
                problems.append(f"{old} is no longer read: use {new}")
        if not (isinstance(cls.long_chain_length, int)
                and cls.long_chain_length > DEFAULT_MAX_BLOCKS_NUM):
            problems.append(f"long_chain_length must exceed {DEFAULT_MAX_BLOCKS_NUM} blocks "
                            f"(the engine's default count), got {cls.long_chain_length!r}")
        known = {str(declaration) for declaration in Declaration}
        declared = cls.declarations
        if isinstance(declared, str):
            problems.append(f"declarations must be a collection of names, got the string "
                            f"{declared!r}")
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
        return (self.declares(Declaration.SERVES_BLOCKS_FROM_MEMORY)
                or self.declares(Declaration.BLOCKS_OF_ITS_OWN))

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

    # --- stacks --------------------------------------------------------------------------

    def kit_stack(self, *, batching: bool, blocks: int | None = None) -> KitStack:
        """A fresh stack: :meth:`wrap` over :meth:`make_inner`, grown by :meth:`extend_chain`
        to ``blocks`` blocks above genesis (default :attr:`chain_length`), with empty
        records."""
        clock = SimClock(KIT_START_TIME)
        inner = self.make_inner(batching=batching, clock=clock)
        layer = self.wrap(inner)
        genesis = layer.last_accepted()
        count = self.chain_length if blocks is None else blocks
        ids = (genesis, *self.extend_chain(layer, inner, count))
        stack = KitStack(layer=layer, inner=inner, ids=ids, clock=clock)
        stack.settle()
        return stack

    def kit_chain(self, stack: KitStack) -> list[bytes]:
        """The bytes of every block of ``stack``'s chain as the layer serves them, genesis
        first (read one by one through the layer; the records are cleared after)."""
        chain = [bytes(stack.layer.get_block(block_id)) for block_id in stack.ids]
        stack.settle()
        return chain

    def drawn_chain(self, data: st.DataObject, batching: bool,
                    minimum: int = 1) -> tuple[KitStack, list[bytes]]:
        """A stack over a chain of a drawn length, and its blocks' bytes."""
        length = data.draw(st.integers(minimum, self.max_chain_length), label="blocks")
        stack = self.kit_stack(batching=batching, blocks=length)
        return stack, self.kit_chain(stack)

    def fresh_blocks(self, stack: KitStack, count: int) -> list[bytes]:
        """Bytes of ``count`` valid blocks extending ``stack``'s chain that ``stack`` has
        never seen (grown on a twin stack)."""
        length = len(stack.ids) - 1
        twin = self.kit_stack(batching=supports_batching(stack.inner), blocks=length + count)
        assert twin.ids[: length + 1] == stack.ids, (
            "two stacks grown the same way must hold the same chain (extend_chain must be "
            "deterministic)")
        return self.kit_chain(twin)[length + 1:]

    def kit_explore(self, check: Callable[..., None],
                    **strategies: st.SearchStrategy[Any]) -> None:
        """Run ``check`` as a Hypothesis property over ``strategies``."""
        examples = self._kit_examples or self.max_examples
        phases = ([Phase.explicit, Phase.generate] if self._kit_expecting_failure
                  else list(Phase))
        run = settings(max_examples=examples, deadline=None, database=None, phases=phases,
                       suppress_health_check=[HealthCheck.too_slow,
                                              HealthCheck.data_too_large])(
            given(**strategies)(check))
        run()

    def draw_request(self, data: st.DataObject, chain: Sequence[bytes]) -> tuple[int, int, int]:
        """A requested height, ``max_blocks_num`` and ``max_blocks_size`` for ``chain``."""
        index = data.draw(st.integers(0, len(chain) - 1), label="requested height")
        num = data.draw(st.integers(1, len(chain) + 2), label="max_blocks_num")
        size = data.draw(st.integers(0, cost(chain) + 8), label="max_blocks_size")
        return index, num, size

    # --- capability ----------------------------------------------------------------------

    def layer_batches(self, stack: KitStack) -> bool:
        """Whether the layer must answer batched calls now: always for a layer that answers
        them itself, else exactly when the VM directly below it batches."""
        return self.answers_itself or supports_batching(stack.below)

    # --- checks --------------------------------------------------------------------------

    def check_answer_types(self, answer: object, what: str) -> list[bytes]:
        """``answer`` is a list whose every element is exactly ``bytes``."""
        assert isinstance(answer, list), (
            f"{what} must return a list of bytes, got {type(answer).__name__}")
        wrong = [(position, type(element).__name__) for position, element in enumerate(answer)
                 if type(element) is not bytes]
        assert not wrong, (
            f"every element of {what}'s answer must be exactly bytes (not bytearray, "
            f"memoryview or a subclass); (position, type) of the first wrong ones: {wrong[:3]}")
        return answer

    def check_block(self, block: object, what: str) -> Block:
        """``block`` satisfies the ``Block`` protocol with fields of the right types."""
        assert isinstance(block, Block), (
            f"{what} returned {type(block).__name__}, which is not a Block (id, parent_id, "
            "height, timestamp, __bytes__, verify, accept, reject)")
        assert type(block.id) is bytes and len(block.id) == 32, (
            f"{what}: a block's id is 32 bytes, got {block.id!r}")
        assert type(block.parent_id) is bytes and len(block.parent_id) == 32, (
            f"{what}: a block's parent_id is 32 bytes, got {block.parent_id!r}")
        assert isinstance(block.height, int) and isinstance(block.timestamp, int), (
            f"{what}: height and timestamp are ints, got {block.height!r}, "
            f"{block.timestamp!r}")
        assert type(bytes(block)) is bytes, f"{what}: bytes(block) must be bytes"
        return block

    def check_ancestors(self, stack: KitStack, chain: Sequence[bytes], index: int, *,
                        num: int, size: int, seconds: float,
                        call: Callable[[], object], what: str) -> list[bytes]:
        """Run ``call`` (a request of ``chain[index]`` with these budgets) and check its
        answer against rules 3 and 4, time included.

        The answer is the newest part of what count and size allow; it stops short of that
        only if the time budget ran out during the call; every block read below to make it
        was read before the deadline; and a layer without memory of its own answers exactly
        what a walk reading each block below answers.
        """
        stack.settle()
        started = stack.clock()
        answer = self.check_answer_types(call(), what)
        finished = stack.clock()
        fetches = list(stack.inner.fetches)
        allowed = untimed_expected(chain, index, num, size)
        assert answer and answer == allowed[: len(answer)], (
            f"{what} for height {index} (max_blocks_num={num}, max_blocks_size={size}, "
            f"max_retrieval_time={seconds}) must be the newest blocks that fit, newest first, "
            f"starting with the requested block; got {len(answer)} blocks, of which the first "
            f"wrong is at position {_first_difference(answer, allowed)} (the rule allows "
            f"{len(allowed)} blocks)")
        if len(answer) < len(allowed):
            assert finished >= started + seconds, (
                f"{what} stopped after {len(answer)} of the {len(allowed)} blocks that count "
                f"and size allow, but only {finished - started:.6f} s of its "
                f"{seconds} s time budget had passed (the budget was cut or rescaled)")
        deadline = started + seconds
        first_read: dict[object, float] = {}
        for fetch in fetches:
            first_read.setdefault(fetch.block_id, fetch.started)
        for position in range(1, len(answer)):
            read = first_read.get(stack.ids[index - position])
            assert read is None or read < deadline, (
                f"{what} included the block at position {position}, read below "
                f"{read - started:.6f} s into the call: after its deadline of {seconds} s "
                "(the time budget starts when the call starts and covers the whole answer: "
                "it was ignored, rescaled or restarted)")
        if not self.has_memory:
            model = timed_expected(chain, index, num, size, seconds, stack.inner.fetch_cost)
            assert answer == model, (
                f"{what} must answer what a walk reading each block below answers: "
                f"{len(model)} blocks, got {len(answer)}")
        return answer

    def assert_forwarded_once(self, stack: KitStack, call: Call) -> None:
        """The batched ``call`` reached the VM below as one call and no per-block call."""
        per_block = [made for made in stack.inner.calls
                     if made.method in ("get_block", "parse_block")]
        assert not per_block, (
            f"a batched call through the layer made {len(per_block)} per-block call(s) to "
            f"the VM below (first: {per_block[0].method}); it must reach it as one call")
        forwarded = stack.inner.calls_to(call.method)
        if self.counts_calls and not self.answers_itself:
            assert forwarded == [call], (
                f"expected exactly one {call.method} call below, with the caller's "
                f"arguments {call.args!r}; the VM below saw {forwarded!r}")
        else:
            assert len(forwarded) <= 1, (
                f"{len(forwarded)} {call.method} calls below for one call: at most one")

    def assert_decisions(self, stack: KitStack,
                         expected: list[tuple[str, Block]]) -> None:
        """The VM below saw exactly these decisions, in order, each once: on the same block
        IDs, or (blocks of its own) on blocks of the same heights."""
        seen = [made for made in stack.inner.calls if made.method.startswith("block.")]
        if not self.own_blocks:
            assert seen == [Call(f"block.{decision}", (block.id,))
                            for decision, block in expected], (
                "each verify/accept/reject on a block the layer returned must reach the "
                f"block below once, in order: expected {_decisions(expected)}, the blocks "
                f"below saw {[(made.method, made.args[0].hex()[:8]) for made in seen]}")
            return
        heights = []
        for made in seen:
            below = stack.inner.known_block(made.args[0])
            heights.append((made.method, None if below is None else below.height))
        assert heights == [(f"block.{decision}", block.height) for decision, block in expected], (
            "each verify/accept/reject on a block the layer returned must reach the block "
            f"below (of the same height) once, in order: expected "
            f"{[(f'block.{d}', b.height) for d, b in expected]}, the blocks below saw {heights}")

    def expect_refusal_or_answer(self, stack: KitStack, call: Callable[[], object],
                                 what: str) -> object | None:
        """Make a batched ``call``: if the layer must batch now, return its answer; if it
        must refuse, check that it raises ``BatchingNotImplemented`` and return ``None``."""
        if self.layer_batches(stack):
            try:
                return call()
            except BatchingNotImplemented as refusal:
                raise AssertionError(
                    f"{what} raised BatchingNotImplemented ({refusal}) though "
                    + ("the layer declares it answers batched calls itself"
                       if self.answers_itself else "the VM below the layer batches")) from None
        try:
            answer = call()
        except BatchingNotImplemented:
            return None
        raise AssertionError(
            f"{what} answered ({_shown(answer)}) though the VM below the layer cannot batch: "
            "a layer refuses then with BatchingNotImplemented, or declares "
            f"{Declaration.ANSWERS_BATCHED_CALLS_ITSELF.value!r} if it answers batched calls "
            "itself")


def _decisions(expected: list[tuple[str, Block]]) -> list[tuple[str, str]]:
    return [(f"block.{decision}", block.id.hex()[:8]) for decision, block in expected]


def _shown(answer: object) -> str:
    if isinstance(answer, list):
        return f"a list of {len(answer)}"
    return type(answer).__name__


def _first_difference(answer: Sequence[bytes], allowed: Sequence[bytes]) -> int:
    for position, (got, want) in enumerate(zip(answer, allowed, strict=False)):
        if got != want:
            return position
    return min(len(answer), len(allowed))


def _unknown(kind: str, name: str, known: Collection[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"unknown {kind} {name!r}{hint}; the kit knows {sorted(known)}"
