"""Snowball instances and the bit tree, as avalanchego's ``snow/consensus/snowball``.

:data:`SNOWFLAKE` (the factory Snowman runs on) and :data:`SNOWBALL` make the instances;
:class:`Tree` decides among 32-byte choices bit by bit. See docs/consensus.md.
"""

from __future__ import annotations

from vmstack.consensus.snowball.instances import (
    SNOWBALL,
    SNOWFLAKE,
    BinarySnowball,
    BinarySnowflake,
    Factory,
    NnarySnowball,
    NnarySnowflake,
    TerminationCondition,
    UnarySnowball,
    UnarySnowflake,
    single_termination_condition,
)
from vmstack.consensus.snowball.tree import NUM_BITS, Tree, bit

__all__ = [
    "BinarySnowball",
    "BinarySnowflake",
    "Factory",
    "NUM_BITS",
    "NnarySnowball",
    "NnarySnowflake",
    "SNOWBALL",
    "SNOWFLAKE",
    "TerminationCondition",
    "Tree",
    "UnarySnowball",
    "UnarySnowflake",
    "bit",
    "single_termination_condition",
]
