"""The windower against avalanchego's own vectors, the twisters' reference outputs and the
sampler's cases, with properties over random validator sets."""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vmstack.errors import AnyoneCanPropose, VMStackError
from vmstack.wrappers.proposer.windower import (
    EMPTY_NODE_ID,
    MAX_LOOK_AHEAD_SLOTS,
    MAX_LOOK_AHEAD_WINDOW,
    MAX_VERIFY_DELAY,
    MAX_VERIFY_WINDOWS,
    WINDOW_DURATION,
    MersenneTwister,
    MersenneTwister64,
    UniformReplacer,
    ValidatorSet,
    WeightedHeap,
    WeightedWithoutReplacement,
    Windower,
    reverse_bits64,
    time_to_slot,
    uint64_inclusive,
)

U64 = 2**64 - 1
INT64_MAX = 2**63 - 1
#: avalanchego's ``fixedChainID = ids.ID{0, 2}``.
FIXED_CHAIN_ID = bytes([0, 2]) + bytes(30)
SETTINGS = settings(max_examples=30, deadline=None)


def upstream_node_ids(count: int) -> list[bytes]:
    """The NodeIDs of avalanchego's ``makeValidators``: ``BuildTestNodeID([]byte{i + 1})``,
    one byte then zeros."""
    return [bytes([index + 1]) + bytes(19) for index in range(count)]


def equal_stake(node_ids: list[bytes]) -> Windower:
    """A windower over ``node_ids``, each of weight 1, on avalanchego's fixed chain ID."""
    return Windower(dict.fromkeys(node_ids, 1), FIXED_CHAIN_ID)


def source_of(numbers: list[int]) -> tuple[Callable[[], int], list[int]]:
    """A 64-bit source that hands out ``numbers`` in order, and the list it consumes."""
    remaining = list(numbers)
    return lambda: remaining.pop(0), remaining


# --- the twisters ------------------------------------------------------------------------


def test_mt19937_reference_outputs() -> None:
    """MT19937 from the default seed 5489 gives the reference outputs, and its 10000th is
    the C++ standard's check value 4123659995."""
    twister = MersenneTwister()
    assert [twister.uint32() for _ in range(5)] == [
        3499211612,
        581869302,
        3890346734,
        3586334585,
        545404204,
    ]
    twister = MersenneTwister(5489)
    outputs = [twister.uint32() for _ in range(10000)]
    assert outputs[-1] == 4123659995


def test_mt19937_64_reference_outputs() -> None:
    """MT19937-64 from the default seed 5489: its first outputs, and its 10000th is the
    C++ standard's check value 9981545732273789042."""
    twister = MersenneTwister64()
    assert [twister.uint64() for _ in range(2)] == [14514284786278117030, 4620546740167642908]
    outputs = [twister.uint64() for _ in range(9998)]
    assert outputs[-1] == 9981545732273789042


@pytest.mark.parametrize("seed", [0, 1, 5489, 12345, 2**31, 2**32 - 1])
def test_mt19937_matches_numpy_and_python(seed: int) -> None:
    """MT19937 seeded with ``seed`` follows the state numpy's ``init_genrand`` seeding
    builds, drawn through Python's own MT19937, over several twists."""
    state = np.random.RandomState(seed).get_state()
    assert isinstance(state, tuple)
    key = state[1]
    reference = random.Random()
    reference.setstate((3, (*(int(word) for word in key), 624), None))
    twister = MersenneTwister(seed)
    assert [twister.uint32() for _ in range(1500)] == [
        reference.getrandbits(32) for _ in range(1500)
    ]


def test_mt19937_seeds_with_the_low_32_bits_and_uint64_is_two_draws() -> None:
    """Only the low 32 bits of a seed count (gonum's ``Seed``); ``uint64`` puts the first
    of two draws in the high half."""
    high_seed, low_seed = MersenneTwister(2**40 + 7), MersenneTwister(7)
    assert [high_seed.uint32() for _ in range(5)] == [low_seed.uint32() for _ in range(5)]
    pair, single = MersenneTwister(99), MersenneTwister(99)
    first, second = single.uint32(), single.uint32()
    assert pair.uint64() == (first << 32) | second


