"""The record machinery (:mod:`vmstack.cchain.types.fields`): the rlp backend it requires."""

from __future__ import annotations

import types

import pytest

from vmstack.cchain.types.fields import require_pyrlp_backend


def test_the_rusty_rlp_backend_is_refused_loudly() -> None:
    """An rlp codec that switched to rusty-rlp is refused with a message saying what to do."""
    require_pyrlp_backend(types.SimpleNamespace())
    with pytest.raises(ImportError, match="uninstall rusty-rlp"):
        require_pyrlp_backend(types.SimpleNamespace(rusty_rlp=object()))
