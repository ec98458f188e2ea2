"""What the gossipers read and fill: the item sets, the marshaller of an item, and the set
with a salted bloom filter the pull gossiper sends (avalanchego's ``network/p2p/gossip``
``Set``, ``Marshaller`` and ``SetWithBloomFilter``).

An item's gossip ID is bytes (32 for a transaction hash); its salted bloom hash is
:func:`~vmstack.gossip.bloom.bloom_hash` of the ID and the filter's 32-byte salt. A set
refuses an item by raising a ``ValueError`` (a mempool's
:class:`~vmstack.errors.InvalidTransaction` is one); the gossipers count such refusals and
carry on.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from typing import Protocol, TypeVar, runtime_checkable

from vmstack.gossip.bloom import BloomFilter, bloom_hash, estimate_count, optimal_parameters

__all__ = [
    "GossipSet",
    "HandlerSet",
    "Marshaller",
    "PullGossiperSet",
    "PushGossiperSet",
    "SetWithBloomFilter",
]

T = TypeVar("T")
T_contra = TypeVar("T_contra", contravariant=True)


class Marshaller(Protocol[T]):
    """How an item travels: ``marshal`` its bytes, ``unmarshal`` the item back (a
    ``ValueError`` for bytes that are not one), ``gossip_id`` the ID that names it."""

    def marshal(self, item: T) -> bytes: ...

    def unmarshal(self, data: bytes) -> T: ...

    def gossip_id(self, item: T) -> bytes: ...


@runtime_checkable
class PushGossiperSet(Protocol):
    """What the push gossiper asks before sending an item: whether the set still holds it."""

    def has(self, gossip_id: bytes) -> bool: ...


class HandlerSet(Protocol[T]):
    """What a handler fills from pushes and answers pulls from: ``add`` an item (a
    ``ValueError`` if refused) and ``iterate`` over the held items."""

    def add(self, item: T) -> None: ...

    def iterate(self) -> Iterator[T]: ...


class GossipSet(HandlerSet[T], PushGossiperSet, Protocol[T]):
    """A set both gossipers and the handler use; ``len`` counts at least the items
    ``iterate`` yields."""

    def __len__(self) -> int: ...


class PullGossiperSet(Protocol[T_contra]):
    """What the pull gossiper needs: ``add`` the items a peer sends, and the bloom filter
    with its salt of what the set holds."""

    def add(self, item: T_contra) -> None: ...

    def bloom_filter(self) -> tuple[BloomFilter, bytes]: ...


class SetWithBloomFilter(GossipSet[T]):
    """``inner`` with a salted bloom filter of its items' gossip IDs (upstream's
    ``SetWithBloomFilter``): every addition to ``inner`` goes through :meth:`add`, or is followed by
    :meth:`add_to_bloom`.

    The filter is sized by :func:`~vmstack.gossip.bloom.optimal_parameters` for
    ``max(target_multiplier * len(inner), min_target_elements)`` items at
    ``target_false_positive``; when its additions exceed
    ``estimate_count(hashes, entries, reset_false_positive)`` it is made anew with a fresh
    salt and refilled from ``inner`` (``resets`` counts that). With coreth's parameters
    (8,192 items, 1%, reset at 5%) the filter is 9,815 bytes with 7 hashes and resets on
    the 11,837th addition. ``random_bytes(n)`` gives the bytes of every filter's seeds and
    salt (``os.urandom``; a seeded source makes a run repeat exactly).
    """

    def __init__(
        self,
        inner: GossipSet[T],
        marshaller: Marshaller[T],
        *,
        min_target_elements: int,
        target_false_positive: float,
        reset_false_positive: float,
        target_multiplier: int = 2,
        random_bytes: Callable[[int], bytes] = os.urandom,
    ) -> None:
        if min_target_elements < 1:
            raise ValueError(f"min_target_elements must be at least 1, not {min_target_elements}")
        if not 0 < target_false_positive < 1 or not 0 < reset_false_positive < 1:
            raise ValueError("false-positive probabilities must lie strictly between 0 and 1")
        if target_multiplier < 1:
            raise ValueError(f"target_multiplier must be at least 1, not {target_multiplier}")
        self._inner = inner
        self._marshaller = marshaller
        self._min_target_elements = min_target_elements
        self._target_false_positive = target_false_positive
        self._reset_false_positive = reset_false_positive
        self._target_multiplier = target_multiplier
        self._random_bytes = random_bytes
        self._lock = threading.RLock()
        self.resets = 0
        self._bloom, self._salt, self.max_count = self._fresh()

    def _fresh(self) -> tuple[BloomFilter, bytes, int]:
        target = max(self._target_multiplier * len(self._inner), self._min_target_elements)
        num_hashes, num_entries = optimal_parameters(target, self._target_false_positive)
        raw = bytes(self._random_bytes(8 * num_hashes + 32))
        if len(raw) != 8 * num_hashes + 32:
            raise ValueError(f"random_bytes gave {len(raw)} bytes, not {8 * num_hashes + 32}")
        seeds = [int.from_bytes(raw[8 * i : 8 * i + 8], "big") for i in range(num_hashes)]
        bloom = BloomFilter(num_hashes, num_entries, seeds=seeds)
        salt = raw[8 * num_hashes :]
        for item in self._inner.iterate():
            bloom.add(bloom_hash(self._marshaller.gossip_id(item), salt))
        return bloom, salt, estimate_count(num_hashes, num_entries, self._reset_false_positive)

    def add(self, item: T) -> None:
        """Add ``item`` to ``inner`` (its refusal propagates, and the filter is unchanged),
        then to the filter, resetting the filter when it is due."""
        self._inner.add(item)
        self.add_to_bloom(item)

    def add_to_bloom(self, item: T) -> None:
        """Add ``item``, which ``inner`` already holds (added to it by other means), to the
        filter, resetting the filter when it is due (upstream's ``AddToBloom``)."""
        with self._lock:
            self._bloom.add(bloom_hash(self._marshaller.gossip_id(item), self._salt))
            if self._bloom.count > self.max_count:
                self._bloom, self._salt, self.max_count = self._fresh()
                self.resets += 1

    def has(self, gossip_id: bytes) -> bool:
        """Whether ``inner`` holds the item of ``gossip_id``."""
        return self._inner.has(gossip_id)

    def iterate(self) -> Iterator[T]:
        """``inner``'s items."""
        return self._inner.iterate()

    def __len__(self) -> int:
        return len(self._inner)

    def bloom_filter(self) -> tuple[BloomFilter, bytes]:
        """The current filter and its 32-byte salt."""
        with self._lock:
            return self._bloom, self._salt
