"""The bloom filter of vmstack.gossip.bloom against avalanchego's utils/bloom tests, ported
as tables (avalanchego's BSD-3 notice: tests/gossip/NOTICE), and vectors of the hash, the
index rule and the wire form that a wrong formula fails (the mutation tests below)."""

from __future__ import annotations

import hashlib
import random
import types
from pathlib import Path

import pytest

import vmstack.gossip.bloom as bloom_module
from vmstack.errors import MalformedRequest
from vmstack.gossip.bloom import (
    BloomFilter,
    bloom_hash,
    estimate_count,
    optimal_entries,
    optimal_hashes,
    optimal_parameters,
)

MAX_INT = (1 << 63) - 1
LARGEST_FLOAT_BELOW_1 = 1 - 1e-16
SMALLEST_NONZERO_FLOAT = 5e-324

# --- ported: utils/bloom/optimal_test.go TestEstimateEntries ---
# (num hashes, num entries, false-positive probability, expected count)
ESTIMATE_COUNT_TABLE = [
    (0, 2_048, 0.5, 0),  # invalid params
    (1, 0, 0.5, 0),  # invalid params
    (1, 1, 2, MAX_INT),  # invalid params
    (1, 1, -1, 0),  # invalid params
    (8, 2_048, 0, 0),
    (7, 11_982, 0.01, 9_993),  # from optimal_parameters(10_000, 0.01)
    (10, 179_720, 0.001, 100_000),  # from optimal_parameters(100_000, 0.001)
    (7, 11_982, 0.05, 14_449),
    (7, 11_982, 1, MAX_INT),
    (7, 11_982, SMALLEST_NONZERO_FLOAT, 0),
    (7, 11_982, LARGEST_FLOAT_BELOW_1, MAX_INT),
]

# The parameters the table's comments name, and coreth's filter (8,192 items at 1%, reset
# at 5%): (count, probability, hashes, entries).
OPTIMAL_TABLE = [
    (10_000, 0.01, 7, 11_982),
    (100_000, 0.001, 10, 179_720),
    (8_192, 0.01, 7, 9_815),
]

# --- vectors: the hash, the index rule, the wire form --------------------------------------
# sha256(b"hello world?" + b"so salty") = 32eb54bf31c6c3cb..., read big-endian.
HASH_VECTORS = [
    (b"hello world?", b"so salty", 0x32EB54BF31C6C3CB),
    (b"hello world!", b"so salty", 0xA8F0C463BB2258A0),
    (b"", b"", 0xE3B0C44298FC1C14),  # sha256 of nothing
]
# (seeds, entries, hashes added, marshal() in hex). Worked by hand for the first two: one
# seed 0 over 16 bits; rotl64(1, 17) = 2^17, 2^17 % 16 = 0: bit 0 of byte 0. rotl64(2^50,
# 17) = 2^67 mod 2^64 = 2^3 = 8: bit 0 of byte 1 (bit i % 8 of byte i // 8).
WIRE_VECTORS = [
    ([0], 2, [1], "01" + "0000000000000000" + "0100"),
    ([0], 2, [1 << 50], "01" + "0000000000000000" + "0001"),
    ([5, 1 << 63], 3, [0xDEADBEEF], "02" + "0000000000000005" + "8000000000000000" + "000820"),
]
# coreth's filter with fixed seeds, the hashes of 1,000 32-byte IDs under a salt added:
# the sha256 of its wire form, and how many of its 78,520 bits are set.
COUNT_VECTOR_SEEDS = [0x0123456789ABCDEF, 0xFEDCBA9876543210, 1, 2, 3, 4, 5]
COUNT_VECTOR_DIGEST = "6b9ebef8aa1f17a4d961fb5c3de17788cac1e4c889d12202175d4b3711fc5c4d"
COUNT_VECTOR_BITS = 6_716


