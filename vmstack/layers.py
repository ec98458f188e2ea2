"""The layer author's toolkit: everything a layer of the stack is built from, in one place.

It sits on the ground floor beside ``interfaces.py`` (ARCHITECTURE.md, section 1), below
every layer: the transition layer and the wrappers alike.

- :class:`Layer`: a VM that wraps another exposes it as ``inner`` and says with
  ``batching`` whether it answers batched calls now; :func:`vmstack.describe_stack`
  follows ``inner`` down a stack.
- Whether a VM batches (ARCHITECTURE.md, section 5): one sentinel carries it, one walk
  describes it. The capability travels with the call, as avalanchego's
  ``ErrRemoteVMNotImplemented`` does: a layer whose VM below has the batched methods
  forwards a batched call as one call, and a VM that cannot batch now raises
  :class:`~vmstack.errors.BatchingNotImplemented` at once, which passes up unchanged to the
  engine helper, which falls back. Whether the VM below HAS the methods is fixed when a
  layer is built (:func:`has_batched_methods`); a layer over one without them refuses at
  once itself (:func:`refusal`), calling nothing below. Nothing is subscribed to and
  nothing is cached, so a change below (a transition layer gains the capability at its
  transition) is followed at the next call. :func:`supports_batching` is the description,
  not a gate: it asks a stack from its top what it can do now, for
  :func:`vmstack.describe_stack` and a layer's ``batching``.
- A layer's blocks wrap the inner block (:class:`WrappedBlock`), so that
  ``verify/accept/reject`` pass through the layer on their way down.
- :class:`PassThroughVM` (with :class:`PassThroughBlock` and :data:`METHODS`), the base of
  a pass-through layer (tracing, metering, a user's counter).

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

:func:`fact_holders` gives, for blocks of layers that only forward their facts, the block
below that holds them, so a reader of many blocks' facts (the process boundary's server)
reads each without a forwarding call per layer.

``vmstack.wrappers`` serves :class:`PassThroughVM`, :class:`PassThroughBlock` and
:class:`WrappedBlock` too, and ``vmstack`` serves :class:`Layer` and
:func:`supports_batching`.
"""

from __future__ import annotations

import abc
import functools
import itertools
from collections.abc import Callable, Sequence
from operator import attrgetter, methodcaller
from typing import Any, ClassVar, Protocol, TypeGuard, TypeVar, runtime_checkable

from vmstack.errors import BatchingNotImplemented
from vmstack.interfaces import BatchedChainVM, Block, ChainVM, iter_layers

__all__ = [
    "Layer",
    "METHODS",
    "PassThroughBlock",
    "PassThroughVM",
    "WrappedBlock",
    "fact_holders",
    "has_batched_methods",
    "refusal",
    "supports_batching",
]


# --- what a layer is ---------------------------------------------------------------------


@runtime_checkable
class Layer(Protocol):
    """A VM that wraps another: ``inner`` is the VM directly below it.

    :func:`vmstack.describe_stack` follows ``inner`` from the top of a stack to the bottom.
    ``batching`` says whether the layer answers batched calls rather than refusing them.
    """

    @property
    def inner(self) -> ChainVM: ...

    @property
    def batching(self) -> bool: ...


# --- whether a VM batches ----------------------------------------------------------------


def has_batched_methods(vm: object) -> TypeGuard[BatchedChainVM]:
    """Whether ``vm`` has both :class:`~vmstack.interfaces.BatchedChainVM` methods.

    The answer ``isinstance(vm, BatchedChainVM)`` gives, instance by instance, without its
    cost: a runtime-checkable protocol check takes tens of microseconds in CPython 3.11.
    """
    return callable(getattr(vm, "get_ancestors", None)) and callable(
        getattr(vm, "batched_parse_block", None)
    )