def eager_mt19937_64(seed: int, count: int) -> list[int]:
    """The textbook MT19937-64: seed the whole state, twist it whole, temper."""
    state = [seed]
    for index in range(1, 312):
        state.append((6364136223846793005 * (state[-1] ^ (state[-1] >> 62)) + index) & U64)
    outputs: list[int] = []
    position = 312
    for _ in range(count):
        if position == 312:
            for index in range(312):
                y = (state[index] & 0xFFFFFFFF80000000) | (state[(index + 1) % 312] & 0x7FFFFFFF)
                state[index] = (
                    state[(index + 156) % 312] ^ (y >> 1) ^ (0xB5026F5AA96619E9 if y & 1 else 0)
                )
            position = 0
        x = state[position]
        position += 1
        x ^= (x >> 29) & 0x5555555555555555
        x ^= (x << 17) & 0x71D67FFFEDA60000
        x ^= (x << 37) & 0xFFF7EEE000000000
        outputs.append(x ^ (x >> 43))
    return outputs


@SETTINGS
@given(seed=st.integers(0, U64), count=st.sampled_from([1, 2, 155, 156, 157, 400]))
def test_lazy_mt19937_64_equals_the_eager_one(seed: int, count: int) -> None:
    """The lazily seeded 64-bit twister gives the textbook outputs, on either side of the
    point where it builds the whole state."""
    twister = MersenneTwister64(seed)
    assert [twister.uint64() for _ in range(count)] == eager_mt19937_64(seed, count)


def test_twister_refuses_a_seed_that_is_not_u64() -> None:
    """A negative or oversized seed is a ValueError, not a silent wrap."""
    with pytest.raises(ValueError, match="u64"):
        MersenneTwister64(-1)
    with pytest.raises(ValueError, match="u64"):
        MersenneTwister(2**64)


# --- the sampler -------------------------------------------------------------------------

#: avalanchego's ``TestRNG``: (maximum, the source's numbers, the expected result).
UINT64_INCLUSIVE_CASES = [
    (U64, [0x01], 0x01),
    (U64, [0x0102030405060708], 0x0102030405060708),
    (U64, [0xF102030405060708], 0xF102030405060708),
    (INT64_MAX, [0x01], 0x01),
    (INT64_MAX, [0x0102030405060708], 0x0102030405060708),
    (INT64_MAX, [0x8102030405060708], 0x0102030405060708),
    (15, [0x810203040506071A], 0x0A),
    (INT64_MAX + 1, [INT64_MAX + 1], INT64_MAX + 1),
    (INT64_MAX + 1, [INT64_MAX + 2, 0], 0),
    (INT64_MAX + 1, [INT64_MAX + 2, 0x0102030405060708], 0x0102030405060708),
    (2, [INT64_MAX - 2], 0x02),
    (2, [INT64_MAX - 1, 0x01], 0x01),
]


@pytest.mark.parametrize(("maximum", "numbers", "expected"), UINT64_INCLUSIVE_CASES)
def test_uint64_inclusive_matches_avalanchego(
    maximum: int, numbers: list[int], expected: int
) -> None:
    """Each upstream case gives its result and consumes exactly its draws (the mask, the
    redraw above 2**63 - 1, and the rejection of the tail below it)."""
    draw, remaining = source_of(numbers)
    assert uint64_inclusive(draw, maximum) == expected
    assert remaining == []


def test_weighted_heap_orders_by_weight_then_index() -> None:
    """avalanchego's ``TestWeightedHeapInitialize``: heaviest first, ties by index."""
    heap = WeightedHeap([2, 2, 1, 3, 3, 1, 3])
    assert heap.order == [3, 4, 6, 0, 1, 2, 5]
    assert heap.total == 15
    units = Counter(heap.sample(unit) for unit in range(15))
    assert units == {0: 2, 1: 2, 2: 1, 3: 3, 4: 3, 5: 1, 6: 3}
    assert heap.sample(15) is None


