"""Wrapper layers: each takes ``inner`` first, wraps the blocks it returns, and passes the
batched protocol through as one call (or refuses it when the VM below cannot batch).

``TracedVM`` (OpenTelemetry spans) and ``MeteredVM`` (prometheus-client histograms) are
pass-through layers; :mod:`vmstack.wrappers.base` holds what they share, for users writing
layers of their own. ``ProposerVM`` (:mod:`vmstack.wrappers.proposer`) answers partly from
post-fork blocks of its own.
"""

from vmstack.wrappers.base import WrappedBlock
from vmstack.wrappers.metered import MeteredBlock, MeteredVM
from vmstack.wrappers.proposer import ProposerBlock, ProposerVM
from vmstack.wrappers.traced import TracedBlock, TracedVM

__all__ = ["MeteredBlock", "MeteredVM", "ProposerBlock", "ProposerVM", "TracedBlock", "TracedVM",
           "WrappedBlock"]
