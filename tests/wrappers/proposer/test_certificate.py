"""Staking certificates, NodeIDs, CB58 and signature checks as avalanchego reads them."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from Crypto.PublicKey import ECC, RSA

from tests.conftest import vectors_dir
from vmstack.errors import InvalidCertificate, InvalidSignature
from vmstack.wrappers.proposer.certificate import (
    MAX_CERTIFICATE_LEN,
    Certificate,
    cb58decode,
    cb58encode,
    format_node_id,
    node_id_from_certificate,
    parse_node_id,
)
from vmstack.wrappers.proposer.staking import StakingKey

#: The NodeIDs upstream's README gives for its local-network stakers (checked in NOTE.md).
STAKER_NODE_IDS = {
    1: "NodeID-7Xhw2mDxuDS44j42TCB6U5579esbSt3Lg",
    2: "NodeID-MFrZFVCXPv5iCn6M9K6XduxGTYp891xXZ",
    3: "NodeID-NFBbbJ4qCmNaCzeW7sxErhvWqvEQMnYcN",
    4: "NodeID-GWPcbFJZFfZreETSoWjPimr846mXEKCtu",
    5: "NodeID-P7oB2McjBGgW2NXXWVYjV8JEDFoW9xDE5",
}


def _staking_file(name: str) -> Path:
    path = vectors_dir() / "staking" / name
    if not path.is_file():
        pytest.skip(f"staking test certificates not found at {path}")
    return path


@pytest.mark.parametrize("staker", sorted(STAKER_NODE_IDS))
def test_staker_node_ids(staker: int) -> None:
    """Upstream's staker certificates give the NodeIDs its README states."""
    certificate = Certificate.from_pem(_staking_file(f"staker{staker}.crt").read_text())
    assert certificate.node_id_str == STAKER_NODE_IDS[staker]
    assert certificate.key_type == "RSA-4096"
    assert certificate.node_id == node_id_from_certificate(certificate.raw)
    assert parse_node_id(STAKER_NODE_IDS[staker]) == certificate.node_id


def test_large_certificate_is_refused() -> None:
    """The 4257-byte upstream certificate fails with ErrCertificateTooLarge's reason."""
    der = _staking_file("large_rsa_key.cert").read_bytes()
    assert len(der) > MAX_CERTIFICATE_LEN
    with pytest.raises(InvalidCertificate, match="greater than 2048"):
        Certificate.parse(der)


def test_cb58_round_trip_and_checksum() -> None:
    """CB58 round-trips, keeps leading zeros, and refuses a broken checksum or character."""
    for data in (b"", bytes(3), b"\x00\x01\x02", hashlib.sha256(b"x").digest()):
        assert cb58decode(cb58encode(data)) == data
    text = cb58encode(b"payload")
    broken = text[:-1] + ("1" if text[-1] != "1" else "2")
    with pytest.raises(ValueError, match="checksum"):
        cb58decode(broken)
    with pytest.raises(ValueError, match="base58"):
        cb58decode("0OIl")
    with pytest.raises(ValueError):
        format_node_id(bytes(19))
    with pytest.raises(ValueError):
        parse_node_id("Node-abc")


def test_rsa_digest_info_without_null_is_refused() -> None:
    """A PKCS#1 v1.5 signature whose DigestInfo omits the NULL parameter fails, as in Go."""
    private = RSA.generate(2048)
    key = StakingKey(private)
    size = private.size_in_bytes()
    digest_info = bytes.fromhex("302f300b06096086480165030402010420")
    tail = digest_info + hashlib.sha256(b"header").digest()
    encoded = b"\x00\x01" + b"\xff" * (size - len(tail) - 3) + b"\x00" + tail
    signature = pow(int.from_bytes(encoded, "big"), private.d, private.n).to_bytes(size, "big")
    with pytest.raises(InvalidSignature):
        key.certificate.check_signature(b"header", signature)


def _tlv(tag: int, content: bytes) -> bytes:
    assert len(content) < 0x80
    return bytes((tag, len(content))) + content


