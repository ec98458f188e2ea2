"""CanonicalHashCache: LRU order, hit and miss counts, and the settled-heights-only rule."""

from __future__ import annotations

import threading

import pytest

from vmstack.cchain.cache import DEFAULT_CAPACITY, CanonicalHashCache


def h(n: int) -> bytes:
    """A distinct 32-byte hash for ``n``."""
    return n.to_bytes(32, "big")


def test_defaults() -> None:
    """A new cache holds 10,000 entries, nothing settled, no lookups counted."""
    cache = CanonicalHashCache()
    assert cache.capacity == DEFAULT_CAPACITY == 10_000
    assert cache.settled_height == -1
    assert (cache.hits, cache.misses, len(cache)) == (0, 0, 0)


def test_lookup_counts_hits_and_misses() -> None:
    """Every lookup is counted once, as a hit when cached and a miss otherwise."""
    cache = CanonicalHashCache(settled_height=10)
    assert cache.remember(4, h(4))
    assert cache.lookup(4) == h(4)
    assert cache.lookup(5) is None
    assert cache.lookup(4) == h(4)
    assert (cache.hits, cache.misses) == (2, 1)
    cache.clear()
    assert (cache.hits, cache.misses, len(cache)) == (0, 0, 0)


def test_least_recently_used_is_evicted() -> None:
    """When full, the entry looked up or remembered longest ago goes first."""
    cache = CanonicalHashCache(3, settled_height=100)
    for number in (1, 2, 3):
        cache.remember(number, h(number))
    assert cache.lookup(1) == h(1)
    cache.remember(4, h(4))
    assert 2 not in cache
    assert [n in cache for n in (1, 3, 4)] == [True, True, True]
    cache.remember(3, h(3))
    cache.remember(5, h(5))
    assert 1 not in cache
    assert len(cache) == 3


def test_heights_above_settled_are_never_cached() -> None:
    """remember refuses a height above the settled one and says so."""
    cache = CanonicalHashCache()
    assert not cache.remember(0, h(0))
    cache.settle(5)
    assert cache.remember(5, h(5))
    assert not cache.remember(6, h(6))
    assert cache.lookup(6) is None
    assert 6 not in cache


def test_reorg_of_an_unsettled_height_returns_the_new_hash() -> None:
    """A height reorganised before it settles is answered with its new canonical hash."""
    store = {9: h(900)}
    cache = CanonicalHashCache(settled_height=8)

    def canonical(number: int) -> bytes:
        found = cache.lookup(number)
        if found is None:
            found = store[number]
            cache.remember(number, found)
        return found

    assert canonical(9) == h(900)
    store[9] = h(901)
    assert canonical(9) == h(901)
    cache.settle(9)
    assert canonical(9) == h(901)
    assert cache.lookup(9) == h(901)


def test_settled_height_only_moves_forward() -> None:
    """settle refuses to move back; forget_above is the deliberate way down."""
    cache = CanonicalHashCache(settled_height=20)
    cache.settle(20)
    with pytest.raises(ValueError):
        cache.settle(19)
    for number in (5, 15, 20):
        cache.remember(number, h(number))
    assert cache.forget_above(10) == 2
    assert cache.settled_height == 10
    assert [n in cache for n in (5, 15, 20)] == [True, False, False]
    assert not cache.remember(15, h(15))
    cache.settle(15)
    assert cache.remember(15, h(15))
    assert cache.forget_above(-1) == 2
    assert cache.settled_height == -1
    assert len(cache) == 0


def test_a_settled_height_cannot_change_its_hash() -> None:
    """Remembering a different hash for a cached settled height is a ValueError."""
    cache = CanonicalHashCache(settled_height=3)
    cache.remember(3, h(3))
    assert cache.remember(3, h(3))
    with pytest.raises(ValueError):
        cache.remember(3, h(4))
    assert cache.lookup(3) == h(3)


def test_hashes_are_copied_to_bytes() -> None:
    """A memoryview or bytearray hash is stored as an independent bytes copy."""
    cache = CanonicalHashCache(settled_height=1)
    source = bytearray(h(1))
    cache.remember(1, memoryview(source))
    source[0] = 0xFF
    found = cache.lookup(1)
    assert type(found) is bytes
    assert found == h(1)


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda c: CanonicalHashCache(0), ValueError),
        (lambda c: CanonicalHashCache(True), ValueError),
        (lambda c: c.remember(1, b"short"), ValueError),
        (lambda c: c.remember(-1, h(1)), ValueError),
        (lambda c: c.remember("1", h(1)), TypeError),
        (lambda c: c.settle(-1), ValueError),
        (lambda c: c.forget_above(-2), ValueError),
    ],
)
def test_bad_arguments(call: object, error: type[Exception]) -> None:
    """Bad capacities, heights and hashes raise ValueError or TypeError."""
    cache = CanonicalHashCache(settled_height=5)
    with pytest.raises(error):
        call(cache)  # type: ignore[operator]


def test_memory_per_entry_is_under_200_bytes() -> None:
    """A full default cache costs under 200 bytes per entry, measured with sys.getsizeof."""
    cache = CanonicalHashCache(settled_height=2_000_000)
    for number in range(1_000_000, 1_000_000 + DEFAULT_CAPACITY):
        cache.remember(number, h(number))
    per_entry = cache.bytes_per_entry()
    assert 32 < per_entry < 200
    assert cache.memory_bytes() == pytest.approx(per_entry * DEFAULT_CAPACITY)
    assert CanonicalHashCache().bytes_per_entry() == 0.0


def test_concurrent_lookups_and_remembers_are_counted_exactly() -> None:
    """Threads sharing the cache never fail and every lookup is counted once."""
    cache = CanonicalHashCache(64, settled_height=1000)
    errors: list[BaseException] = []

    def work(offset: int) -> None:
        try:
            for number in range(offset, offset + 500):
                cache.remember(number % 200, h(number % 200))
                cache.lookup((number * 7) % 200)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i * 13,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert cache.hits + cache.misses == 2000
    assert len(cache) == 64
