"""Hashing and secp256k1 signatures as Ethereum uses them.

``keccak256`` is the original Keccak (not SHA3-256), from pycryptodome. Signatures are
secp256k1 ECDSA over a 32-byte hash, carried as ``(y_parity, r, s)`` with a low ``s``
(``s <= n / 2``, the Homestead rule). Signing is deterministic (RFC 6979 with HMAC-SHA256,
the nonce rule libsecp256k1 uses), so a chain built from a seed is reproducible byte for byte.

Public-key recovery is what a node does to learn a transaction's sender: from ``r`` and the
parity it rebuilds the point ``R``, then ``Q = r^-1 (s R - z G)`` and the address is the last
20 bytes of ``keccak256(Q.x || Q.y)``. The two scalar multiplications run in pycryptodome's C
code with public scalars (no blinding: every value here is public); the rest is Python
integer arithmetic. Signature values that cannot be a valid signature raise
:class:`~vmstack.errors.InvalidBlock`, because they come from block bytes.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterator

from Crypto.Hash import keccak as _keccak
from Crypto.Math.Numbers import Integer

# EccPoint is public API of Crypto.PublicKey.ECC, but newer releases define it elsewhere.
from Crypto.PublicKey.ECC import EccPoint  # type: ignore[attr-defined, unused-ignore]

from vmstack.errors import InvalidBlock

__all__ = [
    "SECP256K1_HALF_N",
    "SECP256K1_N",
    "SECP256K1_P",
    "address_of",
    "keccak256",
    "private_key_int",
    "recover_address",
    "sign_hash",
]

SECP256K1_P = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEFFFFFC2F
"""The field prime of secp256k1 (``p % 4 == 3``, so a square root is one exponentiation)."""

SECP256K1_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
"""The group order of secp256k1."""

SECP256K1_HALF_N = SECP256K1_N // 2
"""The largest ``s`` a low-s (Homestead) signature may carry."""

_CURVE = "secp256k1"
_GX = 0x79BE667EF9DCBBAC55A06295CE870B07029BFCDB2DCE28D959F2815B16F81798
_GY = 0x483ADA7726A3C4655DA4FBFC0E1108A8FD17B448A68554199C47D08FFB10D4B8
_G = EccPoint(_GX, _GY, curve=_CURVE)
_P_PUBLIC = Integer(SECP256K1_P, public=True)
_SQRT_EXPONENT = Integer((SECP256K1_P + 1) // 4, public=True)


def _public(scalar: int) -> int:
    """``scalar`` as a public pycryptodome Integer: multiplying a point by it then skips the
    side-channel blinding meant for secret scalars (every value in a recovery is public)."""
    return Integer(scalar, public=True)  # type: ignore[return-value]


def keccak256(data: bytes | bytearray | memoryview) -> bytes:
    """The 32-byte Keccak-256 digest of ``data`` (any contiguous byte buffer)."""
    if type(data) is not bytes:
        # pycryptodome takes a memoryview by a slower route than the copy costs.
        data = bytes(data)
    return _keccak.new(digest_bits=256, data=data).digest()


def private_key_int(private_key: bytes | int) -> int:
    """A private key as an integer in ``[1, n-1]``; 32 big-endian bytes or an int.

    Raises ``ValueError`` for anything else: a bad key is a caller's mistake, not bad data.
    """
    if isinstance(private_key, int):
        d = private_key
    elif isinstance(private_key, (bytes, bytearray)) and len(private_key) == 32:
        d = int.from_bytes(private_key, "big")
    else:
        raise ValueError("a private key is 32 bytes or an int")
    if not 0 < d < SECP256K1_N:
        raise ValueError("a private key must lie in [1, n-1] of secp256k1")
    return d


def _address_of_point(point: EccPoint) -> bytes:
    x, y = point.xy
    return keccak256(x.to_bytes(32, "big") + y.to_bytes(32, "big"))[12:]


def address_of(private_key: bytes | int) -> bytes:
    """The 20-byte Ethereum address of a private key."""
    return _address_of_point(_G * private_key_int(private_key))


def _rfc6979_nonces(d: int, msg_hash: bytes) -> Iterator[int]:
    """RFC 6979 section 3.2 nonces for key ``d`` and hash ``msg_hash`` (HMAC-SHA256)."""
    x = d.to_bytes(32, "big")
    h = (int.from_bytes(msg_hash, "big") % SECP256K1_N).to_bytes(32, "big")
    v = b"\x01" * 32
    k = b"\x00" * 32
    k = hmac.new(k, v + b"\x00" + x + h, hashlib.sha256).digest()
    v = hmac.new(k, v, hashlib.sha256).digest()
    k = hmac.new(k, v + b"\x01" + x + h, hashlib.sha256).digest()
    v = hmac.new(k, v, hashlib.sha256).digest()
    while True:
        v = hmac.new(k, v, hashlib.sha256).digest()
        candidate = int.from_bytes(v, "big")
        if 0 < candidate < SECP256K1_N:
            yield candidate
        k = hmac.new(k, v + b"\x00", hashlib.sha256).digest()
        v = hmac.new(k, v, hashlib.sha256).digest()


def _check_hash(msg_hash: bytes) -> None:
    if not isinstance(msg_hash, (bytes, bytearray)) or len(msg_hash) != 32:
        raise ValueError("the message hash must be 32 bytes")


def sign_hash(msg_hash: bytes, private_key: bytes | int) -> tuple[int, int, int]:
    """Sign a 32-byte hash; returns ``(y_parity, r, s)`` with a low ``s``.

    Deterministic: the same key and hash always give the same signature (RFC 6979), which
    is what libsecp256k1 (and so geth) produces.
    """
    _check_hash(msg_hash)
    d = private_key_int(private_key)
    z = int.from_bytes(msg_hash, "big") % SECP256K1_N
    for k in _rfc6979_nonces(d, msg_hash):
        x, y = (_G * k).xy
        if x >= SECP256K1_N:
            # Such an R needs a recovery id of 2 or 3, which Ethereum cannot carry.
            continue
        r = x
        s = pow(k, -1, SECP256K1_N) * (z + r * d) % SECP256K1_N
        if s == 0:
            continue
        parity = y & 1
        if s > SECP256K1_HALF_N:
            s = SECP256K1_N - s
            parity ^= 1
        return parity, r, s
    raise AssertionError("unreachable: the nonce generator is infinite")


def recover_address(msg_hash: bytes, y_parity: int, r: int, s: int, *, low_s: bool = True) -> bytes:
    """The 20-byte address whose key signed ``msg_hash`` with ``(y_parity, r, s)``.

    ``low_s`` enforces ``s <= n/2`` (the Homestead rule every transaction signer since
    Homestead applies). Values that cannot form a valid signature raise ``InvalidBlock``;
    a hash that is not 32 bytes raises ``ValueError``.
    """
    _check_hash(msg_hash)
    if y_parity not in (0, 1):
        raise InvalidBlock(f"signature y parity must be 0 or 1, got {y_parity}")
    if not 0 < r < SECP256K1_N:
        raise InvalidBlock("signature r out of range")
    if not 0 < s < SECP256K1_N:
        raise InvalidBlock("signature s out of range")
    if low_s and s > SECP256K1_HALF_N:
        raise InvalidBlock("signature s is not low (s > n/2)")
    p = SECP256K1_P
    alpha = (r * r * r + 7) % p
    # pycryptodome's modular power is several times faster than Python's for 256 bits.
    y = int(pow(Integer(alpha, public=True), _SQRT_EXPONENT, _P_PUBLIC))
    if y * y % p != alpha:
        raise InvalidBlock("signature r is not the x coordinate of a curve point")
    if y & 1 != y_parity:
        y = p - y
    big_r = EccPoint(r, y, curve=_CURVE)
    r_inv = pow(r, -1, SECP256K1_N)
    u1 = -int.from_bytes(msg_hash, "big") * r_inv % SECP256K1_N
    u2 = s * r_inv % SECP256K1_N
    q = big_r * _public(u2)
    if u1:
        q += _G * _public(u1)
    qx, qy = q.xy
    if qx == 0 and qy == 0:
        # pycryptodome's affine form of the point at infinity; (0, 0) is not on the curve.
        raise InvalidBlock("signature recovers to the point at infinity")
    return keccak256(qx.to_bytes(32, "big") + qy.to_bytes(32, "big"))[12:]
