"""Parameter vectors: avalanchego's ``snow/consensus/snowball/parameters_test.go``, as data
(BSD-3; see NOTICE here).

``VERIFY``: name, the fields ``(k, alpha_preference, alpha_confidence, beta,
concurrent_repolls, optimal_processing, max_outstanding_items, max_item_processing_time)``
and whether ``verify`` accepts them. ``MIN_PERCENT_CONNECTED``: name, ``k``,
``alpha_confidence`` (None: the defaults) and the share expected (to 0.1%).
"""

from __future__ import annotations

# upstream's MaxItemProcessingTime of 1 is one nanosecond.
NS = 1e-9

VERIFY: list[tuple[str, tuple[int, int, int, int, int, int, int, float], bool]] = [
    ("valid", (1, 1, 1, 1, 1, 1, 1, NS), True),
    ("invalid K", (0, 1, 1, 1, 1, 1, 1, NS), False),
    ("invalid AlphaPreference 1", (2, 1, 1, 1, 1, 1, 1, NS), False),
    ("invalid AlphaPreference 0", (1, 0, 1, 1, 1, 1, 1, NS), False),
    ("invalid AlphaConfidence", (3, 3, 2, 1, 1, 1, 1, NS), False),
    ("invalid beta", (1, 1, 1, 0, 1, 1, 1, NS), False),
    ("first half fun alphaConfidence", (30, 28, 30, 2, 1, 1, 1, NS), True),
    ("second half fun alphaConfidence", (3, 2, 3, 2, 1, 1, 1, NS), True),
    ("fun invalid alphaConfidence", (1, 28, 3, 2, 1, 1, 1, NS), False),
    ("too few ConcurrentRepolls", (1, 1, 1, 1, 0, 1, 1, NS), False),
    ("too many ConcurrentRepolls", (1, 1, 1, 1, 2, 1, 1, NS), False),
    ("invalid OptimalProcessing", (1, 1, 1, 1, 1, 0, 1, NS), False),
    ("invalid MaxOutstandingItems", (1, 1, 1, 1, 1, 1, 0, NS), False),
    ("invalid MaxItemProcessingTime", (1, 1, 1, 1, 1, 1, 1, 0.0), False),
]

MIN_PERCENT_CONNECTED: list[tuple[str, int | None, int | None, float]] = [
    ("default", None, None, 0.8),
    ("custom", 5, 4, 0.84),
    ("custom", 1001, 501, 0.6),
]
