"""The process-wide verification caches never turn a bad signature into a good one: a
forged twin of a kept signature (another v, a high s, one byte changed, another key) gets
exactly what a check without the cache gives, and a failed check is never kept."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import attrs
import pytest
from coincurve import PublicKey

from vmstack.cchain import DEV_KEYS, DynamicFeeTx, address_of
from vmstack.cchain.crypto import (
    RECOVERED_SENDERS,
    SECP256K1_N,
    recover_address,
    sign_hash,
)
from vmstack.errors import InvalidBlock, InvalidSignature
from vmstack.keccak import keccak256
from vmstack.verifycache import VerificationCache, caches, clear_all
from vmstack.wrappers.proposer.certificate import VERIFIED_SIGNATURES, Certificate
from vmstack.wrappers.proposer.staking import StakingKey

KEY = DEV_KEYS[0]
OTHER_KEY = DEV_KEYS[1]


@pytest.fixture(autouse=True)
def _empty_caches() -> Iterator[None]:
    clear_all()
    yield
    clear_all()


def _uncached_recovery(msg_hash: bytes, parity: int, r: int, s: int) -> bytes | None:
    """What libsecp256k1 recovers from the signature, with no cache anywhere (``None``
    where it recovers nothing)."""
    signature = r.to_bytes(32, "big") + s.to_bytes(32, "big") + bytes((parity,))
    try:
        point = PublicKey.from_signature_and_message(signature, msg_hash, hasher=None)
    except ValueError:
        return None
    return keccak256(point.format(compressed=False)[1:])[12:]


def _cached_recovery(msg_hash: bytes, parity: int, r: int, s: int) -> bytes | None:
    try:
        return recover_address(msg_hash, parity, r, s)
    except InvalidBlock:
        return None


def test_a_signature_made_here_is_known_and_its_twins_are_not() -> None:
    digest = keccak256(b"a message")
    parity, r, s = sign_hash(digest, KEY)
    assert (digest, parity, r, s) in RECOVERED_SENDERS
    assert recover_address(digest, parity, r, s) == address_of(KEY)
    assert RECOVERED_SENDERS.computed == 0  # known at signing
    # Another v: another key point, recovered afresh, the uncached answer.
    other_v = _cached_recovery(digest, 1 - parity, r, s)
    assert other_v == _uncached_recovery(digest, 1 - parity, r, s)
    assert other_v != address_of(KEY)
    # The high-s twin (same point, mathematically valid) is refused by the low-s rule.
    with pytest.raises(InvalidBlock, match="not low"):
        recover_address(digest, 1 - parity, r, SECP256K1_N - s)
    # One byte of the hash changed: another signer (or none), never the cached one.
    changed = bytes((digest[0] ^ 1,)) + digest[1:]
    assert _cached_recovery(changed, parity, r, s) == _uncached_recovery(changed, parity, r, s)
    assert _cached_recovery(changed, parity, r, s) != address_of(KEY)
    # One bit of r or s changed.
    for r2, s2 in ((r ^ 1, s), (r, s ^ 1)):
        assert _cached_recovery(digest, parity, r2, s2) == _uncached_recovery(
            digest, parity, r2, s2
        )
        assert _cached_recovery(digest, parity, r2, s2) != address_of(KEY)


def test_a_recovery_is_kept_and_a_failure_is_not() -> None:
    digest = keccak256(b"another message")
    parity, r, s = sign_hash(digest, KEY)
    clear_all()  # as a node that did not sign it
    assert recover_address(digest, parity, r, s) == address_of(KEY)
    assert recover_address(digest, parity, r, s) == address_of(KEY)
    assert RECOVERED_SENDERS.computed == 1
    assert RECOVERED_SENDERS.lookups == 2
    # r = a value that is no curve point's x recovers nothing: raised every time, never kept.
    bad_r = next(x for x in range(1, 100) if _uncached_recovery(digest, 0, x, 1) is None)
    for _ in range(3):
        with pytest.raises(InvalidBlock, match="recovers no public key"):
            recover_address(digest, 0, bad_r, 1)
    assert RECOVERED_SENDERS.computed == 4
    assert len(RECOVERED_SENDERS) == 1


def test_a_forged_transaction_twin_recovers_its_own_sender() -> None:
    """A transaction whose sender is kept, with one byte changed anywhere in its signed
    fields or its v: the twin's sender is what recovery without a cache gives."""
    tx = DynamicFeeTx(
        chain_id=43114, nonce=3, max_fee_per_gas=50 * 10**9, gas=21_000, to=b"\x11" * 20, value=7
    ).sign(KEY)
    assert tx.sender() == address_of(KEY)
    twins = [
        attrs.evolve(tx, value=8),
        attrs.evolve(tx, nonce=4),
        attrs.evolve(tx, y_parity=1 - tx.y_parity),
        attrs.evolve(tx, s=tx.s ^ 1),
    ]
    for twin in twins:
        expected = _uncached_recovery(twin.signing_hash(), twin.y_parity, twin.r, twin.s)
        try:
            got: bytes | None = twin.sender()
        except InvalidBlock:
            got = None
        assert got == expected
        assert got != address_of(KEY)