def _vector_failures(module: types.ModuleType) -> list[str]:
    """Which vectors ``module`` (vmstack.gossip.bloom or a mutant of it) fails."""
    failures = []
    for key, salt, expected in HASH_VECTORS:
        if module.bloom_hash(key, salt) != expected:
            failures.append(f"hash of {key!r}")
    for seeds, entries, hashes, expected_hex in WIRE_VECTORS:
        bloom = module.BloomFilter(len(seeds), entries, seeds=seeds)
        for h in hashes:
            bloom.add(h)
        if bloom.marshal().hex() != expected_hex:
            failures.append(f"wire form of {seeds} over {entries} bytes")
        if not all(bloom.contains(h) for h in hashes):
            failures.append(f"contains after add, {seeds}")
    bloom = module.BloomFilter(7, 9_815, seeds=COUNT_VECTOR_SEEDS)
    salt = bytes(range(32))
    for i in range(1_000):
        bloom.add(module.bloom_hash(i.to_bytes(32, "big"), salt))
    wire = bloom.marshal()
    if hashlib.sha256(wire).hexdigest() != COUNT_VECTOR_DIGEST:
        failures.append("wire form of coreth's filter after 1,000 additions")
    if sum(bin(byte).count("1") for byte in wire[1 + 7 * 8 :]) != COUNT_VECTOR_BITS:
        failures.append("bits set in coreth's filter after 1,000 additions")
    for count, probability, hash_count, entry_count in OPTIMAL_TABLE:
        if module.optimal_parameters(count, probability) != (hash_count, entry_count):
            failures.append(f"optimal_parameters({count}, {probability})")
    for hash_count, entry_count, probability, expected in ESTIMATE_COUNT_TABLE:
        if module.estimate_count(hash_count, entry_count, probability) != expected:
            failures.append(f"estimate_count({hash_count}, {entry_count}, {probability})")
    if module.estimate_count(7, 9_815, 0.05) != 11_836:
        failures.append("coreth's reset count")
    return failures


def test_the_module_passes_every_vector() -> None:
    assert _vector_failures(bloom_module) == []


#: Deliberately wrong formulas: (what, text in bloom.py, its replacement).
MUTATIONS = [
    ("the hash read little-endian", 'struct.Struct(">Q")', 'struct.Struct("<Q")'),
    ("the salt hashed before the key", "_sha256(key + salt)", "_sha256(salt + key)"),
    (
        "the last 8 bytes of the digest",
        "unpack_from(_sha256(key + salt).digest())",
        "unpack_from(_sha256(key + salt).digest(), 24)",
    ),
    ("a rotation of 16", "_HASH_ROTATION: Final = 17", "_HASH_ROTATION: Final = 16"),
    ("the seed added, not xored", ") ^ seed", ") + seed & _MASK64"),
    ("bits counted from the top of a byte", "|= 1 << (index & 7)", "|= 0x80 >> (index & 7)"),
    (
        "the index over bytes, not bits",
        "self._num_bits = num_entries * _BITS_PER_BYTE",
        "self._num_bits = num_entries",
    ),
    (
        "seeds little-endian on the wire",
        'seed.to_bytes(_SEED_BYTES, "big")',
        'seed.to_bytes(_SEED_BYTES, "little")',
    ),
    (
        "entries rounded down",
        "(entries_in_bits + _BITS_PER_BYTE - 1) / _BITS_PER_BYTE",
        "entries_in_bits / _BITS_PER_BYTE",
    ),
    ("hashes rounded down", "num_hashes = math.ceil(", "num_hashes = math.floor("),
    (
        "the count from log2",
        "count = math.ceil(-math.log(exponent)",
        "count = math.ceil(-math.log2(exponent)",
    ),
]


def _mutant(old: str, new: str) -> types.ModuleType:
    source = Path(bloom_module.__file__).read_text()
    assert source.count(old) >= 1, f"the mutation's text is gone from bloom.py: {old!r}"
    module = types.ModuleType("bloom_mutant")
    exec(compile(source.replace(old, new), "bloom_mutant.py", "exec"), module.__dict__)
    return module


