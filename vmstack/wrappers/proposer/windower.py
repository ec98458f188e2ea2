"""Snowman++ proposer selection, bit-exact with avalanchego's ``vms/proposervm/proposer``.

For each block height the windower draws, by stake, who may propose and when:

- before Durango, :meth:`Windower.proposers` lists up to ``max_windows`` NodeIDs drawn
  without replacement over *weight units* (a validator of weight 3 is three units, so it
  may appear up to three times); the ``i``-th entry may propose from ``i`` windows of
  :data:`WINDOW_DURATION` after its parent (:meth:`Windower.delay`). The draw is seeded
  with ``chain_source ^ height`` on the 32-bit Mersenne Twister (:class:`MersenneTwister`);
- from Durango on, every slot of :data:`WINDOW_DURATION` after the parent has one
  expected proposer (:meth:`Windower.expected_proposer`), drawn from a 64-bit Mersenne
  Twister (:class:`MersenneTwister64`) seeded with
  ``chain_source ^ height ^ reverse_bits64(slot)``, and
  :meth:`Windower.min_delay_for_proposer` finds a node's first slot from a start slot on,
  looking at most :data:`MAX_LOOK_AHEAD_SLOTS` ahead.

``chain_source`` is the first 8 bytes of the 32-byte chain ID read big-endian. The
validator set is sorted by NodeID bytes; the empty NodeID (20 zero bytes, an inactive
validator) is dropped from it. The sampler is avalanchego's ``utils/sampler``: a uniform
replacer (a lazy Fisher-Yates shuffle of the weight units, kept in a swap map) draws a
weight unit with :func:`uint64_inclusive` and its rejection rules, and a weighted heap
(:class:`WeightedHeap`) maps the unit to its validator. Every piece is exact to the bit,
so a schedule computed here is the schedule avalanchego computes for the same set.

The twisters are lazy: an expected proposer needs one or two outputs, and the first
outputs of a freshly seeded twister depend only on the first ``M + 2`` words of its seeded
state (``M`` = 156 for the 64-bit generator), so only those are computed; the whole state
is built and twisted the standard way as soon as an output needs it. A :class:`Windower`
keeps the sorted set and its heap per P-chain height (a set at a P-chain height never
changes), so a call costs one seeding and a heap walk.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import ClassVar

from vmstack.errors import AnyoneCanPropose
from vmstack.wrappers.proposer.certificate import NODE_ID_LEN
from vmstack.wrappers.proposer.envelope import chain_id_bytes

__all__ = [
    "EMPTY_NODE_ID",
    "MAX_BUILD_DELAY",
    "MAX_BUILD_WINDOWS",
    "MAX_LOOK_AHEAD_SLOTS",
    "MAX_LOOK_AHEAD_WINDOW",
    "MAX_VERIFY_DELAY",
    "MAX_VERIFY_WINDOWS",
    "MersenneTwister",
    "MersenneTwister64",
    "UniformReplacer",
    "ValidatorSet",
    "ValidatorSource",
    "WINDOW_DURATION",
    "WeightedHeap",
    "WeightedWithoutReplacement",
    "Windower",
    "reverse_bits64",
    "time_to_slot",
    "uint64_inclusive",
]

#: Seconds of one proposer window (pre-Durango) or slot (post-Durango).
WINDOW_DURATION = 5.0
#: Windows a verifier checks before anyone may propose unsigned (pre-Durango).
MAX_VERIFY_WINDOWS = 6
#: ``MAX_VERIFY_WINDOWS`` windows in seconds (30 s).
MAX_VERIFY_DELAY = MAX_VERIFY_WINDOWS * WINDOW_DURATION
#: Windows a builder waits for its turn before building unsigned (pre-Durango).
MAX_BUILD_WINDOWS = 60
#: ``MAX_BUILD_WINDOWS`` windows in seconds (5 minutes).
MAX_BUILD_DELAY = MAX_BUILD_WINDOWS * WINDOW_DURATION
#: Slots :meth:`Windower.min_delay_for_proposer` looks ahead (post-Durango).
MAX_LOOK_AHEAD_SLOTS = 720
#: ``MAX_LOOK_AHEAD_SLOTS`` slots in seconds (one hour).
MAX_LOOK_AHEAD_WINDOW = MAX_LOOK_AHEAD_SLOTS * WINDOW_DURATION
#: The empty NodeID: an inactive validator in a set, "no proposer" for a node without a key.
EMPTY_NODE_ID = bytes(NODE_ID_LEN)

_U32 = (1 << 32) - 1
_U64 = (1 << 64) - 1
_INT64_MAX = (1 << 63) - 1

#: A validator set: NodeID (20 bytes) -> weight, or a function of the P-chain height
#: giving one.
ValidatorSource = Mapping[bytes, int] | Callable[[int], Mapping[bytes, int]]


def _u64(value: object, what: str) -> int:
    """``value`` if it is an int in [0, 2**64); ``ValueError`` naming ``what`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _U64:
        raise ValueError(f"{what} must be a u64, got {value!r}")
    return value


def reverse_bits64(value: int) -> int:
    """The 64 bits of ``value`` in reverse order (Go's ``bits.Reverse64``)."""
    return int(f"{value & _U64:064b}"[::-1], 2)


def time_to_slot(parent_time: float, block_time: float) -> int:
    """The post-Durango slot of a block at ``block_time`` over a parent at
    ``parent_time`` (seconds): whole :data:`WINDOW_DURATION` windows between them, 0 for a
    block before its parent."""
    if block_time < parent_time:
        return 0
    return int((block_time - parent_time) // WINDOW_DURATION)


# --- the Mersenne Twisters (gonum's mathext/prng) ----------------------------------------


class _Twister:
    """A Mersenne Twister with the reference seeding (``init_genrand``) whose first block of
    outputs is computed lazily; subclasses give the parameters and the tempering."""

    _N: ClassVar[int]
    _M: ClassVar[int]
    _MATRIX: ClassVar[int]
    _UPPER: ClassVar[int]
    _LOWER: ClassVar[int]
    _MASK: ClassVar[int]
    _MULTIPLIER: ClassVar[int]
    _SHIFT: ClassVar[int]

    __slots__ = ("_index", "_state", "_twisted")

    def __init__(self, seed: int = 5489) -> None:
        self._state: list[int] = []
        self._index = 0
        self._twisted = False
        self.seed(seed)

    def seed(self, seed: int) -> None:
        """Start over from ``seed`` (only its low word size of bits count), as the
        reference ``init_genrand``."""
        self._state = [_u64(seed, "a seed") & self._MASK]
        self._index = 0
        self._twisted = False

    def _seed_words(self, last: int) -> list[int]:
        """The seeded state up to index ``last`` at least."""
        state = self._state
        if len(state) <= last:
            multiplier, shift, mask = self._MULTIPLIER, self._SHIFT, self._MASK
            previous = state[-1]
            for index in range(len(state), last + 1):
                previous = (multiplier * (previous ^ (previous >> shift)) + index) & mask
                state.append(previous)
        return state

    def _twist(self) -> None:
        """The reference generation of the next ``N`` words, in place."""
        state = self._state
        n, m, upper, lower, matrix = self._N, self._M, self._UPPER, self._LOWER, self._MATRIX
        for index in range(n):
            y = (state[index] & upper) | (state[(index + 1) % n] & lower)
            state[index] = state[(index + m) % n] ^ (y >> 1) ^ (matrix if y & 1 else 0)

    def _next_word(self) -> int:
        """The next untempered word."""
        index = self._index
        if not self._twisted:
            n, m = self._N, self._M
            if index < n - m:
                # The index-th word of the first block reads only seeded words index,
                # index + 1 and index + M.
                state = self._seed_words(index + m)
                y = (state[index] & self._UPPER) | (state[index + 1] & self._LOWER)
                self._index = index + 1
                return state[index + m] ^ (y >> 1) ^ (self._MATRIX if y & 1 else 0)
            self._seed_words(n - 1)
            self._twist()
            self._twisted = True
        elif index >= self._N:
            self._twist()
            index = 0
        self._index = index + 1
        return self._state[index]


class MersenneTwister(_Twister):
    """The 32-bit MT19937 (gonum's ``prng.MT19937``): :meth:`uint32` is the reference
    ``genrand_int32``; :meth:`uint64` is two draws, the first in the high 32 bits."""

    _N, _M = 624, 397
    _MATRIX, _UPPER, _LOWER = 0x9908B0DF, 0x80000000, 0x7FFFFFFF
    _MASK, _MULTIPLIER, _SHIFT = _U32, 1812433253, 30

    __slots__ = ()

    def uint32(self) -> int:
        """The next 32-bit output."""
        y = self._next_word()
        y ^= y >> 11
        y ^= (y << 7) & 0x9D2C5680
        y ^= (y << 15) & 0xEFC60000
        return y ^ (y >> 18)

    def uint64(self) -> int:
        """Two outputs as one 64-bit number, the first in the high half."""
        high = self.uint32()
        return (high << 32) | self.uint32()


class MersenneTwister64(_Twister):
    """The 64-bit MT19937-64 (gonum's ``prng.MT19937_64``): :meth:`uint64` is the reference
    ``genrand64_int64``."""

    _N, _M = 312, 156
    _MATRIX, _UPPER, _LOWER = 0xB5026F5AA96619E9, 0xFFFFFFFF80000000, 0x7FFFFFFF
    _MASK, _MULTIPLIER, _SHIFT = _U64, 6364136223846793005, 62

    __slots__ = ()

    def uint64(self) -> int:
        """The next 64-bit output."""
        x = self._next_word()
        x ^= (x >> 29) & 0x5555555555555555
        x ^= (x << 17) & 0x71D67FFFEDA60000
        x ^= (x << 37) & 0xFFF7EEE000000000
        return (x ^ (x >> 43)) & _U64


# --- the sampler (avalanchego's utils/sampler) -------------------------------------------


def uint64_inclusive(draw: Callable[[], int], n: int) -> int:
    """A number in ``[0, n]`` from the 64-bit source ``draw``, by avalanchego's rules: a
    mask when ``n + 1`` is a power of two (``n = 2**64 - 1`` included); above
    ``2**63 - 1``, redraw until the draw is at most ``n``; otherwise redraw 63-bit values
    above the largest multiple of ``n + 1`` that fits, and take the remainder."""
    if n & ((n + 1) & _U64) == 0:
        return draw() & n
    if n > _INT64_MAX:
        value = draw()
        while value > n:
            value = draw()
        return value
    bound = n + 1
    maximum = _INT64_MAX - (1 << 63) % bound
    value = draw() & _INT64_MAX
    while value > maximum:
        value = draw() & _INT64_MAX
    return value % bound


class UniformReplacer:
    """Draws from ``[0, length)`` without replacement: the first draws of a Fisher-Yates
    shuffle done lazily, the swapped entries kept in a map (avalanchego's
    ``uniformReplacer``)."""

    __slots__ = ("_draw", "_drawn", "_draws", "_length")

    def __init__(self, draw: Callable[[], int], length: int) -> None:
        self._draw = draw
        self._length = length
        self._drawn: dict[int, int] = {}
        self._draws = 0

    def reset(self) -> None:
        """Forget the draws made: the whole range is available again."""
        self._drawn.clear()
        self._draws = 0

    def next(self) -> int | None:
        """The next value, or ``None`` once every value of the range is drawn."""
        draws = self._draws
        if draws >= self._length:
            return None
        drawn = self._drawn
        position = uint64_inclusive(self._draw, self._length - 1 - draws) + draws
        value = drawn.get(position, position)
        drawn[position] = drawn.get(draws, draws)
        self._draws = draws + 1
        return value


class WeightedHeap:
    """Maps a weight unit to the index of its weight (avalanchego's ``weightedHeap``).

    The weights are laid out as a binary heap, heaviest first (ties by index), each node
    holding its subtree's total weight, so the walk from the root is short where the weight
    is. ``ValueError`` if the total overflows a u64.
    """

    __slots__ = ("_cumulative", "_indices", "_weights", "total")

    def __init__(self, weights: Sequence[int]) -> None:
        order = sorted(range(len(weights)), key=lambda index: (-weights[index], index))
        self._indices = order
        self._weights = [weights[index] for index in order]
        cumulative = list(self._weights)
        for node in range(len(cumulative) - 1, 0, -1):
            parent = (node - 1) >> 1
            cumulative[parent] += cumulative[node]
            if cumulative[parent] > _U64:
                raise ValueError("the weights' total overflows a u64")
        self._cumulative = cumulative
        #: The total weight (0 for no weights).
        self.total = cumulative[0] if cumulative else 0

    @property
    def order(self) -> list[int]:
        """The weights' indices in heap order."""
        return list(self._indices)

    def sample(self, value: int) -> int | None:
        """The index of the weight that weight unit ``value`` falls in, or ``None`` when
        ``value`` is not below the total."""
        cumulative, weights = self._cumulative, self._weights
        if not cumulative or cumulative[0] <= value:
            return None
        node = 0
        while True:
            weight = weights[node]
            if value < weight:
                return self._indices[node]
            value -= weight
            node = 2 * node + 1
            left = cumulative[node]
            if left <= value:
                value -= left
                node += 1


class WeightedWithoutReplacement:
    """Draws weight units without replacement and names the weight each falls in
    (avalanchego's ``weightedWithoutReplacementGeneric`` over a :class:`UniformReplacer`
    and a :class:`WeightedHeap`): a weight may be named as often as it has units."""

    __slots__ = ("_heap", "_uniform")

    def __init__(self, draw: Callable[[], int], heap: WeightedHeap | Sequence[int]) -> None:
        self._heap = heap if isinstance(heap, WeightedHeap) else WeightedHeap(heap)
        self._uniform = UniformReplacer(draw, self._heap.total)

    def sample(self, count: int) -> list[int] | None:
        """``count`` indices, or ``None`` when there are fewer weight units than that."""
        self._uniform.reset()
        indices: list[int] = []
        for _ in range(count):
            unit = self._uniform.next()
            if unit is None:
                return None
            index = self._heap.sample(unit)
            if index is None:
                return None
            indices.append(index)
        return indices


# --- the windower ------------------------------------------------------------------------


class ValidatorSet:
    """A validator set as the windower reads it: NodeIDs sorted by their bytes (the empty
    NodeID dropped), their weights, and the weighted heap over them.

    ``ValueError`` for a NodeID that is not 20 bytes, a weight that is not a u64, or
    weights whose total overflows a u64.
    """

    __slots__ = ("heap", "members", "node_ids", "weights")

    def __init__(self, validators: Mapping[bytes, int]) -> None:
        if not isinstance(validators, Mapping):
            raise ValueError(f"a validator set maps NodeIDs to weights, got {validators!r}")
        checked: dict[bytes, int] = {}
        for node_id, weight in validators.items():
            if not isinstance(node_id, bytes | bytearray) or len(node_id) != NODE_ID_LEN:
                raise ValueError(f"a NodeID is {NODE_ID_LEN} bytes, got {node_id!r}")
            checked[bytes(node_id)] = _u64(weight, f"the weight of {bytes(node_id).hex()}")
        checked.pop(EMPTY_NODE_ID, None)
        #: The NodeIDs, sorted by their bytes.
        self.node_ids = tuple(sorted(checked))
        #: Their weights, in the same order.
        self.weights = tuple(checked[node_id] for node_id in self.node_ids)
        #: The weighted heap over :attr:`weights`.
        self.heap = WeightedHeap(self.weights)
        #: The NodeIDs as a set, for membership.
        self.members = frozenset(self.node_ids)

    @property
    def total_weight(self) -> int:
        """The sum of the weights."""
        return self.heap.total

    def __len__(self) -> int:
        return len(self.node_ids)


class Windower:
    """avalanchego's windower over ``validators`` for the chain ``chain_id``.

    ``validators`` is the validator set (NodeID -> weight) at every P-chain height, or a
    callable from a P-chain height to the set at that height; ``chain_id`` is the 32-byte
    chain ID (or an int, as a 32-byte big-endian number). The set at a P-chain height is
    read once and kept (as on the P-chain, it never changes), up to ``cache_heights``
    heights, the oldest read dropped first; a mapping given directly is copied at once.
    Heights and slots are u64s; ``ValueError`` for anything else.
    """

    __slots__ = ("_cache", "_cache_heights", "_chain_source", "_fixed", "_lock", "_source")

    def __init__(
        self, validators: ValidatorSource, chain_id: bytes | int, *, cache_heights: int = 64
    ) -> None:
        if (
            isinstance(cache_heights, bool)
            or not isinstance(cache_heights, int)
            or (cache_heights < 1)
        ):
            raise ValueError(f"cache_heights must be a positive int, got {cache_heights!r}")
        self._chain_source = int.from_bytes(chain_id_bytes(chain_id)[:8], "big")
        self._fixed: ValidatorSet | None = None
        self._source: Callable[[int], Mapping[bytes, int]] | None = None
        if isinstance(validators, Mapping):
            self._fixed = ValidatorSet(validators)
        elif callable(validators):
            self._source = validators
        else:
            raise ValueError(
                "validators is a mapping of NodeIDs to weights or a callable "
                f"of the P-chain height, got {validators!r}"
            )
        self._cache: dict[int, ValidatorSet] = {}
        self._cache_heights = cache_heights
        self._lock = threading.Lock()

    @property
    def chain_source(self) -> int:
        """The first 8 bytes of the chain ID, big-endian: the part of every seed that
        tells chains apart."""
        return self._chain_source

    def validator_set(self, p_chain_height: int) -> ValidatorSet:
        """The validator set at ``p_chain_height``, sorted, without the empty NodeID."""
        _u64(p_chain_height, "a P-chain height")
        if self._fixed is not None:
            return self._fixed
        found = self._cache.get(p_chain_height)
        if found is not None:
            return found
        assert self._source is not None
        found = ValidatorSet(self._source(p_chain_height))
        with self._lock:
            cache = self._cache
            cache[p_chain_height] = found
            while len(cache) > self._cache_heights:
                del cache[next(iter(cache))]
        return found

    # --- pre-Durango ---------------------------------------------------------------------

    def proposers(self, height: int, p_chain_height: int, max_windows: int) -> list[bytes]:
        """The proposer list of the block at ``height`` (pre-Durango): at most
        ``max_windows`` NodeIDs, one per window, drawn by stake without replacement of
        weight units; fewer when the set has less weight than that."""
        _u64(height, "a height")
        if isinstance(max_windows, bool) or not isinstance(max_windows, int) or (max_windows < 0):
            raise ValueError(f"max_windows must be a non-negative int, got {max_windows!r}")
        validators = self.validator_set(p_chain_height)
        source = MersenneTwister(self._chain_source ^ height)
        sampler = WeightedWithoutReplacement(source.uint64, validators.heap)
        indices = sampler.sample(min(max_windows, validators.total_weight))
        if indices is None:  # pragma: no cover - the count never exceeds the weight
            raise ValueError("the sampler ran out of weight units")
        return [validators.node_ids[index] for index in indices]

    def delay(self, height: int, p_chain_height: int, node_id: bytes, max_windows: int) -> float:
        """Seconds after its parent from which ``node_id`` may propose the block at
        ``height`` (pre-Durango): its first window in :meth:`proposers`, the windows
        listed when it is not there, ``max_windows`` windows for the empty NodeID."""
        if node_id == EMPTY_NODE_ID:
            if (
                isinstance(max_windows, bool)
                or not isinstance(max_windows, int)
                or (max_windows < 0)
            ):
                raise ValueError(f"max_windows must be a non-negative int, got {max_windows!r}")
            return max_windows * WINDOW_DURATION
        proposers = self.proposers(height, p_chain_height, max_windows)
        node_id = bytes(node_id)
        windows = proposers.index(node_id) if node_id in proposers else len(proposers)
        return windows * WINDOW_DURATION

    # --- post-Durango --------------------------------------------------------------------

    def expected_proposer(self, height: int, p_chain_height: int, slot: int) -> bytes:
        """The one NodeID that may propose the block at ``height`` in ``slot``
        (post-Durango); :class:`AnyoneCanPropose` when the set is empty."""
        validators = self.validator_set(p_chain_height)
        if not validators.node_ids:
            raise AnyoneCanPropose(
                f"no validator at P-chain height {p_chain_height}: anyone can propose"
            )
        return self._expected(validators, _u64(height, "a height"), _u64(slot, "a slot"))

    def min_delay_for_proposer(
        self, height: int, p_chain_height: int, node_id: bytes, start_slot: int
    ) -> float:
        """Seconds after the parent at which the first slot of ``node_id`` from
        ``start_slot`` on begins (post-Durango), looking :data:`MAX_LOOK_AHEAD_SLOTS`
        slots ahead; the end of that look-ahead when it has none there.
        :class:`AnyoneCanPropose` when the set is empty."""
        validators = self.validator_set(p_chain_height)
        if not validators.node_ids:
            raise AnyoneCanPropose(
                f"no validator at P-chain height {p_chain_height}: anyone can propose"
            )
        _u64(height, "a height")
        if _u64(start_slot, "a slot") > _U64 - MAX_LOOK_AHEAD_SLOTS:
            raise ValueError(f"start_slot {start_slot} leaves no room for the look-ahead")
        end_slot = start_slot + MAX_LOOK_AHEAD_SLOTS
        node_id = bytes(node_id)
        if node_id in validators.members:
            for slot in range(start_slot, end_slot):
                if self._expected(validators, height, slot) == node_id:
                    return slot * WINDOW_DURATION
        return end_slot * WINDOW_DURATION

    def _expected(self, validators: ValidatorSet, height: int, slot: int) -> bytes:
        """The expected proposer of a non-empty set: one weight unit drawn from a fresh
        64-bit twister (a one-draw sampler: the replacer's first draw is the unit)."""
        source = MersenneTwister64(self._chain_source ^ height ^ reverse_bits64(slot))
        total = validators.heap.total
        if total == 0:
            raise ValueError(
                "the validator set has no weight: no proposer can be drawn "
                "(avalanchego's unexpected sampler failure)"
            )
        index = validators.heap.sample(uint64_inclusive(source.uint64, total - 1))
        assert index is not None  # a unit below the total always falls in a weight
        return validators.node_ids[index]