def test_weighted_heap_refuses_an_overflowing_total() -> None:
    """Weights whose total overflows a u64 are refused, as ``math.Add`` does upstream."""
    with pytest.raises(ValueError, match="overflows"):
        WeightedHeap([1, U64])


def test_weighted_without_replacement_cases() -> None:
    """avalanchego's sampler cases: a singleton, a zero weight never drawn, every unit of
    [1, 1, 2] once, too many draws, and no draws."""
    never: Callable[[], int] = lambda: pytest.fail("no draw expected")  # noqa: E731
    assert WeightedWithoutReplacement(MersenneTwister(1).uint64, [1]).sample(1) == [0]
    assert WeightedWithoutReplacement(MersenneTwister(1).uint64, [0, 1]).sample(1) == [1]
    drawn = WeightedWithoutReplacement(MersenneTwister(3).uint64, [1, 1, 2]).sample(4)
    assert drawn is not None and sorted(drawn) == [0, 1, 2, 2]
    assert WeightedWithoutReplacement(MersenneTwister(1).uint64, [1]).sample(2) is None
    assert WeightedWithoutReplacement(never, [1]).sample(0) == []
    assert WeightedWithoutReplacement(never, []).sample(0) == []


def test_uniform_replacer_draws_each_value_once_then_resets() -> None:
    """Three draws from [0, 3) are a permutation, the fourth is None, and a reset makes
    the whole range available again."""
    replacer = UniformReplacer(MersenneTwister64(7).uint64, 3)
    for _ in range(2):
        assert sorted(
            value for value in (replacer.next() for _ in range(3)) if value is not None
        ) == [0, 1, 2]
        assert replacer.next() is None
        replacer.reset()


def test_uniform_replacer_follows_its_swap_map() -> None:
    """With fixed draws the replacer returns the lazily shuffled values: draw 2 of [0, 4),
    then draw 2 again (now holding 0), then the mask of 1 over [2, 4)."""
    draw, remaining = source_of([2, 1, 0])
    replacer = UniformReplacer(draw, 4)
    # First: uint64_inclusive(3) masks 2 -> position 2 -> value 2; position 2 now holds 0.
    # Second: uint64_inclusive(2) takes 1 % 3 = 1, + 1 -> position 2 -> value 0.
    # Third: uint64_inclusive(1) masks 0 -> + 2 -> position 2 -> value 1.
    assert [replacer.next(), replacer.next(), replacer.next()] == [2, 0, 1]
    assert remaining == []


# --- the windower: avalanchego's windower_test.go ----------------------------------------


def test_delay_change_by_height() -> None:
    """``TestDelayChangeByHeight``: the pre-Durango windows of 6 validators at heights 1
    and 2."""
    node_ids = upstream_node_ids(MAX_VERIFY_WINDOWS)
    windower = equal_stake(node_ids)
    for height, windows in ((1, [2, 5, 3, 4, 0, 1]), (2, [5, 1, 3, 4, 0, 2])):
        assert [windower.delay(height, 0, node_id, MAX_VERIFY_WINDOWS) for node_id in node_ids] == [
            w * WINDOW_DURATION for w in windows
        ]


def test_expected_proposer_change_by_height() -> None:
    """``TestExpectedProposerChangeByHeight``: slot 0 of heights 1 and 2, 10 validators."""
    node_ids = upstream_node_ids(10)
    windower = equal_stake(node_ids)
    assert windower.expected_proposer(1, 0, 0) == node_ids[2]
    assert windower.expected_proposer(2, 0, 0) == node_ids[1]


#: ``TestExpectedProposerChangeBySlot``: the validator index expected in slots 0-23.
BY_SLOT = [2, 0, 9, 7, 0, 3, 3, 3, 3, 3, 4, 0, 6, 3, 2, 1, 6, 0, 5, 1, 9, 6, 0, 8]


