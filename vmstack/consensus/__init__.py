"""Snowman consensus as a library, bit-exact with avalanchego: the parameters, the snowball
instances and bit tree (:mod:`vmstack.consensus.snowball`), the block tree
(:class:`Topological`), the engine's polls (:mod:`vmstack.consensus.poll`) and the engine
loop over a whole stack (:class:`SnowmanEngine`, :mod:`vmstack.consensus.engine`).

docs/consensus.md is the reference; a simulator drives the block tree with its own network.
"""

from __future__ import annotations

from vmstack.consensus.blocks import PlainBlock
from vmstack.consensus.engine import SnowmanEngine, StakeSampler
from vmstack.consensus.parameters import DEFAULT_PARAMETERS, Parameters
from vmstack.consensus.poll import EarlyTermPoll, PollSet
from vmstack.consensus.snowball import SNOWBALL, SNOWFLAKE, Tree
from vmstack.consensus.topological import ConsensusBlock, Topological
from vmstack.errors import ConsensusError, DuplicateBlock, ParametersInvalid, UnknownParentBlock

__all__ = [
    "ConsensusBlock",
    "ConsensusError",
    "DEFAULT_PARAMETERS",
    "DuplicateBlock",
    "EarlyTermPoll",
    "Parameters",
    "ParametersInvalid",
    "PlainBlock",
    "PollSet",
    "SNOWBALL",
    "SNOWFLAKE",
    "SnowmanEngine",
    "StakeSampler",
    "Topological",
    "Tree",
    "UnknownParentBlock",
]
