"""Who validates a simulated network, with what stake: :class:`StakeSchedule`.

Every node of a network run has a staking key derived from the run's seed
(:func:`node_staking_seed`) and a weight drawn from the seed (:func:`draw_weights`):

- ``equal``: every node stakes :data:`MIN_STAKE`;
- ``skewed``: a Pareto draw, ``MIN_STAKE * X`` with ``X`` Pareto-distributed of shape
  :data:`PARETO_SHAPE` (1.16, the "80/20" shape: about a fifth of the nodes hold four
  fifths of the stake), rounded down and capped at :data:`MAX_STAKE`.

Weights are whole AVAX, between avalanchego's mainnet minimum and maximum validator stake.
The validator set changes once, by P-chain height: at :data:`HISTORY_PCHAIN_HEIGHT` the
node that built the chain the run starts from (node 0) validates alone, so the blocks it
built are its slots' blocks; at :data:`LIVE_PCHAIN_HEIGHT`, which the chain's last block
before the run names, every node validates with its weight. From then on the proposer
windows (:class:`~vmstack.wrappers.proposer.windower.Windower`, the one every node's
proposer layer enforces) pick who builds each block and when.
"""

from __future__ import annotations

import hashlib
import random
import threading
from collections.abc import Callable, Sequence

import attrs

from vmstack.wrappers.proposer import StakingKey
from vmstack.wrappers.proposer.envelope import chain_id_bytes
from vmstack.wrappers.proposer.windower import Windower

__all__ = [
    "HISTORY_PCHAIN_HEIGHT",
    "LIVE_PCHAIN_HEIGHT",
    "MAX_STAKE",
    "MIN_STAKE",
    "PARETO_SHAPE",
    "STAKE_KINDS",
    "StakeSchedule",
    "draw_weights",
    "node_staking_seed",
]

#: How a run's weights may be drawn.
STAKE_KINDS = ("equal", "skewed")
#: The smallest weight (avalanchego's mainnet minimum validator stake, in AVAX).
MIN_STAKE = 2_000
#: The largest weight (avalanchego's mainnet maximum validator stake, in AVAX).
MAX_STAKE = 3_000_000
#: The shape of the ``skewed`` Pareto draw.
PARETO_SHAPE = 1.16
#: The P-chain height of the chain the run starts from: node 0 validates alone.
HISTORY_PCHAIN_HEIGHT = 0
#: The P-chain height from the run's start on: every node validates with its weight.
LIVE_PCHAIN_HEIGHT = 1


def node_staking_seed(seed: int, index: int) -> bytes:
    """The seed of node ``index``'s staking key in a run of ``seed``."""
    return f"vmstack simulate {seed} node {index}".encode()


def draw_weights(kind: str, nodes: int, seed: int) -> list[int]:
    """The weight of each of ``nodes`` nodes, drawn as ``kind`` says (one of
    :data:`STAKE_KINDS`) from a generator of its own seeded with ``seed``, so the weights
    never shift the run's other draws."""
    if kind == "equal":
        return [MIN_STAKE] * nodes
    if kind == "skewed":
        rng = random.Random(f"vmstack simulate {seed} stake")
        return [
            min(MAX_STAKE, int(MIN_STAKE * rng.paretovariate(PARETO_SHAPE))) for _ in range(nodes)
        ]
    raise ValueError(f"stake is one of {STAKE_KINDS}, not {kind!r}")


