"""A body's and the receipts' commitments (vmstack.cchain.tries): one function computes
each, one compares them with a header, and sealing a block, building one, check_body and
the VM's verify all go through them, so a wrong commitment is refused alike everywhere,
naming the same field; the bloom has one meaning."""

from __future__ import annotations

import attrs
import pytest
import rlp

from tests.cchain.chains import new_vm, tampered
from vmstack.cchain import (
    AVALANCHE,
    ETHEREUM,
    AvalancheHeader,
    CChainBlock,
    CChainVM,
    DynamicFeeTx,
    Flavour,
    Header,
    Withdrawal,
    check_body,
    keccak256,
)
from vmstack.cchain.genesis import DEV_KEYS
from vmstack.cchain.rules import check_receipts_commitments
from vmstack.cchain.tries import (
    body_commitments,
    check_body_commitments,
    encoded_body_commitments,
    encoded_receipt_commitments,
    receipt_commitments,
    receipts_bloom,
    with_body_commitments,
)
from vmstack.cchain.types import ZERO_HASH, Log, Receipt, logs_bloom
from vmstack.errors import InvalidBlock
from vmstack.store import MemoryStore

KEY = DEV_KEYS[0]
TO = keccak256(b"commitments recipient")[12:]


def _built(flavour: Flavour) -> tuple[CChainVM, CChainBlock]:
    """A VM of ``flavour`` and a block it built with a transaction and extData (Avalanche)
    or withdrawals (Ethereum), not verified."""
    vm = new_vm(MemoryStore(), flavour=flavour)
    vm.add_transactions(
        [DynamicFeeTx(chain_id=43114, max_fee_per_gas=50 * 10**9, gas=21_000, to=TO).sign(KEY)]
    )
    if flavour is AVALANCHE:
        vm.add_ext_data(b"atomic")
    else:
        vm.add_withdrawals([Withdrawal(index=1, validator_index=2, address=TO, amount=3)])
    vm.clock.advance(2)  # type: ignore[attr-defined]
    return vm, vm.build_block()


@pytest.mark.parametrize("flavour", [ETHEREUM, AVALANCHE], ids=["ethereum", "avalanche"])
def test_seal_build_and_check_body_agree_with_body_commitments(flavour: Flavour) -> None:
    """Sealing sets exactly what body_commitments computes; a block the VM builds commits
    to the same; the fast form over the block's own encodings equals the decoded form."""
    _, block = _built(flavour)
    body = block.body
    computed = body_commitments(body)
    header = block.header
    assert flavour.seal(header, body).header == with_body_commitments(header, computed)
    check_body_commitments(header, computed)
    check_body(block.block)
    encodings = [tx.encode() for tx in body.transactions]
    assert body_commitments(body, encodings) == computed
    withdrawals = None if body.withdrawals is None else [w.encode() for w in body.withdrawals]
    ext_data = None if body.ext_data is None else rlp.encode(body.ext_data)
    assert encoded_body_commitments(encodings, b"\xc0", withdrawals, ext_data) == computed
    if flavour is AVALANCHE:
        assert computed.withdrawals_hash is None and computed.ext_data_hash is not None
    else:
        assert computed.ext_data_hash is None and computed.withdrawals_hash is not None


WRONG = b"\x01" * 32


@pytest.mark.parametrize(
    ("flavour", "field", "named"),
    [
        (ETHEREUM, "tx_root", "transactions root"),
        (ETHEREUM, "uncle_hash", "uncle hash"),
        (ETHEREUM, "withdrawals_hash", "withdrawals root"),
        (AVALANCHE, "tx_root", "transactions root"),
        (AVALANCHE, "uncle_hash", "uncle hash"),
        (AVALANCHE, "ext_data_hash", "ExtDataHash"),
    ],
    ids=lambda value: value if isinstance(value, str) else getattr(value, "name", None),
)
def test_a_wrong_commitment_fails_every_path_naming_the_same_field(
    flavour: Flavour, field: str, named: str
) -> None:
    """One wrong commitment in a header: check_body_commitments, check_body and verify all
    raise InvalidBlock naming that field."""
    vm, block = _built(flavour)
    raw = tampered(vm, block, **{field: WRONG})
    decoded = flavour.decode_block(raw)
    with pytest.raises(InvalidBlock, match=named):
        check_body_commitments(decoded.header, body_commitments(decoded.body))
    with pytest.raises(InvalidBlock, match=named):
        check_body(decoded)
    with pytest.raises(InvalidBlock, match=named):
        vm.parse_block(raw).verify()


def test_the_zero_ext_data_hash_of_empty_ext_data_holds_before_apricot_phase_1() -> None:
    """Before Apricot Phase 1 a header carried the zero hash over empty extData: accepted;
    over non-empty extData it is a mismatch."""
    empty = AVALANCHE.body()
    check_body_commitments(AvalancheHeader(ext_data_hash=ZERO_HASH), body_commitments(empty))
    with pytest.raises(InvalidBlock, match="ExtDataHash"):
        check_body_commitments(
            AvalancheHeader(ext_data_hash=ZERO_HASH),
            body_commitments(AVALANCHE.body(ext_data=b"atomic")),
        )


