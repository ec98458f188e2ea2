"""The engine's polls (avalanchego's ``snow/consensus/snowman/poll``): the early-termination
poll and the set of outstanding polls.

An :class:`EarlyTermPoll` collects the chits of the ``k`` validators sampled for one query
(with multiplicity: a validator sampled twice answers with two votes) and finishes as soon
as the missing answers can no longer change what the block tree would do with it: when
``alpha_preference`` is out of reach, or when for every voted block, every processing
ancestor it shares with others and every shared bit prefix of competing siblings, the
transitive votes already meet ``alpha_confidence`` or can no longer reach the next
threshold. A :class:`PollSet` hands finished polls back oldest first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from vmstack.consensus.snowball import bit

__all__ = ["EarlyTermPoll", "ParentOf", "PollSet"]

#: A block's parent ID, or None when the block is unknown or has no parent to vote on
#: (decided). The all-zero ID is a block like any other.
ParentOf = Callable[[bytes], "bytes | None"]


def _no_parent(block_id: bytes) -> bytes | None:
    return None


class _Vertex:
    __slots__ = ("block_id", "children", "parent")

    def __init__(self, block_id: bytes) -> None:
        self.block_id = block_id
        self.parent: _Vertex | None = None
        self.children: list[_Vertex] = []


def _vote_graph(parent_of: ParentOf, votes: Iterable[bytes]) -> list[_Vertex]:
    """The voted blocks and their ancestors (as far as ``parent_of`` knows them), linked;
    every vertex, in the order they were found."""
    vertices: dict[bytes, _Vertex] = {}
    for block_id in votes:
        current: bytes | None = block_id
        while current is not None and current not in vertices:
            vertices[current] = _Vertex(current)
            current = parent_of(current)
    for block_id, vertex in vertices.items():
        parent_id = parent_of(block_id)
        parent = None if parent_id is None else vertices.get(parent_id)
        if parent is not None:
            vertex.parent = parent
            parent.children.append(vertex)
    return list(vertices.values())


def _transitive_votes(vertices: list[_Vertex], votes: Mapping[bytes, int]) -> dict[bytes, int]:
    """Each vertex's votes plus those of all its descendants (leaves to roots)."""
    totals = {vertex.block_id: votes.get(vertex.block_id, 0) for vertex in vertices}
    pending = {vertex.block_id: len(vertex.children) for vertex in vertices}
    level = [vertex for vertex in vertices if not vertex.children]
    while level:
        next_level: list[_Vertex] = []
        for vertex in level:
            parent = vertex.parent
            if parent is None:
                continue
            totals[parent.block_id] += totals[vertex.block_id]
            pending[parent.block_id] -= 1
            if pending[parent.block_id] == 0:
                next_level.append(parent)
        level = next_level
    return totals


def _shared_prefix_groups(choices: list[bytes]) -> list[list[bytes]]:
    """The groups of ``choices`` that share a non-empty bit prefix and split right after
    it: the unary snowflake instances a bit tree over them would hold before a split."""
    unique = list(dict.fromkeys(choices))
    groups: list[list[bytes]] = []
    pending: list[tuple[int, list[bytes]]] = [(0, unique)]
    while pending:
        index, members = pending.pop()
        if len(members) < 2:
            continue
        while True:
            zeros = [member for member in members if bit(member, index) == 0]
            ones = [member for member in members if bit(member, index) == 1]
            if zeros and ones:
                break
            index += 1
        if index > 0:
            groups.append(members)
        pending.append((index + 1, ones))
        pending.append((index + 1, zeros))
    return groups


