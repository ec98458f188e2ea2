"""A Prometheus registry as avalanchego's ``vm.VM/Gather`` answers it: client_model
``MetricFamily`` messages, one per metric, as the Go client library gathers them.

Counters are named with their ``_total`` suffix (the Go library's families carry the name
the metric was registered with, by convention ending in ``_total``); a ``_created`` sample
becomes the ``created_timestamp``. Histograms and summaries gather their buckets,
quantiles, count and sum per label set. Gauges are gauges; anything else (info, state
sets, unknown types) goes as untyped samples under their own names.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING

from google.protobuf.timestamp_pb2 import Timestamp

from vmstack.wrappers.rpc import metrics_pb2

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.metrics_core import Metric
    from prometheus_client.samples import Sample

__all__ = ["metric_families"]

_Labels = tuple[tuple[str, str], ...]


def _labels(sample: Sample, *, without: str = "") -> _Labels:
    return tuple(sorted((name, value) for name, value in sample.labels.items() if name != without))


def _label_pairs(labels: _Labels) -> list[metrics_pb2.LabelPair]:
    return [metrics_pb2.LabelPair(name=name, value=value) for name, value in labels]


def _timestamp(seconds: float) -> Timestamp:
    whole = math.floor(seconds)
    return Timestamp(seconds=whole, nanos=int((seconds - whole) * 1e9))


def _metric(metrics: dict[_Labels, metrics_pb2.Metric], labels: _Labels) -> metrics_pb2.Metric:
    if labels not in metrics:
        metrics[labels] = metrics_pb2.Metric(label=_label_pairs(labels))
    return metrics[labels]


def _counter(family: Metric) -> metrics_pb2.MetricFamily:
    metrics: dict[_Labels, metrics_pb2.Metric] = {}
    for sample in family.samples:
        metric = _metric(metrics, _labels(sample))
        if sample.name.endswith("_created"):
            metric.counter.created_timestamp.CopyFrom(_timestamp(sample.value))
        else:
            metric.counter.value = sample.value
    return metrics_pb2.MetricFamily(
        name=f"{family.name}_total",
        help=family.documentation,
        type=metrics_pb2.COUNTER,
        metric=list(metrics.values()),
    )


def _histogram(family: Metric) -> metrics_pb2.MetricFamily:
    metrics: dict[_Labels, metrics_pb2.Metric] = {}
    for sample in family.samples:
        suffix = sample.name[len(family.name) :]
        metric = _metric(metrics, _labels(sample, without="le"))
        histogram = metric.histogram
        if suffix == "_bucket":
            bound = float(sample.labels["le"])
            if not math.isinf(bound):  # the Go library leaves the +Inf bucket implicit
                histogram.bucket.add(cumulative_count=int(sample.value), upper_bound=bound)
        elif suffix == "_count":
            histogram.sample_count = int(sample.value)
        elif suffix == "_sum":
            histogram.sample_sum = sample.value
        elif suffix == "_created":
            histogram.created_timestamp.CopyFrom(_timestamp(sample.value))
    return metrics_pb2.MetricFamily(
        name=family.name,
        help=family.documentation,
        type=metrics_pb2.HISTOGRAM,
        metric=list(metrics.values()),
    )


def _summary(family: Metric) -> metrics_pb2.MetricFamily:
    metrics: dict[_Labels, metrics_pb2.Metric] = {}
    for sample in family.samples:
        suffix = sample.name[len(family.name) :]
        metric = _metric(metrics, _labels(sample, without="quantile"))
        summary = metric.summary
        if suffix == "_count":
            summary.sample_count = int(sample.value)
        elif suffix == "_sum":
            summary.sample_sum = sample.value
        elif suffix == "_created":
            summary.created_timestamp.CopyFrom(_timestamp(sample.value))
        elif "quantile" in sample.labels:
            summary.quantile.add(quantile=float(sample.labels["quantile"]), value=sample.value)
    return metrics_pb2.MetricFamily(
        name=family.name,
        help=family.documentation,
        type=metrics_pb2.SUMMARY,
        metric=list(metrics.values()),
    )


def _samples(family: Metric) -> Iterable[metrics_pb2.MetricFamily]:
    gauge = family.type == "gauge"
    by_name: dict[str, metrics_pb2.MetricFamily] = {}
    for sample in family.samples:
        out = by_name.setdefault(
            sample.name,
            metrics_pb2.MetricFamily(
                name=sample.name,
                help=family.documentation,
                type=metrics_pb2.GAUGE if gauge else metrics_pb2.UNTYPED,
            ),
        )
        metric = out.metric.add(label=_label_pairs(_labels(sample)))
        if gauge:
            metric.gauge.value = sample.value
        else:
            metric.untyped.value = sample.value
    return by_name.values()


def metric_families(registry: CollectorRegistry) -> list[metrics_pb2.MetricFamily]:
    """Every metric of ``registry`` as a ``MetricFamily``, sorted by name (as the Go
    library's ``Gather`` sorts them)."""
    families: list[metrics_pb2.MetricFamily] = []
    for family in registry.collect():
        if family.type == "counter":
            families.append(_counter(family))
        elif family.type == "histogram":
            families.append(_histogram(family))
        elif family.type == "summary":
            families.append(_summary(family))
        else:
            families.extend(_samples(family))
    return sorted(families, key=lambda family: family.name)
