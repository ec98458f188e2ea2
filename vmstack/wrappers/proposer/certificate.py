"""Staking certificates as avalanchego reads them: the strict DER reader, NodeIDs and CB58.

A proposer's post-fork block carries the X.509 certificate of its staking key. Only the
certificate's public key matters, so the certificate is read the way avalanchego's
``staking.ParseCertificate`` reads it: at most 2048 bytes, a walk over the DER that skips
everything before the SubjectPublicKeyInfo and never looks at the extensions (avalanchego's
own test certificates repeat an extension and have serial 0, which general X.509 parsers
refuse), and a public key that must be RSA-2048/4096 with exponent 65537 or an uncompressed
P-256 point.

A :class:`Certificate` checks signatures made with its key as avalanchego's
``staking.CheckSignature`` does, over the SHA-256 of the message: RSA PKCS#1 v1.5 with
SHA-256 (the encoded message must be the DigestInfo *with* its NULL parameter, as Go
requires), and ECDSA P-256 with an ASN.1 DER signature, read by the same strict reader
bounded to 72 bytes and checked with public-scalar point arithmetic. Everything here reads
what a peer sends, so every malformed input is :class:`~vmstack.errors.InvalidCertificate`
or :class:`~vmstack.errors.InvalidSignature`, never another exception. A node's own key,
its self-signed certificate and signing live in :mod:`~vmstack.wrappers.proposer.staking`.

A node checks the same envelope's signature many times (parse, verify, every peer that
sends it), so :meth:`Certificate.check_signature` keeps each signature that verified in a
process-wide, bounded :class:`~vmstack.verifycache.VerificationCache`
(:data:`VERIFIED_SIGNATURES`) under the certificate's bytes, the message's SHA-256 and the
signature's bytes. Only successes are kept: a signature that fails is checked, and fails,
every time, and a twin differing in any byte of the three is another key.
"""

from __future__ import annotations

import functools
import hashlib
from typing import Any, Literal

import attrs
from Crypto.Hash import RIPEMD160
from Crypto.IO import PEM
from Crypto.Math.Numbers import Integer
from Crypto.PublicKey import ECC, RSA

# EccPoint is public API of Crypto.PublicKey.ECC, but newer releases define it elsewhere.
from Crypto.PublicKey.ECC import EccPoint  # type: ignore[attr-defined, unused-ignore]

from vmstack.errors import InvalidCertificate, InvalidSignature
from vmstack.verifycache import VerificationCache

__all__ = [
    "Certificate",
    "MAX_CERTIFICATE_LEN",
    "MAX_ECDSA_SIGNATURE_LEN",
    "NODE_ID_LEN",
    "RSA_EXPONENT",
    "RSA_MODULUS_BITS",
    "TAG_BIT_STRING",
    "TAG_INTEGER",
    "TAG_OID",
    "TAG_SEQUENCE",
    "VERIFIED_SIGNATURES",
    "cb58decode",
    "cb58encode",
    "format_node_id",
    "node_id_from_certificate",
    "parse_node_id",
]

#: The largest certificate avalanchego accepts (``staking.MaxCertificateLen``).
MAX_CERTIFICATE_LEN = 2048
#: Bytes in a NodeID: ripemd160(sha256(certificate DER)).
NODE_ID_LEN = 20
#: The longest ASN.1 DER encoding of a P-256 ECDSA signature: a SEQUENCE (2 bytes of tag
#: and length) of two INTEGERs of at most 33 bytes each (2 bytes of tag and length each).
MAX_ECDSA_SIGNATURE_LEN = 72

#: The RSA key sizes a staking key may have, and its one public exponent.
RSA_MODULUS_BITS = (2048, 4096)
RSA_EXPONENT = 65537
_OID_RSA = bytes.fromhex("2a864886f70d010101")  # 1.2.840.113549.1.1.1 rsaEncryption
_OID_EC = bytes.fromhex("2a8648ce3d0201")  # 1.2.840.10045.2.1 id-ecPublicKey
# DigestInfo prefix for SHA-256 with the NULL parameter (RFC 8017, section 9.2, note 1).
_SHA256_DIGEST_INFO = bytes.fromhex("3031300d060960864801650304020105000420")
# P-256 domain parameters (FIPS 186-4, D.1.2.3).
_P256_P = 2**256 - 2**224 + 2**192 + 2**96 - 1
_P256_B = 0x5AC635D8AA3A93E7B3EBBD55769886BC651D06B0CC53B0F63BCE3C3E27D2604B
_P256_N = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
_P256_G = EccPoint(
    0x6B17D1F2E12C4247F8BCE6E563A440F277037D812DEB33A0F4A13945D898C296,
    0x4FE342E2FE1A7F9B8EE7EB4A7C0F9E162BCE33576B315ECECBB6406837BF51F5,
    curve="P-256",
)

