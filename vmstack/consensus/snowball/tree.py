"""The bit tree (avalanchego's ``snowball.Tree``): one decision among 32-byte choices, made
bit by bit as a patricia tree of unary and binary snowball instances.

A unary node votes on a run of bits its choices share (``Bits = [decided, common)``); a
binary node on the one bit where they split. Bit ``i`` of an ID is
``(id[i // 8] >> (i % 8)) & 1``, so which choice wins a close race depends on the IDs' bits,
exactly as upstream. ``str(tree)`` is upstream's ``Tree.String()`` byte for byte.
"""

from __future__ import annotations

from collections.abc import Mapping

from vmstack.consensus.parameters import Parameters
from vmstack.consensus.snowball.instances import (
    BinarySnowflake,
    Factory,
    UnarySnowflake,
)

__all__ = ["NUM_BITS", "Tree", "bit", "equal_subset", "first_difference_subset"]

#: Bits in an ID.
NUM_BITS = 256


def bit(choice: bytes, index: int) -> int:
    """Bit ``index`` of ``choice``: ``(choice[index // 8] >> (index % 8)) & 1``."""
    return (choice[index >> 3] >> (index & 7)) & 1


def _as_int(choice: bytes) -> int:
    """The ID as a number whose bit ``i`` is the ID's bit ``i``."""
    return int.from_bytes(choice, "little")


def equal_subset(start: int, stop: int, first: bytes, second: bytes) -> bool:
    """Whether the two IDs agree on bits ``[start, stop)`` (upstream's ``ids.EqualSubset``:
    an empty range agrees, a range past the last bit does not)."""
    last = stop - 1
    if start > last or last < 0:
        return True
    if last >= NUM_BITS:
        return False
    mask = ((1 << (last + 1 - start)) - 1) << start
    return (_as_int(first) ^ _as_int(second)) & mask == 0


def first_difference_subset(start: int, stop: int, first: bytes, second: bytes) -> int | None:
    """The first bit in ``[start, stop)`` where the IDs differ, or None (upstream's
    ``ids.FirstDifferenceSubset``)."""
    last = stop - 1
    if start > last or last < 0 or last >= NUM_BITS:
        return None
    differ = ((_as_int(first) ^ _as_int(second)) >> start) & ((1 << (last + 1 - start)) - 1)
    if differ == 0:
        return None
    return start + (differ & -differ).bit_length() - 1


class _Node:
    """A node of the tree: a unary run of bits or a binary split."""

    __slots__ = ()

    def preference(self) -> bytes:
        raise NotImplementedError

    def decided_prefix(self) -> int:
        raise NotImplementedError

    def add(self, choice: bytes) -> _Node:
        raise NotImplementedError

    def record_poll(
        self, votes: Mapping[bytes, int], count: int, reset: bool
    ) -> tuple[_Node, bool]:
        """Apply ``votes`` (``count`` in all), resetting first when ``reset``; the node
        that takes this one's place and whether the poll reached ``alpha_preference``."""
        raise NotImplementedError

    def finalized(self) -> bool:
        raise NotImplementedError

    def printable(self) -> tuple[str, list[_Node]]:
        raise NotImplementedError


class _UnaryNode(_Node):
    """Consecutive unary instances over bits ``[decided, common)`` shared by every choice
    below, with at most one child (the binary split after them)."""

    __slots__ = ("child", "common", "decided", "preferred", "should_reset", "snow", "tree")

    def __init__(
        self,
        tree: Tree,
        preferred: bytes,
        decided: int,
        common: int,
        snow: UnarySnowflake,
        child: _Node | None = None,
    ) -> None:
        self.tree = tree
        self.preferred = preferred
        self.decided = decided
        self.common = common
        self.snow = snow
        self.should_reset = False
        self.child = child

    def preference(self) -> bytes:
        return self.preferred

    def decided_prefix(self) -> int:
        return self.decided

    def add(self, choice: bytes) -> _Node:
        if self.snow.finalized():
            return self
        index = first_difference_subset(self.decided, self.common, self.preferred, choice)
        if index is None:
            if self.child is not None:
                self.child = self.child.add(choice)
            return self
        # The run splits at ``index``: a binary node decides that bit.
        kept = bit(self.preferred, index)
        split = _BinaryNode(self.tree, index, self.snow.extend(kept))
        split.should_reset = [self.should_reset, self.should_reset]
        split.preferences[kept] = self.preferred
        split.preferences[1 - kept] = choice
        fresh = _UnaryNode(
            self.tree,
            choice,
            index + 1,
            NUM_BITS,
            self.tree.factory.new_unary(self.tree.params),
        )
        if self.decided == self.common - 1:
            # This node voted on one bit only: the split replaces it.
            split.children[kept] = self.child
            if self.child is not None:
                split.children[1 - kept] = fresh
            return split
        if index == self.decided:
            # The split is on the first bit: this node goes on below it.
            self.decided += 1
            split.children[kept] = self
            split.children[1 - kept] = fresh
            return split
        if index == self.common - 1:
            # The split is on the last bit: this node keeps the bits before it.
            self.common -= 1
            split.children[kept] = self.child
            if self.child is not None:
                split.children[1 - kept] = fresh
            self.child = split
            return self
        # The split is on an inner bit: a new node keeps the bits before it, this node
        # the bits after it.
        first_decided = self.decided
        self.decided = index + 1
        split.children[kept] = self
        split.children[1 - kept] = fresh
        return _UnaryNode(self.tree, self.preferred, first_decided, index, self.snow.clone(), split)

    def record_poll(
        self, votes: Mapping[bytes, int], count: int, reset: bool
    ) -> tuple[_Node, bool]:
        if reset:
            self.snow.record_unsuccessful_poll()
            self.should_reset = True
        if count < self.tree.params.alpha_preference:
            self.snow.record_unsuccessful_poll()
            self.should_reset = True
            return self, False
        self.snow.record_poll(count)
        if self.child is not None:
            new_child, _ = self.child.record_poll(votes, count, self.should_reset)
            if self.snow.finalized():
                return new_child, True
            self.preferred = self.child.preference()
        self.should_reset = False
        return self, True

    def finalized(self) -> bool:
        return self.snow.finalized()

    def printable(self) -> tuple[str, list[_Node]]:
        text = f"{self.snow} Bits = [{self.decided}, {self.common})"
        return text, ([] if self.child is None else [self.child])


