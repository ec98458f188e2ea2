"""Poll vectors: avalanchego's ``snow/consensus/snowman/poll/early_term_traversal_test.go``
and ``set_test.go``, as data (BSD-3; see NOTICE here). The cases on metrics registration
and on the String() of upstream's bags are left out.

Block IDs are hex (``"01"`` is upstream's ``ids.ID{1}``); validators are names.

``EARLY_TERM``: ``alphas`` (preference, confidence), ``polled`` (validators, a name listed
twice sampled twice), ``parents`` ({block: parent}, the traversal) and steps
``("vote", validator, block)``, ``("drop", validator)``, ``("finished", bool)`` and
``("result", {block: votes})``.

``SET``: ``alpha`` (both alphas, no traversal) and steps ``("add", request, validators,
returns)``, ``("vote", request, validator, block, results)``, ``("drop", request, validator,
results)`` (``results``: the finished polls' votes, oldest first) and ``("len", n)``.
"""

from __future__ import annotations

from typing import Any

Case = dict[str, Any]
FIVE = ["vdr1", "vdr2", "vdr3", "vdr4", "vdr5"]

EARLY_TERM: list[Case] = [
    {
        "name": "TestEarlyTermNoTraversalResults",
        "alphas": (1, 1),
        "polled": ["vdr1"],
        "parents": {},
        "steps": [("vote", "vdr1", "01"), ("finished", True), ("result", {"01": 1})],
    },
    {
        "name": "TestEarlyTermNoTraversalDropsDuplicatedVotes",
        "alphas": (2, 2),
        "polled": ["vdr1", "vdr2"],
        "parents": {},
        "steps": [
            ("vote", "vdr1", "01"),
            ("finished", False),
            ("vote", "vdr1", "01"),
            ("finished", False),
            ("vote", "vdr2", "01"),
            ("finished", True),
        ],
    },
    {
        "name": "TestEarlyTermNoTraversalTerminatesEarlyWithoutAlphaPreference",
        "alphas": (2, 2),
        "polled": ["vdr1", "vdr2", "vdr3"],
        "parents": {},
        "steps": [("drop", "vdr1"), ("finished", False), ("drop", "vdr2"), ("finished", True)],
    },
    {
        "name": "TestEarlyTermNoTraversalTerminatesEarlyWithAlphaPreference",
        "alphas": (3, 5),
        "polled": FIVE,
        "parents": {},
        "steps": [
            ("vote", "vdr1", "01"),
            ("finished", False),
            ("vote", "vdr2", "01"),
            ("finished", False),
            ("vote", "vdr3", "01"),
            ("finished", False),
            ("drop", "vdr4"),
            ("finished", True),
        ],
    },
    {
        "name": "TestEarlyTermNoTraversalTerminatesEarlyWithAlphaConfidence",
        "alphas": (3, 3),
        "polled": FIVE,
        "parents": {},
        "steps": [
            ("vote", "vdr1", "01"),
            ("finished", False),
            ("vote", "vdr2", "01"),
            ("finished", False),
            ("vote", "vdr3", "01"),
            ("finished", True),
        ],
    },
    {
        "name": "TestEarlyTermForSharedAncestor",
        "alphas": (4, 4),
        "polled": ["vdr1", "vdr2", "vdr3", "vdr4"],
        "parents": {"02": "01", "03": "01", "04": "01"},
        "steps": [
            ("vote", "vdr1", "02"),
            ("finished", False),
            ("vote", "vdr2", "03"),
            ("finished", False),
            ("vote", "vdr3", "04"),
            ("finished", False),
            ("vote", "vdr4", "01"),
            ("finished", True),
        ],
    },
    {
        "name": "TestEarlyTermNoTraversalWithWeightedResponses",
        "alphas": (2, 2),
        "polled": ["vdr1", "vdr2", "vdr2"],
        "parents": {},
        "steps": [("vote", "vdr2", "01"), ("finished", True), ("result", {"01": 2})],
    },
    {
        "name": "TestEarlyTermNoTraversalDropWithWeightedResponses",
        "alphas": (2, 2),
        "polled": ["vdr1", "vdr2", "vdr2"],
        "parents": {},
        "steps": [("drop", "vdr2"), ("finished", True)],
    },
    {
        "name": "TestEarlyTermTraversalNotAllBlocksAreVotedOn",
        "alphas": (3, 3),
        "polled": FIVE,
        "parents": {"02": "01", "03": "02", "04": "03", "05": "04"},
        "steps": [
            ("vote", "vdr1", "01"),
            ("finished", False),
            ("vote", "vdr2", "02"),
            ("finished", False),
            ("vote", "vdr3", "02"),
            ("finished", False),
            ("vote", "vdr4", "05"),
            ("finished", True),
        ],
    },
    {
        "name": "TestPollNoPrematureFinish",
        "alphas": (3, 3),
        "polled": FIVE,
        "parents": {"04": "01", "02": "01"},
        "steps": [
            ("vote", "vdr1", "01"),
            ("finished", False),
            ("vote", "vdr2", "01"),
            ("finished", False),
            ("vote", "vdr3", "02"),
            ("finished", False),
            ("vote", "vdr4", "04"),
            ("finished", False),
        ],
    },
    {
        "name": "TestEarlyTermTraversalForest",
        "alphas": (4, 4),
        "polled": FIVE,
        "parents": {"000f": "0000", "0f0f": "fff0", "0f00": "0000"},
        "steps": [
            ("vote", "vdr1", "0f00"),
            ("finished", False),
            ("vote", "vdr2", "fff0"),
            ("finished", False),
            ("vote", "vdr3", "0f0f"),
            ("finished", False),
            ("drop", "vdr4"),
            ("finished", True),
        ],
    },
    {
        "name": "TestEarlyTermTraversalTransitiveTree",
        "alphas": (4, 4),
        "polled": FIVE,
        "parents": {
            "00ff": "0f0f",
            "0f0f": "0f00",
            "0f00": "0000",
            "ffff": "000f",
            "000f": "fff0",
            "fff0": "0000",
        },
        "steps": [
            ("vote", "vdr1", "00ff"),
            ("finished", False),
            ("vote", "vdr2", "ffff"),
            ("finished", False),
            ("vote", "vdr3", "00ff"),
            ("finished", False),
            ("vote", "vdr4", "ffff"),
            ("finished", True),
        ],
    },
]