def test_a_verified_envelope_signature_is_kept_and_its_twins_are_checked() -> None:
    key = StakingKey.generate(seed=b"verify cache")
    other = StakingKey.generate(seed=b"verify cache, other")
    message = b"a header to sign" * 4
    signature = key.sign(message)
    certificate = key.certificate
    certificate.check_signature(message, signature)
    certificate.check_signature(message, signature)
    assert VERIFIED_SIGNATURES.computed == 1 and VERIFIED_SIGNATURES.lookups == 2
    hashed = hashlib.sha256(message).digest()
    assert (certificate.raw, hashed, signature) in VERIFIED_SIGNATURES
    flipped_message = bytes((message[0] ^ 1,)) + message[1:]
    flipped_signature = signature[:-1] + bytes((signature[-1] ^ 1,))
    for check_certificate, check_message, check_signature in (
        (certificate, flipped_message, signature),
        (certificate, message, flipped_signature),
        (other.certificate, message, signature),
    ):
        for _ in range(2):  # a failure is never kept: it fails again
            with pytest.raises(InvalidSignature):
                check_certificate.check_signature(check_message, check_signature)
    assert len(VERIFIED_SIGNATURES) == 1
    # Not bytes at all: refused as before, nothing kept.
    with pytest.raises(InvalidSignature):
        certificate.check_signature(message, bytearray(signature))  # type: ignore[arg-type]


def test_an_uncached_check_neither_reads_nor_fills_the_cache() -> None:
    key = StakingKey.generate(seed=b"verify cache")
    message = b"header"
    signature = key.sign(message)
    key.certificate.check_signature(message, signature, cached=False)
    assert len(VERIFIED_SIGNATURES) == 0 and VERIFIED_SIGNATURES.lookups == 0
    assert not key.certificate.known_verified(message, signature)
    key.certificate.remember_verified(message, signature)
    assert key.certificate.known_verified(message, signature)


def test_an_rsa_signature_is_kept_too() -> None:
    key = StakingKey.generate(algorithm="RSA", seed=b"verify cache rsa")
    signature = key.sign(b"m")
    Certificate.parse(key.certificate.raw).check_signature(b"m", signature)
    assert len(VERIFIED_SIGNATURES) == 1
    with pytest.raises(InvalidSignature):
        key.certificate.check_signature(b"n", signature)


def test_a_cache_is_bounded_oldest_first() -> None:
    cache: VerificationCache[int, int] = VerificationCache("bounded cache test", maxsize=3)
    for number in range(5):
        cache.put(number, number * 10)
    assert len(cache) == 3 and cache.evicted == 2
    assert cache.get(0) is None and cache.get(4) == 40
    assert caches()["bounded cache test"].entries == 3
    with pytest.raises(ValueError, match="exists already"):
        VerificationCache("bounded cache test", maxsize=3)
    with pytest.raises(ValueError, match="at least one"):
        VerificationCache("empty cache test", maxsize=0)


def test_one_key_object_per_key() -> None:
    from vmstack.cchain.crypto import private_key_object

    assert private_key_object(OTHER_KEY) is private_key_object(OTHER_KEY)
    assert private_key_object(OTHER_KEY) is not private_key_object(KEY)
