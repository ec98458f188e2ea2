"""Parameters keep avalanchego's defaults and rules (parameters_test.go's vectors)."""

from __future__ import annotations

import pytest

from tests.consensus.vectors import parameters
from vmstack.consensus import DEFAULT_PARAMETERS, Parameters, ParametersInvalid
from vmstack.errors import VMStackError

FIELDS = (
    "k",
    "alpha_preference",
    "alpha_confidence",
    "beta",
    "concurrent_repolls",
    "optimal_processing",
    "max_outstanding_items",
    "max_item_processing_time",
)


@pytest.mark.parametrize(("name", "values", "valid"), parameters.VERIFY)
def test_verify_vectors(name: str, values: tuple[float, ...], valid: bool) -> None:
    """verify() accepts and refuses exactly where upstream's Verify does."""
    params = Parameters(**dict(zip(FIELDS, values, strict=True)))  # type: ignore[arg-type]
    if valid:
        params.verify()
    else:
        with pytest.raises(ParametersInvalid) as caught:
            params.verify()
        assert isinstance(caught.value, ValueError) and isinstance(caught.value, VMStackError)
        assert caught.value.reasons


@pytest.mark.parametrize(
    ("name", "k", "alpha_confidence", "expected"), parameters.MIN_PERCENT_CONNECTED
)
def test_min_percent_connected_vectors(
    name: str, k: int | None, alpha_confidence: int | None, expected: float
) -> None:
    """min_percent_connected_healthy() is upstream's, to within 0.1%."""
    params = (
        DEFAULT_PARAMETERS
        if k is None or alpha_confidence is None
        else Parameters(k=k, alpha_confidence=alpha_confidence)
    )
    assert params.min_percent_connected_healthy() == pytest.approx(expected, rel=1e-3)


def test_defaults() -> None:
    """The defaults are avalanchego's DefaultParameters and verify."""
    assert (
        DEFAULT_PARAMETERS.k,
        DEFAULT_PARAMETERS.alpha_preference,
        DEFAULT_PARAMETERS.alpha_confidence,
        DEFAULT_PARAMETERS.beta,
        DEFAULT_PARAMETERS.concurrent_repolls,
        DEFAULT_PARAMETERS.optimal_processing,
        DEFAULT_PARAMETERS.max_outstanding_items,
        DEFAULT_PARAMETERS.max_item_processing_time,
    ) == (20, 15, 15, 20, 4, 10, 256, 30.0)
    DEFAULT_PARAMETERS.verify()


def test_every_broken_rule_is_named() -> None:
    """All broken rules are reported at once, in upstream's order (errors.Join)."""
    with pytest.raises(ParametersInvalid) as caught:
        Parameters(k=0, alpha_preference=0, alpha_confidence=1, concurrent_repolls=0).verify()
    reasons = caught.value.reasons
    assert len(reasons) == 3
    assert "k/2 < alphaPreference" in reasons[0]
    assert "alphaConfidence <= k" in reasons[1]
    assert "0 < concurrentRepolls" in reasons[2]


def test_partial_parameters_build() -> None:
    """Building parameters never raises, however wrong (upstream's tests build partial
    sets)."""
    assert Parameters(k=-5, beta=0).k == -5
