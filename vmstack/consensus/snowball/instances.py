"""Snowflake and snowball instances: unary, binary and n-ary, as avalanchego's
``snow/consensus/snowball`` has them, and the two factories that make them.

An instance keeps one confidence counter per termination condition (an ``alpha_confidence``
threshold and the ``beta`` that finalizes it); the factories give every instance a single
condition, ``(alpha_confidence, beta)`` of the parameters. ``str()`` of an instance is
upstream's ``String()`` byte for byte (the bit tree's dump is made of them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, TypeVar

from vmstack.consensus.parameters import Parameters
from vmstack.wrappers.proposer.certificate import cb58encode

_Choice = TypeVar("_Choice")

__all__ = [
    "BinarySnowball",
    "BinarySnowflake",
    "Factory",
    "NnarySnowball",
    "NnarySnowflake",
    "SNOWBALL",
    "SNOWFLAKE",
    "TerminationCondition",
    "UnarySnowball",
    "UnarySnowflake",
    "single_termination_condition",
]

#: ``(alpha_confidence, beta)``: this many votes in a poll raise the counter; ``beta``
#: consecutive such polls finalize.
TerminationCondition = tuple[int, int]


def single_termination_condition(alpha_confidence: int, beta: int) -> list[TerminationCondition]:
    """The one condition every factory-made instance has."""
    return [(alpha_confidence, beta)]


def _go_bool(value: bool) -> str:
    return "true" if value else "false"


def _go_ints(values: Sequence[int]) -> str:
    """A Go ``%v`` of an int slice: ``[1 2 3]``."""
    return "[" + " ".join(str(value) for value in values) + "]"


def _raise_confidence(
    conditions: Sequence[TerminationCondition], confidence: list[int], count: int
) -> bool:
    """Raise the counters whose threshold ``count`` reaches and clear the others (the
    thresholds ascend); True when a counter reaches its ``beta``."""
    for index, (alpha_confidence, beta) in enumerate(conditions):
        if count < alpha_confidence:
            for rest in range(index, len(confidence)):
                confidence[rest] = 0
            return False
        confidence[index] += 1
        if confidence[index] >= beta:
            return True
    return False


class UnarySnowflake:
    """A snowflake instance over one choice. ``record_poll`` is called only for polls that
    reached ``alpha_preference`` (the bit tree checks that); it raises or clears the
    counters, and finalizes for good when one reaches its ``beta``."""

    __slots__ = ("alpha_preference", "confidence", "finalized_", "termination_conditions")

    def __init__(
        self, alpha_preference: int, termination_conditions: Sequence[TerminationCondition]
    ) -> None:
        self.alpha_preference = alpha_preference
        self.termination_conditions = tuple(termination_conditions)
        self.confidence = [0] * len(self.termination_conditions)
        self.finalized_ = False

    def record_poll(self, count: int) -> None:
        """A poll with ``count`` votes (at least ``alpha_preference``)."""
        if _raise_confidence(self.termination_conditions, self.confidence, count):
            self.finalized_ = True

    def record_unsuccessful_poll(self) -> None:
        """A poll short of ``alpha_preference``: every counter back to 0."""
        self.confidence = [0] * len(self.confidence)

    def finalized(self) -> bool:
        return self.finalized_

    def extend(self, choice: int) -> BinarySnowflake:
        """A binary instance preferring ``choice`` that inherits this one's counters."""
        binary = BinarySnowflake(self.alpha_preference, self.termination_conditions, choice)
        binary.confidence = list(self.confidence)
        binary.finalized_ = self.finalized_
        return binary

    def clone(self) -> UnarySnowflake:
        """An independent copy."""
        copy = UnarySnowflake(self.alpha_preference, self.termination_conditions)
        copy.confidence = list(self.confidence)
        copy.finalized_ = self.finalized_
        return copy

    def __str__(self) -> str:
        return (
            f"SF(Confidence = {_go_ints(self.confidence)}, Finalized = {_go_bool(self.finalized_)})"
        )


class UnarySnowball(UnarySnowflake):
    """A unary snowflake that also counts its successful polls (``preference_strength``)."""

    __slots__ = ("preference_strength",)

    def __init__(
        self, alpha_preference: int, termination_conditions: Sequence[TerminationCondition]
    ) -> None:
        super().__init__(alpha_preference, termination_conditions)
        self.preference_strength = 0

    def record_poll(self, count: int) -> None:
        if count >= self.alpha_preference:
            self.preference_strength += 1
        super().record_poll(count)

    def extend(self, choice: int) -> BinarySnowball:
        binary = BinarySnowball(self.alpha_preference, self.termination_conditions, choice)
        binary.confidence = list(self.confidence)
        binary.finalized_ = self.finalized_
        binary.preference_strength[choice] = self.preference_strength
        return binary

    def clone(self) -> UnarySnowball:
        copy = UnarySnowball(self.alpha_preference, self.termination_conditions)
        copy.confidence = list(self.confidence)
        copy.finalized_ = self.finalized_
        copy.preference_strength = self.preference_strength
        return copy

    def __str__(self) -> str:
        return f"SB(PreferenceStrength = {self.preference_strength}, {super().__str__()})"


