"""The proposer layer ("snowman++"): avalanchego-compatible post-fork blocks over an inner VM.

:class:`ProposerVM` is the layer's lifecycle (:mod:`~vmstack.wrappers.proposer.vm`),
:class:`ProposerBlock` its blocks (:mod:`~vmstack.wrappers.proposer.block`),
:mod:`~vmstack.wrappers.proposer.chain` what it has verified and how it decides;
:mod:`~vmstack.wrappers.proposer.state` its records in the store and their crash recovery,
:mod:`~vmstack.wrappers.proposer.verify` the rules per block kind,
:mod:`~vmstack.wrappers.proposer.batched` its answers to the batched protocol,
:mod:`~vmstack.wrappers.proposer.envelope` the byte format,
:mod:`~vmstack.wrappers.proposer.certificate` certificates, NodeIDs and signature checks,
and :mod:`~vmstack.wrappers.proposer.staking` a node's own key and signing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vmstack.lazy import load_lazily

if TYPE_CHECKING:
    from vmstack.errors import InvalidCertificate, InvalidSignature
    from vmstack.wrappers.proposer.block import ProposerBlock
    from vmstack.wrappers.proposer.certificate import Certificate, format_node_id
    from vmstack.wrappers.proposer.envelope import (
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
    from vmstack.wrappers.proposer.staking import StakingKey
    from vmstack.wrappers.proposer.state import STORE_PREFIX
    from vmstack.wrappers.proposer.verify import MAX_CLOCK_SKEW
    from vmstack.wrappers.proposer.vm import ProposerVM

# Each name loads its module when first asked for: a parse pool's worker, which checks
# signatures, imports the certificates and not the layer's lifecycle or its store.
_ENVELOPE = "vmstack.wrappers.proposer.envelope"
_MODULE_OF = {
    "CODEC_VERSION": _ENVELOPE,
    "Certificate": "vmstack.wrappers.proposer.certificate",
    "Epoch": _ENVELOPE,
    "Header": _ENVELOPE,
    "InvalidCertificate": "vmstack.errors",
    "InvalidSignature": "vmstack.errors",
    "MAX_CLOCK_SKEW": "vmstack.wrappers.proposer.verify",
    "OptionBlock": _ENVELOPE,
    "PostForkBlock": _ENVELOPE,
    "ProposerBlock": "vmstack.wrappers.proposer.block",
    "ProposerVM": "vmstack.wrappers.proposer.vm",
    "STORE_PREFIX": "vmstack.wrappers.proposer.state",
    "StakingKey": "vmstack.wrappers.proposer.staking",
    "build_option": _ENVELOPE,
    "build_signed": _ENVELOPE,
    "build_unsigned": _ENVELOPE,
    "decode_block": _ENVELOPE,
    "format_id": _ENVELOPE,
    "format_node_id": "vmstack.wrappers.proposer.certificate",
    "parse_block": _ENVELOPE,
}


def __getattr__(name: str) -> Any:
    return load_lazily(__name__, _MODULE_OF, name)


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
