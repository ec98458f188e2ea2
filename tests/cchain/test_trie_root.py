"""derive_root builds the same ordered-trie roots as the trie package's HexaryTrie."""

from __future__ import annotations

import rlp
from hypothesis import given, settings
from hypothesis import strategies as st
from trie.hexary import HexaryTrie

from vmstack.cchain.tries import derive_root
from vmstack.cchain.types import EMPTY_ROOT


def _reference_root(values: list[bytes]) -> bytes:
    trie = HexaryTrie(db={})
    for index, value in enumerate(values):
        trie[rlp.encode(index)] = value
    root: bytes = trie.root_hash
    return root


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(min_size=0, max_size=120), max_size=40))
def test_roots_equal_the_general_trie(values: list[bytes]) -> None:
    """Any list of values (short, long, empty) gives HexaryTrie's root."""
    assert derive_root(values) == _reference_root(values)


def test_roots_across_key_length_boundaries() -> None:
    """Counts around the one- and two-byte index keys (127/128, 255/256) match too."""
    for count in (1, 2, 16, 17, 127, 128, 129, 255, 256, 257, 300):
        values = [bytes([i % 251]) * (1 + i % 40) for i in range(count)]
        assert derive_root(values) == _reference_root(values), count


def test_empty_input_gives_the_empty_root() -> None:
    """No values, or only empty ones, is the empty trie."""
    assert derive_root([]) == EMPTY_ROOT
    assert derive_root([b"", b""]) == EMPTY_ROOT