def test_expected_proposer_change_by_slot() -> None:
    """``TestExpectedProposerChangeBySlot``: height 1, slots 0-23 and the two slots after
    the look-ahead."""
    node_ids = upstream_node_ids(10)
    windower = equal_stake(node_ids)
    expected = {slot: node_ids[index] for slot, index in enumerate(BY_SLOT)}
    expected[MAX_LOOK_AHEAD_SLOTS] = node_ids[4]
    expected[MAX_LOOK_AHEAD_SLOTS + 1] = node_ids[6]
    for slot, proposer in expected.items():
        assert windower.expected_proposer(1, 0, slot) == proposer, slot


def test_min_delay_for_proposer() -> None:
    """``TestMinDelayForProposer``: each validator's first slot from slot 0, and the whole
    look-ahead for a node outside the set."""
    node_ids = upstream_node_ids(10)
    windower = equal_stake(node_ids)
    slots = [1, 15, 0, 5, 10, 18, 12, 3, 23, 2]
    assert [windower.min_delay_for_proposer(1, 0, node_id, 0) for node_id in node_ids] == [
        slot * WINDOW_DURATION for slot in slots
    ]
    outsider = bytes(range(1, 21))
    assert windower.min_delay_for_proposer(1, 0, outsider, 0) == MAX_LOOK_AHEAD_WINDOW


def test_coherence_of_expected_proposer_and_min_delay() -> None:
    """``TestCoherenceOfExpectedProposerAndMinDelayForProposer``: over 3 x 720 slots, the
    expected proposer's first slot from that slot on is that slot."""
    windower = equal_stake(upstream_node_ids(10))
    for slot in range(3 * MAX_LOOK_AHEAD_SLOTS):
        proposer = windower.expected_proposer(1, 0, slot)
        assert windower.min_delay_for_proposer(1, 0, proposer, slot) == (slot * WINDOW_DURATION)


@pytest.mark.parametrize(
    "validators", [{}, {EMPTY_NODE_ID: 5}], ids=["no validators", "only inactive validators"]
)
def test_windower_no_validators(validators: dict[bytes, int]) -> None:
    """``TestWindowerNoValidators``: no delay before Durango, and anyone can propose
    after it (the empty NodeID is dropped from the set)."""
    windower = Windower(validators, FIXED_CHAIN_ID)
    node_id = bytes(range(20))
    assert windower.delay(1, 0, node_id, MAX_VERIFY_WINDOWS) == 0.0
    with pytest.raises(AnyoneCanPropose):
        windower.expected_proposer(1, 0, 1)
    with pytest.raises(AnyoneCanPropose):
        windower.min_delay_for_proposer(1, 0, node_id, 1)
    assert issubclass(AnyoneCanPropose, VMStackError)


def test_windower_repeated_validator() -> None:
    """``TestWindowerRepeatedValidator``: a lone validator of weight 10 fills every window,
    so it has no delay and anyone else waits all the verify windows."""
    validator, outsider = upstream_node_ids(2)
    windower = Windower({validator: 10}, FIXED_CHAIN_ID)
    assert windower.proposers(1, 0, MAX_VERIFY_WINDOWS) == [validator] * MAX_VERIFY_WINDOWS
    assert windower.delay(1, 0, validator, MAX_VERIFY_WINDOWS) == 0.0
    assert windower.delay(1, 0, outsider, MAX_VERIFY_WINDOWS) == MAX_VERIFY_DELAY


def test_empty_node_id_waits_every_window() -> None:
    """The empty NodeID (an unsigned block) waits ``max_windows`` windows."""
    windower = equal_stake(upstream_node_ids(3))
    assert windower.delay(1, 0, EMPTY_NODE_ID, MAX_VERIFY_WINDOWS) == MAX_VERIFY_DELAY


