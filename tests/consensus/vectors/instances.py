"""Snowflake and snowball instance vectors: avalanchego's ``unary_snowflake_test.go``,
``unary_snowball_test.go``, ``binary_snowflake_test.go``, ``binary_snowball_test.go``,
``nnary_snowflake_test.go``, ``nnary_snowball_test.go`` and ``snowflake_test.go``'s
error-driven suites, as data (BSD-3; see NOTICE here).

A case names the instance ``kind``, its ``alpha_preference`` and termination
``conditions`` (``(alpha_confidence, beta)`` each) and the initial ``choice`` (0/1 for binary,
an ID name for n-ary, None for unary). Steps act on the current instance:

- ``("poll", count, choice)`` and ``("unsuccessful",)``; ``("add", choice)`` (n-ary);
- ``("clone", name)`` / ``("extend", name, choice)`` keep a copy / a binary extension of the
  current instance under ``name``; ``("use", name)`` makes it current (the first is
  ``"main"``);
- ``("expect", {...})`` with any of ``preference``, ``flake_preference`` (the snowflake's
  own), ``finalized``, ``confidence``, ``strength`` (a unary snowball's count) and ``str``.
"""

from __future__ import annotations

from typing import Any, cast

Case = dict[str, Any]

SINGLE_1_2 = [(2, 2)]


def _expect(**fields: object) -> tuple[str, dict[str, object]]:
    return ("expect", fields)


