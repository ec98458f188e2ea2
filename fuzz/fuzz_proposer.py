"""Coverage-guided fuzzing of the proposer block decoder (atheris).

Each input goes to ``decode_block`` (avalanchego's ``ParseWithoutVerification``),
``peek_block`` (the framing-only read of stored envelopes), ``parse_block`` (decode plus
epoch and signature checks, so the certificate's DER walk and the signature checks see
fuzzed bytes too) and ``Header.decode``. Only ``InvalidBlock`` may come out; whatever decodes
keeps its bytes, its ID rule and its parent. See fuzz/README.md for how to run it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator

from harness import attempt, main, vector_files

from vmstack.wrappers.proposer.envelope import (
    Epoch,
    Header,
    OptionBlock,
    build_option,
    build_signed,
    build_unsigned,
    decode_block,
    parse_block,
    peek_block,
)
from vmstack.wrappers.proposer.staking import StakingKey

CHAIN_ID = bytes(32)


def one_input(data: bytes) -> None:
    """Feed ``data`` to the envelope decoders; raise on anything but ``InvalidBlock``."""
    block = attempt(decode_block, data)
    peeked = attempt(peek_block, data)
    attempt(Header.decode, data)
    if block is None:
        return
    assert bytes(block) == data, "decoded bytes differ"
    if isinstance(block, OptionBlock):
        assert block.id == hashlib.sha256(data).digest()
    else:
        assert block.id == hashlib.sha256(data[: block.unsigned_len]).digest()
    assert peeked == (block.id, block.parent_id), "peek_block disagrees with decode_block"
    attempt(parse_block, data, CHAIN_ID)


def seeds() -> Iterator[bytes]:
    """Envelopes of every type (unsigned, ECDSA-signed, Granite, option) and, when present,
    the proposer vectors (RSA-signed blocks included)."""
    key = StakingKey.generate(seed=b"fuzz")
    parent, inner = b"\x01" * 32, b"\x03" * 40
    yield bytes(build_unsigned(parent, 123, 2, inner))
    yield bytes(build_unsigned(parent, 123, 2, inner, Epoch(2, 1, 123)))
    yield bytes(build_signed(parent, 125, 3, inner, key=key, chain_id=CHAIN_ID))
    yield bytes(
        build_signed(parent, 125, 3, inner, key=key, chain_id=CHAIN_ID, epoch=Epoch(3, 1, 124))
    )
    yield bytes(build_option(parent, inner))
    yield bytes(Header(CHAIN_ID, parent, b"\x02" * 32))
    folder = vector_files()
    if folder is not None and (folder / "proposervm_blocks.json").is_file():
        for entry in json.loads((folder / "proposervm_blocks.json").read_text()):
            yield bytes.fromhex(entry["hex"][2:])


if __name__ == "__main__":
    main(one_input, seeds)
