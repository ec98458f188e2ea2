"""The push and pull gossipers and the handler against avalanchego's network/p2p/gossip
tests, ported as tables (avalanchego's BSD-3 notice: tests/gossip/NOTICE), and the rules
they keep that those tests do not reach: the stake share, the message size caps, the
discarded cache, the bloom filter's reset."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from vmstack.errors import MalformedRequest
from vmstack.gossip import (
    BloomFilter,
    BranchingFactor,
    GossipHandler,
    GossipRouter,
    PullGossiper,
    PushGossiper,
    SendConfig,
    SetWithBloomFilter,
    bloom_hash,
    choose_peers,
    marshal_pull_request,
    optimal_parameters,
    parse_push_gossip,
    split_handler,
    top_validators,
)
from vmstack.gossip.pull import ResponseCallback


class Marshaller:
    """The test item is a 32-byte ID that is its own bytes and gossip ID."""

    def marshal(self, item: bytes) -> bytes:
        return item

    def unmarshal(self, data: bytes) -> bytes:
        if len(data) != 32:
            raise ValueError(f"an ID is 32 bytes, not {len(data)}")
        return data

    def gossip_id(self, item: bytes) -> bytes:
        return item


class SetDouble:
    """A set of IDs that refuses a duplicate and records what it adds."""

    def __init__(self) -> None:
        self.items: dict[bytes, None] = {}
        self.added: list[bytes] = []

    def add(self, item: bytes) -> None:
        if item in self.items:
            raise ValueError(f"{item.hex()} already present")
        self.items[item] = None
        self.added.append(item)

    def has(self, gossip_id: bytes) -> bool:
        return gossip_id in self.items

    def iterate(self) -> Iterator[bytes]:
        return iter(list(self.items))

    def __len__(self) -> int:
        return len(self.items)


def tx(n: int) -> bytes:
    """Upstream's ``tx{n}``: an ID whose first byte is ``n``."""
    return bytes([n]) + bytes(31)


def bloom_set(inner: SetDouble) -> SetWithBloomFilter[bytes]:
    return SetWithBloomFilter(
        inner,
        Marshaller(),
        min_target_elements=1000,
        target_false_positive=0.01,
        reset_false_positive=0.05,
    )


# --- ported: TestGossiperGossip ---
# (name, target response size, requester has, responder has, possible values, expected
# length, expected hit rate or None when nothing is observed)
PULL_TABLE = [
    ("no gossip - no one knows anything", 0, [], [], [], 0, None),
    ("no gossip - requester knows more than responder", 1024, [0], [], [0], 1, None),
    ("no gossip - requester knows everything responder knows", 1024, [0], [0], [0], 1, 100.0),
    ("gossip - requester knows nothing", 1024, [], [0], [0], 1, 0.0),
    ("gossip - requester knows less than responder", 1024, [0], [0, 1], [0, 1], 2, 50.0),
    ("gossip - target response size exceeded", 32, [], [0, 1, 2], [0, 1, 2], 2, 0.0),
]


@pytest.mark.parametrize(
    ("target", "requester", "responder", "possible", "length", "hit_rate"),
    [row[1:] for row in PULL_TABLE],
    ids=[row[0] for row in PULL_TABLE],
)
def test_gossiper_gossip(
    target: int,
    requester: list[int],
    responder: list[int],
    possible: list[int],
    length: int,
    hit_rate: float | None,
) -> None:
    response_set = bloom_set(SetDouble())
    for n in responder:
        response_set.add(tx(n))
    handler = GossipHandler(Marshaller(), response_set, target_response_size=target)
    router = GossipRouter()
    router.register(0, handler)

    request_inner = SetDouble()
    request_set = bloom_set(request_inner)
    for n in requester:
        request_set.add(tx(n))
    request_inner.added.clear()
    sent: list[tuple[bytes, ResponseCallback]] = []
    gossiper = PullGossiper(
        Marshaller(), request_set, lambda payload, answer: sent.append((payload, answer))
    )

    gossiper.gossip()
    ((payload, answer),) = sent
    assert payload[0] == 0  # the handler prefix of transaction gossip
    answer(bytes(32), router.app_request(payload))

    assert len(request_inner.items) == length
    assert set(request_inner.items) <= {tx(n) for n in possible}
    assert handler.last_hit_rate == hit_rate
    # nothing the requester had before it asked comes back
    assert not set(request_inner.added) & {tx(n) for n in requester}


