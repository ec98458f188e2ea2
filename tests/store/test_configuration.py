"""The configuration records of a store: recorded once, held to, read back, refused when
damaged or asked for a part a stack does not have."""

from __future__ import annotations

import pytest

from vmstack.errors import ConfigMismatch, StoreCorrupted
from vmstack.store import MemoryStore
from vmstack.store.configuration import check_configuration, stored_configuration
from vmstack.store.keyspaces import CONFIG_CHAIN, CONFIG_PROPOSER

_CHAIN = {"flavour": "AVALANCHE", "chain_id": 43114, "transition_time": None}


def test_the_first_check_records_and_later_ones_compare() -> None:
    """A new store records the settings under its keyspace line; the same settings pass,
    another value of one is ConfigMismatch naming it."""
    store = MemoryStore()
    assert stored_configuration(store, "chain") is None
    check_configuration(store, "chain", _CHAIN)
    assert store.has(CONFIG_CHAIN.prefix)
    assert stored_configuration(store, "chain") == _CHAIN
    check_configuration(store, "chain", dict(_CHAIN))
    with pytest.raises(ConfigMismatch) as raised:
        check_configuration(store, "chain", {**_CHAIN, "chain_id": 1})
    assert (raised.value.field, raised.value.stored, raised.value.given) == ("chain_id", 43114, 1)


def test_a_record_under_the_other_parts_key_is_store_corrupted() -> None:
    """The checksum covers the key: the chain's record copied under the proposer's fails
    for both readers."""
    store = MemoryStore()
    check_configuration(store, "chain", _CHAIN)
    store.put(CONFIG_PROPOSER.prefix, bytes(store.get(CONFIG_CHAIN.prefix)))
    with pytest.raises(StoreCorrupted, match="proposer configuration record"):
        stored_configuration(store, "proposer")
    with pytest.raises(StoreCorrupted, match="proposer configuration record"):
        check_configuration(store, "proposer", {"fork_time": None})


def test_a_part_a_stack_does_not_have_is_value_error() -> None:
    """Only ``"chain"`` and ``"proposer"`` have records."""
    store = MemoryStore()
    with pytest.raises(ValueError, match="not 'served'"):
        stored_configuration(store, "served")
    with pytest.raises(ValueError, match="not 'served'"):
        check_configuration(store, "served", {})
    assert list(store.iterate()) == []
