"""avalanchego's snowball test network (``snow/consensus/snowball/network_test.go``), over
the project's MT19937 and uniform sampler: nodes, each a bit tree (or a byzantine node that
never changes its mind), polled one random running node per round."""

from __future__ import annotations

from tests.consensus.vectors import prefixed
from vmstack.consensus import Parameters
from vmstack.consensus.snowball import Factory, Tree
from vmstack.wrappers.proposer.windower import MersenneTwister, UniformReplacer


class Byzantine:
    """A node that always prefers its first color and counts as finalized."""

    def __init__(self, choice: bytes) -> None:
        self._choice = choice

    def add(self, choice: bytes) -> None:
        """Ignored."""

    def record_poll(self, votes: dict[bytes, int]) -> bool:
        return False

    def preference(self) -> bytes:
        return self._choice

    def finalized(self) -> bool:
        return True


class Network:
    """``colors`` choices (``Prefix(i)``), nodes added in order, one poll per round."""

    def __init__(self, factory: Factory, params: Parameters, colors: int, seed: int) -> None:
        self.factory = factory
        self.params = params
        self.colors = [prefixed(index) for index in range(colors)]
        self.source = MersenneTwister(seed)
        self.nodes: list[Tree | Byzantine] = []
        self.running: list[Tree | Byzantine] = []
        self.rounds = 0

    def add_node(self, preference: int, options: list[int], *, byzantine: bool = False) -> None:
        node: Tree | Byzantine
        if byzantine:
            node = Byzantine(self.colors[preference])
        else:
            node = Tree(self.factory, self.params, self.colors[preference])
        for option in options:
            node.add(self.colors[option])
        self.nodes.append(node)
        if not node.finalized():
            self.running.append(node)

    def finalized(self) -> bool:
        return not self.running

    def round(self) -> None:
        if not self.running:
            return
        self.rounds += 1
        picker = UniformReplacer(self.source.uint64, len(self.running))
        index = picker.next()
        assert index is not None
        running = self.running[index]
        sampler = UniformReplacer(self.source.uint64, len(self.nodes))
        votes: dict[bytes, int] = {}
        for _ in range(min(self.params.k, len(self.nodes))):
            peer = sampler.next()
            assert peer is not None
            choice = self.nodes[peer].preference()
            votes[choice] = votes.get(choice, 0) + 1
        running.record_poll(votes)
        if running.finalized():
            self.running[index] = self.running[-1]
            self.running.pop()
