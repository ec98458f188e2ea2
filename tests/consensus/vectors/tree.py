"""Bit tree vectors: avalanchego's ``snow/consensus/snowball/tree_test.go`` (the cases on the
snowball factory, with their ``String()`` dumps), as data (BSD-3; see NOTICE here).

A case gives the factory, ``params`` as ``(k, alpha_preference, alpha_confidence, beta)`` and
the initial choice; steps: ``("add", id)``, ``("poll", [id, ...], returns)`` (a bag: an ID
listed twice has two votes; ``returns`` None where upstream does not check it),
``("unsuccessful",)`` and ``("expect", {...})`` with any of ``preference``, ``finalized``
and ``str``.
"""

from __future__ import annotations

from typing import Any

Case = dict[str, Any]

UNARY0 = "SB(PreferenceStrength = 0, SF(Confidence = [0], Finalized = false))"
UNARY1 = "SB(PreferenceStrength = 1, SF(Confidence = [1], Finalized = false))"
INITIAL = UNARY0 + " Bits = [0, 256)"
LAST = "00" * 31 + "80"


def _binary(preference: int, strength0: int, strength1: int, confidence: int, slush: int) -> str:
    return (
        f"SB(Preference = {preference}, PreferenceStrength[0] = {strength0}, "
        f"PreferenceStrength[1] = {strength1}, SF(Confidence = [{confidence}], "
        f"Finalized = false, SL(Preference = {slush})))"
    )


def _expect(**fields: object) -> tuple[str, dict[str, object]]:
    return ("expect", fields)


B0 = _binary(0, 0, 0, 0, 0)