class _BinaryNode(_Node):
    """One binary instance on bit ``index``, with no children or two."""

    __slots__ = ("children", "index", "preferences", "should_reset", "snow", "tree")

    def __init__(self, tree: Tree, index: int, snow: BinarySnowflake) -> None:
        self.tree = tree
        self.index = index
        self.snow = snow
        self.preferences: list[bytes] = [b"", b""]
        self.should_reset = [False, False]
        self.children: list[_Node | None] = [None, None]

    def preference(self) -> bytes:
        return self.preferences[self.snow.preference()]

    def decided_prefix(self) -> int:
        return self.index

    def add(self, choice: bytes) -> _Node:
        side = bit(choice, self.index)
        child = self.children[side]
        if child is not None:
            self.children[side] = child.add(choice)
        return self

    def record_poll(
        self, votes: Mapping[bytes, int], count: int, reset: bool
    ) -> tuple[_Node, bool]:
        byte, shift = self.index >> 3, self.index & 7
        zeros: dict[bytes, int] = {}
        ones: dict[bytes, int] = {}
        ones_total = 0
        for choice, votes_for in votes.items():
            if (choice[byte] >> shift) & 1:
                ones[choice] = votes_for
                ones_total += votes_for
            else:
                zeros[choice] = votes_for
        split = (zeros, ones)
        totals = (count - ones_total, ones_total)
        alpha = self.tree.params.alpha_preference
        side = 1 if ones_total >= alpha else 0
        if reset:
            self.snow.record_unsuccessful_poll()
            self.should_reset[side] = True
        self.should_reset[1 - side] = True
        pruned = split[side]
        count = totals[side]
        if count < alpha:
            self.snow.record_unsuccessful_poll()
            self.should_reset[side] = True
            return self, False
        self.snow.record_poll(count, side)
        child = self.children[side]
        if child is not None:
            new_child, _ = child.record_poll(pruned, count, self.should_reset[side])
            if self.snow.finalized():
                return new_child, True
            self.preferences[side] = new_child.preference()
        self.should_reset[side] = False
        return self, True

    def finalized(self) -> bool:
        return self.snow.finalized()

    def printable(self) -> tuple[str, list[_Node]]:
        text = f"{self.snow} Bit = {self.index}"
        first, second = self.children
        if first is None or second is None:
            return text, []
        return text, [second, first]


class Tree:
    """A decision among 32-byte choices, starting with ``choice`` (the preference until a
    poll says otherwise). ``factory`` makes its instances: :data:`SNOWFLAKE` (Snowman's) or
    :data:`SNOWBALL`; only ``k``, the alphas and ``beta`` of ``params`` are read."""

    __slots__ = ("factory", "params", "root", "should_reset")

    def __init__(self, factory: Factory, params: Parameters, choice: bytes) -> None:
        self.factory = factory
        self.params = params
        self.should_reset = False
        self.root: _Node = _UnaryNode(self, bytes(choice), 0, NUM_BITS, factory.new_unary(params))

    def add(self, choice: bytes) -> None:
        """A new choice; ignored when an earlier decision already ruled it out (or it is
        there already)."""
        decided = self.root.decided_prefix()
        if equal_subset(0, decided, self.root.preference(), choice):
            self.root = self.root.add(bytes(choice))

    def record_poll(self, votes: Mapping[bytes, int]) -> bool:
        """Apply one poll (choice → votes); True when it reached ``alpha_preference`` on the
        first undecided instance. Votes for choices already ruled out are dropped."""
        decided = self.root.decided_prefix()
        preferred = self.root.preference()
        if decided:
            votes = {
                choice: count
                for choice, count in votes.items()
                if equal_subset(0, decided, preferred, choice)
            }
        total = 0
        for count in votes.values():
            total += count
        self.root, successful = self.root.record_poll(votes, total, self.should_reset)
        self.should_reset = False
        return successful

    def record_unsuccessful_poll(self) -> None:
        """A poll that failed above this tree: the next poll first resets every counter it
        passes through."""
        self.should_reset = True

    def preference(self) -> bytes:
        """The preferred choice."""
        return self.root.preference()

    def finalized(self) -> bool:
        """Whether the decision is final."""
        return self.root.finalized()

    def __str__(self) -> str:
        lines: list[str] = []
        stack: list[tuple[str, _Node]] = [("", self.root)]
        while stack:
            prefix, node = stack.pop()
            text, below = node.printable()
            lines.append(prefix + text)
            stack.extend((prefix + "    ", child) for child in below)
        return "\n".join(lines)