@attrs.frozen(eq=False)
class StakeSchedule:
    """The validators of a network run: ``node_ids[i]`` and ``weights[i]`` are node ``i``'s;
    node 0 alone validates at :data:`HISTORY_PCHAIN_HEIGHT`, every node from
    :data:`LIVE_PCHAIN_HEIGHT` on; ``durango_time`` is when the post-Durango windows
    begin; a node of weight 0 validates nothing. ``key`` names the schedule's content (a
    digest), so that every node of one process shares one :class:`Windower`.

    A schedule :meth:`draw` made pickles as how it was drawn, ``recipe`` (nodes, stake
    kind, seed), and is drawn again, once per process, where it is unpickled: a node's spec
    sent to another process carries a few bytes, not every node's NodeID."""

    node_ids: tuple[bytes, ...]
    weights: tuple[int, ...]
    durango_time: float
    key: str
    recipe: tuple[int, str, int] | None = None

    @classmethod
    def draw(cls, *, nodes: int, kind: str, seed: int, durango_time: float) -> StakeSchedule:
        """The schedule of a run of ``nodes`` nodes: each node's key from
        :func:`node_staking_seed`, its weight from :func:`draw_weights`."""
        node_ids = [
            StakingKey.generate(seed=node_staking_seed(seed, index)).node_id
            for index in range(nodes)
        ]
        drawn = cls.of(node_ids, draw_weights(kind, nodes, seed), durango_time=durango_time)
        return attrs.evolve(drawn, recipe=(nodes, kind, seed))

    def __reduce__(self) -> tuple[Callable[..., StakeSchedule], tuple[object, ...]]:
        if self.recipe is not None:
            return _drawn_schedule, (*self.recipe, self.durango_time)
        return StakeSchedule, (self.node_ids, self.weights, self.durango_time, self.key)

    @classmethod
    def of(
        cls, node_ids: Sequence[bytes], weights: Sequence[int], *, durango_time: float
    ) -> StakeSchedule:
        """The schedule of these NodeIDs and weights; a weight of 0 is a node that does
        not validate (it follows the chain but is in no validator set). ``ValueError`` if
        they differ in number, repeat a NodeID, hold a negative weight or no weight at
        all, or node 0 (which built the chain's history) does not validate."""
        if len(node_ids) != len(weights) or not node_ids:
            raise ValueError("a stake schedule needs one weight per node, and a node")
        if len(set(node_ids)) != len(node_ids):
            raise ValueError("two nodes of a stake schedule have one NodeID")
        if any(weight < 0 for weight in weights) or weights[0] < 1:
            raise ValueError(
                "the weights of a stake schedule are not negative, and node 0's is at least 1"
            )
        digest = hashlib.sha256(repr(durango_time).encode())
        for node_id, weight in zip(node_ids, weights, strict=True):
            digest.update(bytes(node_id) + weight.to_bytes(8, "big"))
        return cls(
            tuple(bytes(node_id) for node_id in node_ids),
            tuple(weights),
            float(durango_time),
            digest.hexdigest(),
        )

    def with_weights(self, weights: Sequence[int]) -> StakeSchedule:
        """This schedule's nodes with other ``weights``."""
        return StakeSchedule.of(self.node_ids, weights, durango_time=self.durango_time)

    @property
    def total_weight(self) -> int:
        return sum(self.weights)

    def share(self, node: int) -> float:
        """Node ``node``'s share of the whole stake."""
        return self.weights[node] / self.total_weight

    def validators(self, pchain_height: int) -> dict[bytes, int]:
        """The validator set (NodeID -> weight) at ``pchain_height``."""
        if pchain_height == HISTORY_PCHAIN_HEIGHT:
            return {self.node_ids[0]: self.weights[0]}
        return {
            node_id: weight
            for node_id, weight in zip(self.node_ids, self.weights, strict=True)
            if weight
        }

    def node_of(self, node_id: bytes) -> int:
        """The index of the node whose NodeID is ``node_id`` (``KeyError`` if none)."""
        with _SHARED_LOCK:
            index = _shared(
                ("index", self.key),
                lambda: {node_id: index for index, node_id in enumerate(self.node_ids)},
            )
        assert isinstance(index, dict)
        return index[node_id]

    def windower(self, chain_id: bytes | int) -> Windower:
        """The windower over this schedule for ``chain_id``: one per process, shared by
        every node and the coordinator in it."""
        with _SHARED_LOCK:
            found = _shared(
                ("windower", self.key, chain_id_bytes(chain_id)),
                lambda: Windower(self.validators, chain_id),
            )
        assert isinstance(found, Windower)
        return found


def _drawn_schedule(nodes: int, kind: str, seed: int, durango_time: float) -> StakeSchedule:
    """:meth:`StakeSchedule.draw` of these, drawn once per process (how a drawn schedule
    is unpickled)."""
    with _SHARED_LOCK:
        found = _shared(
            ("drawn", nodes, kind, seed, durango_time),
            lambda: StakeSchedule.draw(
                nodes=nodes, kind=kind, seed=seed, durango_time=durango_time
            ),
        )
    assert isinstance(found, StakeSchedule)
    return found


_Shared = Windower | dict[bytes, int] | StakeSchedule
#: How many schedules' windowers, indexes and draws a process keeps (the newest).
_SHARED_KEPT = 8
_SHARED: dict[tuple[object, ...], _Shared] = {}
_SHARED_LOCK = threading.Lock()


def _shared(key: tuple[object, ...], make: Callable[[], _Shared]) -> _Shared:
    """The value kept under ``key``, made and kept (the oldest dropped past
    :data:`_SHARED_KEPT` entries) if there is none yet; the caller holds the lock."""
    found = _SHARED.pop(key, None)
    if found is None:
        found = make()
    _SHARED[key] = found
    while len(_SHARED) > 3 * _SHARED_KEPT:
        del _SHARED[next(iter(_SHARED))]
    return found
