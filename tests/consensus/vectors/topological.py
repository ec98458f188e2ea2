"""Block tree vectors: the cases of avalanchego's ``snow/consensus/snowman/consensus_test.go``
that ``topological_test.go`` runs, as data (BSD-3; see NOTICE here). The cases on metrics
registration and the randomized network are upstream's plumbing and are left out.

A case gives ``params`` as ``(k, alpha_preference, alpha_confidence, beta)`` (every other
field 1, as upstream) or ``"default"``; ``blocks`` as ``(name, parent)`` pairs under the
genesis ``"G"`` (height 0), a child one above its parent; ``pinned`` IDs (hex, upstream's
``ids.ID{0x06}``) where a case fixes them, every other ID free (upstream draws test IDs from
a counter: the outcomes must not depend on them); ``same_bit0`` pairs whose IDs upstream
makes share bit 0; ``accept_fails`` / ``reject_fails`` blocks whose decision raises.
Blocks whose parent is not in ``blocks`` (``"?"``) sit at ``heights`` given.

Steps: ``("add", name)`` or ``("add", name, error)`` (``"UnknownParentBlock"``,
``"DuplicateBlock"``); ``("poll", {name: votes})`` or ``("poll", {...}, "raises")``
(an unknown name is a block nobody added); ``("reject", name)`` rejects a block outside the
tree; ``("expect", {...})`` with any of ``preference`` (name), ``processing_count``,
``status`` ({name: "accepted" | "rejected" | "undecided"}), ``processing`` /
``preferred`` ({name: bool}), ``at_height`` ({height: name or None}), ``last_accepted``
(name) and ``polls`` ((successful, failed)).
"""

from __future__ import annotations

from typing import Any

Case = dict[str, Any]


def _expect(**fields: object) -> tuple[str, dict[str, object]]:
    return ("expect", fields)


ONE_BETA_3 = (1, 1, 1, 3)