def supports_batching(vm: object) -> bool:
    """Whether ``vm`` answers batched calls now rather than refusing them.

    A VM without the :class:`~vmstack.interfaces.BatchedChainVM` methods cannot batch. A VM
    with them says so with a ``batching`` attribute when it has one (a pass-through layer
    over a VM that cannot batch has ``batching = False``); a layer without one (it has an
    ``inner``) batches when the VM below it does; a VM at the bottom with the methods
    batches.
    """
    for layer in iter_layers(vm):
        if not has_batched_methods(layer):
            return False
        declared = getattr(layer, "batching", None)
        if declared is not None:
            return bool(declared)
    return True


# --- what every layer shares: the refusal and the wrapped block ----------------------------


def refusal(layer: str, inner: ChainVM) -> BatchingNotImplemented:
    """The error a layer raises for a batched call when the VM below cannot batch."""
    return BatchingNotImplemented(
        f"{layer} cannot batch: the VM below it ({type(inner).__name__}) does not"
    )


class WrappedBlock(abc.ABC):
    """A layer's block: forwards ``id``, ``parent_id``, ``height``, ``timestamp`` and the
    bytes to the block it wraps, which :attr:`inner` exposes.

    Subclasses write out ``verify``, ``accept`` and ``reject``, each reaching the inner
    block's method exactly once.
    """

    __slots__ = ("_inner",)

    def __init__(self, inner: Block) -> None:
        self._inner = inner

    @property
    def inner(self) -> Block:
        """The block of the layer below."""
        return self._inner

    @property
    def id(self) -> bytes:
        return self._inner.id

    @property
    def parent_id(self) -> bytes:
        return self._inner.parent_id

    @property
    def height(self) -> int:
        return self._inner.height

    @property
    def timestamp(self) -> int:
        return self._inner.timestamp

    def __bytes__(self) -> bytes:
        return bytes(self._inner)

    @abc.abstractmethod
    def verify(self) -> None:
        """Verify the inner block (raising what it raises)."""

    @abc.abstractmethod
    def accept(self) -> None:
        """Accept the inner block (raising what it raises)."""

    @abc.abstractmethod
    def reject(self) -> None:
        """Reject the inner block (raising what it raises)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._inner!r})"


#: What a block answers that :class:`WrappedBlock` forwards to the block it wraps.
_FACTS = ("id", "parent_id", "height", "timestamp", "__bytes__")
_INNER = attrgetter("_inner")


@functools.cache
def _forwards_facts(kind: type) -> bool:
    """Whether blocks of ``kind`` are each a :class:`WrappedBlock` answering every fact (and
    their bytes) with :class:`WrappedBlock`'s own forwarding, none overridden."""
    return issubclass(kind, WrappedBlock) and all(
        getattr(kind, name) is getattr(WrappedBlock, name) for name in _FACTS
    )


def fact_holders(blocks: Sequence[Block]) -> list[Block]:
    """The block holding each of ``blocks``' facts: a block of a layer that forwards its
    ``id``, ``parent_id``, ``height``, ``timestamp`` and bytes unchanged (a
    :class:`WrappedBlock` overriding none of them) is replaced by the block it wraps, as
    deep as such layers go; any other block is itself. Each holder answers the very facts
    and bytes its block does, read with no layer in between (a layer's forwarding costs a
    call per fact); its decisions are not its block's, so only facts are read from it.
    Blocks of one kind are unwrapped a layer at a time, with no Python code run per block.
    """
    holders = list(blocks)
    while True:
        forwarding = [_forwards_facts(kind) for kind in set(map(type, holders))]
        if not any(forwarding):
            return holders
        if all(forwarding):
            holders = list(map(_INNER, holders))
        else:
            holders = [
                block._inner if _forwards_facts(type(block)) else block  # type: ignore[attr-defined]
                for block in holders
            ]


# --- the pass-through layer --------------------------------------------------------------

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
        # WrappedBlock's own __init__ written out: a batch makes one of these per block.
        self._inner = inner
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
        return list(map(self.block_type, parsed, itertools.repeat(self)))

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
