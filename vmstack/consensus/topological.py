"""The Snowman block tree (avalanchego's ``snow/consensus/snowman/topological.go``).

Every processing block hangs under its parent; a parent with children holds a bit
:class:`~vmstack.consensus.snowball.Tree` deciding among them. A poll's votes are pushed to
every ancestor of the voted blocks in one topological pass (Kahn's order, leaves first);
each ancestor with at least ``alpha_preference`` votes records the poll on its tree, the
branches that got fewer falter (their confidence resets before their next vote), and when
the tree at the last accepted block finalizes its preferred child is accepted and the other
children are rejected with all their descendants. Each block gets exactly one of
``accept()`` / ``reject()``; rejections run in a fixed order (children in the order they
were added, depth first), the set being upstream's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from vmstack.consensus.parameters import Parameters
from vmstack.consensus.snowball import SNOWFLAKE, Factory, Tree
from vmstack.errors import DuplicateBlock, UnknownParentBlock

__all__ = ["ConsensusBlock", "Topological"]


class ConsensusBlock(Protocol):
    """What the block tree reads of a block: the stack's blocks qualify."""

    @property
    def id(self) -> bytes: ...

    @property
    def parent_id(self) -> bytes: ...

    @property
    def height(self) -> int: ...

    def accept(self) -> None: ...

    def reject(self) -> None: ...


class _Node:
    """A block of the tree (``block`` None for the last accepted block given at start)."""

    __slots__ = ("block", "children", "should_falter", "tree")

    def __init__(self, block: ConsensusBlock | None) -> None:
        self.block = block
        self.should_falter = False
        self.tree: Tree | None = None
        self.children: dict[bytes, ConsensusBlock] = {}


class _Kahn:
    """A block's place in one poll's topological pass: children not yet pushed, and the
    votes for its children so far."""

    __slots__ = ("in_degree", "votes")

    def __init__(self) -> None:
        self.in_degree = 0
        self.votes: dict[bytes, int] = {}


