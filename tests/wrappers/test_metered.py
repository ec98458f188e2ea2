"""MeteredVM: observations read back from the prometheus-client registry."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY, CollectorRegistry

from vmstack import BatchingNotImplemented, InvalidBlock, batched_parse_block, get_ancestors
from vmstack.conformance import memory_vm
from vmstack.wrappers import MeteredBlock, MeteredVM

ONE_BLOCK = [
    "get_block",
    "parse_block",
    "build_block",
    "set_preference",
    "last_accepted",
    "get_block_id_at_height",
    "block_verify",
    "block_accept",
    "block_reject",
]
BATCHED = ["get_ancestors", "batched_parse_block"]


def _count(registry: CollectorRegistry, metric: str, outcome: str = "success") -> float | None:
    return registry.get_sample_value(f"C_{metric}_duration_seconds_count", {"outcome": outcome})


def _families(registry: CollectorRegistry) -> set[str]:
    return {family.name for family in registry.collect()}


@pytest.mark.parametrize("batching", [True, False], ids=["inner-batches", "inner-does-not-batch"])
def test_batched_metrics_exist_only_with_the_capability(
    batching: bool, vmstack_registry: CollectorRegistry
) -> None:
    """The batched histograms are registered exactly when the VM below batches."""
    inner = memory_vm(batching=batching)
    metered = MeteredVM(inner, registry=vmstack_registry, namespace="C")
    expected = ONE_BLOCK + (BATCHED if batching else [])
    assert _families(vmstack_registry) == {f"C_{name}_duration_seconds" for name in expected}
    assert metered.batching is batching
    assert metered.inner is inner
    assert (metered.name, metered.namespace, metered.registry) == ("C", "C", vmstack_registry)


def test_batched_metrics_are_registered_as_the_layer_is_built(
    vmstack_registry: CollectorRegistry,
) -> None:
    """Over a VM that has the batched methods but cannot batch now, the batched histograms
    exist from the start, and concurrent first refusals are each one ``not_implemented``
    observation; an answer later adds to the same histogram."""
    import threading

    from vmstack.conformance import BatchedMemoryVM

    inner = memory_vm(batching=True, blocks=5)
    assert isinstance(inner, BatchedMemoryVM)
    inner.batching = False
    metered = MeteredVM(inner, registry=vmstack_registry, namespace="C")
    assert _families(vmstack_registry) == {
        f"C_{name}_duration_seconds" for name in ONE_BLOCK + BATCHED
    }
    tip = inner.last_accepted()
    start = threading.Barrier(4)
    refused: list[bool] = []

    def call() -> None:
        start.wait(timeout=10)
        try:
            metered.get_ancestors(tip, 5, 10_000, 1.0)
        except BatchingNotImplemented:
            refused.append(True)

    threads = [threading.Thread(target=call) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
        assert not thread.is_alive()
    assert refused == [True] * 4
    assert _count(vmstack_registry, "get_ancestors", "not_implemented") == 4
    assert _count(vmstack_registry, "get_ancestors") == 0
    inner.batching = True
    assert len(metered.get_ancestors(tip, 5, 10_000, 1.0)) == 5
    assert _count(vmstack_registry, "get_ancestors") == 1


def test_batched_get_ancestors_is_one_observation(vmstack_registry: CollectorRegistry) -> None:
    """Each batched get_ancestors, however many blocks it returns, is one observation."""
    inner = memory_vm(batching=True, blocks=60)
    metered = MeteredVM(inner, registry=vmstack_registry, namespace="C")
    for expected in (1, 2, 3):
        assert len(get_ancestors(metered, inner.last_accepted(), max_blocks_num=50)) == 50
        assert _count(vmstack_registry, "get_ancestors") == expected
    total = vmstack_registry.get_sample_value(
        "C_get_ancestors_duration_seconds_sum", {"outcome": "success"}
    )
    assert total is not None and total > 0
    assert _count(vmstack_registry, "get_block") == 0


def test_batched_parse_block_is_one_observation(vmstack_registry: CollectorRegistry) -> None:
    """A batched parse of 40 blocks is one observation, and its blocks are MeteredBlocks."""
    inner = memory_vm(batching=True, blocks=40)
    batch = [bytes(inner.get_block(inner.get_block_id_at_height(h))) for h in range(1, 41)]
    metered = MeteredVM(inner, registry=vmstack_registry, namespace="C")
    parsed = batched_parse_block(metered, batch)
    assert all(isinstance(block, MeteredBlock) for block in parsed)
    assert [bytes(block) for block in parsed] == batch
    assert _count(vmstack_registry, "batched_parse_block") == 1
    assert _count(vmstack_registry, "parse_block") == 0


def test_fallback_is_one_observation_per_block(vmstack_registry: CollectorRegistry) -> None:
    """Over a VM that cannot batch, the refusal is not observed and each fetched block is."""
    inner = memory_vm(batching=False, blocks=30)
    metered = MeteredVM(inner, registry=vmstack_registry, namespace="C")
    answer = get_ancestors(metered, inner.last_accepted(), max_blocks_num=25)
    assert len(answer) == 25
    assert _count(vmstack_registry, "get_block") == 25
    assert _count(vmstack_registry, "get_ancestors") is None


def test_refusal_is_immediate(vmstack_registry: CollectorRegistry) -> None:
    """Over a VM that cannot batch, both batched methods raise at once, calling nothing."""
    inner = memory_vm(batching=False, blocks=2)
    tip = inner.last_accepted()
    inner.calls.clear()
    metered = MeteredVM(inner, registry=vmstack_registry, namespace="C")
    with pytest.raises(BatchingNotImplemented, match=r"MeteredVM\(C\)"):
        metered.get_ancestors(tip, 5, 1000, 1.0)
    with pytest.raises(BatchingNotImplemented):
        metered.batched_parse_block([])
    assert inner.calls == []


def test_error_is_observed_and_reraised_unchanged(vmstack_registry: CollectorRegistry) -> None:
    """An error from below is one ``outcome="error"`` observation and comes up as is."""
    inner = memory_vm(batching=True, blocks=3)
    metered = MeteredVM(inner, registry=vmstack_registry, namespace="C")
    fault = InvalidBlock("injected")
    inner.fail_next("parse_block", fault)
    with pytest.raises(InvalidBlock) as raised:
        metered.parse_block(b"whatever")
    assert raised.value is fault
    assert _count(vmstack_registry, "parse_block", "error") == 1
    assert _count(vmstack_registry, "parse_block", "success") == 0


def test_batching_not_implemented_from_below_has_its_outcome(
    vmstack_registry: CollectorRegistry,
) -> None:
    """BatchingNotImplemented from below is observed as ``not_implemented`` and passes up as
    the same object."""
    inner = memory_vm(batching=True, blocks=3)
    metered = MeteredVM(inner, registry=vmstack_registry, namespace="C")
    refusal = BatchingNotImplemented("injected")
    inner.fail_next("get_ancestors", refusal)
    with pytest.raises(BatchingNotImplemented) as raised:
        metered.get_ancestors(inner.last_accepted(), 5, 1000, 1.0)
    assert raised.value is refusal
    assert _count(vmstack_registry, "get_ancestors", "not_implemented") == 1
    assert _count(vmstack_registry, "get_ancestors", "error") == 0
    assert _count(vmstack_registry, "get_ancestors", "success") == 0


def test_every_method_is_one_observation(vmstack_registry: CollectorRegistry) -> None:
    """Each one-block method and each block decision is observed once per call."""
    inner = memory_vm(batching=True, blocks=4)
    tip = inner.last_accepted()
    metered = MeteredVM(inner, registry=vmstack_registry, namespace="C")
    metered.get_block(tip)
    metered.parse_block(bytes(inner.get_block(tip)))
    metered.set_preference(tip)
    assert metered.last_accepted() == tip
    assert metered.get_block_id_at_height(4) == tip
    accepted = metered.build_block()
    accepted.verify()
    accepted.accept()
    rejected = metered.build_block()
    rejected.verify()
    rejected.reject()
    counts = {name: _count(vmstack_registry, name) for name in ONE_BLOCK}
    assert counts == {
        "get_block": 1,
        "parse_block": 1,
        "build_block": 2,
        "set_preference": 1,
        "last_accepted": 1,
        "get_block_id_at_height": 1,
        "block_verify": 2,
        "block_accept": 1,
        "block_reject": 1,
    }
    assert inner.last_accepted() == accepted.id


def test_block_decision_error_is_observed(vmstack_registry: CollectorRegistry) -> None:
    """A failing verify is an ``error`` observation and comes up as the same object."""
    inner = memory_vm(batching=True, blocks=2)
    metered = MeteredVM(inner, registry=vmstack_registry, namespace="C")
    block = metered.build_block()
    fault = InvalidBlock("injected")
    inner.fail_next("block.verify", fault)
    with pytest.raises(InvalidBlock) as raised:
        block.verify()
    assert raised.value is fault
    assert _count(vmstack_registry, "block_verify", "error") == 1
    assert block.inner is inner.parse_block(bytes(block))


def test_one_metered_layer_per_namespace_and_registry(vmstack_registry: CollectorRegistry) -> None:
    """A second layer with the same namespace in one registry is a ValueError that leaves
    nothing half-registered; another registry or namespace is fine."""
    first = MeteredVM(memory_vm(batching=False), registry=vmstack_registry, namespace="C")
    before = _families(vmstack_registry)
    with pytest.raises(ValueError, match="own namespace"):
        MeteredVM(memory_vm(batching=True), registry=vmstack_registry, namespace="C")
    assert _families(vmstack_registry) == before
    MeteredVM(memory_vm(), registry=CollectorRegistry(), namespace="C")
    MeteredVM(first, registry=vmstack_registry, namespace="proposervm")
    assert "proposervm_get_block_duration_seconds" in _families(vmstack_registry)


@pytest.mark.parametrize("namespace", ["", "1C", "C-chain", "proposer vm", None])
def test_namespace_must_be_a_metric_name(
    namespace: object, vmstack_registry: CollectorRegistry
) -> None:
    """A namespace that cannot prefix a Prometheus metric name is a ValueError."""
    with pytest.raises(ValueError, match="namespace"):
        MeteredVM(memory_vm(), registry=vmstack_registry, namespace=namespace)  # type: ignore[arg-type]


def test_registry_is_required_and_global_one_untouched() -> None:
    """No registry is a ValueError, and metrics never land in prometheus' global registry."""
    with pytest.raises(ValueError, match="CollectorRegistry"):
        MeteredVM(memory_vm(), registry=None, namespace="C")  # type: ignore[arg-type]
    inner = memory_vm(batching=True, blocks=3)
    metered = MeteredVM(inner, registry=CollectorRegistry(), namespace="vmstack_global_probe")
    get_ancestors(metered, inner.last_accepted())
    assert (
        REGISTRY.get_sample_value(
            "vmstack_global_probe_get_ancestors_duration_seconds_count", {"outcome": "success"}
        )
        is None
    )


