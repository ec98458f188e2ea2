"""A run's report as a test reads it: the JSON-shaped ``as_dict()`` (typed ``dict[str,
object]`` by the reports, whose shape varies by section) handed out as ``Any`` below the top,
so a test may index into it and compare."""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["reported"]


class _Report(Protocol):
    def as_dict(self) -> dict[str, object]: ...


def reported(report: _Report) -> dict[str, Any]:
    """``report.as_dict()``, each section typed ``Any``."""
    return report.as_dict()
