"""Store doubles the reliability suites share: the replay of queued write ops onto a
batch, and a memory store that pauses at the commit of chosen batches."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from vmstack.store import BufferedWriteBatch, MemoryStore, WriteBatch
from vmstack.store.base import KeyWriter, WriteOp

__all__ = ["PausingStore", "replay"]


def replay(ops: Iterable[WriteOp], batch: KeyWriter) -> None:
    """Write queued ``ops`` to ``batch`` in order: a value is a put, ``None`` a delete."""
    for key, value in ops:
        if value is None:
            batch.delete(key)
        else:
            batch.put(key, value)


class PausingStore(MemoryStore):
    """A memory store that calls ``pause`` at the commit of a batch whose ops ``matches``:
    just before the commit, or (``after=True``) right after it. A window into the middle
    of an accept; ``pause`` is ``None`` (no pause) until a test sets it."""

    def __init__(
        self, matches: Callable[[Sequence[WriteOp]], bool], *, after: bool = False
    ) -> None:
        super().__init__()
        self.matches = matches
        self.after = after
        self.pause: Callable[[], None] | None = None

    def write_batch(self) -> WriteBatch:
        inner = super().write_batch()

        def commit(ops: Sequence[WriteOp]) -> None:
            if not self.after and self.pause is not None and self.matches(ops):
                self.pause()
            with inner as batch:
                replay(ops, batch)
            if self.after and self.pause is not None and self.matches(ops):
                self.pause()

        return BufferedWriteBatch(commit)
