"""Keccak-256, the hash of every Ethereum block and of an era1 file's accumulator entries:
:func:`keccak256`, beneath the store so the era1 reader (:mod:`vmstack.store.history`)
hashes headers as the C-chain does.

It is the original Keccak (not SHA3-256) from pycryptodome's C library, called through its
one-shot function; every floor hashes with this one function. pycryptodome reaches its C
library through cffi when cffi is installed and through ctypes otherwise; the one-shot call
is written for the backend this process has (each takes its own kind of buffer).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

from Crypto.Hash.keccak import _raw_keccak_lib
from Crypto.Util import _raw_api

__all__ = ["keccak256"]

_keccak_oneshot = _raw_keccak_lib.keccak_oneshot
_Buffer = bytes | bytearray | memoryview


def _over_ctypes() -> Callable[[_Buffer], bytes]:
    # A 512-bit capacity, 24 rounds, the original padding byte 0x01 (SHA3-256 has 0x06),
    # passed as ctypes values; the digest's buffer a fixed array of 32 C chars, whose
    # ``raw`` is all 32 bytes (a ``create_string_buffer`` costs more per call).
    digest_size, capacity = ctypes.c_size_t(32), ctypes.c_size_t(64)
    rounds, padding = ctypes.c_ubyte(24), ctypes.c_ubyte(0x01)
    size, digest_type, oneshot = ctypes.c_size_t, ctypes.c_char * 32, _keccak_oneshot

    def keccak256(data: _Buffer) -> bytes:
        if type(data) is not bytes:
            data = bytes(data)  # the C function reads a bytes object in place
        digest = digest_type()
        failed = oneshot(data, size(len(data)), digest, digest_size, capacity, rounds, padding)
        if failed:
            raise _failure(failed)
        return digest.raw

    return _public(keccak256)


def _over_cffi() -> Callable[[_Buffer], bytes]:
    # The same parameters as plain integers, the digest's buffer a cffi array.
    new, buffer, oneshot = _raw_api.ffi.new, _raw_api.ffi.buffer, _keccak_oneshot

    def keccak256(data: _Buffer) -> bytes:
        if type(data) is not bytes:
            data = bytes(data)
        digest = new("uint8_t[32]")
        failed = oneshot(data, len(data), digest, 32, 64, 24, 0x01)
        if failed:
            raise _failure(failed)
        return buffer(digest)[:]  # type: ignore[no-any-return]

    return _public(keccak256)


def _failure(code: int) -> ValueError:
    return ValueError(f"Keccak-256 failed in pycryptodome (error {code})")


def _public(function: Callable[[_Buffer], bytes]) -> Callable[[_Buffer], bytes]:
    """``function`` named and documented as this module's :func:`keccak256`, whichever
    backend's it is."""
    function.__qualname__ = function.__name__ = "keccak256"
    function.__module__ = __name__
    function.__doc__ = (
        "The 32-byte Keccak-256 digest of ``data`` (any contiguous byte buffer; other than "
        "``bytes``, copied once), in one call into pycryptodome's C Keccak (a hash object "
        "per call costs more than hashing a short input)."
    )
    return function


#: The 32-byte Keccak-256 digest of a byte buffer, over the backend this process has (its
#: docstring states the contract).
keccak256: Callable[[_Buffer], bytes] = (
    _over_cffi() if _raw_api.backend == "cffi" else _over_ctypes()
)
