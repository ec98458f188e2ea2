"""The store's bookkeeping is checked, not trusted: head pointers, the integrity-start
marker, number entries, and the proposer layer's index, newest-block pointer and first
post-fork height. One damaged, truncated or missing value of any of these kinds makes the
stack refuse to open (``StoreCorrupted``) or answer ``StoreCorrupted`` / ``BlockNotFound``
where it touches the damage; it never answers a wrong ID or wrong bytes, and a populated
store is never given a genesis block over its chain."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.reliability.stacks import START, StackFactory, bare_vm, full_stack
from tests.reliability.test_corruption import (
    SCHEMA,
    TARGET,
    Chain,
    block_hash_at,
    build_chain,
    flipped,
    reopen,
)
from vmstack import BlockNotFound, SimClock, StoreCorrupted, get_ancestors
from vmstack.batching import serial_get_ancestors
from vmstack.cchain import CChainVM, rawdb
from vmstack.interfaces import ChainVM
from vmstack.store import KeyValueStore, MemoryStore
from vmstack.wrappers.proposer.state import STORE_PREFIX

#: Every damaged record of whole stacks: the full suite runs it.
pytestmark = pytest.mark.thorough

REFUSED = (StoreCorrupted, BlockNotFound)

HEAD_KEYS = {
    "last accepted": SCHEMA.last_accepted_key(),
    "last settled": SCHEMA.last_settled_key(),
    "head header": SCHEMA.head_header_key(),
    "head fast block": SCHEMA.head_fast_block_key(),
    "integrity start": SCHEMA.integrity_start_key(),
}


@pytest.fixture(scope="module")
def bare_chain() -> Chain:
    return build_chain(bare_vm, 8)


@pytest.fixture(scope="module")
def stack_chain() -> Chain:
    return build_chain(full_stack, 13)


def lagging_vm(store: KeyValueStore, clock: SimClock) -> ChainVM:
    """A C-chain VM whose blocks settle three blocks late (its last settled pointer trails
    the last accepted one)."""
    return CChainVM(store, clock=clock, settle_lag=3)


@pytest.fixture(scope="module")
def lagging_chain() -> Chain:
    return build_chain(lagging_vm, 8)


def damaged_values(value: bytes) -> Iterator[tuple[str, bytes | None]]:
    """One-bit flips of ``value`` (the lowest, a middle and the highest bit of every byte
    of a value up to 12 bytes, else of a spread of positions), a value one byte short, one
    byte long, and the key missing (``None``)."""
    positions = (
        range(len(value))
        if len(value) <= 12
        else sorted({0, 1, 5, len(value) // 2, len(value) - 5, len(value) - 1})
    )
    for position in positions:
        for bit in (0, 3, 7):
            yield (
                f"bit {bit} of byte {position}",
                value[:position] + bytes((value[position] ^ (1 << bit),)) + value[position + 1 :],
            )
    yield "one byte short", value[:-1]
    yield "one byte long", value + b"\0"
    yield "missing", None


def answer(call: Callable[[], object]) -> object:
    """What ``call`` answers, or the refusal's type."""
    try:
        return call()
    except REFUSED as error:
        return type(error)


def check_never_wrong(
    factory: StackFactory, chain: Chain, items: dict[bytes, bytes], what: str
) -> str:
    """Open ``factory`` over ``items`` and ask it everything: each answer is the truth or a
    refusal; a walk is a prefix of the truth. Returns ``"refused to open"`` or
    ``"opened"``."""
    try:
        vm = factory(reopen(items), SimClock(START + 100))
    except REFUSED:
        return "refused to open"
    ids, truth = chain.ids, chain.truth
    top = len(ids) - 1
    for got in (answer(vm.last_accepted),):
        assert got in (ids[-1], *REFUSED), f"{what}: last_accepted answered {got!r}"
    for height, block_id in enumerate(ids):
        got = answer(lambda height=height: vm.get_block_id_at_height(height))  # type: ignore[misc]
        assert got in (block_id, *REFUSED), f"{what}: height {height} answered {got!r}"
        got = answer(lambda block_id=block_id: bytes(vm.get_block(block_id)))  # type: ignore[misc]
        assert got in (truth[top - height], *REFUSED), f"{what}: block at {height} wrong"
    for start in (ids[-1], ids[TARGET]):
        below = truth[top - ids.index(start) :]
        for walk in (get_ancestors, serial_get_ancestors):
            got = answer(
                lambda start=start, walk=walk: walk(  # type: ignore[misc]
                    vm, start, max_blocks_num=10_000, max_retrieval_time=60.0
                )
            )
            assert got in REFUSED or got == below[: len(got)], (  # type: ignore[arg-type]
                f"{what}: a walk served wrong bytes"
            )
    return "opened"


