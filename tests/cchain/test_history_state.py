"""The state roots of real history: Sepolia's genesis read from go-ethereum's format, the
pre-merge rewards and withdrawals, epoch 0's 8,192 state roots recomputed, and what the
accounts model cannot recompute refused naming the height."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest

from tests.conftest import ERA1_FIRST as FIRST
from tests.conftest import ERA1_SECOND as SECOND
from vmstack.cchain import ETHEREUM, keccak256
from vmstack.cchain.era1 import state_roots
from vmstack.cchain.era1.state_roots import StateNotModelled, genesis_header, recompute_state_roots
from vmstack.cchain.genesis import Genesis
from vmstack.cchain.rewards import ETHER, GWEI, Forks, apply_rewards, block_reward
from vmstack.cchain.state import Account
from vmstack.cchain.types import Body, Header, Withdrawal
from vmstack.cli import main
from vmstack.errors import InvalidBlock
from vmstack.store.history import EraArchive, EraRecord, write_era1

SEPOLIA_GENESIS_HASH = "25a5cc106eea7138acab33231d7160d69cb777ee0c2c553fcddf5138993e6dd9"
SEPOLIA_STATE_ROOT = "5eb6e371a698b8d68f665192350ffcecbbbf322916f4b51bd79bb6887da3f494"


@pytest.fixture(scope="module")
def genesis_text(era_dir: Path) -> str:
    path = era_dir / "sepolia-genesis.json"
    if not path.is_file():
        pytest.skip(f"Sepolia's genesis not found at {path} (set VMSTACK_VECTORS)")
    return path.read_text()


@pytest.fixture
def epoch0(era_dir: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "epoch0"
    folder.mkdir()
    (folder / FIRST).symlink_to(era_dir / FIRST)
    return folder


def _short_archive(era_dir: Path, folder: Path, count: int, bodies: dict[int, bytes]) -> Path:
    """Epoch 0's first ``count`` blocks as a file of their own, with ``bodies`` replacing
    some blocks' bodies (the state replay reads bodies, not their commitments)."""
    with EraArchive(era_dir, sparse=True) as real:
        records = [
            EraRecord(
                real.header_rlp(n),
                bodies.get(n, real.body_rlp(n)),
                real.receipts(n),
                real.total_difficulty(n),
            )
            for n in range(count)
        ]
    folder.mkdir()
    write_era1(folder, "sepolia", 0, records)
    return folder


def test_sepolia_genesis_reads_to_its_block_0(genesis_text: str, era_dir: Path) -> None:
    """go-ethereum's genesis format: the allocation's root is Sepolia's block 0 state root,
    and the header built from it is block 0's, byte for byte."""
    assert Genesis.from_json(genesis_text).state_root().hex() == SEPOLIA_STATE_ROOT
    encoded = ETHEREUM.encode_header(genesis_header(genesis_text))
    assert keccak256(encoded).hex() == SEPOLIA_GENESIS_HASH
    with EraArchive(era_dir, sparse=True) as archive:
        assert encoded == archive.header_rlp(0)


@pytest.mark.slow
def test_epoch_0_state_roots_recomputed(genesis_text: str, epoch0: Path) -> None:
    """All 8,192 state roots of Sepolia's epoch 0 follow from its genesis and the
    2-ether block reward."""
    seen: list[int] = []
    with EraArchive(epoch0) as archive:
        assert recompute_state_roots(archive, genesis_text, on_block=seen.append) == 8192
    assert seen == list(range(8192))


def test_a_changed_alloc_balance_fails_at_height_0(
    genesis_text: str, era_dir: Path, tmp_path: Path
) -> None:
    document = json.loads(genesis_text)
    first = next(iter(document["alloc"]))
    document["alloc"][first]["balance"] = hex(int(document["alloc"][first]["balance"], 16) + 1)
    folder = _short_archive(era_dir, tmp_path / "a", 16, {})
    with EraArchive(folder) as archive, pytest.raises(InvalidBlock, match=r"^block 0: state root"):
        recompute_state_roots(archive, json.dumps(document))


