"""A node's staking identity: its key, its self-signed certificate, and signing.

A proposer signs its post-fork blocks with its staking key, as avalanchego's ``block.Build``
does: over the SHA-256 of the message (ECDSA deterministically, RFC 6979). A node of a
simulation gets its own identity from :meth:`StakingKey.generate` (ECDSA P-256 by default,
optionally derived from a seed so a seeded simulation is reproducible); the self-signed
certificate is built here as DER, since only its public key is ever read.

Reading certificates, NodeIDs, CB58 and checking signatures live in
:mod:`~vmstack.wrappers.proposer.certificate`; their public names are importable from here
too.
"""

from __future__ import annotations

from typing import Any, Literal

from Crypto.Hash import SHA256, SHAKE256
from Crypto.PublicKey import ECC, RSA
from Crypto.Signature import DSS, pkcs1_15

from vmstack.wrappers.proposer.certificate import (
    RSA_EXPONENT,
    RSA_MODULUS_BITS,
    TAG_BIT_STRING,
    TAG_INTEGER,
    TAG_OID,
    TAG_SEQUENCE,
    Certificate,
)

__all__ = [
    "StakingKey",
    "der_element",
    "signing_identity",
]

_OID_SHA256_RSA = bytes.fromhex("2a864886f70d01010b")  # 1.2.840.113549.1.1.11
_OID_SHA256_ECDSA = bytes.fromhex("2a8648ce3d040302")  # 1.2.840.10045.4.3.2
_TAG_NULL = 0x05
_TAG_UTC_TIME = 0x17
_TAG_GENERALIZED_TIME = 0x18


# --- a node's own identity --------------------------------------------------------------


def der_element(tag: int, content: bytes) -> bytes:
    """One DER element: ``tag``, its definite length (short or long form), ``content``."""
    length = len(content)
    if length < 0x80:
        return bytes((tag, length)) + content
    size = (length.bit_length() + 7) // 8
    return bytes((tag, 0x80 | size)) + length.to_bytes(size, "big") + content


def _self_signed_certificate(private_key: Any) -> bytes:
    """A minimal X.509 v1 certificate for ``private_key``, signed by itself.

    Serial 0, empty issuer and subject, valid from 2000 to 9999: the shape of the
    certificates avalanchego generates for staking, of which peers read only the key.
    """
    is_rsa = isinstance(private_key, RSA.RsaKey)
    if is_rsa:
        algorithm = der_element(
            TAG_SEQUENCE, der_element(TAG_OID, _OID_SHA256_RSA) + der_element(_TAG_NULL, b"")
        )
        spki = private_key.publickey().export_key(format="DER")
    else:
        algorithm = der_element(TAG_SEQUENCE, der_element(TAG_OID, _OID_SHA256_ECDSA))
        spki = private_key.public_key().export_key(format="DER")
    empty_name = der_element(TAG_SEQUENCE, b"")
    validity = der_element(
        TAG_SEQUENCE,
        der_element(_TAG_UTC_TIME, b"000101000000Z")
        + der_element(_TAG_GENERALIZED_TIME, b"99991231235959Z"),
    )
    tbs = der_element(
        TAG_SEQUENCE,
        der_element(TAG_INTEGER, b"\0") + algorithm + empty_name + validity + empty_name + spki,
    )
    signature = _sign(private_key, tbs)
    return der_element(
        TAG_SEQUENCE, tbs + algorithm + der_element(TAG_BIT_STRING, b"\0" + signature)
    )


def _sign(private_key: Any, message: bytes) -> bytes:
    digest = SHA256.new(message)
    if isinstance(private_key, RSA.RsaKey):
        return pkcs1_15.new(private_key).sign(digest)
    return DSS.new(private_key, "deterministic-rfc6979", encoding="der").sign(digest)