# --- ported: TestPushGossiper ---
# (name, cycles of (to add, expected messages), regossip)
PUSH_TABLE = [
    ("single cycle with regossip", [([0, 1, 2], [[0, 1, 2]])], True),
    (
        "multiple cycles with regossip",
        [([0], [[0]]), ([1], [[1], [0]]), ([2], [[2], [1, 0]])],
        True,
    ),
    ("verify that we don't gossip empty messages", [([0], [[0]]), ([], [])], False),
]


class ManualClock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("cycles", "regossip"), [row[1:] for row in PUSH_TABLE], ids=[row[0] for row in PUSH_TABLE]
)
def test_push_gossiper(cycles: list[tuple[list[int], list[list[int]]]], regossip: bool) -> None:
    clock = ManualClock()
    sent: list[tuple[SendConfig, bytes]] = []
    regossip_time = 1e-9 if regossip else 3600.0
    gossiper = PushGossiper(
        Marshaller(),
        _AlwaysHas(),
        lambda: {},
        lambda config, payload: sent.append((config, payload)),
        gossip_params=BranchingFactor(validators=1),
        regossip_params=BranchingFactor(validators=1),
        discarded_size=0,
        target_gossip_size=1 << 20,
        max_regossip_frequency=regossip_time,
        clock=clock,
    )
    for to_add, expected in cycles:
        gossiper.add([tx(n) for n in to_add])
        gossiper.gossip()
        got = [parse_push_gossip(split_handler(payload)[1]) for _, payload in sent]
        assert got == [[tx(n) for n in message] for message in expected]
        assert all(payload[0] == 0 for _, payload in sent)
        sent.clear()
        if regossip:
            clock.now += regossip_time + 1e-6


class _AlwaysHas:
    def has(self, gossip_id: bytes) -> bool:
        return True


# --- ported: TestPushGossiperNew ---