#: The DER tags the reader and the certificate writer share.
TAG_INTEGER = 0x02
TAG_BIT_STRING = 0x03
TAG_OID = 0x06
TAG_SEQUENCE = 0x30
_TAG_VERSION = 0xA0  # [0] EXPLICIT, constructed, context-specific

#: Signatures that verified, by ``(certificate DER, sha256(message), signature)`` (4,096 at
#: most); the value is always ``True``.
VERIFIED_SIGNATURES: VerificationCache[tuple[bytes, bytes, bytes], bool] = VerificationCache(
    "verified envelope signatures", maxsize=1 << 12
)


# --- identifiers ------------------------------------------------------------------------

_B58_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_B58_INDEX = {char: index for index, char in enumerate(_B58_ALPHABET)}


def cb58encode(data: bytes) -> str:
    """Avalanche's CB58: base58 of ``data`` followed by the last 4 bytes of its sha256."""
    payload = bytes(data) + hashlib.sha256(data).digest()[-4:]
    number = int.from_bytes(payload, "big")
    digits: list[str] = []
    while number:
        number, rest = divmod(number, 58)
        digits.append(_B58_ALPHABET[rest])
    zeros = len(payload) - len(payload.lstrip(b"\0"))
    return "1" * zeros + "".join(reversed(digits))