@pytest.mark.parametrize(
    ("offset", "slot"),
    [
        (-WINDOW_DURATION, 0),
        (-1.0, 0),
        (0.0, 0),
        (WINDOW_DURATION, 1),
        (2 * WINDOW_DURATION, 2),
        (9.0, 1),
    ],
)
def test_time_to_slot(offset: float, slot: int) -> None:
    """``TestTimeToSlot``: whole windows after the parent, 0 before it."""
    parent = 1_700_000_000.0
    assert time_to_slot(parent, parent + offset) == slot


def test_proposer_distribution() -> None:
    """``TestProposerDistribution``: over 100 heights x 100 slots each of 10 equal
    validators is expected within 3 standard deviations of a tenth."""
    node_ids = upstream_node_ids(10)
    windower = equal_stake(node_ids)
    frequency = Counter({node_id: 0 for node_id in node_ids})
    frequency.update(
        windower.expected_proposer(height, 0, slot) for height in range(100) for slot in range(100)
    )
    deviation = math.sqrt(10_000 * 0.1 * 0.9)
    assert max(abs(count - 1000) for count in frequency.values()) / deviation < 3


def test_chain_source_is_the_first_eight_bytes_big_endian() -> None:
    """The chain source reads the chain ID's first 8 bytes big-endian; an int chain ID is
    a 32-byte big-endian number."""
    assert Windower({}, FIXED_CHAIN_ID).chain_source == 0x0002_0000_0000_0000
    assert Windower({}, bytes(range(32))).chain_source == 0x0001020304050607
    assert Windower({}, 43114).chain_source == 0


# --- properties --------------------------------------------------------------------------

node_id_strategy = st.binary(min_size=20, max_size=20).filter(lambda value: value != EMPTY_NODE_ID)
validator_sets = st.dictionaries(node_id_strategy, st.integers(1, 10**9), min_size=1, max_size=30)