def with_value(items: dict[bytes, bytes], key: bytes, value: bytes | None) -> dict[bytes, bytes]:
    changed = dict(items)
    if value is None:
        del changed[key]
    else:
        changed[key] = value
    return changed


# --- the C-chain's head pointers and integrity-start marker ---------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(HEAD_KEYS))
@pytest.mark.parametrize("stack", ["bare", "settling late", "full stack"])
def test_damaged_head_pointer_or_marker_is_never_trusted(
    bare_chain: Chain, lagging_chain: Chain, stack_chain: Chain, kind: str, stack: str
) -> None:
    factory, chain = {
        "bare": (bare_vm, bare_chain),
        "settling late": (lagging_vm, lagging_chain),
        "full stack": (full_stack, stack_chain),
    }[stack]
    key = HEAD_KEYS[kind]
    for what, value in damaged_values(chain.items[key]):
        check_never_wrong(factory, chain, with_value(chain.items, key, value), f"{kind}, {what}")


def test_a_chain_without_its_last_accepted_pointer_is_refused_not_reinitialised(
    bare_chain: Chain,
) -> None:
    """One missing key does not turn a populated store into an empty one: opening it is
    StoreCorrupted and writes nothing (no genesis over the chain, no head rewritten)."""
    items = with_value(bare_chain.items, SCHEMA.last_accepted_key(), None)
    store = reopen(items)
    with pytest.raises(StoreCorrupted, match="no last accepted"):
        CChainVM(store, clock=SimClock(START + 100))
    assert {key: bytes(value) for key, value in store.iterate(b"")} == items
    with pytest.raises(StoreCorrupted):
        full_stack(store, SimClock(START + 100))
    after = {key: bytes(value) for key, value in store.iterate(b"")}
    assert {key: after.get(key) for key in items} == items
    added = after.keys() - items.keys()
    assert not [
        key for key in added if SCHEMA.parse_key(key) is not None or key.startswith(STORE_PREFIX)
    ]


@pytest.mark.parametrize(
    "kept",
    ["number entry", "canonical entry at 0", "integrity entry", "last settled", "head header"],
)
def test_any_trace_of_a_chain_counts_as_populated(bare_chain: Chain, kept: str) -> None:
    """A store that lost its head pointer but kept any one kind of bookkeeping is refused."""
    genesis = block_hash_at(bare_chain, 0)
    keep = {
        "number entry": SCHEMA.header_number_key(genesis),
        "canonical entry at 0": SCHEMA.canonical_hash_key(0),
        "integrity entry": SCHEMA.integrity_key(0, genesis),
        "last settled": SCHEMA.last_settled_key(),
        "head header": SCHEMA.head_header_key(),
    }[kept]
    store = reopen({keep: bare_chain.items[keep]})
    with pytest.raises(StoreCorrupted):
        CChainVM(store, clock=SimClock(START + 100))


def test_an_empty_store_still_gets_its_genesis() -> None:
    store = MemoryStore()
    vm = CChainVM(store, clock=SimClock(START))
    assert vm.get_block_id_at_height(0) == vm.last_accepted()


def test_a_damaged_marker_cannot_switch_off_block_checksums(bare_chain: Chain) -> None:
    """The attack the marker's checksum stops: a marker moved above a damaged block would
    turn its checksum off and serve its bytes. Every flip of the marker, with a body byte
    damaged below, still never serves the damaged block."""
    key = SCHEMA.integrity_start_key()
    body_key = SCHEMA.body_key(TARGET, block_hash_at(bare_chain, TARGET))
    body = bare_chain.items[body_key]
    damaged_body = flipped(body, len(body) - 1)
    for what, value in damaged_values(bare_chain.items[key]):
        items = with_value(bare_chain.items, key, value)
        items[body_key] = damaged_body
        check_never_wrong(bare_vm, bare_chain, items, f"marker {what}, body damaged")


