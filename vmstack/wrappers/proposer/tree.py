"""The verified, undecided inner blocks of a proposer layer, and how their decisions spread.

As avalanchego's ``utils/tree``. The engine decides every block it verified exactly once,
and the proposer layer owes the inner VM the same: each inner block it verified gets
exactly one ``accept`` or ``reject``. A post-fork block's ``reject`` cannot be that
decision, because several post-fork blocks may wrap one inner block (two proposers, or
one built again after its first envelope lost): the inner block may still be accepted
through another of them. So the tree keeps every inner block the layer verified, by
parent, until a decision reaches it the only way one can:

- :meth:`InnerTree.accept` accepts an inner block, then rejects its siblings (the other
  processing children of its parent) and, transitively, their descendants in the tree;
- :meth:`InnerTree.reject_children` rejects the inner blocks whose parent was rejected
  (a pre-fork block, which the engine decides directly), transitively;
- nothing else rejects an inner block of a post-fork block.

One accept rejects depth first, each block before its descendants and siblings in
ascending ID order (upstream walks a map; the set is the same). An error raised by an
inner block's ``accept`` or ``reject`` propagates unchanged.
"""

from __future__ import annotations

from vmstack.interfaces import Block

__all__ = ["InnerTree"]


class InnerTree:
    """Inner blocks verified through the layer and not yet decided, by parent ID."""

    __slots__ = ("_children", "_parents")

    def __init__(self) -> None:
        self._children: dict[bytes, dict[bytes, Block]] = {}
        self._parents: dict[bytes, bytes] = {}

    def __len__(self) -> int:
        return len(self._parents)

    def __contains__(self, block_id: object) -> bool:
        return block_id in self._parents

    def add(self, block: Block) -> None:
        """Keep the verified inner ``block`` (once per ID: a second add keeps the first)."""
        children = self._children.setdefault(block.parent_id, {})
        if block.id not in children:
            children[block.id] = block
            self._parents[block.id] = block.parent_id

    def get(self, block: Block) -> Block | None:
        """The block kept with ``block``'s parent and ID (the object verified first), or
        ``None`` if there is none."""
        return self._children.get(block.parent_id, {}).get(block.id)

    def accept(self, block: Block) -> list[Block]:
        """Accept ``block``, then reject its siblings and their descendants in the tree
        (:meth:`reject_conflicts`); return the rejected blocks in the order they were
        rejected."""
        block.accept()
        return self.reject_conflicts(block)

    def reject_conflicts(self, block: Block) -> list[Block]:
        """Forget the accepted ``block`` and reject its siblings and their descendants in
        the tree; return them in the order they were rejected. ``block`` need not be in
        the tree (the inner block of the first post-fork block may have pre-fork
        siblings, which the engine decides itself)."""
        siblings = self._children.get(block.parent_id, {})
        siblings.pop(block.id, None)
        self._parents.pop(block.id, None)
        return self.reject_children(block.parent_id)

    def reject_children(self, parent_id: bytes) -> list[Block]:
        """Reject the children of ``parent_id`` in the tree and their descendants (a block
        that can no longer be accepted: a sibling of an accepted one, or a child of a
        rejected pre-fork block); return them in the order they were rejected."""
        children = self._children.pop(parent_id, {})
        pending = [children[key] for key in sorted(children, reverse=True)]
        rejected: list[Block] = []
        while pending:
            loser = pending.pop()
            self._parents.pop(loser.id, None)
            loser.reject()
            rejected.append(loser)
            below = self._children.pop(loser.id, {})
            pending.extend(below[key] for key in sorted(below, reverse=True))
        return rejected
