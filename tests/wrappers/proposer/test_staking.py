"""A node's staking identity: keys, self-signed certificates and signing."""

from __future__ import annotations

import pytest
from Crypto.PublicKey import ECC, RSA

from vmstack.errors import InvalidSignature
from vmstack.wrappers.proposer.certificate import Certificate
from vmstack.wrappers.proposer.staking import StakingKey


@pytest.fixture(scope="module")
def rsa_key() -> StakingKey:
    return StakingKey(RSA.generate(2048))


def test_generated_ecdsa_identity_signs_and_verifies() -> None:
    """A generated P-256 identity's signatures verify, and fail for another message."""
    key = StakingKey.generate()
    certificate = Certificate.parse(key.certificate.raw)
    assert certificate.key_type == "ECDSA-P256"
    signature = key.sign(b"header")
    certificate.check_signature(b"header", signature)
    with pytest.raises(InvalidSignature, match="ECDSA"):
        certificate.check_signature(b"other", signature)
    with pytest.raises(InvalidSignature):
        certificate.check_signature(b"header", signature + b"\0")


def test_seeded_identity_is_reproducible() -> None:
    """The same seed gives the same certificate and NodeID; another seed does not."""
    first, again = StakingKey.generate(seed=b"node-1"), StakingKey.generate(seed=b"node-1")
    other = StakingKey.generate(seed=b"node-2")
    assert first.certificate == again.certificate
    assert first.node_id == again.node_id != other.node_id
    assert first.sign(b"m") == again.sign(b"m")


def test_rsa_identity_signs_and_verifies(rsa_key: StakingKey) -> None:
    """An RSA-2048 identity's PKCS#1 v1.5 signatures verify and wrong ones do not."""
    assert rsa_key.certificate.key_type == "RSA-2048"
    signature = rsa_key.sign(b"header")
    rsa_key.certificate.check_signature(b"header", signature)
    with pytest.raises(InvalidSignature, match="verification error"):
        rsa_key.certificate.check_signature(b"other", signature)
    with pytest.raises(InvalidSignature):
        rsa_key.certificate.check_signature(b"header", signature[1:])


def test_certificate_must_match_the_key() -> None:
    """Pairing a key with another key's certificate raises ValueError."""
    other = StakingKey.generate(seed=b"b")
    with pytest.raises(ValueError, match="public key"):
        StakingKey(ECC.generate(curve="P-256"), other.certificate)
    with pytest.raises(ValueError, match="private key"):
        StakingKey(ECC.generate(curve="P-256").public_key())
    with pytest.raises(ValueError):
        StakingKey(ECC.generate(curve="P-384"))


def test_pem_key_loading() -> None:
    """A PEM private key loads with its self-signed certificate, or with a given one."""
    private = ECC.generate(curve="P-256")
    loaded = StakingKey.from_pem(private.export_key(format="PEM"))
    assert loaded.certificate.public_numbers == (int(private.pointQ.x), int(private.pointQ.y))
    with pytest.raises(ValueError):
        StakingKey.from_pem("not a key")
