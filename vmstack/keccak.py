"""Keccak-256, the hash of every Ethereum block and of an era1 file's accumulator entries:
:func:`keccak256`, beneath the store so the era1 reader (:mod:`vmstack.store.history`)
hashes headers as the C-chain does.

It is the original Keccak (not SHA3-256) from pycryptodome's C library, called through its
one-shot function; every floor hashes with this one function.
"""

from __future__ import annotations

import ctypes

from Crypto.Hash.keccak import _raw_keccak_lib
from Crypto.Util._raw_api import c_size_t, c_ubyte

__all__ = ["keccak256"]

# A 512-bit capacity, 24 rounds, the original padding byte 0x01 (SHA3-256 has 0x06),
# passed as the C library wants them.
_keccak_oneshot = _raw_keccak_lib.keccak_oneshot
_DIGEST_SIZE = c_size_t(32)
_CAPACITY = c_size_t(64)
_ROUNDS = c_ubyte(24)
_PADDING = c_ubyte(0x01)
# The digest's buffer: a fixed array of 32 C chars, whose ``raw`` is all 32 bytes (a
# ``create_string_buffer`` and pycryptodome's ``get_raw_buffer`` cost more per call).
_Digest = ctypes.c_char * 32


def keccak256(data: bytes | bytearray | memoryview) -> bytes:
    """The 32-byte Keccak-256 digest of ``data`` (any contiguous byte buffer), in one call
    into pycryptodome's C Keccak (a hash object per call costs more than hashing a short
    input)."""
    if type(data) is not bytes:
        # The C function reads a bytes object in place; other buffers are copied once.
        data = bytes(data)
    digest = _Digest()
    failed = _keccak_oneshot(
        data, c_size_t(len(data)), digest, _DIGEST_SIZE, _CAPACITY, _ROUNDS, _PADDING
    )
    if failed:
        raise ValueError(f"Keccak-256 failed in pycryptodome (error {failed})")
    return digest.raw