def test_no_batched_metrics_over_a_layer_that_cannot_batch() -> None:
    """Batched histograms exist only where the capability does, through layers too."""
    from opentelemetry.trace import NoOpTracer
    from prometheus_client import CollectorRegistry

    from vmstack.conformance import memory_vm
    from vmstack.wrappers import MeteredVM, TracedVM

    registry = CollectorRegistry()
    MeteredVM(
        TracedVM(memory_vm(batching=False, blocks=3), tracer=NoOpTracer(), name="t"),
        registry=registry,
        namespace="x",
    )
    names = {family.name for family in registry.collect()}
    assert "x_get_block_duration_seconds" in names
    assert (
        not {"x_get_ancestors_duration_seconds", "x_batched_parse_block_duration_seconds"} & names
    )


def test_only_exceptions_are_observed(vmstack_registry: CollectorRegistry) -> None:
    """An error is one ``error`` observation and passes on as itself; an interrupt (not an
    Exception) passes on unobserved."""
    inner = memory_vm(batching=True, blocks=2)
    metered = MeteredVM(inner, registry=vmstack_registry, namespace="C")
    failure = ValueError("injected")
    inner.fail_next("last_accepted", failure)
    with pytest.raises(ValueError) as raised:
        metered.last_accepted()
    assert raised.value is failure
    assert _count(vmstack_registry, "last_accepted", "error") == 1
    inner.fail_next("last_accepted", KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        metered.last_accepted()
    assert _count(vmstack_registry, "last_accepted", "error") == 1
    assert _count(vmstack_registry, "last_accepted") == 0
    assert metered.last_accepted() == inner.last_accepted()
    assert _count(vmstack_registry, "last_accepted") == 1
