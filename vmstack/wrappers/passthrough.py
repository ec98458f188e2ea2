"""PassThroughVM: the base of a pass-through layer (tracing, metering, a user's counter).

A pass-through layer adds something around each call (a span, a timing, a count) and
changes no answer. :class:`PassThroughVM` writes that skeleton once:

- it takes ``inner`` first and an optional ``name`` keyword-only, and exposes ``inner``,
  ``name`` and ``batching`` (whether the VM below batches now);
- it forwards every ``ChainVM`` method as one call below, and both batched methods as ONE
  call below when the VM below has them; the capability travels with that call (a VM that
  cannot batch now raises :class:`~vmstack.errors.BatchingNotImplemented` at once, and it
  passes up unchanged). Over a VM without the batched methods (or a pass-through layer
  over one) they raise it at once themselves, calling nothing below and intercepting
  nothing, so the engine falls back to one call per block (rule 8);
- every block it returns, batched results included, is a :attr:`PassThroughVM.block_type`
  (a :class:`PassThroughBlock`) wrapping the block below, whose ``verify/accept/reject``
  go through the layer too;
- errors pass up unchanged, the very object.

A subclass overrides ONE hook, :meth:`PassThroughVM.intercept`, which every call goes
through: ``intercept(method, forward, *args)`` must call ``forward(*args)`` once and return
its result (or let its exception pass). ``method`` names the call: ``"get_block"``,
``"parse_block"``, ``"build_block"``, ``"set_preference"``, ``"last_accepted"``,
``"get_block_id_at_height"``, ``"get_ancestors"``, ``"batched_parse_block"``, and
``"block.verify"`` / ``"block.accept"`` / ``"block.reject"`` for a block's decisions (their
one argument is the block below). A layer that answers calls from memory of its own, or
changes an answer, is not a pass-through layer and writes its methods out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import methodcaller
from typing import Any, ClassVar, TypeVar

from vmstack.capability import has_batched_methods, supports_batching
from vmstack.interfaces import BatchedChainVM, Block, ChainVM
from vmstack.layers import WrappedBlock, refusal

__all__ = ["METHODS", "PassThroughBlock", "PassThroughVM"]

ResultT = TypeVar("ResultT")

#: Every call a pass-through layer intercepts, by the name its hook receives.
METHODS: tuple[str, ...] = (
    "get_block",
    "parse_block",
    "build_block",
    "set_preference",
    "last_accepted",
    "get_block_id_at_height",
    "get_ancestors",
    "batched_parse_block",
    "block.verify",
    "block.accept",
    "block.reject",
)

_VERIFY = methodcaller("verify")
_ACCEPT = methodcaller("accept")
_REJECT = methodcaller("reject")


class PassThroughBlock(WrappedBlock):
    """A pass-through layer's block: its fields are the inner block's, and
    ``verify/accept/reject`` reach the inner block through the layer's hook."""

    __slots__ = ("_layer",)

    def __init__(self, inner: Block, layer: PassThroughVM) -> None:
        super().__init__(inner)
        self._layer = layer

    def verify(self) -> None:
        self._layer.intercept("block.verify", _VERIFY, self._inner)

    def accept(self) -> None:
        self._layer.intercept("block.accept", _ACCEPT, self._inner)

    def reject(self) -> None:
        self._layer.intercept("block.reject", _REJECT, self._inner)


class PassThroughVM:
    """Forwards every call of ``inner`` through :meth:`intercept` and wraps every block
    it returns in :attr:`block_type`. Subclass it and override :meth:`intercept`."""

    __slots__ = ("_batched", "_inner", "_name")

    #: The class of the blocks this layer returns: ``block_type(inner_block, layer)``.
    block_type: ClassVar[type[PassThroughBlock]] = PassThroughBlock

    def __init__(self, inner: ChainVM, *, name: str | None = None) -> None:
        self._inner = inner
        self._name = name
        #: The VM below as a batched VM, or None when it can never batch: it lacks the
        #: methods, or is a pass-through layer over one that does (so a pile of them over a
        #: VM without the methods refuses at its top, recording nothing).
        self._batched = (
            inner
            if has_batched_methods(inner)
            and not (isinstance(inner, PassThroughVM) and inner._batched is None)
            else None
        )

    def intercept(self, method: str, forward: Callable[..., ResultT], *args: Any) -> ResultT:
        """The one hook: make the call ``method`` below by ``forward(*args)``, exactly once,
        and return its result unchanged (or let its exception pass unchanged). The default
        adds nothing."""
        return forward(*args)

    @property
    def inner(self) -> ChainVM:
        """The VM below this layer."""
        return self._inner

    @property
    def name(self) -> str | None:
        """The layer's name in a stack description (``None`` for an unnamed layer)."""
        return self._name

    @property
    def batching(self) -> bool:
        """Whether the layer answers batched calls now: whether the VM below does (a
        description, asked down the stack; the calls themselves ask nothing)."""
        return self._batched is not None and supports_batching(self._batched)

    # --- ChainVM -------------------------------------------------------------------------

    def get_block(self, block_id: bytes) -> PassThroughBlock:
        return self.block_type(self.intercept("get_block", self._inner.get_block, block_id), self)

    def parse_block(self, data: bytes) -> PassThroughBlock:
        return self.block_type(self.intercept("parse_block", self._inner.parse_block, data), self)

    def build_block(self) -> PassThroughBlock:
        return self.block_type(self.intercept("build_block", self._inner.build_block), self)

    def set_preference(self, block_id: bytes) -> None:
        self.intercept("set_preference", self._inner.set_preference, block_id)

    def last_accepted(self) -> bytes:
        return self.intercept("last_accepted", self._inner.last_accepted)

    def get_block_id_at_height(self, height: int) -> bytes:
        return self.intercept("get_block_id_at_height", self._inner.get_block_id_at_height, height)

    # --- BatchedChainVM ------------------------------------------------------------------

    def get_ancestors(
        self, block_id: bytes, max_blocks_num: int, max_blocks_size: int, max_retrieval_time: float
    ) -> list[bytes]:
        return self.intercept(
            "get_ancestors",
            self.batched_inner().get_ancestors,
            block_id,
            max_blocks_num,
            max_blocks_size,
            max_retrieval_time,
        )

    def batched_parse_block(self, blocks: Sequence[bytes]) -> list[PassThroughBlock]:
        parsed = self.intercept(
            "batched_parse_block", self.batched_inner().batched_parse_block, blocks
        )
        block_type = self.block_type
        return [block_type(block, self) for block in parsed]

    def batched_inner(self) -> BatchedChainVM:
        """The VM below, to forward a batched call to; raises
        :class:`~vmstack.errors.BatchingNotImplemented` at once when it has no batched
        methods (one that has them and cannot batch now raises it itself)."""
        batched = self._batched
        if batched is None:
            kind = type(self).__name__
            raise refusal(kind if self._name is None else f"{kind}({self._name})", self._inner)
        return batched

    def __repr__(self) -> str:
        shown = "" if self._name is None else f", name={self._name!r}"
        return f"{type(self).__name__}({self._inner!r}{shown})"
