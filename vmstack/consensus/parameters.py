"""The parameters of Snowman consensus, with avalanchego's defaults and rules
(``snow/consensus/snowball/parameters.go``).

Building a :class:`Parameters` never raises, so a test can give only the fields it needs
(a bit tree reads only ``k``, the two alphas and ``beta``); :meth:`Parameters.verify` applies
upstream's rules where a caller wants them. Neither the bit tree nor the block tree calls it.
"""

from __future__ import annotations

import attrs

from vmstack.errors import ParametersInvalid

__all__ = ["DEFAULT_PARAMETERS", "MIN_PERCENT_CONNECTED_BUFFER", "Parameters"]

#: The share of stake above ``alpha_confidence / k`` that
#: :meth:`Parameters.min_percent_connected_healthy` adds as a safety margin (upstream's
#: ``MinPercentConnectedBuffer``).
MIN_PERCENT_CONNECTED_BUFFER = 0.2


def _half(value: int) -> int:
    """``value / 2`` as Go's integer division computes it (truncated toward zero)."""
    return value // 2 if value >= 0 else -((-value) // 2)


@attrs.frozen(slots=True)
class Parameters:
    """Snowball and Snowman parameters.

    ``k`` validators are sampled per poll; ``alpha_preference`` votes change a preference,
    ``alpha_confidence`` votes raise confidence, ``beta`` consecutive confident polls
    finalize; the engine keeps ``concurrent_repolls`` polls outstanding and builds while
    fewer than ``optimal_processing`` blocks process; health reports trouble past
    ``max_outstanding_items`` processing blocks or a block processing longer than
    ``max_item_processing_time`` seconds.
    """

    k: int = 20
    alpha_preference: int = 15
    alpha_confidence: int = 15
    beta: int = 20
    concurrent_repolls: int = 4
    optimal_processing: int = 10
    max_outstanding_items: int = 256
    max_item_processing_time: float = 30.0

    def problems(self) -> list[str]:
        """Every rule these parameters break, one line each, in upstream's order; empty
        when they are valid."""
        found: list[str] = []
        if self.alpha_preference <= _half(self.k):
            found.append(
                f"k = {self.k}, alphaPreference = {self.alpha_preference}: "
                "fails the condition that: k/2 < alphaPreference"
            )
        if self.alpha_confidence < self.alpha_preference:
            found.append(
                f"alphaPreference = {self.alpha_preference}, alphaConfidence = "
                f"{self.alpha_confidence}: fails the condition that: "
                "alphaPreference <= alphaConfidence"
            )
        if self.k < self.alpha_confidence:
            found.append(
                f"k = {self.k}, alphaConfidence = {self.alpha_confidence}: "
                "fails the condition that: alphaConfidence <= k"
            )
        if self.concurrent_repolls <= 0:
            found.append(
                f"concurrentRepolls = {self.concurrent_repolls}: "
                "fails the condition that: 0 < concurrentRepolls"
            )
        if self.concurrent_repolls > self.beta:
            found.append(
                f"concurrentRepolls = {self.concurrent_repolls}, beta = {self.beta}: "
                "fails the condition that: concurrentRepolls <= beta"
            )
        if self.optimal_processing <= 0:
            found.append(
                f"optimalProcessing = {self.optimal_processing}: "
                "fails the condition that: 0 < optimalProcessing"
            )
        if self.max_outstanding_items <= 0:
            found.append(
                f"maxOutstandingItems = {self.max_outstanding_items}: "
                "fails the condition that: 0 < maxOutstandingItems"
            )
        if not self.max_item_processing_time > 0:
            found.append(
                f"maxItemProcessingTime = {self.max_item_processing_time}s: "
                "fails the condition that: 0 < maxItemProcessingTime"
            )
        return found

    def verify(self) -> None:
        """Raise :class:`~vmstack.errors.ParametersInvalid` naming every broken rule, where
        upstream's ``Verify`` fails: ``k/2 < alpha_preference <= alpha_confidence <= k``,
        ``0 < concurrent_repolls <= beta``, and positive ``optimal_processing``,
        ``max_outstanding_items`` and ``max_item_processing_time``."""
        found = self.problems()
        if found:
            raise ParametersInvalid(found)

    def min_percent_connected_healthy(self) -> float:
        """The share of stake (0 to 1) that must be connected for the node to be healthy:
        ``alpha_confidence / k`` raised by :data:`MIN_PERCENT_CONNECTED_BUFFER` of the rest
        (0.8 for the defaults)."""
        ratio = self.alpha_confidence / self.k
        return ratio * (1 - MIN_PERCENT_CONNECTED_BUFFER) + MIN_PERCENT_CONNECTED_BUFFER


#: avalanchego's ``DefaultParameters``.
DEFAULT_PARAMETERS = Parameters()
