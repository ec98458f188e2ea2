"""ChainSource: the one place a C-chain VM decides between its store and the era1 archive
beneath it (the store first, then the archive for the heights it holds that the store has
no canonical entry for)."""

from __future__ import annotations

from pathlib import Path

from tests.cchain.chains import build_chain, new_vm
from vmstack.cchain import ETHEREUM, CChainVM, rawdb
from vmstack.cchain.era1 import export_history, import_history
from vmstack.cchain.source import ChainSource
from vmstack.store import MemoryStore
from vmstack.store.history import EraArchive

BIG = 2**40


def test_the_store_answers_first_then_the_archive(tmp_path: Path) -> None:
    """A chain of 20 blocks exported, then imported with its last 5 in the store: heights
    0 to 15 are the archive's, 16 to 20 the store's, and every read the source answers says
    so; the fast walk across the boundary gives the chain's bytes."""
    original = new_vm(MemoryStore(), flavour=ETHEREUM)
    build_chain(original, 20, txs=2)
    out = tmp_path / "era"
    out.mkdir()
    export_history(original, out)
    with EraArchive(out) as archive:
        store = MemoryStore()
        import_history(archive, store, recent=5, chain_id=original.chain_id)
        vm = CChainVM(store, flavour=ETHEREUM, chain_id=original.chain_id, history=archive)
        source = vm.source
        assert source.archive_last == 20
        ids = [original.get_block_id_at_height(n) for n in range(21)]
        for number, block_id in enumerate(ids):
            in_store = rawdb.read_canonical_hash(store, vm.schema, number) is not None
            assert in_store == (number >= 16)
            assert source.archived(store, number) == (not in_store)
            assert source.canonical(store, number) == block_id
            assert source.number(store, block_id) == number
            parts = source.parts(store, number, block_id)
            assert parts is not None
            assert [bytes(p) for p in parts] == [
                archive.header_rlp(number),
                archive.body_rlp(number),
            ]
            assert source.archived_hash(number, None) == block_id
            assert source.archived_hash(number, block_id) is None  # a stored entry answers
        assert source.parts(store, 3, ids[4]) is None  # another block's ID at height 3
        assert source.header(store, 3, ids[3]) == archive.header_rlp(3)
        assert source.archived_block(21) is None
        assert source.head() == ids[20]
        assert vm.get_ancestors(ids[20], 21, BIG, 60.0) == original.get_ancestors(
            ids[20], 21, BIG, 60.0
        )


def test_without_an_archive_the_store_answers_everything() -> None:
    """No archive: the source never answers from one (one comparison tells the fast walk)."""
    vm = new_vm(MemoryStore(), flavour=ETHEREUM)
    build_chain(vm, 3, txs=1)
    source = vm.source
    assert source.archive is None and source.archive_last == -1
    assert source.archived_block(0) is None
    assert source.archived_hash(0, None) is None
    assert source.head() is None and source.unheld(0) is None
    assert source.canonical(vm.store, 3) == vm.last_accepted()
    assert source.canonical(vm.store, 4) is None
    assert isinstance(source, ChainSource)


def test_only_the_source_reads_the_archive_on_the_read_paths() -> None:
    """The readers of the chain (chain.py, fastwalk.py) never ask the archive whether it
    holds a height: that decision is the source's alone."""
    import vmstack.cchain.chain as chain
    import vmstack.cchain.fastwalk as fastwalk

    for module in (chain, fastwalk):
        text = Path(str(module.__file__)).read_text()
        assert ".holds(" not in text and "history is not None" not in text, module.__name__