CASES: list[Case] = [
    {
        "name": "TestSnowballSingleton",
        "params": (1, 1, 1, 2),
        "choice": "Red",
        "steps": [
            _expect(finalized=False),
            ("poll", ["Red"], True),
            _expect(finalized=False),
            ("poll", [], False),
            _expect(finalized=False),
            ("poll", ["Red"], True),
            _expect(finalized=False),
            ("poll", ["Red"], True),
            _expect(preference="Red", finalized=True),
            ("add", "Blue"),
            _expect(finalized=True),
            ("poll", ["Blue"], None),
            _expect(preference="Red", finalized=True),
        ],
    },
    {
        "name": "TestSnowballRecordUnsuccessfulPoll",
        "params": (1, 1, 1, 3),
        "choice": "Red",
        "steps": [
            _expect(finalized=False),
            ("poll", ["Red"], True),
            ("unsuccessful",),
            ("poll", ["Red"], True),
            _expect(finalized=False),
            ("poll", ["Red"], True),
            _expect(finalized=False),
            ("poll", ["Red"], True),
            _expect(preference="Red", finalized=True),
        ],
    },
    {
        "name": "TestSnowballBinary",
        "params": (1, 1, 1, 2),
        "choice": "Red",
        "steps": [
            ("add", "Blue"),
            _expect(preference="Red", finalized=False),
            ("poll", ["Blue"], True),
            _expect(preference="Blue", finalized=False),
            ("poll", ["Red"], True),
            _expect(preference="Blue", finalized=False),
            ("poll", ["Blue"], True),
            _expect(preference="Blue", finalized=False),
            ("poll", ["Blue"], True),
            _expect(preference="Blue", finalized=True),
        ],
    },
    {
        "name": "TestSnowballLastBinary",
        "params": (1, 1, 1, 2),
        "choice": "00",
        "steps": [
            ("add", LAST),
            ("add", LAST),
            _expect(
                str=UNARY0 + " Bits = [0, 255)\n    " + B0 + " Bit = 255",
                preference="00",
                finalized=False,
            ),
            ("poll", [LAST], True),
            _expect(preference=LAST, finalized=False),
            _expect(str=UNARY1 + " Bits = [0, 255)\n    " + _binary(1, 0, 1, 1, 1) + " Bit = 255"),
            ("poll", [LAST], True),
            _expect(
                preference=LAST,
                finalized=True,
                str="SB(Preference = 1, PreferenceStrength[0] = 0, PreferenceStrength[1] = 2, "
                "SF(Confidence = [2], Finalized = true, SL(Preference = 1))) Bit = 255",
            ),
        ],
    },
    {
        "name": "TestSnowballFirstBinary",
        "params": (1, 1, 1, 2),
        "choice": "00",
        "steps": [
            ("add", "01"),
            _expect(
                str=f"{B0} Bit = 0\n    {UNARY0} Bits = [1, 256)\n    {UNARY0} Bits = [1, 256)",
                preference="00",
                finalized=False,
            ),
            ("poll", ["01"], True),
            _expect(
                preference="01",
                finalized=False,
                str=f"{_binary(1, 0, 1, 1, 1)} Bit = 0\n    {UNARY0} Bits = [1, 256)\n"
                f"    {UNARY1} Bits = [1, 256)",
            ),
            ("poll", ["01"], True),
            _expect(
                preference="01",
                finalized=True,
                str="SB(PreferenceStrength = 2, SF(Confidence = [2], Finalized = true)) "
                "Bits = [1, 256)",
            ),
        ],
    },
    {
        "name": "TestSnowballAddDecidedFirstBit",
        "params": (1, 1, 1, 2),
        "choice": "00",
        "steps": [
            ("add", "01"),
            ("add", "03"),
            _expect(
                str=f"{B0} Bit = 0\n    {UNARY0} Bits = [1, 256)\n    {B0} Bit = 1\n"
                f"        {UNARY0} Bits = [2, 256)\n        {UNARY0} Bits = [2, 256)",
                preference="00",
                finalized=False,
            ),
            ("poll", ["01"], True),
            _expect(
                preference="01",
                finalized=False,
                str=f"{_binary(1, 0, 1, 1, 1)} Bit = 0\n    {UNARY0} Bits = [1, 256)\n"
                f"    {_binary(0, 1, 0, 1, 0)} Bit = 1\n        {UNARY1} Bits = [2, 256)\n"
                f"        {UNARY0} Bits = [2, 256)",
            ),
            ("poll", ["03"], True),
            _expect(
                preference="01",
                finalized=False,
                str=f"{_binary(0, 1, 1, 1, 1)} Bit = 1\n    {UNARY1} Bits = [2, 256)\n"
                f"    {UNARY1} Bits = [2, 256)",
            ),
            ("add", "06"),
            _expect(
                str=f"{_binary(0, 1, 1, 1, 1)} Bit = 1\n    {UNARY1} Bits = [2, 256)\n"
                f"    {UNARY1} Bits = [2, 256)",
            ),
        ],
    },
    {
        "name": "TestSnowballAddPreviouslyRejected",
        "params": (1, 1, 1, 2),
        "choice": "00",
        "steps": [
            ("add", "02"),
            _expect(
                str=f"{UNARY0} Bits = [0, 1)\n    {B0} Bit = 1\n        {UNARY0} Bits = [2, 256)\n"
                f"        {UNARY0} Bits = [2, 256)",
                preference="00",
                finalized=False,
            ),
            ("poll", ["00"], True),
            _expect(
                str=f"{UNARY1} Bits = [0, 1)\n    {_binary(0, 1, 0, 1, 0)} Bit = 1\n"
                f"        {UNARY1} Bits = [2, 256)\n        {UNARY0} Bits = [2, 256)",
                preference="00",
                finalized=False,
            ),
            ("poll", ["02"], True),
            _expect(
                str=f"{_binary(0, 1, 1, 1, 1)} Bit = 1\n    {UNARY1} Bits = [2, 256)\n"
                f"    {UNARY1} Bits = [2, 256)",
                preference="00",
                finalized=False,
            ),
            ("add", "01"),
            _expect(
                str=f"{_binary(0, 1, 1, 1, 1)} Bit = 1\n    {UNARY1} Bits = [2, 256)\n"
                f"    {UNARY1} Bits = [2, 256)",
                preference="00",
                finalized=False,
            ),
        ],
    },
    {
        "name": "TestSnowballNewUnary",
        "params": (1, 1, 1, 3),
        "choice": "00",
        "steps": [
            ("add", "01"),
            _expect(
                str=f"{B0} Bit = 0\n    {UNARY0} Bits = [1, 256)\n    {UNARY0} Bits = [1, 256)",
                preference="00",
                finalized=False,
            ),
            ("poll", ["01"], True),
            _expect(
                str=f"{_binary(1, 0, 1, 1, 1)} Bit = 0\n    {UNARY0} Bits = [1, 256)\n"
                f"    {UNARY1} Bits = [1, 256)",
                preference="01",
                finalized=False,
            ),
            ("poll", ["01"], True),
            _expect(
                str=f"{_binary(1, 0, 2, 2, 1)} Bit = 0\n    {UNARY0} Bits = [1, 256)\n"
                "    SB(PreferenceStrength = 2, SF(Confidence = [2], Finalized = false)) "
                "Bits = [1, 256)",
                preference="01",
                finalized=False,
            ),
        ],
    },
    {
        "name": "TestSnowballTransitiveReset",
        "params": (1, 1, 1, 2),
        "choice": "00",
        "steps": [
            ("add", "02"),
            ("add", "08"),
            _expect(
                str=f"{UNARY0} Bits = [0, 1)\n    {B0} Bit = 1\n        {UNARY0} Bits = [2, 3)\n"
                f"            {B0} Bit = 3\n                {UNARY0} Bits = [4, 256)\n"
                f"                {UNARY0} Bits = [4, 256)\n        {UNARY0} Bits = [2, 256)",
                preference="00",
                finalized=False,
            ),
            ("poll", ["00"], True),
            _expect(
                str=f"{UNARY1} Bits = [0, 1)\n    {_binary(0, 1, 0, 1, 0)} Bit = 1\n"
                f"        {UNARY1} Bits = [2, 3)\n"
                f"            {_binary(0, 1, 0, 1, 0)} Bit = 3\n"
                f"                {UNARY1} Bits = [4, 256)\n"
                f"                {UNARY0} Bits = [4, 256)\n        {UNARY0} Bits = [2, 256)",
                preference="00",
                finalized=False,
            ),
            ("poll", [], False),
            _expect(
                str="SB(PreferenceStrength = 1, SF(Confidence = [0], Finalized = false)) "
                f"Bits = [0, 1)\n    {_binary(0, 1, 0, 1, 0)} Bit = 1\n"
                f"        {UNARY1} Bits = [2, 3)\n"
                f"            {_binary(0, 1, 0, 1, 0)} Bit = 3\n"
                f"                {UNARY1} Bits = [4, 256)\n"
                f"                {UNARY0} Bits = [4, 256)\n        {UNARY0} Bits = [2, 256)",
                preference="00",
                finalized=False,
            ),
            ("poll", ["00"], True),
            _expect(
                str="SB(PreferenceStrength = 2, SF(Confidence = [1], Finalized = false)) "
                f"Bits = [0, 1)\n    {_binary(0, 2, 0, 1, 0)} Bit = 1\n"
                "        SB(PreferenceStrength = 2, SF(Confidence = [1], Finalized = false)) "
                f"Bits = [2, 3)\n            {_binary(0, 2, 0, 1, 0)} Bit = 3\n"
                "                SB(PreferenceStrength = 2, SF(Confidence = [1], "
                "Finalized = false)) Bits = [4, 256)\n"
                f"                {UNARY0} Bits = [4, 256)\n        {UNARY0} Bits = [2, 256)",
                preference="00",
                finalized=False,
            ),
            ("poll", ["00"], True),
            _expect(
                str="SB(PreferenceStrength = 3, SF(Confidence = [2], Finalized = true)) "
                "Bits = [4, 256)",
                preference="00",
                finalized=True,
            ),
        ],
    },
    {
        "name": "TestSnowballTrinary",
        "params": (1, 1, 1, 2),
        "choice": "Green",
        "steps": [
            ("add", "Red"),
            ("add", "Blue"),
            _expect(preference="Green", finalized=False),
            ("poll", ["Red"], True),
            _expect(preference="Red", finalized=False),
            ("poll", ["Blue"], True),
            _expect(preference="Red", finalized=False),
            ("poll", ["Green"], True),
            _expect(preference="Blue", finalized=False),
            ("poll", ["Red"], False),
            _expect(preference="Blue", finalized=False),
            ("poll", ["Green"], True),
            _expect(preference="Green", finalized=False),
        ],
    },
    {
        "name": "TestSnowballCloseTrinary",
        "params": (1, 1, 1, 2),
        "choice": "01",
        "steps": [
            ("add", "02"),
            ("add", "03"),
            _expect(preference="01", finalized=False),
            ("poll", ["01"], True),
            _expect(preference="01", finalized=False),
            ("poll", ["03"], True),
            _expect(preference="01", finalized=False),
            ("poll", ["02"], False),
            _expect(preference="01", finalized=False),
            ("poll", ["02"], False),
            _expect(preference="01", finalized=False),
        ],
    },
    {
        "name": "TestSnowballResetChild",
        "params": (1, 1, 1, 2),
        "choice": "00",
        "steps": [
            ("add", "02"),
            ("add", "01"),
            _expect(preference="00", finalized=False),
            ("poll", ["00"], True),
            _expect(
                str=f"{_binary(0, 1, 0, 1, 0)} Bit = 0\n    {_binary(0, 1, 0, 1, 0)} Bit = 1\n"
                f"        {UNARY1} Bits = [2, 256)\n        {UNARY0} Bits = [2, 256)\n"
                f"    {UNARY0} Bits = [1, 256)",
                preference="00",
                finalized=False,
            ),
            ("poll", [], False),
            _expect(
                str=f"{_binary(0, 1, 0, 0, 0)} Bit = 0\n    {_binary(0, 1, 0, 1, 0)} Bit = 1\n"
                f"        {UNARY1} Bits = [2, 256)\n        {UNARY0} Bits = [2, 256)\n"
                f"    {UNARY0} Bits = [1, 256)",
                preference="00",
                finalized=False,
            ),
            ("poll", ["00"], True),
            _expect(
                str=f"{_binary(0, 2, 0, 1, 0)} Bit = 0\n    {_binary(0, 2, 0, 1, 0)} Bit = 1\n"
                "        SB(PreferenceStrength = 2, SF(Confidence = [1], Finalized = false)) "
                f"Bits = [2, 256)\n        {UNARY0} Bits = [2, 256)\n"
                f"    {UNARY0} Bits = [1, 256)",
                preference="00",
                finalized=False,
            ),
        ],
    },
    {
        "name": "TestSnowballResetSibling",
        "params": (1, 1, 1, 2),
        "choice": "00",
        "steps": [
            ("add", "02"),
            ("add", "01"),
            _expect(preference="00", finalized=False),
            ("poll", ["02"], True),
            _expect(
                str=f"{_binary(0, 1, 0, 1, 0)} Bit = 0\n    {_binary(1, 0, 1, 1, 1)} Bit = 1\n"
                f"        {UNARY0} Bits = [2, 256)\n        {UNARY1} Bits = [2, 256)\n"
                f"    {UNARY0} Bits = [1, 256)",
                preference="02",
                finalized=False,
            ),
            ("poll", ["01"], True),
            _expect(
                str=f"{_binary(0, 1, 1, 1, 1)} Bit = 0\n    {_binary(1, 0, 1, 1, 1)} Bit = 1\n"
                f"        {UNARY0} Bits = [2, 256)\n        {UNARY1} Bits = [2, 256)\n"
                f"    {UNARY1} Bits = [1, 256)",
                preference="02",
                finalized=False,
            ),
            ("poll", ["02"], True),
            _expect(
                str=f"{_binary(0, 2, 1, 1, 0)} Bit = 0\n    {_binary(1, 0, 2, 1, 1)} Bit = 1\n"
                f"        {UNARY0} Bits = [2, 256)\n"
                "        SB(PreferenceStrength = 2, SF(Confidence = [1], Finalized = false)) "
                f"Bits = [2, 256)\n    {UNARY1} Bits = [1, 256)",
                preference="02",
                finalized=False,
            ),
        ],
    },
    {
        "name": "TestSnowballFineGrained",
        "params": (1, 1, 1, 2),
        "choice": "00",
        "steps": [
            _expect(str=INITIAL, preference="00", finalized=False),
            ("add", "03"),
            _expect(
                str=f"{B0} Bit = 0\n    {UNARY0} Bits = [1, 256)\n    {UNARY0} Bits = [1, 256)",
                preference="00",
                finalized=False,
            ),
            ("add", "01"),
            _expect(
                str=f"{B0} Bit = 0\n    {UNARY0} Bits = [1, 256)\n"
                f"    {_binary(1, 0, 0, 0, 1)} Bit = 1\n        {UNARY0} Bits = [2, 256)\n"
                f"        {UNARY0} Bits = [2, 256)",
                preference="00",
                finalized=False,
            ),
            ("add", "04"),
            _expect(
                str=f"{B0} Bit = 0\n    {UNARY0} Bits = [1, 2)\n        {B0} Bit = 2\n"
                f"            {UNARY0} Bits = [3, 256)\n            {UNARY0} Bits = [3, 256)\n"
                f"    {_binary(1, 0, 0, 0, 1)} Bit = 1\n        {UNARY0} Bits = [2, 256)\n"
                f"        {UNARY0} Bits = [2, 256)",
                preference="00",
                finalized=False,
            ),
            ("poll", ["00"], True),
            _expect(
                str=f"{_binary(0, 1, 0, 1, 0)} Bit = 0\n    {UNARY1} Bits = [1, 2)\n"
                f"        {_binary(0, 1, 0, 1, 0)} Bit = 2\n"
                f"            {UNARY1} Bits = [3, 256)\n            {UNARY0} Bits = [3, 256)\n"
                f"    {_binary(1, 0, 0, 0, 1)} Bit = 1\n        {UNARY0} Bits = [2, 256)\n"
                f"        {UNARY0} Bits = [2, 256)",
                preference="00",
                finalized=False,
            ),
            ("poll", ["04"], True),
            _expect(
                str=f"{_binary(0, 1, 1, 1, 1)} Bit = 2\n    {UNARY1} Bits = [3, 256)\n"
                f"    {UNARY1} Bits = [3, 256)",
                preference="00",
                finalized=False,
            ),
            ("poll", ["04"], True),
            _expect(
                str="SB(PreferenceStrength = 2, SF(Confidence = [2], Finalized = true)) "
                "Bits = [3, 256)",
                preference="04",
                finalized=True,
            ),
        ],
    },
    {
        "name": "TestSnowballDoubleAdd",
        "params": (1, 1, 1, 3),
        "choice": "Red",
        "steps": [
            ("add", "Red"),
            _expect(str=INITIAL, preference="Red", finalized=False),
        ],
    },
    {
        "name": "TestSnowballFilterBinaryChildren",
        "params": (1, 1, 1, 2),
        "choice": "00",
        "steps": [
            _expect(str=INITIAL, preference="00", finalized=False),
            ("add", "01"),
            _expect(
                str=f"{B0} Bit = 0\n    {UNARY0} Bits = [1, 256)\n    {UNARY0} Bits = [1, 256)",
                preference="00",
                finalized=False,
            ),
            ("add", "04"),
            _expect(
                str=f"{B0} Bit = 0\n    {UNARY0} Bits = [1, 2)\n        {B0} Bit = 2\n"
                f"            {UNARY0} Bits = [3, 256)\n            {UNARY0} Bits = [3, 256)\n"
                f"    {UNARY0} Bits = [1, 256)",
                preference="00",
                finalized=False,
            ),
            ("poll", ["00"], True),
            _expect(
                str=f"{_binary(0, 1, 0, 1, 0)} Bit = 0\n    {UNARY1} Bits = [1, 2)\n"
                f"        {_binary(0, 1, 0, 1, 0)} Bit = 2\n"
                f"            {UNARY1} Bits = [3, 256)\n            {UNARY0} Bits = [3, 256)\n"
                f"    {UNARY0} Bits = [1, 256)",
                preference="00",
                finalized=False,
            ),
            ("add", "02"),
            _expect(
                str=f"{_binary(0, 1, 0, 1, 0)} Bit = 0\n    {_binary(0, 1, 0, 1, 0)} Bit = 1\n"
                f"        {_binary(0, 1, 0, 1, 0)} Bit = 2\n"
                f"            {UNARY1} Bits = [3, 256)\n            {UNARY0} Bits = [3, 256)\n"
                f"        {UNARY0} Bits = [2, 256)\n    {UNARY0} Bits = [1, 256)",
                preference="00",
                finalized=False,
            ),
            ("poll", ["02"], True),
            _expect(
                str=f"{_binary(0, 1, 1, 1, 1)} Bit = 1\n    {_binary(0, 1, 0, 1, 0)} Bit = 2\n"
                f"        {UNARY1} Bits = [3, 256)\n        {UNARY0} Bits = [3, 256)\n"
                f"    {UNARY1} Bits = [2, 256)",
                preference="00",
                finalized=False,
            ),
        ],
    },
    {
        "name": "TestSnowballRecordPreferencePollBinary",
        "params": (3, 2, 3, 2),
        "choice": "Red",
        "steps": [
            ("add", "Blue"),
            _expect(preference="Red", finalized=False),
            ("poll", ["Blue", "Blue", "Blue"], True),
            _expect(preference="Blue", finalized=False),
            ("poll", ["Red", "Red"], True),
            _expect(preference="Blue", finalized=False),
            ("poll", ["Red", "Red", "Red"], True),
            _expect(preference="Red", finalized=False),
            ("poll", ["Red", "Red", "Red"], True),
            _expect(preference="Red", finalized=True),
        ],
    },
    {
        "name": "TestSnowballRecordPreferencePollUnary",
        "params": (3, 2, 3, 2),
        "choice": "Red",
        "steps": [
            _expect(preference="Red", finalized=False),
            ("poll", ["Red", "Red"], True),
            _expect(preference="Red", finalized=False),
            ("add", "Blue"),
            ("poll", ["Blue", "Blue", "Blue"], True),
            _expect(preference="Red", finalized=False),
            ("poll", ["Blue", "Blue", "Blue"], True),
            _expect(preference="Blue", finalized=True),
        ],
    },
]
