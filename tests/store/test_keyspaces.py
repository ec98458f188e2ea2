"""The store's map of keyspaces: no key of vmstack fits two lines, under either C-chain
prefix, and the keys the parts build are the map's, byte for byte as stores hold them."""

from __future__ import annotations

import pytest

from vmstack.cchain import rawdb
from vmstack.store import MemoryStore, keyspaces
from vmstack.store.configuration import check_configuration
from vmstack.store.format import FORMAT_KEY
from vmstack.store.keyspaces import (
    CHAIN_ACCOUNT,
    CHAIN_CANONICAL_HASH,
    CHAIN_HEADER,
    CHAIN_INTEGRITY,
    CHAIN_INTEGRITY_START,
    FOREIGN_KEYSPACES,
    KEYSPACES,
    Field,
    Keyspace,
    config_key,
    overlapping_pairs,
    overlaps,
)
from vmstack.wrappers.proposer.envelope import build_unsigned
from vmstack.wrappers.proposer.state import STORE_PREFIX, ProposerState

PREFIXES = pytest.mark.parametrize(
    "chain_prefix", keyspaces.CHAIN_PREFIXES, ids=["no prefix", "coreth prefix"]
)
HASH_TRIE_NODE = next(space for space in FOREIGN_KEYSPACES if space.prefix == b"")


@PREFIXES
def test_no_key_of_vmstack_fits_two_keyspaces(chain_prefix: bytes) -> None:
    """Every pair of the keyspaces vmstack writes is disjoint, under each chain prefix."""
    assert overlapping_pairs(KEYSPACES, chain_prefix) == []


@PREFIXES
def test_vmstack_meets_a_coreth_database_only_where_a_hash_would_have_to(
    chain_prefix: bytes,
) -> None:
    """Beside coreth's own keyspaces, the one overlap is an account key against a
    hash-scheme trie node (a key that is keccak256 of its value: fitting it needs a hash
    that starts with ``vmstack-acct``)."""
    meeting = [
        (ours, theirs)
        for ours in KEYSPACES
        for theirs in FOREIGN_KEYSPACES
        if overlaps(ours, theirs, chain_prefix)
    ]
    assert meeting == [(CHAIN_ACCOUNT, HASH_TRIE_NODE)]


def test_keyspaces_under_another_ones_prefix_are_told_apart_by_length() -> None:
    """The only keyspaces whose prefix starts another's are go-ethereum's header and
    canonical-hash keys and vmstack's integrity entries and their start marker; a scan under
    the shorter prefix sees the other's keys, whose lengths differ."""
    nested = {
        (a.holds, b.holds)
        for a in KEYSPACES
        for b in KEYSPACES
        if a is not b and b.prefix.startswith(a.prefix)
    }
    assert nested == {
        (CHAIN_HEADER.holds, CHAIN_CANONICAL_HASH.holds),
        (CHAIN_CANONICAL_HASH.holds, CHAIN_HEADER.holds),
        (CHAIN_INTEGRITY.holds, CHAIN_INTEGRITY_START.holds),
    }
    for first, second in (
        (CHAIN_HEADER, CHAIN_CANONICAL_HASH),
        (CHAIN_INTEGRITY, CHAIN_INTEGRITY_START),
    ):
        assert set(first.key_lengths()).isdisjoint(second.key_lengths())


def test_overlap_is_decided_by_every_fixed_byte_and_every_length() -> None:
    """Two shapes meet only when a length fits both and their literal bytes agree."""
    hashed = Keyspace("a", "x", b"h", (Field("n", 8), Field("h", 32)))
    assert overlaps(hashed, Keyspace("b", "y", b"h", (Field("n", 40),)))
    assert not overlaps(hashed, Keyspace("b", "y", b"h", (Field("n", 39),)))
    assert overlaps(hashed, Keyspace("b", "y", b"h", (Field("n", 39),), suffix=b"n"))
    assert not overlaps(
        Keyspace("a", "x", b"h", (Field("n", 8),), suffix=b"n"),
        Keyspace("b", "y", b"h", (Field("n", 8),), suffix=b"m"),
    )
    assert overlaps(
        Keyspace("a", "x", b"ab", (Field("n", 1),)), Keyspace("b", "y", b"a", (Field("p", 0, 5),))
    )
    assert not overlaps(
        Keyspace("a", "x", b"ab", (Field("n", 1),)), Keyspace("b", "y", b"ac", (Field("p", 0, 5),))
    )
    user_prefix = b"proposervm/"
    chain = Keyspace("c", "z", b"last", chain_prefixed=True)
    assert overlaps(chain, Keyspace("p", "w", b"proposervm/last"), user_prefix)
    assert not overlaps(chain, Keyspace("p", "w", b"proposervm/last"))