class Topological:
    """The block tree of one node. Call :meth:`initialize` with the last accepted block
    first. ``params`` are used as given (call ``params.verify()`` to check them);
    ``factory`` makes the snowball instances, :data:`~vmstack.consensus.snowball.SNOWFLAKE`
    as in Snowman.

    ``polls_successful`` and ``polls_failed`` count polls as upstream's metrics do: a poll
    that reached ``alpha_preference`` on some tree is successful; one that did not is failed
    (a poll with nothing processing counts as neither).
    """

    def __init__(self, params: Parameters, factory: Factory = SNOWFLAKE) -> None:
        self.params = params
        self.factory = factory
        self.polls_successful = 0
        self.polls_failed = 0
        self._poll_number = 0
        self._last_accepted_id = b""
        self._last_accepted_height = 0
        self._blocks: dict[bytes, _Node] = {}
        self._preferred_ids: set[bytes] = set()
        self._preferred_heights: dict[int, bytes] = {}
        self._preference = b""

    def initialize(self, last_accepted_id: bytes, last_accepted_height: int) -> None:
        """Start from ``last_accepted_id`` at ``last_accepted_height``: the preference,
        with nothing processing."""
        self._last_accepted_id = bytes(last_accepted_id)
        self._last_accepted_height = last_accepted_height
        self._blocks = {self._last_accepted_id: _Node(None)}
        self._preferred_ids = set()
        self._preferred_heights = {}
        self._preference = self._last_accepted_id

    # --- reading ------------------------------------------------------------------------

    def num_processing(self) -> int:
        """Blocks added and not yet decided."""
        return len(self._blocks) - 1

    def processing(self, block_id: bytes) -> bool:
        """Whether ``block_id`` was added and is not decided yet."""
        return block_id != self._last_accepted_id and block_id in self._blocks

    def is_preferred(self, block_id: bytes) -> bool:
        """Whether ``block_id`` is the last accepted block or on the preferred chain."""
        return block_id == self._last_accepted_id or block_id in self._preferred_ids

    def last_accepted(self) -> tuple[bytes, int]:
        """The last accepted block's ID and height."""
        return self._last_accepted_id, self._last_accepted_height

    def preference(self) -> bytes:
        """The tip of the preferred chain (the last accepted block when nothing
        processes)."""
        return self._preference

    def preference_height(self) -> int:
        """The height of :meth:`preference`."""
        node = self._blocks[self._preference]
        return self._last_accepted_height if node.block is None else node.block.height

    def preference_at_height(self, height: int) -> bytes | None:
        """The preferred block at ``height``: the last accepted block at its height, a
        preferred processing block above it, else None."""
        if height == self._last_accepted_height:
            return self._last_accepted_id
        return self._preferred_heights.get(height)

    def decided(self, block: ConsensusBlock) -> bool:
        """Whether ``block``'s height is at or below the last accepted height (it was
        accepted or lost: this tree will never decide it)."""
        return block.height <= self._last_accepted_height

    def parent_of(self, block_id: bytes) -> bytes | None:
        """The parent of a block the tree holds (the last accepted block included, whose
        parent is unknown here): what the early-termination poll walks."""
        node = self._blocks.get(block_id)
        if node is None or node.block is None:
            return None
        return node.block.parent_id

    def _is_decided(self, node: _Node) -> bool:
        block = node.block
        return block is None or block.height <= self._last_accepted_height

    # --- adding -------------------------------------------------------------------------

    def add(self, block: ConsensusBlock) -> None:
        """Add a verified block whose parent is processing or the last accepted block;
        it becomes the preference when it extends the preference. Raises
        :class:`~vmstack.errors.DuplicateBlock` for a block already processing and
        :class:`~vmstack.errors.UnknownParentBlock` for a parent the tree does not hold."""
        block_id = bytes(block.id)
        if self.processing(block_id):
            raise DuplicateBlock(f"block {block_id.hex()} is already processing")
        parent_id = bytes(block.parent_id)
        parent = self._blocks.get(parent_id)
        if parent is None:
            raise UnknownParentBlock(
                f"block {block_id.hex()} names parent {parent_id.hex()}, which is neither "
                "processing nor the last accepted block"
            )
        if parent.tree is None:
            parent.tree = Tree(self.factory, self.params, block_id)
        else:
            parent.tree.add(block_id)
        parent.children[block_id] = block
        self._blocks[block_id] = _Node(block)
        if self._preference == parent_id:
            self._preference = block_id
            self._preferred_ids.add(block_id)
            self._preferred_heights[block.height] = block_id

    # --- polling ------------------------------------------------------------------------

    def record_poll(self, votes: Mapping[bytes, int]) -> None:
        """Apply one poll's result: ``votes`` maps block IDs to vote counts (a bag).
        Votes for blocks the tree does not hold, or for decided blocks, are dropped. May
        accept and reject blocks; an exception from a block's ``accept`` or ``reject``
        propagates unchanged."""
        self._poll_number += 1
        vote_stack: list[tuple[bytes, dict[bytes, int]]] = []
        if sum(votes.values()) >= self.params.alpha_preference:
            kahn, leaves = self._calculate_in_degree(votes)
            vote_stack = self._push_votes(kahn, leaves)
        preferred = self._vote(vote_stack)
        if preferred in self._preferred_ids:
            return
        self._preferred_ids.clear()
        self._preferred_heights.clear()
        self._preference = preferred
        start = self._blocks[preferred]
        node = start
        while not self._is_decided(node):
            assert node.block is not None
            self._preferred_ids.add(node.block.id)
            self._preferred_heights[node.block.height] = node.block.id
            node = self._blocks[node.block.parent_id]
        node = start
        while node.tree is not None:
            self._preference = node.tree.preference()
            self._preferred_ids.add(self._preference)
            node = self._blocks[self._preference]
            assert node.block is not None
            self._preferred_heights[node.block.height] = self._preference

    def _calculate_in_degree(
        self, votes: Mapping[bytes, int]
    ) -> tuple[dict[bytes, _Kahn], dict[bytes, None]]:
        """Each voted block's votes on its parent's entry, the in-degrees of their
        ancestors, and the entries no child points to (the leaves, in insertion order)."""
        kahn: dict[bytes, _Kahn] = {}
        leaves: dict[bytes, None] = {}
        blocks, last_height = self._blocks, self._last_accepted_height
        for voted_id, count in votes.items():
            if count <= 0:
                continue
            voted = blocks.get(voted_id)
            voted_block = None if voted is None else voted.block
            if voted_block is None or voted_block.height <= last_height:
                continue
            parent_id = voted_block.parent_id
            entry = kahn.get(parent_id)
            seen = entry is not None
            if entry is None:
                entry = kahn[parent_id] = _Kahn()
            entry.votes[voted_id] = entry.votes.get(voted_id, 0) + count
            if seen:
                continue
            leaves[parent_id] = None
            block = blocks[parent_id].block
            while block is not None and block.height > last_height:
                parent_id = block.parent_id
                entry = kahn.get(parent_id)
                seen = entry is not None
                if entry is None:
                    entry = kahn[parent_id] = _Kahn()
                entry.in_degree += 1
                if seen:
                    leaves.pop(parent_id, None)
                    break
                block = blocks[parent_id].block
        return kahn, leaves

    def _push_votes(
        self, kahn: dict[bytes, _Kahn], leaves: dict[bytes, None]
    ) -> list[tuple[bytes, dict[bytes, int]]]:
        """The blocks whose trees record this poll (at least ``alpha_preference`` votes
        for their children, each vote pushed up to every ancestor), descendants first."""
        alpha = self.params.alpha_preference
        blocks, last_height = self._blocks, self._last_accepted_height
        stack: list[tuple[bytes, dict[bytes, int]]] = []
        while leaves:
            leaf_id, _ = leaves.popitem()
            entry = kahn[leaf_id]
            total = sum(entry.votes.values())
            if total >= alpha:
                stack.append((leaf_id, entry.votes))
            block = blocks[leaf_id].block
            if block is None or block.height <= last_height:
                continue
            parent_id = block.parent_id
            parent = kahn[parent_id]
            parent.in_degree -= 1
            parent.votes[leaf_id] = parent.votes.get(leaf_id, 0) + total
            if parent.in_degree == 0:
                leaves[parent_id] = None
        return stack

    def _vote(self, stack: list[tuple[bytes, dict[bytes, int]]]) -> bytes:
        """Record the poll on the trees of ``stack`` from the root down, accept and reject
        where the last accepted block's tree finalizes, mark the branches that must falter;
        return the next preferred block below the last one voted for."""
        if not stack:
            self._blocks[self._last_accepted_id].should_falter = True
            if self.num_processing() > 0:
                self.polls_failed += 1
            return self._preference
        new_preferred = self._last_accepted_id
        on_preferred_branch = True
        successful = False
        while stack:
            parent_id, votes = stack.pop()
            parent = self._blocks.get(parent_id)
            if parent is None:
                break
            tree = parent.tree
            assert tree is not None
            transitively_falter = parent.should_falter
            if transitively_falter:
                tree.record_unsuccessful_poll()
                parent.should_falter = False
            successful = tree.record_poll(votes) or successful
            if tree.finalized() and parent_id == self._last_accepted_id:
                self._accept_preferred_child(parent)
                del self._blocks[parent_id]
            parent_preference = tree.preference()
            if on_preferred_branch:
                new_preferred = parent_preference
            next_id = stack[-1][0] if stack else b""
            on_preferred_branch = on_preferred_branch and next_id == parent_preference
            for child_id in parent.children:
                if not transitively_falter and child_id == next_id:
                    continue
                child = self._blocks.get(child_id)
                if child is not None:
                    child.should_falter = True
        if successful:
            self.polls_successful += 1
        else:
            self.polls_failed += 1
        return new_preferred

    def _accept_preferred_child(self, parent: _Node) -> None:
        """Accept the child ``parent``'s tree finalized on; reject its siblings and, after
        them, their descendants."""
        assert parent.tree is not None
        preferred_id = parent.tree.preference()
        child = parent.children[preferred_id]
        child.accept()
        self._last_accepted_id = preferred_id
        self._last_accepted_height = child.height
        self._preferred_ids.discard(preferred_id)
        self._preferred_heights.pop(child.height, None)
        rejected: list[bytes] = []
        for sibling_id, sibling in parent.children.items():
            if sibling_id == preferred_id:
                continue
            sibling.reject()
            rejected.append(sibling_id)
        self._reject_transitively(rejected)

    def _reject_transitively(self, rejected: list[bytes]) -> None:
        """Remove the rejected blocks and reject every descendant of them."""
        while rejected:
            rejected_id = rejected.pop()
            node = self._blocks.pop(rejected_id)
            for child_id, child in node.children.items():
                child.reject()
                rejected.append(child_id)
