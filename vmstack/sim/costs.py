"""What each call costs in simulated time, measured from the real calls.

The simulation charges every serving, parsing and executing call to the simulated clock of
the node that makes it. The charge comes from a :class:`CostModel`: a linear fit
``base + per_block * blocks + per_byte * bytes`` of the wall time that the real calls take
on the real stack. Keeping the charge a model (rather than the wall time of each call in
the run) is what makes a run a pure function of its seed and its cost model:
:func:`calibrate` measures this machine and returns the model it found, which a run records
and can reuse (``vmstack simulate --costs FILE``). :data:`REFERENCE_COSTS` is the model
calibrated on the reference machine (2 cores, CPython 3.11) and is the default.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence

import attrs

__all__ = [
    "CostModel",
    "OperationCost",
    "REFERENCE_COSTS",
    "fit_cost",
    "mean_cost",
]


@attrs.frozen
class OperationCost:
    """Seconds one call costs: ``base + per_block * blocks + per_byte * bytes``."""

    base: float = 0.0
    per_block: float = 0.0
    per_byte: float = 0.0

    def __attrs_post_init__(self) -> None:
        for name in ("base", "per_block", "per_byte"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not (math.isfinite(value) and value >= 0)
            ):
                raise ValueError(f"{name} must be a finite number of seconds >= 0, got {value!r}")

    def __call__(self, blocks: int, nbytes: int) -> float:
        return self.base + self.per_block * blocks + self.per_byte * nbytes


@attrs.frozen
class CostModel:
    """The cost of each kind of call the bootstrap makes.

    ``serve_batched``: one ``get_ancestors`` answer through the serving stack.
    ``serve_serial``: one ``get_block`` through the serving stack (the fallback walk).
    ``parse_batched``: one ``batched_parse_block`` call. ``parse_serial``: one
    ``parse_block``. ``execute``: ``verify`` + ``accept`` of one block.
    """

    serve_batched: OperationCost
    serve_serial: OperationCost
    parse_batched: OperationCost
    parse_serial: OperationCost
    execute: OperationCost
    source: str = "reference"

    def as_dict(self) -> dict[str, object]:
        """The model as plain data (JSON-ready), ``source`` included."""
        return attrs.asdict(self)

    @classmethod
    def from_dict(cls, data: object) -> CostModel:
        """Read a model written by :meth:`as_dict`; a ``ValueError`` naming the field that
        is missing or malformed (costs are finite numbers of seconds, never negative)."""
        if not isinstance(data, dict):
            raise ValueError(f"a cost model is a JSON object, got {type(data).__name__}")
        fields: dict[str, OperationCost] = {}
        for name in ("serve_batched", "serve_serial", "parse_batched", "parse_serial", "execute"):
            if name not in data:
                raise ValueError(f"field {name!r} is missing")
            entry = data[name]
            if not isinstance(entry, dict):
                raise ValueError(f"field {name!r} is not an object of costs")
            unknown = set(entry) - {"base", "per_block", "per_byte"}
            if unknown:
                raise ValueError(f"field {name!r} has unknown costs {sorted(unknown)}")
            try:
                fields[name] = OperationCost(**entry)
            except ValueError as error:
                raise ValueError(f"field {name!r}: {error}") from None
        return cls(**fields, source=str(data.get("source", "file")))


def fit_cost(samples: Sequence[tuple[int, int, float]], *, by: str = "bytes") -> OperationCost:
    """Fit ``seconds = base + slope * x`` to ``(blocks, bytes, seconds)`` samples, where ``x``
    is the sample's bytes (``by="bytes"``) or blocks (``by="blocks"``); no coefficient comes
    out negative (a fit that would go negative falls back to a proportional or flat cost)."""
    if by not in ("bytes", "blocks"):
        raise ValueError(f"fit by 'bytes' or 'blocks', not {by!r}")
    if not samples:
        raise ValueError("cannot fit a cost to no samples")
    xs = [float(nbytes if by == "bytes" else blocks) for blocks, nbytes, _ in samples]
    seconds = [elapsed for _, _, elapsed in samples]

    def cost(base: float, slope: float) -> OperationCost:
        return (
            OperationCost(base=base, per_byte=slope)
            if by == "bytes"
            else OperationCost(base=base, per_block=slope)
        )

    if len(set(xs)) < 2:
        return cost(statistics.median(seconds), 0.0)
    slope, intercept = statistics.linear_regression(xs, seconds)
    if slope <= 0:
        return cost(statistics.median(seconds), 0.0)
    if intercept < 0:
        return cost(
            0.0, statistics.median(s / x for s, x in zip(seconds, xs, strict=True) if x > 0)
        )
    return cost(intercept, slope)


def mean_cost(samples: Sequence[tuple[int, int, float]]) -> OperationCost:
    """``seconds = per_block * blocks`` with the mean cost per block over ``(blocks, bytes,
    seconds)`` samples: for calls whose cost depends on the kind of block more than on its
    size (a signed post-fork block costs a signature check), measured on a chain with the
    same mix of kinds as the one simulated."""
    blocks = sum(count for count, _, _ in samples)
    if blocks < 1:
        raise ValueError("cannot average a cost over no blocks")
    return OperationCost(per_block=sum(seconds for _, _, seconds in samples) / blocks)


def time_call(call: Callable[[], object]) -> float:
    """Wall seconds of one ``call()``."""
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


# Calibrated with `vmstack simulate --calibrate` on the reference machine (2 cores,
# CPython 3.11) on the default chain: 10 transactions a block, the full stack.
REFERENCE_COSTS = CostModel(
    serve_batched=OperationCost(base=4.3e-6, per_block=1.35e-5),
    serve_serial=OperationCost(base=4.0e-3, per_byte=1.1e-7),
    parse_batched=OperationCost(per_block=2.8e-4),
    parse_serial=OperationCost(per_block=3.0e-4),
    execute=OperationCost(base=3.45e-3, per_byte=5.5e-7),
)
