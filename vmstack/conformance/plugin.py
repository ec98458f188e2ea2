"""The vmstack pytest plugin (entry point ``pytest11: vmstack``): fixtures for layer tests.

It loads in every pytest run of an environment where vmstack is installed, so it imports
nothing heavy at load time: OpenTelemetry's SDK and prometheus-client are imported by the
fixtures that use them, when a test asks for one.

Fixtures:

- ``vmstack_memory_vm``: :func:`vmstack.conformance.memory_vm`, the recording test VM factory.
- ``vmstack_registry``: a fresh prometheus ``CollectorRegistry`` (never the global one).
- ``vmstack_spans``: a :class:`SpanRecorder`: an SDK tracer whose finished spans are kept in
  memory (skips the test if ``opentelemetry-sdk`` is not installed).

Option: ``--vmstack-max-examples N`` sets how many Hypothesis examples each property of
:class:`vmstack.conformance.LayerConformance` tries (default: the kit class's
``max_examples``).

Loading the plugin registers the kit's modules for pytest's assertion rewriting, so a
failing kit test shows the values it compared.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.trace import Tracer
    from prometheus_client import CollectorRegistry

    from vmstack.conformance.doubles import MemoryVM

__all__ = ["KIT_MODULES", "MAX_EXAMPLES_OPTION", "SpanRecorder"]

#: The kit's modules that hold its assertions (a package stands for all its submodules).
#: The kit's failures show the compared values only if pytest rewrites these asserts.
#: pytest does that by itself for plugin modules of a regular install, not of an editable
#: one; so they are registered here, before anything imports them.
KIT_MODULES = (
    "vmstack.conformance.base",
    "vmstack.conformance.checks",
    "vmstack.conformance.contracts",
    "vmstack.conformance.declarations",
    "vmstack.conformance.kit",
    "vmstack.conformance.stacks",
    "vmstack.conformance.stores",
)
pytest.register_assert_rewrite(*KIT_MODULES)

#: The ``config.getoption`` name of ``--vmstack-max-examples``.
MAX_EXAMPLES_OPTION = "vmstack_max_examples"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("vmstack", "vmstack layer conformance kit")
    group.addoption(
        "--vmstack-max-examples",
        dest=MAX_EXAMPLES_OPTION,
        type=int,
        default=None,
        metavar="N",
        help="Hypothesis examples per property of the vmstack layer conformance kit.",
    )


class SpanRecorder:
    """An OpenTelemetry SDK tracer with its finished spans kept in memory.

    Each recorder has its own ``TracerProvider``; the global provider is never set, so
    recorders of different tests never see each other's spans. The provider is not
    registered for shutdown at exit (tests make many): call :meth:`shutdown`, or drop it.
    """

    def __init__(self) -> None:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter,
        )

        self.provider = TracerProvider(shutdown_on_exit=False)
        self.exporter = InMemorySpanExporter()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer: Tracer = self.provider.get_tracer("vmstack.conformance")

    def spans(self) -> list[ReadableSpan]:
        """The finished spans, in the order they ended."""
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        """The finished spans called ``name``."""
        return [span for span in self.exporter.get_finished_spans() if span.name == name]

    def names(self) -> list[str]:
        """The names of the finished spans, in the order they ended."""
        return [span.name for span in self.exporter.get_finished_spans()]

    def clear(self) -> None:
        """Forget the spans finished so far."""
        self.exporter.clear()

    def shutdown(self) -> None:
        """Shut the provider down (its processor and exporter with it)."""
        self.provider.shutdown()


@pytest.fixture
def vmstack_memory_vm() -> Callable[..., MemoryVM]:
    """The factory of recording in-memory chain VMs: ``memory_vm(batching=..., blocks=...)``."""
    from vmstack.conformance.doubles import memory_vm

    return memory_vm


@pytest.fixture
def vmstack_registry() -> CollectorRegistry:
    """A fresh prometheus-client registry for one test."""
    from prometheus_client import CollectorRegistry

    return CollectorRegistry()


@pytest.fixture
def vmstack_spans() -> Iterator[SpanRecorder]:
    """A :class:`SpanRecorder` for one test (skipped without ``opentelemetry-sdk``)."""
    pytest.importorskip("opentelemetry.sdk.trace", reason="needs opentelemetry-sdk")
    recorder = SpanRecorder()
    yield recorder
    recorder.shutdown()