def cb58decode(text: str) -> bytes:
    """Inverse of :func:`cb58encode`; ``ValueError`` for a bad character or checksum."""
    number = 0
    for char in text:
        try:
            number = number * 58 + _B58_INDEX[char]
        except KeyError:
            raise ValueError(f"{char!r} is not a base58 character") from None
    zeros = len(text) - len(text.lstrip("1"))
    body = number.to_bytes((number.bit_length() + 7) // 8, "big")
    payload = b"\0" * zeros + body
    if len(payload) < 4:
        raise ValueError("a CB58 string carries at least its 4-byte checksum")
    data, checksum = payload[:-4], payload[-4:]
    if hashlib.sha256(data).digest()[-4:] != checksum:
        raise ValueError("CB58 checksum mismatch")
    return data


def node_id_from_certificate(der: bytes) -> bytes:
    """The NodeID of a staking certificate: ripemd160(sha256(certificate DER))."""
    return RIPEMD160.new(hashlib.sha256(der).digest()).digest()


def format_node_id(node_id: bytes) -> str:
    """``"NodeID-" + cb58(node_id)``, as avalanchego prints a NodeID."""
    if len(node_id) != NODE_ID_LEN:
        raise ValueError(f"a NodeID is {NODE_ID_LEN} bytes, got {len(node_id)}")
    return "NodeID-" + cb58encode(node_id)


def parse_node_id(text: str) -> bytes:
    """Inverse of :func:`format_node_id`; ``ValueError`` for anything else."""
    if not text.startswith("NodeID-"):
        raise ValueError(f"a NodeID starts with 'NodeID-', got {text!r}")
    node_id = cb58decode(text[len("NodeID-") :])
    if len(node_id) != NODE_ID_LEN:
        raise ValueError(f"a NodeID is {NODE_ID_LEN} bytes, got {len(node_id)}")
    return node_id


# --- a DER walker, as strict as Go's cryptobyte on what it reads ------------------------


def _read_tlv(data: bytes, offset: int, reason: str) -> tuple[int, int, int]:
    """Read one DER element at ``offset``: ``(tag, content start, content end)``."""
    end = len(data)
    if offset + 2 > end:
        raise InvalidCertificate(reason)
    tag = data[offset]
    if tag & 0x1F == 0x1F:
        raise InvalidCertificate(reason)
    first = data[offset + 1]
    start = offset + 2
    if first < 0x80:
        length = first
    else:
        count = first & 0x7F
        if count == 0 or count > 4 or start + count > end:
            raise InvalidCertificate(reason)
        length = int.from_bytes(data[start : start + count], "big")
        if data[start] == 0 or length < 0x80:
            raise InvalidCertificate(reason)
        start += count
    if start + length > end:
        raise InvalidCertificate(reason)
    return tag, start, start + length


def _expect(data: bytes, offset: int, tag: int, reason: str) -> tuple[int, int]:
    found, start, stop = _read_tlv(data, offset, reason)
    if found != tag:
        raise InvalidCertificate(reason)
    return start, stop


def _der_integer(content: bytes, reason: str) -> int:
    """A DER INTEGER's value; non-minimal encodings are refused, as cryptobyte does."""
    if not content:
        raise InvalidCertificate(reason)
    if len(content) > 1 and (
        (content[0] == 0 and content[1] < 0x80) or (content[0] == 0xFF and content[1] >= 0x80)
    ):
        raise InvalidCertificate(reason)
    return int.from_bytes(content, "big", signed=True)


def _bit_string_bytes(content: bytes) -> bytes:
    """The right-aligned bytes of a DER BIT STRING (cryptobyte's rules for its padding)."""
    reason = "staking: malformed subject public key"
    if not content:
        raise InvalidCertificate(reason)
    padding = content[0]
    body = content[1:]
    if padding > 7 or (not body and padding) or (body and body[-1] & ((1 << padding) - 1)):
        raise InvalidCertificate(reason)
    if padding == 0:
        return body
    value = int.from_bytes(body, "big") >> padding
    return value.to_bytes(len(body), "big")


def _spki(der: bytes) -> tuple[bytes, bytes]:
    """``(algorithm OID, subject public key bytes)`` of a certificate, extensions unread."""
    start, stop = _expect(der, 0, TAG_SEQUENCE, "staking: malformed certificate")
    body = der[:stop]
    start, stop = _expect(body, start, TAG_SEQUENCE, "staking: malformed tbs certificate")
    tbs = body[:stop]
    offset = start
    tag, _, end = _read_tlv(tbs, offset, "staking: malformed version")
    if tag == _TAG_VERSION:
        offset = end
    for expected, reason in (
        (TAG_INTEGER, "staking: malformed serial number"),
        (TAG_SEQUENCE, "staking: malformed signature algorithm identifier"),
        (TAG_SEQUENCE, "staking: malformed issuer"),
        (TAG_SEQUENCE, "staking: malformed validity"),
        (TAG_SEQUENCE, "staking: malformed subject"),
    ):
        _, offset = _expect(tbs, offset, expected, reason)
    start, stop = _expect(tbs, offset, TAG_SEQUENCE, "staking: malformed spki")
    spki = tbs[:stop]
    algo_start, algo_stop = _expect(
        spki, start, TAG_SEQUENCE, "staking: malformed public key algorithm identifier"
    )
    oid_start, oid_stop = _expect(spki[:algo_stop], algo_start, TAG_OID, "staking: malformed oid")
    key_start, key_stop = _expect(
        spki, algo_stop, TAG_BIT_STRING, "staking: malformed subject public key"
    )
    return spki[oid_start:oid_stop], _bit_string_bytes(spki[key_start:key_stop])


def _rsa_numbers(key: bytes) -> tuple[int, int]:
    start, stop = _expect(key, 0, TAG_SEQUENCE, "staking: invalid RSA public key")
    sequence = key[:stop]
    n_start, n_stop = _expect(sequence, start, TAG_INTEGER, "staking: invalid RSA modulus")
    modulus = _der_integer(sequence[n_start:n_stop], "staking: invalid RSA modulus")
    e_start, e_stop = _expect(sequence, n_stop, TAG_INTEGER, "staking: invalid RSA public exponent")
    if e_stop - e_start > 8:
        raise InvalidCertificate("staking: invalid RSA public exponent")
    exponent = _der_integer(sequence[e_start:e_stop], "staking: invalid RSA public exponent")
    if modulus <= 0:
        raise InvalidCertificate("staking: RSA modulus is not a positive number")
    if modulus.bit_length() not in RSA_MODULUS_BITS:
        raise InvalidCertificate(f"staking: unsupported RSA modulus bitlen: {modulus.bit_length()}")
    if modulus % 2 == 0:
        raise InvalidCertificate("staking: RSA modulus is an even number")
    if exponent != RSA_EXPONENT:
        raise InvalidCertificate(f"staking: unsupported RSA public exponent: {exponent}")
    return modulus, exponent


def _p256_point(key: bytes) -> tuple[int, int]:
    reason = "staking: failed to unmarshal elliptic curve point"
    if len(key) != 65 or key[0] != 4:
        raise InvalidCertificate(reason)
    x = int.from_bytes(key[1:33], "big")
    y = int.from_bytes(key[33:], "big")
    if x >= _P256_P or y >= _P256_P or (y * y - (x * x * x - 3 * x + _P256_B)) % _P256_P:
        raise InvalidCertificate(reason)
    return x, y


def _ecdsa_signature_numbers(signature: bytes) -> tuple[int, int]:
    """``(r, s)`` of an ASN.1 DER ECDSA P-256 signature, each in ``[1, n - 1]``.

    Read here, strictly (one SEQUENCE of two minimal INTEGERs, nothing after it), rather
    than by a general DER parser: the length is bounded first (:data:`MAX_ECDSA_SIGNATURE_LEN`
    bytes), so a peer's oversized signature is refused without reading it, and the cost
    never depends on how long the peer made it. ``InvalidSignature`` otherwise.
    """
    reason = "staking: ECDSA verification failure"
    if not isinstance(signature, bytes) or len(signature) > MAX_ECDSA_SIGNATURE_LEN:
        raise InvalidSignature(reason)
    try:
        start, stop = _expect(signature, 0, TAG_SEQUENCE, reason)
        if stop != len(signature):
            raise InvalidSignature(reason)
        r_start, r_stop = _expect(signature, start, TAG_INTEGER, reason)
        s_start, s_stop = _expect(signature, r_stop, TAG_INTEGER, reason)
        if s_stop != stop:
            raise InvalidSignature(reason)
        r = _der_integer(signature[r_start:r_stop], reason)
        s = _der_integer(signature[s_start:s_stop], reason)
    except InvalidCertificate:
        raise InvalidSignature(reason) from None
    if not (0 < r < _P256_N and 0 < s < _P256_N):
        raise InvalidSignature(reason)
    return r, s


def _public(scalar: int) -> int:
    """``scalar`` as a public pycryptodome Integer, which a point multiplies by without
    side-channel blinding (typed as the int it stands for)."""
    return Integer(scalar, public=True)  # type: ignore[return-value]


def _check_ecdsa(point: Any, digest: bytes, r: int, s: int) -> None:
    """ECDSA P-256 verification (FIPS 186-4, 6.4.2) of ``(r, s)`` over a SHA-256 digest.

    ``u1 G + u2 Q`` with ``w = s^-1``, ``u1 = e w``, ``u2 = r w`` must have ``x = r mod n``.
    The scalars are public, so pycryptodome multiplies without the blinding it applies to
    secret ones, which halves the cost of a check a peer can ask for once per block.
    """
    w = pow(s, -1, _P256_N)
    e = int.from_bytes(digest, "big")  # SHA-256 has the order's bit length: no truncation
    total = _P256_G * _public(e * w % _P256_N) + point * _public(r * w % _P256_N)
    x, y = total.xy
    # pycryptodome gives the point at infinity the affine form (0, 0), which is not on
    # P-256; reading it that way spares building a point to compare with.
    if (x == 0 and y == 0) or x % _P256_N != r:
        raise InvalidSignature("staking: ECDSA verification failure")


# --- certificates -----------------------------------------------------------------------


@attrs.frozen(eq=False)
class Certificate:
    """A parsed staking certificate: its DER bytes and the public key inside.

    ``algorithm`` is ``"RSA"`` or ``"ECDSA"``, ``key_bits`` the key size (2048/4096 or 256)
    and ``public_numbers`` the key itself (``(n, e)`` or the point ``(x, y)``). Two
    certificates are equal when their DER bytes are. Build one with :meth:`parse`.
    """

    raw: bytes
    algorithm: Literal["RSA", "ECDSA"]
    key_bits: int
    public_numbers: tuple[int, int]
    node_id: bytes
    _verifier: Any = attrs.field(repr=False)

    @staticmethod
    def parse(der: bytes) -> Certificate:
        """Read a certificate as avalanchego's ``staking.ParseCertificate`` does.

        Raises :class:`InvalidCertificate` (reason as upstream names it) for a certificate
        over 2048 bytes, malformed DER before or in the SubjectPublicKeyInfo, an unknown
        key algorithm, or a key outside the allowed forms. Bytes after the certificate's
        outer SEQUENCE and everything after the public key are ignored, as there.
        Parsed certificates are cached by their bytes: a chain has few proposers.
        """
        return _parse_certificate(bytes(der))

    @staticmethod
    def from_pem(text: str | bytes) -> Certificate:
        """Parse a PEM ``CERTIFICATE`` block (like avalanchego's ``stakerN.crt``)."""
        if isinstance(text, bytes):
            text = text.decode("ascii")
        try:
            der, marker, _ = PEM.decode(text)
        except ValueError as error:
            raise InvalidCertificate(f"not a PEM certificate: {error}") from None
        if marker != "CERTIFICATE":
            raise InvalidCertificate(f"expected a PEM CERTIFICATE, got {marker!r}")
        return Certificate.parse(der)

    @property
    def key_type(self) -> str:
        """``"RSA-4096"``, ``"RSA-2048"`` or ``"ECDSA-P256"``."""
        return f"RSA-{self.key_bits}" if self.algorithm == "RSA" else "ECDSA-P256"

    @property
    def node_id_str(self) -> str:
        """The NodeID as avalanchego prints it (``NodeID-…``)."""
        return format_node_id(self.node_id)

    def public_key(self) -> Any:
        """The public key as a pycryptodome ``RsaKey`` or ``EccKey``."""
        if self.algorithm == "RSA":
            return RSA.construct(self.public_numbers, consistency_check=False)
        return self._verifier

    def check_signature(self, message: bytes, signature: bytes, *, cached: bool = True) -> None:
        """Verify ``signature`` over ``message`` as ``staking.CheckSignature`` does.

        The message is hashed with SHA-256; RSA signatures are PKCS#1 v1.5 over that
        digest, ECDSA signatures are ASN.1 DER ``(r, s)`` over it. Raises
        :class:`InvalidSignature` when the signature does not verify. A signature that
        verified is kept in :data:`VERIFIED_SIGNATURES` (by these three byte strings) and
        not checked again; ``cached=False`` checks without reading or filling it (what a
        parse pool's worker does: the process that asked keeps the verdict).
        """
        digest = hashlib.sha256(message).digest()
        key = (self.raw, digest, signature)
        cacheable = cached and type(signature) is bytes  # anything else fails below
        if cacheable:
            if VERIFIED_SIGNATURES.get(key):
                return
            VERIFIED_SIGNATURES.computed_once()
        if self.algorithm == "RSA":
            _check_rsa(self.public_numbers[0], self._verifier, digest, signature)
        else:
            r, s = _ecdsa_signature_numbers(signature)
            _check_ecdsa(self._verifier.pointQ, digest, r, s)
        if cacheable:
            VERIFIED_SIGNATURES.put(key, True)

    def remember_verified(self, message: bytes, signature: bytes) -> None:
        """Enter in :data:`VERIFIED_SIGNATURES` a signature that :meth:`check_signature`
        verified in another process (a parse pool's worker, for the same bytes)."""
        VERIFIED_SIGNATURES.put((self.raw, hashlib.sha256(message).digest(), signature), True)

    def known_verified(self, message: bytes, signature: bytes) -> bool:
        """Whether :data:`VERIFIED_SIGNATURES` holds this signature (no look-up counted)."""
        return (self.raw, hashlib.sha256(message).digest(), signature) in VERIFIED_SIGNATURES

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Certificate) and other.raw == self.raw

    def __hash__(self) -> int:
        return hash(self.raw)