class EarlyTermPoll:
    """One poll of the validators in ``polled`` (node ID → times sampled).

    ``parent_of`` walks from a voted block to its processing ancestors (the block tree's
    :meth:`~vmstack.consensus.Topological.parent_of`), so shared ancestors count every
    vote below them.
    """

    __slots__ = (
        "_finished",
        "_polled",
        "_votes",
        "alpha_confidence",
        "alpha_preference",
        "parent_of",
    )

    def __init__(
        self,
        alpha_preference: int,
        alpha_confidence: int,
        polled: Mapping[bytes, int],
        parent_of: ParentOf = _no_parent,
    ) -> None:
        self.alpha_preference = alpha_preference
        self.alpha_confidence = alpha_confidence
        self.parent_of = parent_of
        self._polled = {node: count for node, count in polled.items() if count > 0}
        self._votes: dict[bytes, int] = {}
        self._finished = False

    def vote(self, node: bytes, block_id: bytes) -> None:
        """``node``'s chit for ``block_id``, counted as many times as the node was sampled;
        a second answer of one node, or one from a node not polled, counts nothing."""
        count = self._polled.pop(node, 0)
        if count > 0:
            self._votes[block_id] = self._votes.get(block_id, 0) + count

    def drop(self, node: bytes) -> None:
        """``node`` will not answer (it failed, or timed out)."""
        self._polled.pop(node, None)

    def remaining(self) -> int:
        """Votes still outstanding."""
        return sum(self._polled.values())

    def finished(self) -> bool:
        """Whether the poll is over: every answer in, ``alpha_preference`` out of reach,
        or no outstanding vote can change any instance the votes reach (once True, stays
        True)."""
        if self._finished:
            return True
        remaining = self.remaining()
        if remaining == 0:
            self._finished = True
            return True
        if sum(self._votes.values()) + remaining < self.alpha_preference:
            self._finished = True
            return True
        vertices = _vote_graph(self.parent_of, self._votes)
        transitive = _transitive_votes(vertices, self._votes)
        counts = list(transitive.values())
        for vertex in vertices:
            children = [child.block_id for child in vertex.children]
            for group in _shared_prefix_groups(children):
                counts.append(sum(transitive[member] for member in group))
        if counts and all(self._settled(count, remaining) for count in counts):
            self._finished = True
        return self._finished

    def _settled(self, count: int, remaining: int) -> bool:
        most = count + remaining
        return (
            most < self.alpha_preference
            or (count >= self.alpha_preference and most < self.alpha_confidence)
            or count >= self.alpha_confidence
        )

    def result(self) -> dict[bytes, int]:
        """The votes received: block ID → count."""
        return dict(self._votes)


class PollSet:
    """The outstanding polls by request ID. A poll's result is handed back once it and
    every older poll have finished, oldest first."""

    def __init__(
        self, alpha_preference: int, alpha_confidence: int, parent_of: ParentOf = _no_parent
    ) -> None:
        self.alpha_preference = alpha_preference
        self.alpha_confidence = alpha_confidence
        self.parent_of = parent_of
        self._polls: dict[int, EarlyTermPoll] = {}

    def add(self, request_id: int, polled: Mapping[bytes, int]) -> bool:
        """Start a poll of ``polled``; False (and nothing changes) when ``request_id`` is
        already outstanding."""
        if request_id in self._polls:
            return False
        self._polls[request_id] = EarlyTermPoll(
            self.alpha_preference, self.alpha_confidence, polled, self.parent_of
        )
        return True

    def vote(self, request_id: int, node: bytes, block_id: bytes) -> list[dict[bytes, int]]:
        """Record ``node``'s chit; the results of the polls this finishes, oldest first
        (empty for an unknown request)."""
        poll = self._polls.get(request_id)
        if poll is None:
            return []
        poll.vote(node, block_id)
        return self._finished_results() if poll.finished() else []

    def drop(self, request_id: int, node: bytes) -> list[dict[bytes, int]]:
        """``node`` will not answer ``request_id``; as :meth:`vote`."""
        poll = self._polls.get(request_id)
        if poll is None:
            return []
        poll.drop(node)
        return self._finished_results() if poll.finished() else []

    def _finished_results(self) -> list[dict[bytes, int]]:
        results: list[dict[bytes, int]] = []
        for request_id, poll in list(self._polls.items()):
            if not poll.finished():
                break
            results.append(poll.result())
            del self._polls[request_id]
        return results

    def __len__(self) -> int:
        return len(self._polls)

    def __contains__(self, request_id: object) -> bool:
        return request_id in self._polls