def _certificate_with_key(algorithm_oid: bytes, key: bytes) -> bytes:
    spki = _tlv(0x30, _tlv(0x30, _tlv(0x06, algorithm_oid)) + _tlv(0x03, b"\0" + key))
    tbs = _tlv(
        0x30,
        _tlv(0x02, b"\0")
        + _tlv(0x30, b"")
        + _tlv(0x30, b"")
        + _tlv(0x30, b"")
        + _tlv(0x30, b"")
        + spki,
    )
    return _tlv(0x30, tbs)


def test_tolerant_parse_reads_only_the_public_key() -> None:
    """Serial 0, empty names, no signature and trailing bytes do not matter; the key does."""
    point = ECC.generate(curve="P-256").pointQ
    key = b"\x04" + int(point.x).to_bytes(32, "big") + int(point.y).to_bytes(32, "big")
    der = _certificate_with_key(bytes.fromhex("2a8648ce3d0201"), key)
    assert Certificate.parse(der).public_numbers == (int(point.x), int(point.y))
    assert Certificate.parse(der + b"junk").key_type == "ECDSA-P256"


@pytest.mark.parametrize(
    "der, reason",
    [
        (b"", "malformed certificate"),
        (b"\x30\x05\x00", "malformed certificate"),
        (b"\x31\x00", "malformed certificate"),
        (b"\x30\x81\x01\x00", "malformed certificate"),
        (_tlv(0x30, _tlv(0x30, _tlv(0x04, b""))), "malformed serial number"),
        (_certificate_with_key(bytes.fromhex("2b6570"), bytes(32)), "unknown public key algorithm"),
        (
            _certificate_with_key(bytes.fromhex("2a8648ce3d0201"), b"\x04" + bytes(64)),
            "failed to unmarshal elliptic curve point",
        ),
        (
            _certificate_with_key(bytes.fromhex("2a8648ce3d0201"), b"\x02" + bytes(32)),
            "failed to unmarshal elliptic curve point",
        ),
        (
            _certificate_with_key(
                bytes.fromhex("2a864886f70d010101"),
                _tlv(0x30, _tlv(0x02, b"\x03") + _tlv(0x02, b"\x03")),
            ),
            "unsupported RSA modulus bitlen",
        ),
        (
            _certificate_with_key(
                bytes.fromhex("2a864886f70d010101"),
                _tlv(0x30, _tlv(0x02, b"\x00\x03") + _tlv(0x02, b"\x03")),
            ),
            "invalid RSA modulus",
        ),
    ],
)
def test_malformed_certificates_name_the_reason(der: bytes, reason: str) -> None:
    """Malformed DER or a key outside the allowed forms raises InvalidCertificate."""
    with pytest.raises(InvalidCertificate, match=reason):
        Certificate.parse(der)


def test_rsa_exponent_must_be_65537() -> None:
    """An RSA-2048 key with exponent 3 is refused, as avalanchego refuses it."""
    modulus = RSA.generate(2048).n
    body = int(modulus).to_bytes(257, "big")
    sequence = (
        b"\x30\x82"
        + (len(body) + 4 + 3).to_bytes(2, "big")
        + b"\x02\x82"
        + (len(body)).to_bytes(2, "big")
        + body
        + b"\x02\x01\x03"
    )
    algorithm = _tlv(0x30, _tlv(0x06, bytes.fromhex("2a864886f70d010101")))
    bit_string = b"\x03\x82" + (len(sequence) + 1).to_bytes(2, "big") + b"\0" + sequence
    spki_body = algorithm + bit_string
    spki = b"\x30\x82" + len(spki_body).to_bytes(2, "big") + spki_body
    tbs_body = _tlv(0x02, b"\0") + _tlv(0x30, b"") * 4 + spki
    tbs = b"\x30\x82" + len(tbs_body).to_bytes(2, "big") + tbs_body
    der = b"\x30\x82" + len(tbs).to_bytes(2, "big") + tbs
    with pytest.raises(InvalidCertificate, match="unsupported RSA public exponent: 3"):
        Certificate.parse(der)