class _Snowflake(Generic[_Choice]):
    """A snowflake instance over choices of one type: a poll of at least
    ``alpha_preference`` votes for a choice makes it the preference (clearing the counters
    when it changes), then raises the counters it reaches."""

    __slots__ = (
        "alpha_preference",
        "confidence",
        "finalized_",
        "slush_preference",
        "termination_conditions",
    )

    def __init__(
        self,
        alpha_preference: int,
        termination_conditions: Sequence[TerminationCondition],
        choice: _Choice,
    ) -> None:
        self.alpha_preference = alpha_preference
        self.termination_conditions = tuple(termination_conditions)
        self.confidence = [0] * len(self.termination_conditions)
        self.finalized_ = False
        self.slush_preference: _Choice = choice

    def preference(self) -> _Choice:
        return self.slush_preference

    def record_poll(self, count: int, choice: _Choice) -> None:
        """A poll with ``count`` votes for ``choice``; nothing changes once finalized."""
        if self.finalized_:
            return
        if count < self.alpha_preference:
            self.record_unsuccessful_poll()
            return
        if choice != self.slush_preference:
            self.confidence = [0] * len(self.confidence)
        self.slush_preference = choice
        if _raise_confidence(self.termination_conditions, self.confidence, count):
            self.finalized_ = True

    def record_unsuccessful_poll(self) -> None:
        self.confidence = [0] * len(self.confidence)

    def finalized(self) -> bool:
        return self.finalized_

    def _preference_text(self) -> str:
        return str(self.slush_preference)

    def __str__(self) -> str:
        return (
            f"SF(Confidence = {_go_ints(self.confidence)}, "
            f"Finalized = {_go_bool(self.finalized_)}, "
            f"SL(Preference = {self._preference_text()}))"
        )


class BinarySnowflake(_Snowflake[int]):
    """A snowflake instance over two choices, 0 and 1: a poll of at least
    ``alpha_preference`` votes for a choice makes it the preference (clearing the counters
    when it changes), then raises the counters it reaches."""

    __slots__ = ()


class BinarySnowball(BinarySnowflake):
    """A binary snowflake whose preference is the choice with more successful polls (ties
    kept lazily); once finalized, the snowflake's choice."""

    __slots__ = ("preference_strength", "strongest")

    def __init__(
        self,
        alpha_preference: int,
        termination_conditions: Sequence[TerminationCondition],
        choice: int,
    ) -> None:
        super().__init__(alpha_preference, termination_conditions, choice)
        self.strongest = choice
        self.preference_strength = [0, 0]

    def preference(self) -> int:
        if self.finalized_:
            return self.slush_preference
        return self.strongest

    def record_poll(self, count: int, choice: int) -> None:
        if count >= self.alpha_preference:
            self.preference_strength[choice] += 1
            if self.preference_strength[choice] > self.preference_strength[1 - choice]:
                self.strongest = choice
        super().record_poll(count, choice)

    def __str__(self) -> str:
        return (
            f"SB(Preference = {self.strongest}, "
            f"PreferenceStrength[0] = {self.preference_strength[0]}, "
            f"PreferenceStrength[1] = {self.preference_strength[1]}, {super().__str__()})"
        )


class NnarySnowflake(_Snowflake[bytes]):
    """A snowflake instance over any number of 32-byte choices (the flat instance, not the
    bit tree)."""

    __slots__ = ()

    def add(self, choice: bytes) -> None:
        """A new choice: nothing to remember for a snowflake."""

    def _preference_text(self) -> str:
        return cb58encode(self.slush_preference)


class NnarySnowball(NnarySnowflake):
    """An n-ary snowflake whose preference is the first choice to reach the highest count
    of successful polls; once finalized, the snowflake's choice."""

    __slots__ = ("max_preference_strength", "preference_strength", "strongest")

    def __init__(
        self,
        alpha_preference: int,
        termination_conditions: Sequence[TerminationCondition],
        choice: bytes,
    ) -> None:
        super().__init__(alpha_preference, termination_conditions, choice)
        self.strongest = choice
        self.max_preference_strength = 0
        self.preference_strength: dict[bytes, int] = {}

    def preference(self) -> bytes:
        if self.finalized_:
            return self.slush_preference
        return self.strongest

    def record_poll(self, count: int, choice: bytes) -> None:
        if count >= self.alpha_preference:
            strength = self.preference_strength.get(choice, 0) + 1
            self.preference_strength[choice] = strength
            if strength > self.max_preference_strength:
                self.strongest = choice
                self.max_preference_strength = strength
        super().record_poll(count, choice)

    def __str__(self) -> str:
        return (
            f"SB(Preference = {cb58encode(self.strongest)}, "
            f"PreferenceStrength = {self.max_preference_strength}, {super().__str__()})"
        )


class Factory:
    """Makes the instances of one kind (``"snowflake"`` or ``"snowball"``) from the
    parameters: ``alpha_preference`` and the single condition
    ``(alpha_confidence, beta)``."""

    __slots__ = ("kind",)

    def __init__(self, kind: str) -> None:
        if kind not in ("snowflake", "snowball"):
            raise ValueError(f"unknown instance kind {kind!r}: 'snowflake' or 'snowball'")
        self.kind = kind

    def new_unary(self, params: Parameters) -> UnarySnowflake:
        """A unary instance."""
        conditions = single_termination_condition(params.alpha_confidence, params.beta)
        if self.kind == "snowball":
            return UnarySnowball(params.alpha_preference, conditions)
        return UnarySnowflake(params.alpha_preference, conditions)

    def new_nnary(self, params: Parameters, choice: bytes) -> NnarySnowflake:
        """An n-ary instance preferring ``choice``."""
        conditions = single_termination_condition(params.alpha_confidence, params.beta)
        if self.kind == "snowball":
            return NnarySnowball(params.alpha_preference, conditions, choice)
        return NnarySnowflake(params.alpha_preference, conditions, choice)

    def __repr__(self) -> str:
        return f"Factory({self.kind!r})"


#: The factory Snowman runs on (avalanchego's ``snowball.SnowflakeFactory``).
SNOWFLAKE = Factory("snowflake")
#: avalanchego's ``snowball.SnowballFactory``.
SNOWBALL = Factory("snowball")