def test_a_marker_without_its_checksum_is_store_corrupted(bare_chain: Chain) -> None:
    """An 8-byte marker (a number alone, as earlier versions wrote it) cannot be told from
    a damaged one: StoreCorrupted."""
    items = dict(bare_chain.items)
    items[SCHEMA.integrity_start_key()] = rawdb.encode_block_number(0)
    vm = bare_vm(reopen(items), SimClock(START + 100))
    with pytest.raises(StoreCorrupted, match="integrity-start marker"):
        vm.get_block(bare_chain.ids[-1])


def test_the_head_blocks_number_entry_damaged(bare_chain: Chain) -> None:
    """The number entry of the block the head pointer names, changed to another height, is
    caught by the head's canonical check."""
    head = bare_chain.ids[-1]
    key = SCHEMA.header_number_key(head)
    for what, value in damaged_values(bare_chain.items[key]):
        items = with_value(bare_chain.items, key, value)
        check_never_wrong(bare_vm, bare_chain, items, f"head number entry {what}")


@pytest.mark.slow
@pytest.mark.parametrize("height", [0, TARGET, 8])
def test_number_and_canonical_entries_at_every_kind_of_height(
    bare_chain: Chain, height: int
) -> None:
    """Number and canonical entries of the genesis, a middle and the head block, every way
    damaged: never a wrong answer."""
    block_hash = block_hash_at(bare_chain, height)
    for key in (SCHEMA.header_number_key(block_hash), SCHEMA.canonical_hash_key(height)):
        for what, value in damaged_values(bare_chain.items[key]):
            check_never_wrong(
                bare_vm, bare_chain, with_value(bare_chain.items, key, value), f"{key!r} {what}"
            )


# --- the proposer layer's bookkeeping -------------------------------------------------------


def proposer_keys(chain: Chain) -> dict[str, bytes]:
    """One key of each kind the proposer layer keeps, for the chain's newest and a middle
    post-fork block."""
    keys = {
        "newest pointer": STORE_PREFIX + b"last",
        "first post-fork height": STORE_PREFIX + b"first",
    }
    for label, height in (("head", len(chain.ids) - 1), ("middle", len(chain.ids) - 2)):
        inner = block_hash_at(chain, height)
        keys[f"index entry of the {label}"] = STORE_PREFIX + b"i" + inner
        keys[f"record of the {label}"] = STORE_PREFIX + b"b" + chain.ids[height]
    return keys


def test_proposer_keys_are_present(stack_chain: Chain) -> None:
    """The keys below are the layer's real keys (a renamed key would make the damage tests
    vacuous)."""
    for key in proposer_keys(stack_chain).values():
        assert key in stack_chain.items


@pytest.mark.slow
@pytest.mark.parametrize(
    "kind",
    [
        "newest pointer",
        "first post-fork height",
        "index entry of the head",
        "index entry of the middle",
        "record of the head",
        "record of the middle",
    ],
)
def test_damaged_proposer_bookkeeping_is_never_trusted(stack_chain: Chain, kind: str) -> None:
    key = proposer_keys(stack_chain)[kind]
    for what, value in damaged_values(stack_chain.items[key]):
        check_never_wrong(
            full_stack, stack_chain, with_value(stack_chain.items, key, value), f"{kind}, {what}"
        )


def test_a_lost_index_entry_never_serves_the_bare_inner_block(stack_chain: Chain) -> None:
    """Without the head's index entry the stack does not answer the head's inner block as
    the last accepted block, nor at its height, nor serve it by its inner ID."""
    head_height = len(stack_chain.ids) - 1
    inner = block_hash_at(stack_chain, head_height)
    items = with_value(stack_chain.items, STORE_PREFIX + b"i" + inner, None)
    vm: ChainVM = full_stack(reopen(items), SimClock(START + 100))
    with pytest.raises(StoreCorrupted):
        vm.last_accepted()
    with pytest.raises(StoreCorrupted):
        vm.get_block_id_at_height(head_height)
    with pytest.raises(BlockNotFound):
        vm.get_block(inner)
