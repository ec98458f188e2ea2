"""Names a package loads on first use (vmstack.lazy), as the wrapper and conformance
packages do."""

from __future__ import annotations

import pytest

import vmstack.conformance
import vmstack.wrappers
from vmstack.conformance.kit import LayerConformance
from vmstack.wrappers.metered import MeteredVM


def test_a_lazy_name_is_the_modules_own_and_is_kept_on_the_package() -> None:
    assert vmstack.wrappers.MeteredVM is MeteredVM
    assert vars(vmstack.wrappers)["MeteredVM"] is MeteredVM
    assert vmstack.conformance.LayerConformance is LayerConformance


@pytest.mark.parametrize("package", [vmstack.wrappers, vmstack.conformance])
def test_a_name_no_module_holds_is_an_attribute_error_naming_the_package(package: object) -> None:
    with pytest.raises(AttributeError, match=r"module 'vmstack\.\w+' has no attribute 'Nothing'"):
        _ = package.Nothing  # type: ignore[attr-defined]
    assert not hasattr(package, "Nothing")