@pytest.mark.parametrize(
    ("factor", "message"),
    [
        ({"validators": -1}, "num validators cannot be negative"),
        ({"non_validators": -1}, "num non-validators cannot be negative"),
        ({"peers": -1}, "num peers cannot be negative"),
        ({}, "must gossip to at least one peer"),
    ],
)
def test_branching_factor_refuses(factor: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        BranchingFactor(**factor)


@pytest.mark.parametrize(
    ("keyword", "message"),
    [
        ("discarded_size", "discarded size cannot be negative"),
        ("target_gossip_size", "target gossip size cannot be negative"),
        ("max_regossip_frequency", "re-gossip frequency cannot be negative"),
    ],
)
def test_push_gossiper_refuses(keyword: str, message: str) -> None:
    sizes: dict[str, float] = {
        "discarded_size": 0,
        "target_gossip_size": 0,
        "max_regossip_frequency": 0,
    }
    sizes[keyword] = -1
    with pytest.raises(ValueError, match=message):
        PushGossiper(
            Marshaller(),
            _AlwaysHas(),
            lambda: {},
            lambda config, payload: None,
            gossip_params=BranchingFactor(validators=1),
            regossip_params=BranchingFactor(validators=1),
            discarded_size=int(sizes["discarded_size"]),
            target_gossip_size=int(sizes["target_gossip_size"]),
            max_regossip_frequency=sizes["max_regossip_frequency"],
            clock=ManualClock(),
        )


# --- the rules beyond the ported tables ---------------------------------------------------


def _gossiper(
    held: SetDouble, sent: list[tuple[SendConfig, bytes]], clock: ManualClock, **changes: object
) -> PushGossiper[bytes]:
    weights = {bytes([n]) * 20: weight for n, weight in enumerate([50, 30, 15, 5], 1)}
    settings: dict[str, object] = {
        "gossip_params": BranchingFactor(stake_percentage=0.9, validators=2),
        "regossip_params": BranchingFactor(validators=1),
        "discarded_size": 16,
        "target_gossip_size": 20 * 1024,
        "max_regossip_frequency": 30.0,
        "clock": clock,
    }
    settings.update(changes)
    return PushGossiper(
        Marshaller(),
        held,
        lambda: weights,
        lambda config, payload: sent.append((config, payload)),
        **settings,  # type: ignore[arg-type]
    )


def test_a_push_goes_to_ninety_percent_of_the_stake_and_the_validator_count() -> None:
    held, clock = SetDouble(), ManualClock()
    sent: list[tuple[SendConfig, bytes]] = []
    gossiper = _gossiper(held, sent, clock)
    held.add(tx(1))
    gossiper.add([tx(1)])
    gossiper.gossip()
    ((config, _),) = sent
    # 50 + 30 = 80 < 90, + 15 = 95: three validators hold 90% of the stake
    assert config == SendConfig(node_ids=(b"\x01" * 20, b"\x02" * 20, b"\x03" * 20), validators=2)
    assert gossiper.statistics.top_validators == 3


def test_top_validators_is_upstreams_inverse_cdf() -> None:
    weights = {b"b": 10, b"a": 10, b"c": 5}
    assert top_validators(weights, 0.9) == [b"a", b"b", b"c"]  # ties by node ID
    assert top_validators(weights, 0.4) == [b"a"]
    assert top_validators(weights, 0.0) == []
    assert top_validators(weights, 7.0) == [b"a", b"b", b"c"]  # bound to [0, 1]


def test_a_push_message_stops_at_the_target_size() -> None:
    held, clock = SetDouble(), ManualClock()
    sent: list[tuple[SendConfig, bytes]] = []
    gossiper = _gossiper(held, sent, clock, target_gossip_size=64)
    items = [tx(n) for n in range(5)]
    for item in items:
        held.add(item)
    gossiper.add(items)
    gossiper.gossip()
    # 32 < 64 takes a second item, 64 stops: two per cycle, the rest wait
    assert [parse_push_gossip(payload[1:]) for _, payload in sent] == [items[:2]]
    assert (gossiper.unsent, gossiper.sent) == (3, 2)


def test_an_item_the_set_dropped_is_not_sent_and_a_regossip_drop_is_remembered() -> None:
    held, clock = SetDouble(), ManualClock()
    sent: list[tuple[SendConfig, bytes]] = []
    gossiper = _gossiper(held, sent, clock)
    gossiper.add([tx(1)])  # never in the set: dropped from the unsent queue
    gossiper.gossip()
    assert sent == [] and gossiper.statistics.dropped == 1
    held.add(tx(2))
    gossiper.add([tx(2)])
    gossiper.gossip()
    assert len(sent) == 1
    del held.items[tx(2)]  # the pool dropped it after it was sent
    clock.now += 31
    gossiper.gossip()
    assert len(sent) == 1 and gossiper.statistics.dropped == 2
    # re-added: taken as just sent, so it waits for the regossip period, not pushed at once
    held.add(tx(2))
    gossiper.add([tx(2)])
    gossiper.gossip()
    assert len(sent) == 1 and (gossiper.unsent, gossiper.sent) == (0, 1)
    clock.now += 31
    gossiper.gossip()
    assert len(sent) == 2
    assert parse_push_gossip(sent[1][1][1:]) == [tx(2)]
    assert sent[1][0] == SendConfig(validators=1)


def test_a_pull_response_stops_once_past_the_target_size() -> None:
    inner = SetDouble()
    for n in range(100):
        inner.add(tx(n))
    handler = GossipHandler(Marshaller(), inner, target_response_size=20 * 32)
    salt = bytes(32)
    bloom = BloomFilter(7, 100)
    response = handler.app_request(marshal_pull_request(bloom.marshal(), salt))
    assert len(parse_push_gossip(response)) == 21  # the 21st crosses 640 bytes
    for n in range(50):
        bloom.add(bloom_hash(tx(n), salt))
    answer = parse_push_gossip(handler.app_request(marshal_pull_request(bloom.marshal(), salt)))
    assert answer[0] == tx(50) and len(answer) == 21


def test_bad_payloads_are_malformed_requests() -> None:
    handler = GossipHandler(Marshaller(), SetDouble(), target_response_size=1024)
    router = GossipRouter({0: handler})  # type: ignore[dict-item]
    with pytest.raises(MalformedRequest, match="unknown handler 1"):
        router.app_request(b"\x01")
    with pytest.raises(MalformedRequest, match="uvarint"):
        router.app_gossip(b"")
    with pytest.raises(MalformedRequest, match="salt"):
        router.app_request(b"\x00" + marshal_pull_request(BloomFilter(1, 1).marshal(), b"x"))
    with pytest.raises(MalformedRequest, match="too many hashes"):
        router.app_request(b"\x00" + marshal_pull_request(b"\x11" + bytes(200), bytes(32)))
    with pytest.raises(MalformedRequest, match="PullGossipRequest"):
        router.app_request(b"\x00\xff\xff")
    router.app_gossip(b"\x00\xff\xff")  # unreadable pushes are counted, not raised
    assert handler.statistics.unreadable == 1


def test_the_bloom_filter_resets_after_coreths_count() -> None:
    """coreth's filter (8,192, 1%, reset at 5%) takes 11,836 additions; the next resets it
    with a new salt, sized for twice the set, and refilled from it."""
    inner = SetDouble()
    draws = iter(bytes([n]) * (8 * 7 + 32) for n in range(1, 10))
    item_set = SetWithBloomFilter(
        inner,
        Marshaller(),
        min_target_elements=8_192,
        target_false_positive=0.01,
        reset_false_positive=0.05,
        random_bytes=lambda size: next(draws)[:size],
    )
    bloom, salt = item_set.bloom_filter()
    assert (bloom.num_hashes, bloom.num_entries, item_set.max_count) == (7, 9_815, 11_836)
    for n in range(11_836):
        item_set.add(n.to_bytes(32, "big"))
    assert item_set.resets == 0 and item_set.bloom_filter()[1] == salt
    item_set.add((11_836).to_bytes(32, "big"))
    bloom, new_salt = item_set.bloom_filter()
    assert item_set.resets == 1 and new_salt == bytes([2]) * 32
    assert (bloom.num_hashes, bloom.num_entries) == optimal_parameters(2 * 11_837, 0.01)
    assert bloom.count == 11_837
    assert all(
        bloom.contains(bloom_hash(n.to_bytes(32, "big"), new_salt)) for n in range(0, 11_837, 97)
    )


def test_choose_peers_resolves_a_send_config() -> None:
    nodes = [bytes([n]) * 20 for n in range(10)]
    validators = nodes[:6]
    config = SendConfig(node_ids=(nodes[0], nodes[9], b"gone"), validators=2, non_validators=1)
    chosen = choose_peers(
        config, connected=nodes[1:], validators=validators, draw=random.Random(5), self_id=nodes[3]
    )
    assert chosen[0] == nodes[9]  # nodes[0] is not connected
    assert len(chosen) == 4 and len(set(chosen)) == 4 and nodes[3] not in chosen
    assert sum(node in validators for node in chosen[1:3]) == 2
    assert chosen[3] not in validators


def test_next_due_says_when_a_cycle_can_send() -> None:
    held, clock = SetDouble(), ManualClock()
    sent: list[tuple[SendConfig, bytes]] = []
    gossiper = _gossiper(held, sent, clock)
    assert gossiper.next_due() is None
    held.add(tx(1))
    gossiper.add([tx(1)])
    assert gossiper.next_due() == clock.now  # never sent: now
    gossiper.gossip()
    assert gossiper.next_due() == clock.now + 30.0  # sent: after the regossip period
    clock.now += 10
    gossiper.gossip()
    assert len(sent) == 1 and gossiper.next_due() == clock.now + 20.0
