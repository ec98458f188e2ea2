"""The proposer layer ("snowman++"): avalanchego-compatible post-fork blocks over an inner VM.

:class:`ProposerVM` is the layer's lifecycle (:mod:`~vmstack.wrappers.proposer.vm`);
:mod:`~vmstack.wrappers.proposer.state` its records in the store and their crash recovery,
:mod:`~vmstack.wrappers.proposer.verify` the rules per block kind,
:mod:`~vmstack.wrappers.proposer.batched` its answers to the batched protocol,
:mod:`~vmstack.wrappers.proposer.block` the byte format,
:mod:`~vmstack.wrappers.proposer.certificate` certificates, NodeIDs and signature checks,
and :mod:`~vmstack.wrappers.proposer.staking` a node's own key and signing.
"""

from vmstack.errors import InvalidCertificate, InvalidSignature
from vmstack.wrappers.proposer.block import (
    CODEC_VERSION,
    Epoch,
    Header,
    OptionBlock,
    PostForkBlock,
    build_option,
    build_signed,
    build_unsigned,
    decode_block,
    format_id,
    parse_block,
)
from vmstack.wrappers.proposer.certificate import Certificate, format_node_id
from vmstack.wrappers.proposer.staking import StakingKey
from vmstack.wrappers.proposer.state import STORE_PREFIX
from vmstack.wrappers.proposer.verify import MAX_CLOCK_SKEW
from vmstack.wrappers.proposer.vm import ProposerBlock, ProposerVM

__all__ = [
    "CODEC_VERSION",
    "Certificate",
    "Epoch",
    "Header",
    "InvalidCertificate",
    "InvalidSignature",
    "MAX_CLOCK_SKEW",
    "OptionBlock",
    "PostForkBlock",
    "ProposerBlock",
    "ProposerVM",
    "STORE_PREFIX",
    "StakingKey",
    "build_option",
    "build_signed",
    "build_unsigned",
    "decode_block",
    "format_id",
    "format_node_id",
    "parse_block",
]