@SETTINGS
@given(validators=validator_sets, height=st.integers(0, U64), start=st.integers(0, 10**6))
def test_expected_proposer_and_min_delay_cohere(
    validators: dict[bytes, int], height: int, start: int
) -> None:
    """For any set and height, a slot's expected proposer has that slot as its first from
    there on, and a validator's first slot names it as expected there."""
    windower = Windower(validators, bytes(32))
    for slot in range(start, start + 5):
        proposer = windower.expected_proposer(height, 0, slot)
        assert proposer in validators
        assert windower.min_delay_for_proposer(height, 0, proposer, slot) == (
            slot * WINDOW_DURATION
        )
    some = sorted(validators)[0]
    delay = windower.min_delay_for_proposer(height, 0, some, start)
    if delay < (start + MAX_LOOK_AHEAD_SLOTS) * WINDOW_DURATION:
        assert windower.expected_proposer(height, 0, int(delay // WINDOW_DURATION)) == some


@SETTINGS
@given(weight=st.integers(1, 100), max_windows=st.integers(0, 70), node_id=node_id_strategy)
def test_a_repeated_validator_fills_the_windows_its_weight_allows(
    weight: int, max_windows: int, node_id: bytes
) -> None:
    """A lone validator appears once per weight unit, up to ``max_windows`` times."""
    windower = Windower({node_id: weight}, bytes(32))
    assert windower.proposers(3, 0, max_windows) == [node_id] * min(weight, max_windows)


@SETTINGS
@given(validators=validator_sets, height=st.integers(0, U64))
def test_proposers_respect_each_weight(validators: dict[bytes, int], height: int) -> None:
    """The proposer list is never longer than the total weight, and names no validator
    more often than its weight."""
    windower = Windower(validators, bytes(32))
    listed = windower.proposers(height, 0, 60)
    assert len(listed) == min(60, sum(validators.values()))
    assert all(count <= validators[node_id] for node_id, count in Counter(listed).items())


@SETTINGS
@given(height=st.integers(0, U64), slot=st.integers(0, 10**6))
def test_no_validators_means_anyone_can_propose(height: int, slot: int) -> None:
    """An empty set has no proposers, no delay, and no expected proposer in any slot."""
    windower = Windower(lambda _height: {}, bytes(32))
    assert windower.proposers(height, 7, MAX_VERIFY_WINDOWS) == []
    with pytest.raises(AnyoneCanPropose):
        windower.expected_proposer(height, 7, slot)


@SETTINGS
@given(validators=validator_sets)
def test_the_order_given_does_not_matter(validators: dict[bytes, int]) -> None:
    """The set is sorted by NodeID bytes: the order of the mapping changes nothing."""
    reversed_order = dict(reversed(list(validators.items())))
    first, second = Windower(validators, bytes(32)), Windower(reversed_order, bytes(32))
    assert [first.expected_proposer(1, 0, slot) for slot in range(10)] == [
        second.expected_proposer(1, 0, slot) for slot in range(10)
    ]
    assert first.proposers(1, 0, 6) == second.proposers(1, 0, 6)


def test_reverse_bits64() -> None:
    """Bit 0 goes to bit 63 and back; reversing twice is the identity."""
    assert reverse_bits64(1) == 1 << 63
    assert reverse_bits64(0b1011) == 0b1101 << 60
    assert reverse_bits64(reverse_bits64(0x0123456789ABCDEF)) == 0x0123456789ABCDEF


# --- sets and bad input ------------------------------------------------------------------


def test_a_callable_set_is_read_once_per_p_chain_height() -> None:
    """A callable of the P-chain height is asked once per height, and each height's set is
    its own."""
    node_ids = upstream_node_ids(4)
    asked: list[int] = []

    def at(p_chain_height: int) -> dict[bytes, int]:
        asked.append(p_chain_height)
        return {node_ids[p_chain_height % 4]: 1}

    windower = Windower(at, FIXED_CHAIN_ID)
    for _ in range(3):
        assert windower.expected_proposer(1, 1, 0) == node_ids[1]
        assert windower.expected_proposer(1, 2, 0) == node_ids[2]
    assert asked == [1, 2]


@pytest.mark.parametrize(
    ("validators", "message"),
    [
        ({b"short": 1}, "20 bytes"),
        ({bytes(range(20)): -1}, "u64"),
        ({bytes(range(20)): 2**64}, "u64"),
        ({bytes(range(20)): True}, "u64"),
        ({bytes(range(20)): U64, bytes(range(1, 21)): 1}, "overflows"),
    ],
)
def test_bad_validator_sets_are_refused(validators: dict[bytes, int], message: str) -> None:
    """A NodeID of the wrong length, a weight outside u64 or an overflowing total is a
    ValueError naming the problem."""
    with pytest.raises(ValueError, match=message):
        ValidatorSet(validators)


def test_bad_heights_and_slots_are_refused() -> None:
    """Heights, P-chain heights and slots are u64s; the look-ahead must fit too."""
    windower = equal_stake(upstream_node_ids(3))
    with pytest.raises(ValueError, match="height"):
        windower.expected_proposer(-1, 0, 0)
    with pytest.raises(ValueError, match="P-chain height"):
        windower.expected_proposer(1, 2**64, 0)
    with pytest.raises(ValueError, match="slot"):
        windower.expected_proposer(1, 0, 1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="look-ahead"):
        windower.min_delay_for_proposer(1, 0, upstream_node_ids(1)[0], U64)
    with pytest.raises(ValueError, match="max_windows"):
        windower.proposers(1, 0, -1)
    with pytest.raises(ValueError, match="validators"):
        Windower(42, FIXED_CHAIN_ID)  # type: ignore[arg-type]


def test_the_bench_row_times_the_kept_set_against_a_set_per_call() -> None:
    """The windower's bench row compares the same answers: it has all three figures and a
    verdict on its goal."""
    from vmstack.benchmarks import windower

    (row,) = windower.run(quick=True)
    assert row.fast_seconds > 0 and row.baseline_seconds > 0 and row.floor_seconds
    assert row.goal_met is not None
