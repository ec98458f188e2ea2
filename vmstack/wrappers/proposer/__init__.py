"""The proposer layer ("snowman++"): avalanchego-compatible post-fork blocks over an inner VM.

:mod:`~vmstack.wrappers.proposer.block` is the byte format,
:mod:`~vmstack.wrappers.proposer.staking` the certificates, NodeIDs, keys and signatures.
"""

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
from vmstack.wrappers.proposer.staking import (
    Certificate,
    InvalidCertificate,
    InvalidSignature,
    StakingKey,
    format_node_id,
)

__all__ = [
    "CODEC_VERSION",
    "Certificate",
    "Epoch",
    "Header",
    "InvalidCertificate",
    "InvalidSignature",
    "OptionBlock",
    "PostForkBlock",
    "StakingKey",
    "build_option",
    "build_signed",
    "build_unsigned",
    "decode_block",
    "format_id",
    "format_node_id",
    "parse_block",
]
