"""The checks every contract of the kit shares, and the models they check against.

:func:`untimed_expected` and :func:`timed_expected` say what a ``get_ancestors`` answer must
be (the count and size budgets alone, or a walk that reads each block below at the kit's
cost); :class:`KitChecks` holds the assertions on answers, blocks, calls below and
decisions that several contracts make, each failing with a message that says what was
expected. A check's assertions are rewritten by pytest (the plugin registers this module),
so a failure also shows the values compared.

This module imports pytest: it is for test suites.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from vmstack.batching import CONTAINER_LEN_OVERHEAD, AncestorBudget, walk_ancestors
from vmstack.clock import SimClock
from vmstack.conformance.declarations import Declaration, KitDeclarations
from vmstack.conformance.doubles import Call
from vmstack.conformance.stacks import KIT_FETCH_COST, KIT_START_TIME, KIT_TIME_BUDGET, KitStack
from vmstack.errors import BatchingNotImplemented, BlockNotFound
from vmstack.interfaces import BatchedChainVM, Block, ChainVM, iter_layers
from vmstack.layers import has_batched_methods, supports_batching

__all__ = [
    "KitChecks",
    "batched",
    "cost",
    "reaches",
    "timed_expected",
    "untimed_expected",
]


def cost(blocks: Sequence[bytes]) -> int:
    """What ``blocks`` cost against a size budget."""
    return sum(len(block) + CONTAINER_LEN_OVERHEAD for block in blocks)


def untimed_expected(
    chain: Sequence[bytes], index: int, max_blocks_num: int, max_blocks_size: int
) -> list[bytes]:
    """What the count and size budgets allow for a request of ``chain[index]`` (chain
    oldest first) when time never runs out."""
    budget = AncestorBudget(max_blocks_num, max_blocks_size, KIT_TIME_BUDGET, clock=SimClock())
    budget.extend(reversed(chain[: index + 1]))
    return budget.blocks


def timed_expected(
    chain: Sequence[bytes],
    index: int,
    max_blocks_num: int,
    max_blocks_size: int,
    max_retrieval_time: float,
    fetch_cost: float = KIT_FETCH_COST,
) -> list[bytes]:
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
        "BatchingNotImplemented when it cannot"
    )
    return layer


def reaches(layer: object, inner: object) -> bool:
    """Whether following ``inner`` from ``layer`` arrives at ``inner`` (False for a stack
    that loops before it does)."""
    try:
        return any(below is inner for below in iter_layers(layer))
    except ValueError:
        return False


class KitChecks(KitDeclarations):
    """The checks the contract mixins share; what they expect follows the declarations."""

    def layer_batches(self, stack: KitStack) -> bool:
        """Whether the layer must answer batched calls now: always for a layer that answers
        them itself, else exactly when the VM directly below it batches."""
        return self.answers_itself or supports_batching(stack.below)

    def check_answer_types(self, answer: object, what: str) -> list[bytes]:
        """``answer`` is a list whose every element is exactly ``bytes``."""
        assert isinstance(answer, list), (
            f"{what} must return a list of bytes, got {type(answer).__name__}"
        )
        wrong = [
            (position, type(element).__name__)
            for position, element in enumerate(answer)
            if type(element) is not bytes
        ]
        assert not wrong, (
            f"every element of {what}'s answer must be exactly bytes (not bytearray, "
            f"memoryview or a subclass); (position, type) of the first wrong ones: {wrong[:3]}"
        )
        return answer

    def check_block(self, block: object, what: str) -> Block:
        """``block`` satisfies the ``Block`` protocol with fields of the right types."""
        assert isinstance(block, Block), (
            f"{what} returned {type(block).__name__}, which is not a Block (id, parent_id, "
            "height, timestamp, __bytes__, verify, accept, reject)"
        )
        assert type(block.id) is bytes and len(block.id) == 32, (
            f"{what}: a block's id is 32 bytes, got {block.id!r}"
        )
        assert type(block.parent_id) is bytes and len(block.parent_id) == 32, (
            f"{what}: a block's parent_id is 32 bytes, got {block.parent_id!r}"
        )
        assert isinstance(block.height, int) and isinstance(block.timestamp, int), (
            f"{what}: height and timestamp are ints, got {block.height!r}, {block.timestamp!r}"
        )
        assert type(bytes(block)) is bytes, f"{what}: bytes(block) must be bytes"
        return block

    def check_ancestors(
        self,
        stack: KitStack,
        chain: Sequence[bytes],
        index: int,
        *,
        num: int,
        size: int,
        seconds: float,
        call: Callable[[], object],
        what: str,
    ) -> list[bytes]:
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
            f"{len(allowed)} blocks)"
        )
        if len(answer) < len(allowed):
            assert finished >= started + seconds, (
                f"{what} stopped after {len(answer)} of the {len(allowed)} blocks that count "
                f"and size allow, but only {finished - started:.6f} s of its "
                f"{seconds} s time budget had passed (the budget was cut or rescaled)"
            )
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
                "it was ignored, rescaled or restarted)"
            )
        if not self.has_memory:
            model = timed_expected(chain, index, num, size, seconds, stack.inner.fetch_cost)
            assert answer == model, (
                f"{what} must answer what a walk reading each block below answers: "
                f"{len(model)} blocks, got {len(answer)}"
            )
        return answer

    def assert_forwarded_once(self, stack: KitStack, call: Call) -> None:
        """The batched ``call`` reached the VM below as one call and no per-block call."""
        per_block = [
            made for made in stack.inner.calls if made.method in ("get_block", "parse_block")
        ]
        assert not per_block, (
            f"a batched call through the layer made {len(per_block)} per-block call(s) to "
            f"the VM below (first: {per_block[0].method}); it must reach it as one call"
        )
        forwarded = stack.inner.calls_to(call.method)
        if self.counts_calls and not self.answers_itself:
            assert forwarded == [call], (
                f"expected exactly one {call.method} call below, with the caller's "
                f"arguments {call.args!r}; the VM below saw {forwarded!r}"
            )
        else:
            assert len(forwarded) <= 1, (
                f"{len(forwarded)} {call.method} calls below for one call: at most one"
            )

    def assert_decisions(self, stack: KitStack, expected: list[tuple[str, Block]]) -> None:
        """The VM below saw exactly these decisions, in order, each once: on the same block
        IDs, or (blocks of its own) on blocks of the same heights."""
        seen = [made for made in stack.inner.calls if made.method.startswith("block.")]
        if not self.own_blocks:
            assert seen == [
                Call(f"block.{decision}", (block.id,)) for decision, block in expected
            ], (
                "each verify/accept/reject on a block the layer returned must reach the "
                f"block below once, in order: expected {_decisions(expected)}, the blocks "
                f"below saw {[(made.method, made.args[0].hex()[:8]) for made in seen]}"
            )
            return
        heights = []
        for made in seen:
            below = stack.inner.known_block(made.args[0])
            heights.append((made.method, None if below is None else below.height))
        assert heights == [(f"block.{decision}", block.height) for decision, block in expected], (
            "each verify/accept/reject on a block the layer returned must reach the block "
            f"below (of the same height) once, in order: expected "
            f"{[(f'block.{d}', b.height) for d, b in expected]}, the blocks below saw {heights}"
        )

    def expect_refusal_or_answer(
        self, stack: KitStack, call: Callable[[], object], what: str
    ) -> object | None:
        """Make a batched ``call``: if the layer must batch now, return its answer; if it
        must refuse, check that it raises ``BatchingNotImplemented`` and return ``None``."""
        if self.layer_batches(stack):
            try:
                return call()
            except BatchingNotImplemented as refusal:
                raise AssertionError(
                    f"{what} raised BatchingNotImplemented ({refusal}) though "
                    + (
                        "the layer declares it answers batched calls itself"
                        if self.answers_itself
                        else "the VM below the layer batches"
                    )
                ) from None
        try:
            answer = call()
        except BatchingNotImplemented:
            return None
        raise AssertionError(
            f"{what} answered ({_shown(answer)}) though the VM below the layer cannot batch: "
            "a layer refuses then with BatchingNotImplemented, or declares "
            f"{Declaration.ANSWERS_BATCHED_CALLS_ITSELF.value!r} if it answers batched calls "
            "itself"
        )


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