def test_a_part_outside_the_map_has_no_configuration_key() -> None:
    """Only the parts the map declares have a configuration record."""
    assert config_key("chain") == b"vmstack/config/chain"
    with pytest.raises(ValueError, match="not 'transition'"):
        config_key("transition")


_HASH = bytes(range(32))
_NUMBER = 0x0102030405060708


@pytest.mark.parametrize("prefix", [b"", keyspaces.CORETH_KEY_PREFIX])
def test_the_chain_keys_are_the_bytes_stores_hold(prefix: bytes) -> None:
    """A few keys of the C-chain, as written before the map: go-ethereum's layout, vmstack's
    own records, under no prefix and under coreth's (``sha256(b"ethdb")``)."""
    coreth = bytes.fromhex("337fb73f9bcdac8c31a2d5f7b877ab1e8a2b7f2a1e9bf02a0a0e6c6fd164f1d1")
    assert coreth == keyspaces.CORETH_KEY_PREFIX
    schema = rawdb.Schema(prefix)
    num = bytes.fromhex("0102030405060708")
    assert schema.header_key(_NUMBER, _HASH) == prefix + b"h" + num + _HASH
    assert schema.body_key(_NUMBER, _HASH) == prefix + b"b" + num + _HASH
    assert schema.receipts_key(_NUMBER, _HASH) == prefix + b"r" + num + _HASH
    assert schema.canonical_hash_key(_NUMBER) == prefix + b"h" + num + b"n"
    assert schema.header_number_key(_HASH) == prefix + b"H" + _HASH
    assert schema.last_accepted_key() == prefix + b"LastBlock"
    assert schema.head_header_key() == prefix + b"LastHeader"
    assert schema.head_fast_block_key() == prefix + b"LastFast"
    assert schema.last_settled_key() == prefix + b"LastFinalized"
    assert schema.integrity_key(_NUMBER, _HASH) == prefix + b"vmstack-sum" + num + _HASH
    assert schema.integrity_start_key() == prefix + b"vmstack-sum-from"
    assert schema.account_key(_HASH[:20]) == prefix + b"vmstack-acct" + _HASH[:20]
    assert schema.state_head_key() == prefix + b"vmstack-state"
    for key in (
        schema.header_key(_NUMBER, _HASH),
        schema.canonical_hash_key(_NUMBER),
        schema.account_key(_HASH[:20]),
        schema.integrity_start_key(),
    ):
        fitting = [
            space
            for space in KEYSPACES
            if len(key) in space.key_lengths(prefix)
            and all(
                want is None or want == byte
                for want, byte in zip(space.pattern(len(key), prefix), key, strict=True)
            )
        ]
        assert len(fitting) == 1, key


def test_the_proposer_configuration_and_format_keys_are_the_bytes_stores_hold() -> None:
    """The proposer layer's, the configuration's and the format record's keys, as written
    before the map."""
    assert STORE_PREFIX == b"proposervm/"
    assert keyspaces.CONFIG_PREFIX == b"vmstack/config/"
    assert config_key("proposer") == b"vmstack/config/proposer"
    assert FORMAT_KEY == b"vmstack/format"
    store = MemoryStore()
    state = ProposerState(store)
    envelope = build_unsigned(_HASH, 1, 0, b"inner block")
    inner_id = bytes(reversed(_HASH))
    state.write_accepted(envelope.id, inner_id, envelope, 5)
    check_configuration(store, "chain", {"flavour": "avalanche"})
    check_configuration(store, "proposer", {"fork_time": 0})
    assert {bytes(key) for key, _ in store.iterate(b"")} == {
        b"vmstack/format",
        b"vmstack/config/chain",
        b"vmstack/config/proposer",
        b"proposervm/b" + envelope.id,
        b"proposervm/i" + inner_id,
        b"proposervm/last",
        b"proposervm/first",
    }


def test_a_chosen_chain_prefix_is_held_to_the_map() -> None:
    """A key prefix under which a C-chain key could be another part's key is refused, by
    the map and by the schema that would use it; an ordinary one is not."""
    clashing = b"proposervm/i" + b"x" * 23  # + b"LastBlock": an index key's 44 bytes
    with pytest.raises(
        ValueError,
        match="last accepted block hash keys could be the "
        "proposer's envelope of an inner block keys",
    ):
        keyspaces.check_chain_prefix(clashing)
    with pytest.raises(ValueError, match="could be the proposer's"):
        rawdb.Schema(clashing)
    for prefix in (b"", b"x/", b"ethdb/", keyspaces.CORETH_KEY_PREFIX):
        keyspaces.check_chain_prefix(prefix)
        assert rawdb.Schema(prefix).prefix == prefix
