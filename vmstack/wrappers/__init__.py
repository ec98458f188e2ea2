"""Wrapper layers: each takes ``inner`` first, wraps the blocks it returns, and passes the
batched protocol through as one call (or refuses it when the VM below cannot batch).

``TracedVM`` (OpenTelemetry spans) and ``MeteredVM`` (prometheus-client histograms) are
pass-through layers built on :class:`PassThroughVM` (from :mod:`vmstack.layers`, the
layer author's toolkit), the base for users writing pass-through layers of their own: it
forwards every call and wraps every block, and a subclass overrides one hook,
``intercept``. ``ProposerVM``
(:mod:`vmstack.wrappers.proposer`) answers partly from post-fork blocks of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vmstack.lazy import load_lazily

if TYPE_CHECKING:
    from vmstack.layers import PassThroughBlock, PassThroughVM, WrappedBlock
    from vmstack.wrappers.metered import MeteredBlock, MeteredVM
    from vmstack.wrappers.proposer import ProposerBlock, ProposerVM
    from vmstack.wrappers.traced import TracedBlock, TracedVM

# Each name loads its module when first asked for, so a process that needs one layer
# (a parse pool's worker needs only the proposer layer's certificates) does not import
# the others' packages (prometheus_client, OpenTelemetry).
_MODULE_OF = {
    "MeteredBlock": "vmstack.wrappers.metered",
    "MeteredVM": "vmstack.wrappers.metered",
    "PassThroughBlock": "vmstack.layers",
    "PassThroughVM": "vmstack.layers",
    "ProposerBlock": "vmstack.wrappers.proposer",
    "ProposerVM": "vmstack.wrappers.proposer",
    "TracedBlock": "vmstack.wrappers.traced",
    "TracedVM": "vmstack.wrappers.traced",
    "WrappedBlock": "vmstack.layers",
}


def __getattr__(name: str) -> Any:
    return load_lazily(__name__, _MODULE_OF, name)


__all__ = [
    "MeteredBlock",
    "MeteredVM",
    "PassThroughBlock",
    "PassThroughVM",
    "ProposerBlock",
    "ProposerVM",
    "TracedBlock",
    "TracedVM",
    "WrappedBlock",
]
