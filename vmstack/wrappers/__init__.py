"""Wrapper layers: each takes ``inner`` first, wraps the blocks it returns, and passes the
batched protocol through as one call (or refuses it when the VM below cannot batch).

``TracedVM`` (OpenTelemetry spans) and ``MeteredVM`` (prometheus-client histograms) are
pass-through layers built on :class:`PassThroughVM` (:mod:`vmstack.wrappers.passthrough`),
the base for users writing pass-through layers of their own: it forwards every call and
wraps every block, and a subclass overrides one hook, ``intercept``. ``ProposerVM``
(:mod:`vmstack.wrappers.proposer`) answers partly from post-fork blocks of its own.
"""

from vmstack.layers import WrappedBlock
from vmstack.wrappers.metered import MeteredBlock, MeteredVM
from vmstack.wrappers.passthrough import PassThroughBlock, PassThroughVM
from vmstack.wrappers.proposer import ProposerBlock, ProposerVM
from vmstack.wrappers.traced import TracedBlock, TracedVM

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