@functools.lru_cache(maxsize=1024)
def _parse_certificate(der: bytes) -> Certificate:
    if len(der) > MAX_CERTIFICATE_LEN:
        raise InvalidCertificate(
            f"staking: certificate length is greater than {MAX_CERTIFICATE_LEN}"
        )
    oid, key = _spki(der)
    verifier: Any
    if oid == _OID_RSA:
        numbers = _rsa_numbers(key)
        bits = numbers[0].bit_length()
        algorithm: Literal["RSA", "ECDSA"] = "RSA"
        verifier = Integer(numbers[0])
    elif oid == _OID_EC:
        numbers = _p256_point(key)
        bits = 256
        algorithm = "ECDSA"
        verifier = ECC.construct(curve="P-256", point_x=numbers[0], point_y=numbers[1])
    else:
        raise InvalidCertificate("staking: unknown public key algorithm")
    return Certificate(der, algorithm, bits, numbers, node_id_from_certificate(der), verifier)


def _check_rsa(modulus: int, modulus_integer: Any, digest: bytes, signature: bytes) -> None:
    """RSASSA-PKCS1-V1_5-VERIFY with SHA-256, comparing the whole encoded message."""
    size = (modulus.bit_length() + 7) // 8
    if len(signature) != size:
        raise InvalidSignature("crypto/rsa: verification error")
    value = int.from_bytes(signature, "big")
    if value >= modulus:
        raise InvalidSignature("crypto/rsa: verification error")
    encoded = int(pow(Integer(value), RSA_EXPONENT, modulus_integer)).to_bytes(size, "big")
    tail = _SHA256_DIGEST_INFO + digest
    expected = b"\x00\x01" + b"\xff" * (size - len(tail) - 3) + b"\x00" + tail
    if encoded != expected:
        raise InvalidSignature("crypto/rsa: verification error")