CASES: list[Case] = [
    {
        "name": "TestUnarySnowflake",
        "kind": "unary_snowflake",
        "alpha_preference": 1,
        "conditions": [(2, 2)],
        "choice": None,
        "steps": [
            ("poll", 2, None),
            _expect(confidence=[1], finalized=False),
            ("unsuccessful",),
            _expect(confidence=[0], finalized=False),
            ("poll", 2, None),
            _expect(confidence=[1], finalized=False),
            ("clone", "clone"),
            ("use", "clone"),
            _expect(confidence=[1], finalized=False),
            ("extend", "binary", 0),
            ("use", "binary"),
            ("unsuccessful",),
            ("poll", 2, 1),
            _expect(finalized=False),
            ("poll", 2, 1),
            _expect(preference=1, finalized=True),
            ("use", "main"),
            ("poll", 2, None),
            _expect(confidence=[2], finalized=True),
            ("unsuccessful",),
            _expect(confidence=[0], finalized=True),
            ("poll", 2, None),
            _expect(confidence=[1], finalized=True),
        ],
    },
    {
        "name": "TestUnarySnowball",
        "kind": "unary_snowball",
        "alpha_preference": 1,
        "conditions": [(2, 2)],
        "choice": None,
        "steps": [
            ("poll", 2, None),
            _expect(strength=1, confidence=[1], finalized=False),
            ("poll", 1, None),
            _expect(strength=2, confidence=[0], finalized=False),
            ("poll", 2, None),
            _expect(strength=3, confidence=[1], finalized=False),
            ("unsuccessful",),
            _expect(strength=3, confidence=[0], finalized=False),
            ("poll", 2, None),
            _expect(strength=4, confidence=[1], finalized=False),
            ("clone", "clone"),
            ("use", "clone"),
            _expect(strength=4, confidence=[1], finalized=False),
            ("extend", "binary", 0),
            ("use", "binary"),
            _expect(
                str="SB(Preference = 0, PreferenceStrength[0] = 4, PreferenceStrength[1] = 0, "
                "SF(Confidence = [1], Finalized = false, SL(Preference = 0)))"
            ),
            ("unsuccessful",),
            *[
                step
                for _ in range(5)
                for step in (
                    _expect(preference=0, finalized=False),
                    ("poll", 2, 1),
                    ("unsuccessful",),
                )
            ],
            _expect(preference=1, finalized=False),
            ("poll", 2, 1),
            _expect(preference=1, finalized=False),
            ("poll", 2, 1),
            _expect(preference=1, finalized=True),
            ("use", "main"),
            _expect(str="SB(PreferenceStrength = 4, SF(Confidence = [1], Finalized = false))"),
        ],
    },
    {
        "name": "TestBinarySnowflake",
        "kind": "binary_snowflake",
        "alpha_preference": 2,
        "conditions": [(3, 2)],
        "choice": 0,
        "steps": [
            _expect(preference=0, finalized=False),
            ("poll", 3, 1),
            _expect(preference=1, finalized=False),
            ("poll", 3, 0),
            _expect(preference=0, finalized=False),
            ("poll", 3, 1),
            _expect(preference=1, finalized=False),
            ("poll", 3, 1),
            _expect(preference=1, finalized=True),
        ],
    },
    {
        "name": "TestBinarySnowflakeRecordPollPreference",
        "kind": "binary_snowflake",
        "alpha_preference": 1,
        "conditions": SINGLE_1_2,
        "choice": 0,
        "steps": [
            ("poll", 2, 1),
            _expect(preference=1, finalized=False),
            ("poll", 2, 0),
            _expect(preference=0, finalized=False),
            ("poll", 1, 0),
            _expect(preference=0, finalized=False),
            ("poll", 2, 0),
            _expect(preference=0, finalized=False),
            ("poll", 2, 0),
            _expect(
                preference=0,
                finalized=True,
                str="SF(Confidence = [2], Finalized = true, SL(Preference = 0))",
            ),
        ],
    },
    {
        "name": "TestBinarySnowflakeRecordUnsuccessfulPoll",
        "kind": "binary_snowflake",
        "alpha_preference": 1,
        "conditions": SINGLE_1_2,
        "choice": 0,
        "steps": [
            ("poll", 2, 1),
            _expect(preference=1, finalized=False),
            ("unsuccessful",),
            ("poll", 2, 1),
            _expect(preference=1, finalized=False),
            ("poll", 2, 1),
            _expect(
                preference=1,
                finalized=True,
                str="SF(Confidence = [2], Finalized = true, SL(Preference = 1))",
            ),
        ],
    },
    {
        "name": "TestBinarySnowflakeAcceptWeirdColor",
        "kind": "binary_snowflake",
        "alpha_preference": 1,
        "conditions": SINGLE_1_2,
        "choice": 1,
        "steps": [
            _expect(preference=1, finalized=False),
            ("poll", 2, 1),
            ("unsuccessful",),
            _expect(preference=1, finalized=False),
            ("poll", 2, 1),
            ("unsuccessful",),
            _expect(preference=1, finalized=False),
            ("poll", 2, 0),
            _expect(preference=0, finalized=False),
            ("poll", 2, 0),
            _expect(
                preference=0,
                finalized=True,
                str="SF(Confidence = [2], Finalized = true, SL(Preference = 0))",
            ),
        ],
    },
    {
        "name": "TestBinarySnowball",
        "kind": "binary_snowball",
        "alpha_preference": 2,
        "conditions": [(3, 2)],
        "choice": 0,
        "steps": [
            _expect(preference=0, finalized=False),
            ("poll", 3, 1),
            _expect(preference=1, finalized=False),
            ("poll", 3, 0),
            _expect(preference=1, finalized=False),
            ("poll", 3, 1),
            _expect(preference=1, finalized=False),
            ("poll", 3, 1),
            _expect(preference=1, finalized=True),
        ],
    },
    {
        "name": "TestBinarySnowballRecordPollPreference",
        "kind": "binary_snowball",
        "alpha_preference": 1,
        "conditions": SINGLE_1_2,
        "choice": 0,
        "steps": [
            _expect(preference=0, finalized=False),
            ("poll", 2, 1),
            _expect(preference=1, finalized=False),
            ("poll", 2, 0),
            _expect(preference=1, finalized=False),
            ("poll", 1, 0),
            _expect(preference=0, finalized=False),
            ("poll", 2, 0),
            _expect(preference=0, finalized=False),
            ("poll", 2, 0),
            _expect(
                preference=0,
                finalized=True,
                str="SB(Preference = 0, PreferenceStrength[0] = 4, PreferenceStrength[1] = 1, "
                "SF(Confidence = [2], Finalized = true, SL(Preference = 0)))",
            ),
        ],
    },
    {
        "name": "TestBinarySnowballRecordUnsuccessfulPoll",
        "kind": "binary_snowball",
        "alpha_preference": 1,
        "conditions": SINGLE_1_2,
        "choice": 0,
        "steps": [
            ("poll", 2, 1),
            _expect(preference=1, finalized=False),
            ("unsuccessful",),
            ("poll", 2, 1),
            _expect(preference=1, finalized=False),
            ("poll", 2, 1),
            _expect(
                preference=1,
                finalized=True,
                str="SB(Preference = 1, PreferenceStrength[0] = 0, PreferenceStrength[1] = 3, "
                "SF(Confidence = [2], Finalized = true, SL(Preference = 1)))",
            ),
        ],
    },
    {
        "name": "TestBinarySnowballAcceptWeirdColor",
        "kind": "binary_snowball",
        "alpha_preference": 1,
        "conditions": SINGLE_1_2,
        "choice": 1,
        "steps": [
            _expect(preference=1, finalized=False),
            ("poll", 2, 1),
            ("unsuccessful",),
            _expect(preference=1, finalized=False),
            ("poll", 2, 1),
            ("unsuccessful",),
            _expect(preference=1, finalized=False),
            ("poll", 2, 0),
            _expect(preference=1, finalized=False),
            ("poll", 2, 0),
            _expect(
                preference=0,
                finalized=True,
                str="SB(Preference = 1, PreferenceStrength[0] = 2, PreferenceStrength[1] = 2, "
                "SF(Confidence = [2], Finalized = true, SL(Preference = 0)))",
            ),
        ],
    },
    {
        "name": "TestBinarySnowballLockColor",
        "kind": "binary_snowball",
        "alpha_preference": 1,
        "conditions": [(2, 1)],
        "choice": 0,
        "steps": [
            ("poll", 2, 0),
            _expect(preference=0, finalized=True),
            ("poll", 2, 1),
            _expect(preference=0, finalized=True),
            ("poll", 1, 1),
            ("poll", 2, 1),
            _expect(
                preference=0,
                finalized=True,
                str="SB(Preference = 1, PreferenceStrength[0] = 1, PreferenceStrength[1] = 3, "
                "SF(Confidence = [1], Finalized = true, SL(Preference = 0)))",
            ),
        ],
    },
    {
        "name": "TestNnarySnowflake",
        "kind": "nnary_snowflake",
        "alpha_preference": 1,
        "conditions": SINGLE_1_2,
        "choice": "Red",
        "steps": [
            ("add", "Blue"),
            ("add", "Green"),
            _expect(preference="Red", finalized=False),
            ("poll", 2, "Blue"),
            _expect(preference="Blue", finalized=False),
            ("poll", 1, "Red"),
            _expect(preference="Red", finalized=False),
            ("poll", 2, "Red"),
            _expect(preference="Red", finalized=False),
            ("poll", 2, "Red"),
            _expect(preference="Red", finalized=True),
            ("poll", 1, "Blue"),
            _expect(preference="Red", finalized=True),
            ("poll", 2, "Blue"),
            _expect(preference="Red", finalized=True),
        ],
    },
    {
        "name": "TestNnarySnowflakeConfidenceReset",
        "kind": "nnary_snowflake",
        "alpha_preference": 1,
        "conditions": [(2, 4)],
        "choice": "Red",
        "steps": [
            ("add", "Blue"),
            ("add", "Green"),
            _expect(preference="Red", finalized=False),
            *[s for _ in range(3) for s in (("poll", 2, "Blue"), _expect(preference="Blue"))],
            *[s for _ in range(3) for s in (("poll", 2, "Red"), _expect(preference="Red"))],
            _expect(finalized=False),
            ("poll", 2, "Red"),
            _expect(preference="Red", finalized=True),
        ],
    },
    {
        "name": "TestVirtuousNnarySnowflake",
        "kind": "nnary_snowflake",
        "alpha_preference": 1,
        "conditions": SINGLE_1_2,
        "choice": "Red",
        "steps": [
            _expect(preference="Red", finalized=False),
            ("poll", 2, "Red"),
            _expect(preference="Red", finalized=False),
            ("poll", 2, "Red"),
            _expect(preference="Red", finalized=True),
        ],
    },
    {
        "name": "TestNnarySnowball",
        "kind": "nnary_snowball",
        "alpha_preference": 1,
        "conditions": SINGLE_1_2,
        "choice": "Red",
        "steps": [
            ("add", "Blue"),
            ("add", "Green"),
            _expect(preference="Red", finalized=False),
            ("poll", 2, "Blue"),
            _expect(preference="Blue", finalized=False),
            ("poll", 2, "Red"),
            _expect(preference="Blue", finalized=False),
            ("poll", 1, "Red"),
            _expect(preference="Red", finalized=False),
            ("poll", 2, "Red"),
            _expect(preference="Red", finalized=False),
            ("poll", 1, "Blue"),
            _expect(preference="Red", finalized=False),
            ("poll", 2, "Blue"),
            _expect(preference="Red", finalized=False),
            ("poll", 2, "Blue"),
            _expect(preference="Blue", finalized=True),
        ],
    },
    {
        "name": "TestVirtuousNnarySnowball",
        "kind": "nnary_snowball",
        "alpha_preference": 1,
        "conditions": [(2, 1)],
        "choice": "Red",
        "steps": [
            _expect(preference="Red", finalized=False),
            ("poll", 2, "Red"),
            _expect(preference="Red", finalized=True),
        ],
    },
    {
        "name": "TestNarySnowballRecordUnsuccessfulPoll",
        "kind": "nnary_snowball",
        "alpha_preference": 1,
        "conditions": SINGLE_1_2,
        "choice": "Red",
        "steps": [
            ("add", "Blue"),
            _expect(preference="Red", finalized=False),
            ("poll", 2, "Blue"),
            _expect(preference="Blue", finalized=False),
            ("unsuccessful",),
            ("poll", 2, "Blue"),
            _expect(preference="Blue", finalized=False),
            ("poll", 2, "Blue"),
            _expect(
                preference="Blue",
                finalized=True,
                str="SB(Preference = TtF4d2QWbk5vzQGTEPrN48x6vwgAoAmKQ9cbp79inpQmcRKES, "
                "PreferenceStrength = 3, SF(Confidence = [2], Finalized = true, "
                "SL(Preference = TtF4d2QWbk5vzQGTEPrN48x6vwgAoAmKQ9cbp79inpQmcRKES)))",
            ),
            *[s for _ in range(4) for s in (("poll", 2, "Red"), _expect(preference="Blue"))],
            _expect(finalized=True),
        ],
    },
    {
        "name": "TestNarySnowballDifferentSnowflakeColor",
        "kind": "nnary_snowball",
        "alpha_preference": 1,
        "conditions": SINGLE_1_2,
        "choice": "Red",
        "steps": [
            ("add", "Blue"),
            _expect(preference="Red", finalized=False),
            ("poll", 2, "Blue"),
            _expect(flake_preference="Blue"),
            ("poll", 2, "Red"),
            _expect(preference="Blue", flake_preference="Red"),
        ],
    },
]

