"""InnerTree, as avalanchego's ``utils/tree``: accepting a block rejects its siblings and
their descendants; a block is found by its parent and ID until it is decided. The first
three tests are upstream's ``tree_test.go`` (notice below)."""

from __future__ import annotations

import hashlib

import pytest

from vmstack.wrappers.proposer.tree import InnerTree

# The scenarios below are ported from avalanchego (github.com/ava-labs/avalanchego),
# whose tests carry this notice:
#
#   Copyright (C) 2019-2025, Ava Labs, Inc. All rights reserved.
#
#   Redistribution and use in source and binary forms, with or without modification, are
#   permitted provided that the following conditions are met:
#   1. Redistributions of source code must retain the above copyright notice, this list of
#      conditions and the following disclaimer.
#   2. Redistributions in binary form must reproduce the above copyright notice, this list
#      of conditions and the following disclaimer in the documentation and/or other
#      materials provided with the distribution.
#   3. Neither the name of the copyright holder nor the names of its contributors may be
#      used to endorse or promote products derived from this software without specific
#      prior written permission.
#
#   THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS "AS IS" AND ANY
#   EXPRESS OR IMPLIED WARRANTIES, INCLUDING, BUT NOT LIMITED TO, THE IMPLIED WARRANTIES OF
#   MERCHANTABILITY AND FITNESS FOR A PARTICULAR PURPOSE ARE DISCLAIMED. IN NO EVENT SHALL
#   THE COPYRIGHT HOLDER OR CONTRIBUTORS BE LIABLE FOR ANY DIRECT, INDIRECT, INCIDENTAL,
#   SPECIAL, EXEMPLARY, OR CONSEQUENTIAL DAMAGES (INCLUDING, BUT NOT LIMITED TO,
#   PROCUREMENT OF SUBSTITUTE GOODS OR SERVICES; LOSS OF USE, DATA, OR PROFITS; OR BUSINESS
#   INTERRUPTION) HOWEVER CAUSED AND ON ANY THEORY OF LIABILITY, WHETHER IN CONTRACT,
#   STRICT LIABILITY, OR TORT (INCLUDING NEGLIGENCE OR OTHERWISE) ARISING IN ANY WAY OUT OF
#   THE USE OF THIS SOFTWARE, EVEN IF ADVISED OF THE POSSIBILITY OF SUCH DAMAGE.


class Decided:
    """A block that records its one decision (a second one is an error)."""

    def __init__(self, parent_id: bytes, name: str, height: int = 1) -> None:
        self.id = hashlib.sha256(name.encode()).digest()
        self.parent_id = parent_id
        self.height = height
        self.timestamp = 0
        self.status = "processing"
        self.log: list[str] | None = None

    def __bytes__(self) -> bytes:
        return self.id

    def verify(self) -> None:
        pass

    def accept(self) -> None:
        self._decide("accepted")

    def reject(self) -> None:
        self._decide("rejected")

    def _decide(self, status: str) -> None:
        assert self.status == "processing", f"a second decision ({status}) after {self.status}"
        self.status = status
        if self.log is not None:
            self.log.append(self.id.hex())


GENESIS = bytes(32)


def child(parent: Decided | bytes, name: str) -> Decided:
    parent_id = parent if isinstance(parent, bytes) else parent.id
    return Decided(parent_id, name)


def test_accept_single_block() -> None:
    """TestAcceptSingleBlock: a block is in the tree once added, and gone once accepted."""
    tree = InnerTree()
    block = child(GENESIS, "block")
    assert tree.get(block) is None
    tree.add(block)
    assert tree.get(block) is block
    assert tree.accept(block) == []
    assert block.status == "accepted"
    assert tree.get(block) is None and len(tree) == 0


def test_accept_block_conflict() -> None:
    """TestAcceptBlockConflict: accepting one of two siblings rejects the other."""
    tree = InnerTree()
    to_accept, to_reject = child(GENESIS, "accept"), child(GENESIS, "reject")
    for block in (to_accept, to_reject):
        tree.add(block)
        assert tree.get(block) is block
    assert tree.accept(to_accept) == [to_reject]
    assert (to_accept.status, to_reject.status) == ("accepted", "rejected")
    assert tree.get(to_accept) is None and tree.get(to_reject) is None


def test_accept_chain_conflict() -> None:
    """TestAcceptChainConflict: a rejected sibling's descendants are rejected with it."""
    tree = InnerTree()
    to_accept, to_reject = child(GENESIS, "accept"), child(GENESIS, "reject")
    to_reject_child = child(to_reject, "reject child")
    for block in (to_accept, to_reject, to_reject_child):
        tree.add(block)
        assert tree.get(block) is block
    tree.accept(to_accept)
    assert to_accept.status == "accepted"
    assert (to_reject.status, to_reject_child.status) == ("rejected", "rejected")
    for block in (to_accept, to_reject, to_reject_child):
        assert tree.get(block) is None
    assert len(tree) == 0


# --- beyond upstream's tests ----------------------------------------------------------------


def test_the_accepted_blocks_children_stay_and_the_order_is_fixed() -> None:
    """The accepted block's own children stay in the tree; the losers go depth first,
    parents before children, siblings in ascending ID order, each decided once."""
    tree = InnerTree()
    log: list[str] = []
    winner = child(GENESIS, "winner")
    losers = [child(GENESIS, f"loser {i}") for i in range(3)]
    below = [child(losers[0], "below 0"), child(losers[2], "below 2")]
    kept = child(winner, "kept")
    for block in (winner, *losers, *below, kept):
        block.log = log
        tree.add(block)
    rejected = tree.accept(winner)
    assert all(block.status == "rejected" for block in (*losers, *below))
    assert kept.status == "processing" and tree.get(kept) is kept and len(tree) == 1
    expected: list[Decided] = []
    for loser in sorted(losers, key=lambda block: block.id):
        expected.append(loser)
        expected.extend(block for block in below if block.parent_id == loser.id)
    assert rejected == expected
    assert log == [winner.id.hex(), *(block.id.hex() for block in expected)]


def test_a_second_add_keeps_the_first_object() -> None:
    """Adding another object with the same ID keeps the one verified first."""
    tree = InnerTree()
    first, again = child(GENESIS, "same"), child(GENESIS, "same")
    tree.add(first)
    tree.add(again)
    assert tree.get(again) is first and len(tree) == 1


def test_children_of_a_rejected_parent_are_rejected() -> None:
    """reject_children rejects what builds on a parent that lost, transitively."""
    tree = InnerTree()
    parent = bytes([9]) * 32
    children = [child(parent, "a"), child(parent, "b")]
    grandchild = child(children[0], "c")
    for block in (*children, grandchild):
        tree.add(block)
    assert set(map(id, tree.reject_children(parent))) == set(map(id, (*children, grandchild)))
    assert len(tree) == 0


def test_an_error_of_a_reject_propagates() -> None:
    """An inner block's failing reject propagates unchanged (as upstream returns it)."""

    class Failing(Decided):
        def reject(self) -> None:
            raise RuntimeError("the inner VM refused")

    tree = InnerTree()
    winner = child(GENESIS, "winner")
    loser = Failing(GENESIS, "loser")
    tree.add(winner)
    tree.add(loser)
    with pytest.raises(RuntimeError, match="the inner VM refused"):
        tree.accept(winner)
    assert winner.status == "accepted"