CASES: list[Case] = [
    {
        "name": "InitializeTest",
        "params": ONE_BETA_3,
        "blocks": [],
        "steps": [_expect(preference="G", processing_count=0)],
    },
    {
        "name": "NumProcessingTest",
        "params": (1, 1, 1, 1),
        "blocks": [("b", "G")],
        "steps": [
            _expect(processing_count=0),
            ("add", "b"),
            _expect(processing_count=1),
            ("poll", {"b": 1}),
            _expect(processing_count=0),
        ],
    },
    {
        "name": "AddToTailTest",
        "params": ONE_BETA_3,
        "blocks": [("b", "G")],
        "steps": [
            ("add", "b"),
            _expect(preference="b", preferred={"b": True}, at_height={1: "b"}),
        ],
    },
    {
        "name": "AddToNonTailTest",
        "params": ONE_BETA_3,
        "blocks": [("first", "G"), ("second", "G")],
        "steps": [
            ("add", "first"),
            _expect(preference="first"),
            ("add", "second"),
            _expect(preference="first"),
        ],
    },
    {
        "name": "AddOnUnknownParentTest",
        "params": ONE_BETA_3,
        "blocks": [("b", "?")],
        "heights": {"b": 2},
        "steps": [("add", "b", "UnknownParentBlock")],
    },
    {
        "name": "StatusOrProcessingPreviouslyAcceptedTest",
        "params": ONE_BETA_3,
        "blocks": [],
        "steps": [
            _expect(processing={"G": False}, preferred={"G": True}, at_height={0: "G"}),
        ],
    },
    {
        "name": "StatusOrProcessingPreviouslyRejectedTest",
        "params": ONE_BETA_3,
        "blocks": [("b", "G")],
        "steps": [
            ("reject", "b"),
            _expect(
                status={"b": "rejected"},
                processing={"b": False},
                preferred={"b": False},
                at_height={1: None},
            ),
        ],
    },
    {
        "name": "StatusOrProcessingUnissuedTest",
        "params": ONE_BETA_3,
        "blocks": [("b", "G")],
        "steps": [
            _expect(
                status={"b": "undecided"},
                processing={"b": False},
                preferred={"b": False},
                at_height={1: None},
            ),
        ],
    },
    {
        "name": "StatusOrProcessingIssuedTest",
        "params": ONE_BETA_3,
        "blocks": [("b", "G")],
        "steps": [
            ("add", "b"),
            _expect(
                status={"b": "undecided"},
                processing={"b": True},
                preferred={"b": True},
                at_height={1: "b"},
            ),
        ],
    },
    {
        "name": "RecordPollAcceptSingleBlockTest",
        "params": (1, 1, 1, 2),
        "blocks": [("b", "G")],
        "steps": [
            ("add", "b"),
            ("poll", {"b": 1}),
            _expect(preference="b", processing_count=1, status={"b": "undecided"}),
            ("poll", {"b": 1}),
            _expect(preference="b", processing_count=0, status={"b": "accepted"}),
        ],
    },
    {
        "name": "RecordPollAcceptAndRejectTest",
        "params": (1, 1, 1, 2),
        "blocks": [("first", "G"), ("second", "G")],
        "steps": [
            ("add", "first"),
            ("add", "second"),
            ("poll", {"first": 1}),
            _expect(
                preference="first",
                processing_count=2,
                status={"first": "undecided", "second": "undecided"},
            ),
            ("poll", {"first": 1}),
            _expect(
                preference="first",
                processing_count=0,
                status={"first": "accepted", "second": "rejected"},
            ),
        ],
    },
    {
        "name": "RecordPollSplitVoteNoChangeTest",
        "params": (2, 2, 2, 1),
        "blocks": [("first", "G"), ("second", "G")],
        "same_bit0": [("first", "second")],
        "steps": [
            ("add", "first"),
            ("add", "second"),
            ("poll", {"first": 1, "second": 1}),
            _expect(preference="first", processing_count=2, polls=(1, 0)),
            ("poll", {"first": 1, "second": 1}),
            _expect(preference="first", processing_count=2, polls=(1, 1)),
        ],
    },
    {
        "name": "RecordPollWhenFinalizedTest",
        "params": (1, 1, 1, 1),
        "blocks": [],
        "steps": [
            ("poll", {"G": 1}),
            _expect(processing_count=0, preference="G"),
        ],
    },
    {
        "name": "RecordPollRejectTransitivelyTest",
        "params": (1, 1, 1, 1),
        "blocks": [("b0", "G"), ("b1", "G"), ("b2", "b1")],
        "steps": [
            ("add", "b0"),
            ("add", "b1"),
            ("add", "b2"),
            ("poll", {"b0": 1}),
            _expect(
                processing_count=0,
                preference="b0",
                status={"b0": "accepted", "b1": "rejected", "b2": "rejected"},
            ),
        ],
    },
    {
        "name": "RecordPollTransitivelyResetConfidenceTest",
        "params": (1, 1, 1, 2),
        "blocks": [("b0", "G"), ("b1", "G"), ("b2", "b1"), ("b3", "b1")],
        "steps": [
            ("add", "b0"),
            ("add", "b1"),
            ("add", "b2"),
            ("add", "b3"),
            ("poll", {"b2": 1}),
            _expect(processing_count=4, preference="b2"),
            ("poll", {}),
            _expect(processing_count=4, preference="b2"),
            ("poll", {"b2": 1}),
            _expect(processing_count=4, preference="b2"),
            ("poll", {"b3": 1}),
            _expect(processing_count=2, preference="b3"),
            ("poll", {"b3": 1}),
            _expect(
                processing_count=0,
                preference="b3",
                status={
                    "b0": "rejected",
                    "b1": "accepted",
                    "b2": "rejected",
                    "b3": "accepted",
                },
            ),
        ],
    },
    {
        "name": "RecordPollInvalidVoteTest",
        "params": (1, 1, 1, 2),
        "blocks": [("b", "G")],
        "steps": [
            ("add", "b"),
            ("poll", {"b": 1}),
            ("poll", {"unknown": 1}),
            ("poll", {"b": 1}),
            _expect(processing_count=1, preference="b"),
        ],
    },
    {
        "name": "RecordPollTransitiveVotingTest",
        "params": (3, 3, 3, 1),
        "blocks": [("b0", "G"), ("b1", "b0"), ("b2", "b1"), ("b3", "b0"), ("b4", "b3")],
        "steps": [
            ("add", "b0"),
            ("add", "b1"),
            ("add", "b2"),
            ("add", "b3"),
            ("add", "b4"),
            ("poll", {"b0": 1, "b2": 1, "b4": 1}),
            _expect(
                processing_count=4,
                preference="b2",
                status={
                    "b0": "accepted",
                    "b1": "undecided",
                    "b2": "undecided",
                    "b3": "undecided",
                    "b4": "undecided",
                },
            ),
            ("poll", {"b2": 3}),
            _expect(
                processing_count=0,
                preference="b2",
                status={
                    "b0": "accepted",
                    "b1": "accepted",
                    "b2": "accepted",
                    "b3": "rejected",
                    "b4": "rejected",
                },
            ),
        ],
    },
    {
        "name": "RecordPollDivergedVotingWithNoConflictingBitTest",
        "params": (1, 1, 1, 2),
        "blocks": [("b0", "G"), ("b1", "G"), ("b2", "G"), ("b3", "b2")],
        "pinned": {"b0": "06", "b1": "08", "b2": "01"},
        "steps": [
            ("add", "b0"),
            ("add", "b1"),
            ("poll", {"b0": 1}),
            ("add", "b2"),
            ("add", "b3"),
            _expect(
                preference="b0",
                status={name: "undecided" for name in ("b0", "b1", "b2", "b3")},
            ),
            ("poll", {"b3": 1}),
            _expect(
                processing_count=4,
                status={name: "undecided" for name in ("b0", "b1", "b2", "b3")},
            ),
        ],
    },
    {
        "name": "RecordPollChangePreferredChainTest",
        "params": (1, 1, 1, 10),
        "blocks": [("a1", "G"), ("b1", "G"), ("a2", "a1"), ("b2", "b1")],
        "steps": [
            ("add", "a1"),
            ("add", "a2"),
            ("add", "b1"),
            ("add", "b2"),
            _expect(
                preference="a2",
                preferred={"a1": True, "a2": True, "b1": False, "b2": False},
                at_height={1: "a1", 2: "a2"},
            ),
            ("poll", {"b2": 1}),
            _expect(
                preference="b2",
                preferred={"a1": False, "a2": False, "b1": True, "b2": True},
                at_height={1: "b1", 2: "b2"},
            ),
            ("poll", {"a1": 1}),
            ("poll", {"a1": 1}),
            _expect(
                preference="a2",
                preferred={"a1": True, "a2": True, "b1": False, "b2": False},
                at_height={1: "a1", 2: "a2"},
            ),
        ],
    },
    {
        "name": "LastAcceptedTest",
        "params": (1, 1, 1, 2),
        "blocks": [("b0", "G"), ("b1", "b0"), ("b2", "b1"), ("b1c", "b0")],
        "steps": [
            _expect(last_accepted="G"),
            ("add", "b0"),
            ("add", "b1"),
            ("add", "b1c"),
            ("add", "b2"),
            _expect(last_accepted="G"),
            ("poll", {"b0": 1}),
            _expect(last_accepted="G"),
            ("poll", {"b1": 1}),
            _expect(last_accepted="b0"),
            ("poll", {"b1": 1}),
            _expect(last_accepted="b1"),
            ("poll", {"b2": 1}),
            _expect(last_accepted="b1"),
            ("poll", {"b2": 1}),
            _expect(last_accepted="b2"),
        ],
    },
    {
        "name": "ErrorOnAcceptTest",
        "params": (1, 1, 1, 1),
        "blocks": [("b", "G")],
        "accept_fails": ["b"],
        "steps": [("add", "b"), ("poll", {"b": 1}, "raises")],
    },
    {
        "name": "ErrorOnRejectSiblingTest",
        "params": (1, 1, 1, 1),
        "blocks": [("b0", "G"), ("b1", "G")],
        "reject_fails": ["b1"],
        "steps": [("add", "b0"), ("add", "b1"), ("poll", {"b0": 1}, "raises")],
    },
    {
        "name": "ErrorOnTransitiveRejectionTest",
        "params": (1, 1, 1, 1),
        "blocks": [("b0", "G"), ("b1", "G"), ("b2", "b1")],
        "reject_fails": ["b2"],
        "steps": [
            ("add", "b0"),
            ("add", "b1"),
            ("add", "b2"),
            ("poll", {"b0": 1}, "raises"),
        ],
    },
    {
        "name": "ErrorOnAddDecidedBlockTest",
        "params": (1, 1, 1, 1),
        "blocks": [],
        "steps": [("add", "G", "UnknownParentBlock")],
    },
    {
        "name": "RecordPollWithDefaultParameters",
        "params": "default",
        "blocks": [("b1", "G"), ("b2", "G")],
        "steps": [
            ("add", "b1"),
            ("add", "b2"),
            *[
                step
                for _ in range(20)
                for step in (_expect(processing_count=2), ("poll", {"b1": 15}))
            ],
            _expect(processing_count=0, status={"b1": "accepted", "b2": "rejected"}),
        ],
    },
    {
        "name": "RecordPollRegressionCalculateInDegreeIndegreeCalculation",
        "params": (3, 2, 2, 1),
        "blocks": [("b1", "G"), ("b2", "b1"), ("b3", "b2")],
        "steps": [
            ("add", "b1"),
            ("add", "b2"),
            ("add", "b3"),
            ("poll", {"b2": 1, "b3": 2}),
            _expect(status={"b1": "accepted", "b2": "accepted", "b3": "accepted"}),
        ],
    },
    {
        # Not upstream's: a chain whose blocks gather confidence in the same polls; the
        # second poll finalizes the parent's tree and then the child's, so both are
        # accepted at once (the child, voted through its parent, must not falter).
        "name": "ChainAcceptedInOnePoll",
        "params": (1, 1, 1, 2),
        "blocks": [("a", "G"), ("b", "a")],
        "steps": [
            ("add", "a"),
            ("add", "b"),
            ("poll", {"b": 1}),
            _expect(processing_count=2, status={"a": "undecided", "b": "undecided"}),
            ("poll", {"b": 1}),
            _expect(processing_count=0, status={"a": "accepted", "b": "accepted"}),
        ],
    },
    {
        # Not upstream's: a block added twice while processing.
        "name": "DuplicateAdd",
        "params": ONE_BETA_3,
        "blocks": [("b", "G")],
        "steps": [("add", "b"), ("add", "b", "DuplicateBlock"), _expect(processing_count=1)],
    },
]