THREE = ["vdr1", "vdr2", "vdr3"]

SET: list[Case] = [
    {
        "name": "TestCreateAndFinishPollOutOfOrder_NewerFinishesFirst",
        "alpha": 3,
        "steps": [
            ("add", 1, THREE, True),
            ("add", 2, THREE, True),
            ("len", 2),
            ("vote", 1, "vdr1", "01", []),
            ("vote", 2, "vdr2", "02", []),
            ("vote", 2, "vdr3", "02", []),
            ("vote", 2, "vdr1", "02", []),
            ("vote", 1, "vdr2", "01", []),
            ("vote", 1, "vdr3", "01", [{"01": 3}, {"02": 3}]),
        ],
    },
    {
        "name": "TestCreateAndFinishPollOutOfOrder_OlderFinishesFirst",
        "alpha": 3,
        "steps": [
            ("add", 1, THREE, True),
            ("add", 2, THREE, True),
            ("len", 2),
            ("vote", 1, "vdr1", "01", []),
            ("vote", 2, "vdr2", "02", []),
            ("vote", 2, "vdr3", "02", []),
            ("vote", 1, "vdr2", "01", []),
            ("vote", 1, "vdr3", "01", [{"01": 3}]),
            ("vote", 2, "vdr1", "02", [{"02": 3}]),
        ],
    },
    {
        "name": "TestCreateAndFinishPollOutOfOrder_UnfinishedPollsGaps",
        "alpha": 3,
        "steps": [
            ("add", 1, THREE, True),
            ("add", 2, THREE, True),
            ("add", 3, THREE, True),
            ("len", 3),
            ("vote", 2, "vdr3", "02", []),
            ("vote", 2, "vdr2", "02", []),
            ("vote", 2, "vdr1", "02", []),
            ("vote", 3, "vdr2", "03", []),
            ("vote", 3, "vdr3", "03", []),
            ("vote", 3, "vdr1", "03", []),
            ("vote", 1, "vdr1", "01", []),
            ("vote", 1, "vdr2", "01", []),
            ("vote", 1, "vdr3", "01", [{"01": 3}, {"02": 3}, {"03": 3}]),
        ],
    },
    {
        "name": "TestCreateAndFinishSuccessfulPoll",
        "alpha": 2,
        "steps": [
            ("len", 0),
            ("add", 0, ["vdr1", "vdr2"], True),
            ("len", 1),
            ("add", 0, ["vdr1", "vdr2"], False),
            ("len", 1),
            ("vote", 1, "vdr1", "01", []),
            ("vote", 0, "vdr1", "01", []),
            ("vote", 0, "vdr1", "01", []),
            ("vote", 0, "vdr2", "01", [{"01": 2}]),
        ],
    },
    {
        "name": "TestCreateAndFinishFailedPoll",
        "alpha": 1,
        "steps": [
            ("len", 0),
            ("add", 0, ["vdr1", "vdr2"], True),
            ("len", 1),
            ("add", 0, ["vdr1", "vdr2"], False),
            ("len", 1),
            ("drop", 1, "vdr1", []),
            ("drop", 0, "vdr1", []),
            ("drop", 0, "vdr1", []),
            ("drop", 0, "vdr2", [{}]),
        ],
    },
]