def test_a_header_and_body_disagreeing_on_withdrawals_is_named() -> None:
    """An Ethereum header with a withdrawals root needs a body with withdrawals, and the
    other way round."""
    with_list = ETHEREUM.body(withdrawals=())
    sealed = ETHEREUM.seal(Header(), with_list).header
    with pytest.raises(InvalidBlock, match="disagree on having withdrawals"):
        check_body_commitments(sealed, body_commitments(ETHEREUM.body()))


def _receipts_with_logs() -> list[Receipt]:
    """Three receipts as execution makes them (each bloom its logs' bloom), one without
    logs."""
    logs = [Log(address=TO, topics=(keccak256(b"topic %d" % i),), data=b"d") for i in range(2)]
    return [
        Receipt(cumulative_gas_used=21_000 * (i + 1), logs=tuple(found), bloom=logs_bloom(found))
        for i, found in enumerate(([logs[0]], [], [logs[1]]))
    ]


@pytest.mark.parametrize("flavour", [ETHEREUM, AVALANCHE], ids=["ethereum", "avalanche"])
def test_seal_build_and_verify_agree_on_the_receipts_commitments(flavour: Flavour) -> None:
    """Sealing, building and the verify rule all use receipt_commitments: a sealed header
    (with its gas used) passes the rule, and a built block commits to its own receipts."""
    receipts = _receipts_with_logs()
    expected = receipt_commitments(receipts)
    header = flavour.seal(
        flavour.header_type(gas_used=expected.gas_used), flavour.body([]), receipts
    ).header
    assert (header.receipt_root, header.bloom) == (expected.receipt_root, expected.bloom)
    check_receipts_commitments(header, receipts)
    _, block = _built(flavour)
    assert block.receipts is not None
    built = receipt_commitments(block.receipts)
    assert (block.header.gas_used, block.header.receipt_root, block.header.bloom) == (
        built.gas_used,
        built.receipt_root,
        built.bloom,
    )


def test_the_bloom_of_consistent_receipts_is_the_bloom_of_all_their_logs() -> None:
    """For receipts whose bloom is their logs' bloom, the header bloom is the bloom of every
    log of the block (execution-specs' meaning), and a receipt without logs adds nothing."""
    receipts = _receipts_with_logs()
    every_log = [log for receipt in receipts for log in receipt.logs]
    assert receipts_bloom(receipts) == logs_bloom(every_log) != bytes(256)
    unstated = [attrs.evolve(receipt, bloom=None) for receipt in receipts]
    assert receipts_bloom(unstated) == logs_bloom(every_log)
    assert receipts_bloom([]) == bytes(256)


def test_a_stated_bloom_counts_as_the_receipts_root_counts_it() -> None:
    """The one meaning: a receipt's bloom is the one its consensus form carries into the
    receipts root, so a receipt without logs whose stated bloom has bits adds them to the
    header bloom (the former rule, which skipped receipts without logs, did not), and a
    header ignoring them is refused."""
    odd = Receipt(cumulative_gas_used=21_000, logs=(), bloom=b"\x01" + bytes(255))
    receipts = [*_receipts_with_logs(), attrs.evolve(odd, cumulative_gas_used=90_000)]
    with_bits = receipts_bloom(receipts)
    assert with_bits[0] == 1
    assert with_bits != logs_bloom([log for receipt in receipts for log in receipt.logs])
    header = ETHEREUM.seal(Header(gas_used=90_000), ETHEREUM.body([]), receipts).header
    check_receipts_commitments(header, receipts)
    without = attrs.evolve(header, bloom=bytes([0]) + with_bits[1:])
    with pytest.raises(InvalidBlock, match="logs bloom"):
        check_receipts_commitments(without, receipts)


def test_receipts_commitments_come_from_their_encodings_on_every_path() -> None:
    """receipt_commitments is encoded_receipt_commitments over the receipts' consensus
    encodings (typed ones after their type byte), the function the era1 verifier calls on a
    file's receipts: gas used, receipts root and bloom agree; a stated bloom counts; a
    receipt of another shape is refused naming it."""
    typed = attrs.evolve(_receipts_with_logs()[0], tx_type=2, cumulative_gas_used=50_000)
    odd = Receipt(cumulative_gas_used=90_000, logs=(), bloom=b"\x01" + bytes(255))
    receipts = [*_receipts_with_logs(), typed, odd]
    from_receipts = receipt_commitments(receipts)
    assert encoded_receipt_commitments([r.encode() for r in receipts]) == from_receipts
    assert from_receipts.gas_used == 90_000
    assert from_receipts.bloom == receipts_bloom(receipts)
    assert encoded_receipt_commitments([]) == receipt_commitments([])
    with pytest.raises(InvalidBlock, match="receipt 1 has 3 fields"):
        encoded_receipt_commitments([receipts[0].encode(), rlp.encode([b"", b"", []])])
    with pytest.raises(InvalidBlock, match="receipt 0: its bloom is not 256 bytes"):
        encoded_receipt_commitments([rlp.encode([b"\x01", b"", bytes(255), []])])
    with pytest.raises(InvalidBlock, match="receipt 0: RLP list"):
        encoded_receipt_commitments([b"\x02"])