@pytest.mark.parametrize(("what", "old", "new"), MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_a_wrong_formula_fails_the_vectors(what: str, old: str, new: str) -> None:
    assert _vector_failures(_mutant(old, new)) != [], f"{what} passes every vector"


# --- ported: utils/bloom/filter_test.go ---


@pytest.mark.parametrize(
    ("num_hashes", "num_entries", "message"),
    [(0, 1, "too few hashes"), (17, 1, "too many hashes"), (8, 0, "too few entries")],
)
def test_new_refuses_bad_sizes(num_hashes: int, num_entries: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        BloomFilter(num_hashes, num_entries)


def test_normal_usage() -> None:
    """Every added hash is contained after each addition; the parsed filter contains them
    and marshals to the same bytes (TestNormalUsage, with a seeded draw)."""
    draw = random.Random(1024)
    to_add = [draw.getrandbits(64) for _ in range(1024)]
    bloom = BloomFilter(*optimal_parameters(1024, 0.01))
    for index, element in enumerate(to_add):
        bloom.add(element)
        if index % 64 == 0 or index == len(to_add) - 1:
            assert all(bloom.contains(earlier) for earlier in to_add[: index + 1])
    assert bloom.count == len(to_add)
    wire = bloom.marshal()
    parsed = BloomFilter.parse(wire)
    assert all(parsed.contains(element) for element in to_add)
    assert parsed.marshal() == wire
    assert parsed.seeds == bloom.seeds


def test_the_seeds_are_the_filters_own_and_on_the_wire() -> None:
    first, second = BloomFilter(8, 64), BloomFilter(8, 64)
    assert first.seeds != second.seeds
    wire = first.marshal()
    assert wire[0] == 8
    assert [int.from_bytes(wire[1 + 8 * i : 9 + 8 * i], "big") for i in range(8)] == list(
        first.seeds
    )
    assert first.add(1) is None  # type: ignore[func-returns-value]  # what is checked


# --- ported: utils/bloom/hasher_test.go ---


def test_collision_resistance() -> None:
    bloom = BloomFilter(8, 16 * 1024, seeds=list(range(1, 9)))
    bloom.add(bloom_hash(b"hello world?", b"so salty"))
    assert not bloom.contains(bloom_hash(b"hello world!", b"so salty"))
    assert bloom.contains(bloom_hash(b"hello world?", b"so salty"))


# --- ported: utils/bloom/read_filter_test.go ---


def _malicious(num_hashes: int, num_entries: int) -> bytes:
    """The wire form of a filter of zero seeds and every entry bit set."""
    return bytes([num_hashes]) + bytes(8 * num_hashes) + b"\xff" * num_entries


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "invalid num hashes"),
        (_malicious(0, 1), "too few hashes"),
        (_malicious(17, 1), "too many hashes"),
        (_malicious(1, 0), "too few entries"),
        (b"\x01", "too few entries"),
    ],
)
def test_parse_refuses_bad_bytes(data: bytes, message: str) -> None:
    with pytest.raises(MalformedRequest, match=message):
        BloomFilter.parse(data)


def test_a_malicious_filter_contains_everything() -> None:
    full = BloomFilter.parse(_malicious(16, 1))
    assert all(full.contains(random.Random(i).getrandbits(64)) for i in range(100))


@pytest.mark.parametrize("seed", range(20))
def test_parse_then_marshal_gives_the_bytes_back(seed: int) -> None:
    draw = random.Random(seed)
    data = bytes([draw.randint(1, 16)])
    data += draw.randbytes(8 * data[0] + draw.randint(1, 40))
    assert BloomFilter.parse(data).marshal() == data


# --- ported: utils/bloom/optimal_test.go ---


@pytest.mark.parametrize(
    ("num_hashes", "num_entries", "probability", "expected"), ESTIMATE_COUNT_TABLE
)
def test_estimate_count(
    num_hashes: int, num_entries: int, probability: float, expected: int
) -> None:
    assert estimate_count(num_hashes, num_entries, probability) == expected


def test_the_sizing_functions_at_their_edges() -> None:
    assert optimal_entries(0, 0.01) == 1
    assert optimal_entries(10, 1) == 1
    assert optimal_entries(10, 0) == MAX_INT
    assert optimal_hashes(0, 10) == 1
    assert optimal_hashes(10, 0) == 16
    assert optimal_hashes(1 << 40, 1) == 16


def test_coreths_filter() -> None:
    """8,192 items at 1%: 9,815 bytes and 7 hashes; reset past 5% after 11,836 additions."""
    assert optimal_parameters(8_192, 0.01) == (7, 9_815)
    assert estimate_count(7, 9_815, 0.05) == 11_836
    assert len(BloomFilter(7, 9_815).marshal()) == 1 + 7 * 8 + 9_815
