"""Hashing and secp256k1 signatures as Ethereum uses them.

Addresses hash with :func:`vmstack.keccak.keccak256` (the original Keccak). Signatures are
secp256k1 ECDSA over a 32-byte hash, carried as ``(y_parity, r, s)`` with a low ``s``
(``s <= n / 2``, the Homestead rule). Signing and public-key recovery run in libsecp256k1
(through ``coincurve``), the library Ethereum clients use: signing is deterministic (RFC 6979
with HMAC-SHA256), so a chain built from a seed is reproducible byte for byte.

Recovery is what a node does to learn a transaction's sender: from the signature it rebuilds
the signer's public key ``Q``, and the address is the last 20 bytes of
``keccak256(Q.x || Q.y)``. The signature's values are checked against their ranges before
libsecp256k1 sees them; values that cannot form a valid signature raise
:class:`~vmstack.errors.InvalidBlock`, because they come from block bytes.

A node recovers the same sender many times (parse, verify, restore from the store, the
mempool, every peer that sends the block), so :func:`recover_address` keeps what it
recovered in a process-wide, bounded :class:`~vmstack.verifycache.VerificationCache`
(:data:`RECOVERED_SENDERS`) under the hash and the whole signature ``(y_parity, r, s)``: a
twin with another ``v``, another ``s`` or another hash is another key, recovered afresh, and
the range checks run on every call before the cache is read. :func:`sign_hash` enters the
signature it makes there too (with the signing key's address, which recovery would give), so
a transaction this process signed is never recovered again. Signing keys are kept as
libsecp256k1 key objects, one per key (:func:`private_key_object`).
"""

from __future__ import annotations

import functools

from coincurve import PrivateKey, PublicKey

from vmstack.errors import InvalidBlock
from vmstack.keccak import keccak256
from vmstack.verifycache import VerificationCache

__all__ = [
    "RECOVERED_SENDERS",
    "SECP256K1_HALF_N",
    "SECP256K1_N",
    "SECP256K1_P",
    "address_of",
    "private_key_int",
    "private_key_object",
    "recover_address",
    "sign_hash",
    "sign_hash_and_address",
]

SECP256K1_P = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEFFFFFC2F
"""The field prime of secp256k1."""

SECP256K1_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
"""The group order of secp256k1."""

SECP256K1_HALF_N = SECP256K1_N // 2
"""The largest ``s`` a low-s (Homestead) signature may carry."""

RECOVERED_SENDERS: VerificationCache[tuple[bytes, int, int, int], bytes] = VerificationCache(
    "recovered senders", maxsize=1 << 15
)
"""Recovered addresses by ``(hash, y_parity, r, s)``, successes only (32,768 at most)."""


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


def _address_of_public_key(public_key: PublicKey) -> bytes:
    return keccak256(public_key.format(compressed=False)[1:])[12:]


@functools.lru_cache(maxsize=256)
def _key_and_address(secret: int) -> tuple[PrivateKey, bytes]:
    key = PrivateKey(secret.to_bytes(32, "big"))
    return key, _address_of_public_key(key.public_key)


def private_key_object(private_key: bytes | int) -> PrivateKey:
    """The libsecp256k1 key object of a private key, made once per key (the 256 keys used
    last are kept: building one costs more than a signature)."""
    return _key_and_address(private_key_int(private_key))[0]


def address_of(private_key: bytes | int) -> bytes:
    """The 20-byte Ethereum address of a private key."""
    return _key_and_address(private_key_int(private_key))[1]


def _check_hash(msg_hash: bytes) -> None:
    if not isinstance(msg_hash, (bytes, bytearray)) or len(msg_hash) != 32:
        raise ValueError("the message hash must be 32 bytes")


def sign_hash(msg_hash: bytes, private_key: bytes | int) -> tuple[int, int, int]:
    """Sign a 32-byte hash; returns ``(y_parity, r, s)`` with a low ``s``.

    Deterministic: the same key and hash always give the same signature (RFC 6979, as
    libsecp256k1, and so geth, signs). The signature is entered in
    :data:`RECOVERED_SENDERS` with the key's address, what recovering it gives.
    """
    parity, r, s, _ = sign_hash_and_address(msg_hash, private_key)
    return parity, r, s


def sign_hash_and_address(msg_hash: bytes, private_key: bytes | int) -> tuple[int, int, int, bytes]:
    """:func:`sign_hash`, and the signing key's address (what :func:`address_of` gives),
    from one look-up of the key: ``(y_parity, r, s, address)``."""
    _check_hash(msg_hash)
    digest = bytes(msg_hash)
    key, address = _key_and_address(private_key_int(private_key))
    signature = key.sign_recoverable(digest, hasher=None)
    parity = signature[64]
    if parity > 1:
        # R.x >= n (probability about 2**-128): Ethereum cannot carry its recovery id.
        raise ValueError("this key and hash give a signature Ethereum cannot carry")
    r = int.from_bytes(signature[:32], "big")
    s = int.from_bytes(signature[32:64], "big")
    RECOVERED_SENDERS.put((digest, parity, r, s), address)
    return parity, r, s, address


def recover_address(msg_hash: bytes, y_parity: int, r: int, s: int, *, low_s: bool = True) -> bytes:
    """The 20-byte address whose key signed ``msg_hash`` with ``(y_parity, r, s)``.

    ``low_s`` enforces ``s <= n/2`` (the Homestead rule every transaction signer since
    Homestead applies). Values that cannot form a valid signature raise ``InvalidBlock``;
    a hash that is not 32 bytes raises ``ValueError``. Those checks run on every call; what
    a successful recovery gives is kept in :data:`RECOVERED_SENDERS` by the hash and the
    whole signature.
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
    digest = bytes(msg_hash)
    key = (digest, y_parity, r, s)
    address = RECOVERED_SENDERS.get(key)
    if address is not None:
        return address
    RECOVERED_SENDERS.computed_once()
    signature = r.to_bytes(32, "big") + s.to_bytes(32, "big") + bytes((y_parity,))
    try:
        public_key = PublicKey.from_signature_and_message(signature, digest, hasher=None)
    except ValueError:
        raise InvalidBlock(
            "signature recovers no public key (r is not the x coordinate of "
            "a curve point, or the key would be the point at infinity)"
        ) from None
    address = _address_of_public_key(public_key)
    RECOVERED_SENDERS.put(key, address)
    return address