def test_dropping_the_reward_fails_at_height_1(
    genesis_text: str, era_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _short_archive(era_dir, tmp_path / "a", 16, {})
    with EraArchive(folder) as archive:
        assert recompute_state_roots(archive, genesis_text) == 16
        monkeypatch.setattr(state_roots, "apply_rewards", lambda *args: {})
        with pytest.raises(InvalidBlock, match=r"^block 1: state root"):
            recompute_state_roots(archive, genesis_text)


def test_a_block_with_transactions_is_refused_naming_its_height(
    genesis_text: str, era_dir: Path, tmp_path: Path
) -> None:
    """Block 175881's body (3 transactions) at height 5: refused, never verified."""
    with EraArchive(era_dir, sparse=True) as real:
        body = real.body_rlp(175881)
    folder = _short_archive(era_dir, tmp_path / "a", 16, {5: body})
    seen: list[int] = []
    with (
        EraArchive(folder, trust=True) as archive,
        pytest.raises(StateNotModelled, match=r"^block 5 carries 3 transactions: .* not verified"),
    ):
        recompute_state_roots(archive, genesis_text, on_block=seen.append)
    assert seen == [0, 1, 2, 3, 4]


def test_an_archive_not_from_block_0_is_refused(
    genesis_text: str, era_dir: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "e21"
    folder.mkdir()
    (folder / SECOND).symlink_to(era_dir / SECOND)
    with EraArchive(folder) as archive, pytest.raises(ValueError, match="every block from 0"):
        recompute_state_roots(archive, genesis_text)


def test_block_rewards_by_fork_uncles_and_withdrawals() -> None:
    """5, 3 and 2 ether by fork; an uncle one block back gets 7/8 of it, two back 6/8, the
    includer 1/32 per uncle; after the merge no reward, each withdrawal credited in gwei."""
    forks = Forks(byzantium=10, constantinople=20)
    assert [block_reward(n, forks) for n in (9, 10, 19, 20)] == [
        5 * ETHER,
        3 * ETHER,
        3 * ETHER,
        2 * ETHER,
    ]
    miner, uncle_a, uncle_b = b"\x01" * 20, b"\x02" * 20, b"\x03" * 20
    header = Header(number=30, difficulty=1, coinbase=miner)
    uncles = (
        Header(number=29, coinbase=uncle_a),
        Header(number=28, coinbase=uncle_b),
    )
    accounts = {miner: Account(balance=1)}
    changed = apply_rewards(accounts, header, Body(uncles=uncles), forks)
    assert changed[miner].balance == 1 + 2 * ETHER + 2 * (2 * ETHER // 32)
    assert changed[uncle_a].balance == 7 * 2 * ETHER // 8
    assert changed[uncle_b].balance == 6 * 2 * ETHER // 8
    assert accounts == changed
    merged = attrs.evolve(header, difficulty=0)
    withdrawals = (
        Withdrawal(index=0, address=uncle_a, amount=5),
        Withdrawal(index=1, address=uncle_a, amount=7),
    )
    after = apply_rewards({}, merged, Body(withdrawals=withdrawals), forks)
    assert after == {uncle_a: Account(balance=12 * GWEI)}
    assert apply_rewards({}, merged, Body(withdrawals=()), forks) == {}


@pytest.mark.slow
def test_cli_history_verify_and_import_with_state(
    genesis_text: str,
    era_dir: Path,
    epoch0: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    genesis = era_dir / "sepolia-genesis.json"
    assert main(["history", "verify", str(epoch0), "--state", "--genesis", str(genesis)]) == 0
    assert "8,192 state roots recomputed" in " ".join(capsys.readouterr().out.split())
    assert main(["history", "verify", str(epoch0), "--state"]) == 2
    assert "give --genesis FILE" in capsys.readouterr().err
    with EraArchive(era_dir, sparse=True) as real:
        body = real.body_rlp(175881)
    folder = _short_archive(era_dir, tmp_path / "tx", 16, {5: body})
    argv = ["history", "import", str(folder), "--data-dir", str(tmp_path / "db")]
    assert main([*argv, "--state", "--genesis", str(genesis)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "block 5 carries 3 transactions" in err and "not verified" in err
