"""The vmstack error tree: its classes. The tree is drawn once, in ARCHITECTURE.md, section
4 (a test keeps the drawing equal to these classes).

One shallow tree, so a caller can catch everything the stack raises on purpose with one
``except VMStackError`` and still tell the cases apart; a class that is also a built-in
kind of error (``ValueError``, ``RuntimeError``, ``TypeError``) can be caught as that too.

Wrappers pass errors through unchanged: a layer never re-wraps an error of the layer
below, so the engine sees the very object the bottom raised. A store's ``KeyError``
becomes :class:`BlockNotFound` at the store boundary only.
"""

from __future__ import annotations

__all__ = [
    "AnyoneCanPropose",
    "BatchingNotImplemented",
    "BlockNotFound",
    "ConfigMismatch",
    "ConsensusError",
    "DuplicateBlock",
    "InvalidBlock",
    "InvalidCertificate",
    "InvalidOption",
    "InvalidSignature",
    "InvalidTransaction",
    "KitDeclarationError",
    "MalformedRequest",
    "NodeCrashed",
    "ParametersInvalid",
    "ProposerWindowNotStarted",
    "StoreClosed",
    "StoreCorrupted",
    "StoreError",
    "UnknownParentBlock",
    "VMStackError",
    "VMUnavailable",
]


class VMStackError(Exception):
    """Root of every error vmstack raises on purpose."""


class BlockNotFound(VMStackError):
    """The requested block is not served: unknown, rejected, or missing from the store."""


class InvalidBlock(VMStackError, ValueError):
    """Bytes or a block that break a rule.

    ``reason`` says what was wrong; ``index`` names the element of a batch that failed
    (``None`` outside a batch).
    """

    def __init__(self, reason: str, *, index: int | None = None) -> None:
        self.reason = reason
        self.index = index
        message = reason if index is None else f"block {index} of the batch: {reason}"
        super().__init__(message)

    def at_index(self, index: int) -> InvalidBlock:
        """Return the same failure attributed to element ``index`` of a batch."""
        located = InvalidBlock(self.reason, index=index)
        located.__cause__ = self
        return located


class InvalidTransaction(VMStackError, ValueError):
    """A transaction submitted to a mempool that no block could carry now (missing or bad
    signature, another chain, gas below intrinsic, a nonce below the sender's, a balance too
    low, a duplicate of one already pending); ``reason`` says which."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class BatchingNotImplemented(VMStackError):
    """The VM (or a layer below it) does not offer the optional batched protocol.

    The engine helpers in :mod:`vmstack.batching` catch exactly this error and fall back
    to one ``get_block`` / ``parse_block`` per block. Layers never swallow or re-wrap it.
    """


class StoreCorrupted(VMStackError):
    """A stored value failed its check; it is never returned as data."""


class StoreError(VMStackError, RuntimeError):
    """The store cannot do what was asked: it is read-only, full beyond repair, or failed I/O."""


class StoreClosed(StoreError):
    """The store (or the snapshot or batch used) is closed."""


class ConfigMismatch(VMStackError, ValueError):
    """A store opened with a stack configuration other than the one it was written with.

    ``field`` names the first option that differs; ``stored`` and ``given`` are its values.
    """

    def __init__(self, field: str, stored: object, given: object) -> None:
        self.field = field
        self.stored = stored
        self.given = given
        super().__init__(
            f"the store was written with {field}={stored!r}, opened with "
            f"{field}={given!r}; open it with the same configuration or use "
            "another store"
        )


class InvalidOption(VMStackError, ValueError):
    """A stack option given a value it does not take, or an option there is not
    (``vmstack.options`` holds them); ``option`` names it, and so does ``reason``, the
    message."""

    def __init__(self, option: str, reason: str) -> None:
        self.option = option
        self.reason = reason
        super().__init__(reason)


class VMUnavailable(VMStackError):
    """A VM served in another process did not answer: the process is gone, the connection
    broke, or the caller's deadline passed. Raised by :class:`vmstack.wrappers.rpc.VMClient`
    within its timeout, never as a transport library's own exception."""


class InvalidCertificate(VMStackError, ValueError):
    """A staking certificate that avalanchego would not parse; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class InvalidSignature(VMStackError, ValueError):
    """A signature that does not verify against the certificate's public key."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class MalformedRequest(VMStackError, ValueError):
    """A request across the process boundary that cannot be read: not a message of its type,
    or with unknown fields."""


class NodeCrashed(VMStackError):
    """A node's process died or stopped answering; it takes no further part in the run."""

    def __init__(self, node: int, reason: str) -> None:
        self.node = node
        self.reason = reason
        super().__init__(f"node {node} crashed: {reason}")


class AnyoneCanPropose(VMStackError):
    """The validator set at the P-chain height asked is empty: no proposer is expected, any
    node may propose, and its block is unsigned (avalanchego's ``ErrAnyoneCanPropose``)."""


class ProposerWindowNotStarted(VMStackError):
    """``build_block`` before this node's proposer window: ``build_time`` (seconds, on the
    layer's clock) is the earliest time it may build on the same parent, ``reason`` says
    whose turn it is."""

    def __init__(self, reason: str, *, build_time: float) -> None:
        self.reason = reason
        self.build_time = build_time
        super().__init__(reason)


class KitDeclarationError(VMStackError, TypeError):
    """A conformance test class declares something the kit does not know (or no longer
    knows)."""


class ConsensusError(VMStackError):
    """The consensus library refuses an operation on its block tree (``vmstack.consensus``)."""


class UnknownParentBlock(ConsensusError):
    """A block added to the block tree whose parent is neither processing nor the last
    accepted block (avalanchego's ``errUnknownParentBlock``)."""


class DuplicateBlock(ConsensusError):
    """A block added to the block tree while it is already processing there (avalanchego's
    ``errDuplicateAdd``)."""


class ParametersInvalid(VMStackError, ValueError):
    """Consensus parameters that break one or more of avalanchego's rules
    (``snowball.Parameters.Verify``); ``reasons`` holds one line per broken rule, in the
    order upstream checks them."""

    def __init__(self, reasons: list[str]) -> None:
        self.reasons = list(reasons)
        super().__init__("parameters invalid: " + "; ".join(reasons))