class StakingKey:
    """A node's staking identity: its private key and the certificate carrying its public key.

    ``private_key`` is a pycryptodome ``RsaKey`` (2048 or 4096 bits, e = 65537) or a P-256
    ``EccKey``; ``certificate`` is its certificate (DER bytes or :class:`Certificate`), or
    ``None`` for a self-signed one built from the key. A certificate whose public key is not
    the key's raises ``ValueError``. :meth:`sign` signs the way avalanchego's ``block.Build``
    does: over the SHA-256 of the message (ECDSA deterministically, RFC 6979, so a seeded
    simulation reproduces its blocks byte for byte).
    """

    __slots__ = ("_private_key", "certificate")

    def __init__(self, private_key: Any, certificate: Certificate | bytes | None = None) -> None:
        if isinstance(private_key, RSA.RsaKey):
            if not private_key.has_private():
                raise ValueError("a staking key must be a private key")
            if private_key.size_in_bits() not in RSA_MODULUS_BITS or private_key.e != RSA_EXPONENT:
                raise ValueError("an RSA staking key has 2048 or 4096 bits and e = 65537")
            numbers: tuple[int, int] = (int(private_key.n), int(private_key.e))
        elif isinstance(private_key, ECC.EccKey):
            if not private_key.has_private():
                raise ValueError("a staking key must be a private key")
            if private_key.curve not in ("NIST P-256", "p256", "P-256", "prime256v1", "secp256r1"):
                raise ValueError(f"an ECDSA staking key is on P-256, got {private_key.curve}")
            numbers = (int(private_key.pointQ.x), int(private_key.pointQ.y))
        else:
            raise ValueError(
                f"a staking key is a pycryptodome RsaKey or EccKey, got {type(private_key)!r}"
            )
        if certificate is None:
            certificate = _self_signed_certificate(private_key)
        parsed = (
            certificate
            if isinstance(certificate, Certificate)
            else (Certificate.parse(certificate))
        )
        if parsed.public_numbers != numbers:
            raise ValueError("the certificate does not carry this key's public key")
        self._private_key = private_key
        self.certificate: Certificate = parsed

    @classmethod
    def generate(
        cls,
        *,
        algorithm: Literal["ECDSA", "RSA"] = "ECDSA",
        seed: bytes | None = None,
        rsa_bits: int = 2048,
    ) -> StakingKey:
        """A fresh identity with a self-signed certificate.

        ECDSA P-256 by default (quick to make, and what avalanchego's ``NewTLSCert`` makes);
        RSA with ``rsa_bits`` of 2048 or 4096 on request. With ``seed`` the key is derived
        from it deterministically, so the same seed gives the same NodeID.
        """
        randfunc = SHAKE256.new(b"vmstack staking key\0" + seed).read if seed is not None else None
        if algorithm == "ECDSA":
            return cls(ECC.generate(curve="P-256", randfunc=randfunc))
        if algorithm == "RSA":
            if rsa_bits not in RSA_MODULUS_BITS:
                raise ValueError(f"rsa_bits must be 2048 or 4096, got {rsa_bits}")
            return cls(RSA.generate(rsa_bits, randfunc=randfunc))
        raise ValueError(f"algorithm must be 'ECDSA' or 'RSA', got {algorithm!r}")

    @classmethod
    def from_pem(
        cls,
        key_pem: str | bytes,
        certificate_pem: str | bytes | None = None,
    ) -> StakingKey:
        """Load a PEM private key (PKCS#1, PKCS#8 or SEC1) and, optionally, its certificate."""
        try:
            key: Any = RSA.import_key(key_pem)
        except ValueError:
            try:
                key = ECC.import_key(key_pem)
            except ValueError:
                raise ValueError("not a PEM RSA or P-256 private key") from None
        certificate = None if certificate_pem is None else Certificate.from_pem(certificate_pem)
        return cls(key, certificate)

    @property
    def node_id(self) -> bytes:
        """The NodeID of this identity's certificate."""
        return self.certificate.node_id

    def sign(self, message: bytes) -> bytes:
        """Sign ``message`` (hashed with SHA-256); :meth:`Certificate.check_signature` verifies."""
        return _sign(self._private_key, message)

    def __repr__(self) -> str:
        return f"StakingKey({self.certificate.key_type}, {self.certificate.node_id_str})"


def signing_identity(
    staking_key: StakingKey | Any,
    certificate: Certificate | bytes | None,
    *,
    signer: StakingKey | Any = None,
) -> StakingKey | None:
    """The identity a layer signs with, from what its caller passed: a :class:`StakingKey`
    (no ``certificate``), a pycryptodome key with its certificate (or ``None`` for a
    self-signed one), or nothing (``None``: the node builds unsigned blocks). ``signer``
    is another name for ``staking_key``; passing both, or a certificate without a key or
    beside a ``StakingKey``, is ``ValueError``."""
    if signer is not None:
        if staking_key is not None:
            raise ValueError("signer and staking_key name the same key: pass one")
        staking_key = signer
    if isinstance(staking_key, StakingKey):
        if certificate is not None:
            raise ValueError("a StakingKey carries its certificate: pass no certificate")
        return staking_key
    if staking_key is None:
        if certificate is not None:
            raise ValueError("a certificate without its staking key cannot sign")
        return None
    return StakingKey(staking_key, certificate)
