"""keccak256 and secp256k1: known vectors, an independent verifier, and bad signature values."""

from __future__ import annotations

import subprocess
import sys

import pytest
from Crypto.Hash import keccak
from Crypto.PublicKey import ECC
from Crypto.Signature import DSS

from vmstack.cchain import LegacyTx, address_of, keccak256, recover_address, sign_transaction
from vmstack.cchain.crypto import SECP256K1_HALF_N, SECP256K1_N, private_key_int, sign_hash
from vmstack.errors import InvalidBlock

EIP155_KEY = bytes.fromhex("46" * 32)
EIP155_SIGNED = bytes.fromhex(
    "f86c098504a817c800825208943535353535353535353535353535353535353535880de0b6b3a7640000"
    "8025a028ef61340bd939bc2195fe537567866003e1a15d3c71ff63e1590620aa636276a067cbe9d8997f"
    "761aecb703304b3800ccf555c9f3dc64214b297fb1966a3b6d83"
)


def test_keccak256_known_digests() -> None:
    """keccak256 is the original Keccak, not SHA3-256, and accepts views."""
    assert keccak256(b"").hex() == (
        "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"
    )
    assert keccak256(b"\x80").hex() == (
        "56e81f171bcc55a6ff8345e692c0f86e5b48e01b996cadc001622fb5e363b421"
    )
    data = bytearray(b"vmstack" * 100)
    assert keccak256(memoryview(data)[7:]) == keccak256(bytes(data[7:]))


@pytest.mark.parametrize("length", [0, 1, 31, 32, 135, 136, 137, 271, 272, 273, 100_000])
def test_keccak256_agrees_with_a_keccak_hash_object(length: int) -> None:
    """The one-shot digest is the Keccak hash object's, on each side of the 136-byte rate,
    for bytes, bytearray and memoryview input."""
    data = bytes((7 * i + 3) & 0xFF for i in range(length))
    expected = keccak.new(digest_bits=256, data=data).digest()
    assert (
        keccak256(data) == keccak256(bytearray(data)) == keccak256(memoryview(data)) == (expected)
    )


# A child process that reports pycryptodome's backend and a few digests; with ``block``,
# cffi is made unimportable first, so pycryptodome falls back to ctypes.
_BACKEND_CHILD = """
import sys
if sys.argv[1] == "block":
    sys.modules["cffi"] = None
from Crypto.Util import _raw_api
from vmstack.keccak import keccak256
print(_raw_api.backend)
for data in (b"", b"\\x80", bytearray(b"vmstack" * 40), memoryview(b"x" * 137)[1:]):
    print(keccak256(data).hex())
"""


@pytest.mark.parametrize("backend", ["cffi", "ctypes"])
def test_keccak256_under_both_backends_of_pycryptodome(backend: str) -> None:
    """pycryptodome reaches its C library through cffi where cffi is installed (the test
    extra installs it) and through ctypes otherwise; keccak256 gives the same digests over
    either (it once passed a ctypes buffer to the cffi backend, and a process with cffi
    could not import vmstack)."""
    pytest.importorskip("cffi", reason="the cffi backend needs cffi installed")
    child = subprocess.run(
        [sys.executable, "-c", _BACKEND_CHILD, "block" if backend == "ctypes" else "allow"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert child.returncode == 0, child.stderr
    reported, *digests = child.stdout.split()
    assert reported == backend
    inputs = (b"", b"\x80", b"vmstack" * 40, b"x" * 136)
    assert digests == [keccak.new(digest_bits=256, data=data).hexdigest() for data in inputs]


def test_address_of_known_keys() -> None:
    """Private key 1 and the EIP-155 example key give their well-known addresses."""
    assert address_of(1).hex() == "7e5f4552091a69125d5dfcb7b8c2659029395bdf"
    assert address_of(EIP155_KEY).hex() == "9d8a62f656a8d1615c1294fd71e9cfb3e4855a4f"


def test_eip155_example_signs_byte_for_byte() -> None:
    """Signing the EIP-155 example transaction reproduces its published signed bytes."""
    tx = LegacyTx(
        nonce=9,
        gas_price=20 * 10**9,
        gas=21000,
        to=bytes.fromhex("35" * 20),
        value=10**18,
    )
    assert tx.signing_hash(1).hex() == (
        "daf5a779ae972f972197303d7b574746c7ef83eadac0f2791ad23db92e4c8e53"
    )
    signed = sign_transaction(tx, EIP155_KEY, 1)
    assert signed.v == 37
    assert signed.encode() == EIP155_SIGNED
    assert signed.sender() == address_of(EIP155_KEY)
    assert signed.sender(1) == address_of(EIP155_KEY)


@pytest.mark.parametrize("seed", range(6))
def test_signatures_verify_with_an_independent_ecdsa(seed: int) -> None:
    """pycryptodome's own ECDSA verifier accepts our signatures, and recovery finds the key."""
    key = keccak256(b"key %d" % seed)
    message = b"message %d" % seed
    digest = keccak256(message)
    parity, r, s = sign_hash(digest, key)
    assert s <= SECP256K1_HALF_N and parity in (0, 1)
    public = ECC.construct(curve="secp256k1", d=private_key_int(key)).public_key()
    verifier = DSS.new(public, "deterministic-rfc6979")
    signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    verifier.verify(keccak.new(digest_bits=256, data=message), signature)
    assert recover_address(digest, parity, r, s) == address_of(key)
    assert recover_address(digest, parity ^ 1, r, s) != address_of(key)


def test_signing_is_deterministic() -> None:
    """The same key and hash always give the same signature; another hash gives another."""
    digest = keccak256(b"same")
    assert sign_hash(digest, 7) == sign_hash(digest, 7)
    assert sign_hash(digest, 7) != sign_hash(keccak256(b"other"), 7)


def test_high_s_is_rejected_unless_allowed() -> None:
    """The mirror signature (n - s, other parity) is rejected as high-s unless allowed."""
    digest = keccak256(b"malleable")
    parity, r, s = sign_hash(digest, 11)
    with pytest.raises(InvalidBlock, match="not low"):
        recover_address(digest, parity ^ 1, r, SECP256K1_N - s)
    assert recover_address(digest, parity ^ 1, r, SECP256K1_N - s, low_s=False) == address_of(11)


@pytest.mark.parametrize(
    ("parity", "r", "s", "reason"),
    [
        (2, 1, 1, "parity"),
        (-1, 1, 1, "parity"),
        (0, 0, 1, "r out of range"),
        (0, SECP256K1_N, 1, "r out of range"),
        (0, 1, 0, "s out of range"),
        (0, 1, SECP256K1_N, "s out of range"),
        (0, 5, 1, "not the x coordinate"),
    ],
)
def test_invalid_signature_values_raise_invalid_block(
    parity: int, r: int, s: int, reason: str
) -> None:
    """Values that cannot form a signature raise InvalidBlock saying which one is wrong."""
    with pytest.raises(InvalidBlock, match=reason):
        recover_address(keccak256(b"x"), parity, r, s, low_s=False)


def test_bad_arguments_raise_value_error() -> None:
    """A hash that is not 32 bytes or a key outside [1, n-1] is a caller's ValueError."""
    with pytest.raises(ValueError, match="32 bytes"):
        recover_address(b"short", 0, 1, 1)
    for key in (0, SECP256K1_N, b"\x01" * 31, "key"):
        with pytest.raises(ValueError, match="private key"):
            address_of(key)  # type: ignore[arg-type]