# snowflake_test.go's error-driven suites, run on every kind (the snowball kinds keep the
# snowflake's counters). Three termination conditions: (3, 4), (4, 3), (5, 2).
SUITE_ALPHA_PREFERENCE = 3
SUITE_CONDITIONS = [(3, 4), (4, 3), (5, 2)]
SUITE_CHOICES = {
    "unary_snowflake": (None, None),
    "unary_snowball": (None, None),
    "binary_snowflake": (0, 1),
    "binary_snowball": (0, 1),
    "nnary_snowflake": ("Red", "Green"),
    "nnary_snowball": ("Red", "Green"),
}


def _suite_case(name: str, kind: str, steps: list[tuple[Any, ...]]) -> Case:
    first = SUITE_CHOICES[kind][0]
    return {
        "name": f"{name}[{kind}]",
        "kind": kind,
        "alpha_preference": SUITE_ALPHA_PREFERENCE,
        "conditions": SUITE_CONDITIONS,
        "choice": first,
        "steps": steps,
    }


def _pref(kind: str, choice: object) -> dict[str, object]:
    return {} if kind.startswith("unary") else {"preference": choice}


def _suite() -> list[Case]:
    cases: list[Case] = []
    for kind, (choice0, choice1) in SUITE_CHOICES.items():
        for index, (alpha_confidence, beta) in enumerate(SUITE_CONDITIONS):
            terminate: list[tuple[Any, ...]] = []
            reset: list[tuple[Any, ...]] = [
                ("poll", alpha_confidence, choice0) for _ in range(beta - 1)
            ]
            reset.append(("unsuccessful",))
            reset.append(_expect(confidence=[0, 0, 0], finalized=False, **_pref(kind, choice0)))
            for poll in range(beta):
                expected = [poll + 1 if j <= index else 0 for j in range(3)]
                expect = _expect(
                    confidence=expected, finalized=poll + 1 >= beta, **_pref(kind, choice0)
                )
                terminate += [("poll", alpha_confidence, choice0), expect]
                reset += [("poll", alpha_confidence, choice0), expect]
            cases.append(_suite_case(f"TerminateInBetaPolls{index}", kind, terminate))
            cases.append(_suite_case(f"Reset{index}", kind, reset))
        highest = [
            ("poll", 5, choice0),
            _expect(confidence=[1, 1, 1], finalized=False, **_pref(kind, choice0)),
            ("poll", 4, choice0),
            _expect(confidence=[2, 2, 0], finalized=False, **_pref(kind, choice0)),
            ("poll", 3, choice0),
            _expect(confidence=[3, 0, 0], finalized=False, **_pref(kind, choice0)),
            ("poll", 5, choice0),
            _expect(confidence=[4, 0, 0], finalized=True, **_pref(kind, choice0)),
        ]
        cases.append(_suite_case("ResetHighestAlphaConfidence", kind, highest))
        if kind.startswith("unary"):
            continue
        switch = [
            ("poll", 3, choice0),
            _expect(confidence=[1, 0, 0], finalized=False, **_pref(kind, choice0)),
            ("poll", 2, choice1),
            _expect(confidence=[0, 0, 0], finalized=False, **_pref(kind, choice0)),
            ("poll", 3, choice0),
            _expect(confidence=[1, 0, 0], finalized=False, **_pref(kind, choice0)),
            ("poll", 0, choice0),
            _expect(confidence=[0, 0, 0], finalized=False, **_pref(kind, choice0)),
            ("poll", 3, choice1),
            _expect(confidence=[1, 0, 0], finalized=False, **_pref(kind, choice1)),
            ("poll", 5, choice1),
            _expect(confidence=[2, 1, 1], finalized=False, **_pref(kind, choice1)),
            ("poll", 5, choice1),
            _expect(confidence=[3, 2, 2], finalized=True, **_pref(kind, choice1)),
        ]
        if kind.endswith("snowball"):
            # The snowball's preference follows its poll counts, not the last poll: check
            # the snowflake's own preference, as upstream's suite does.
            switch = [
                (
                    "expect",
                    {
                        "flake_preference" if k == "preference" else k: v
                        for k, v in cast(dict[str, object], step[1]).items()
                    },
                )
                if step[0] == "expect"
                else step
                for step in switch
            ]
        cases.append(_suite_case("SwitchChoices", kind, switch))
    return cases


CASES += _suite()
