"""The store conformance kit: inherit :class:`StoreConformance`, get the store tests.

The contract of :class:`~vmstack.store.KeyValueStore` (``vmstack/store/base.py``) as tests
a store's author runs in their own suite::

    from vmstack.conformance import StoreConformance

    class TestMyStore(StoreConformance):
        def make_store(self):
            return MyStore(self.new_directory() / "db")

and pytest collects the inherited tests: reads and writes, bad keys and values, atomic
batches (all or nothing, in order, used once), key-ordered prefix iteration, snapshots that
keep their view while others write (a writer thread included), closing, a
:class:`~vmstack.store.PrefixedStore` view over the store, and a property test against a
dict model. ``make_store`` is called for each test and for each Hypothesis example, and
must return a new, empty store each time; :meth:`StoreConformance.close_store` closes it
(override it for a view that must close what it wraps too).

Each test checks one named rule (:data:`STORE_RULES`: the name and what it expects of a
store); a failure starts with ``[kit rule NAME] expected: ...``, as the layer kit's do, and
each test carries its rule as ``kit_rule``. ``tests/store/broken_stores.py`` is a corpus of
stores with one mistake each, every one caught by the rule it breaks.

vmstack's own stores run it: ``MemoryStore``, ``LMDBStore`` and ``PrefixedStore`` views
(``tests/store/test_stores.py``). This module imports pytest and Hypothesis: it is for test
suites, and :mod:`vmstack.conformance` imports it only when :class:`StoreConformance` is
asked for.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from contextlib import nullcontext
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vmstack.conformance.stacks import KitFault
from vmstack.conformance.store_rules import (
    BATCH_ATOMIC,
    BATCH_ONCE,
    BATCH_ORDER,
    CLOSE,
    COPIES,
    ITERATE_ARGUMENTS,
    ITERATE_ORDER,
    KEYS_RULE,
    MODEL,
    PREFIXED,
    PROTOCOL,
    READ_WRITE,
    SNAPSHOT_CLOSES,
    SNAPSHOT_ISOLATION,
    SNAPSHOT_VALUES,
    VALUES_RULE,
)
from vmstack.store import (
    MAX_KEY_LEN,
    KeyValueStore,
    PrefixedStore,
    ReadSnapshot,
    StoreClosed,
    StoreError,
    WriteBatch,
)

__all__ = ["StoreConformance"]

KEYS = st.binary(min_size=1, max_size=3)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), KEYS, st.binary(max_size=8)),
        st.tuples(st.just("delete"), KEYS),
        st.tuples(
            st.just("batch"),
            st.lists(st.tuples(KEYS, st.none() | st.binary(max_size=8)), max_size=6),
            st.booleans(),
        ),
    ),
    max_size=25,
)


class StoreConformance:
    """Mixin test class: every contract test of a key-value store. Override
    :meth:`make_store`.

    Subclass it in a module pytest collects, under a name pytest collects (``Test...``).
    """

    _directories: pytest.TempPathFactory

    # --- hooks ---------------------------------------------------------------------------

    def make_store(self) -> KeyValueStore:
        """A new, empty store of the kind under test (one per test and per example); a store
        that lives in files puts them in :meth:`new_directory`."""
        raise NotImplementedError(
            f"{type(self).__name__} must override make_store(self) to return a new, empty store"
        )

    def close_store(self, store: KeyValueStore) -> None:
        """Close ``store`` after a test. Default: ``store.close()``; a view over a store
        made for it closes that store too."""
        store.close()
        if isinstance(store, PrefixedStore):
            store.store.close()

    def max_key_len(self, store: KeyValueStore) -> int:
        """The longest key ``store`` takes: :data:`~vmstack.store.MAX_KEY_LEN`, less the
        prefix of a :class:`~vmstack.store.PrefixedStore` view."""
        return MAX_KEY_LEN - (len(store.prefix) if isinstance(store, PrefixedStore) else 0)

    def new_directory(self) -> Path:
        """A new, empty directory, removed by pytest as its temporary directories are."""
        return self._directories.mktemp("store")

    # --- set-up --------------------------------------------------------------------------

    @pytest.fixture(autouse=True)
    def _vmstack_store_kit_setup(self, tmp_path_factory: pytest.TempPathFactory) -> None:
        self._directories = tmp_path_factory

    @pytest.fixture
    def store(self) -> Iterator[KeyValueStore]:
        """A new, empty store from :meth:`make_store`, closed after the test."""
        made = self.make_store()
        yield made
        self.close_store(made)

    # --- the contract --------------------------------------------------------------------

    @PROTOCOL
    def test_store_meets_the_protocol(self, store: KeyValueStore) -> None:
        """Every store, its batches and its snapshots satisfy the runtime-checkable protocols."""
        assert isinstance(store, KeyValueStore)
        with store.write_batch() as batch:
            assert isinstance(batch, WriteBatch)
        with store.snapshot() as snap:
            assert isinstance(snap, ReadSnapshot)

    @READ_WRITE
    def test_put_get_has_delete(self, store: KeyValueStore) -> None:
        """A put value reads back; delete removes it; a missing key raises KeyError."""
        store.put(b"alpha", b"one")
        assert store.get(b"alpha") == b"one"
        assert store.has(b"alpha")
        store.put(b"alpha", b"two")
        assert store.get(b"alpha") == b"two"
        store.delete(b"alpha")
        assert not store.has(b"alpha")
        with pytest.raises(KeyError):
            store.get(b"alpha")

    @READ_WRITE
    def test_delete_of_missing_key_is_fine(self, store: KeyValueStore) -> None:
        """Deleting a key that was never written is not an error."""
        store.delete(b"never")
        assert not store.has(b"never")

    @READ_WRITE
    def test_empty_value_is_a_value(self, store: KeyValueStore) -> None:
        """An empty value is stored and distinguished from a missing key."""
        store.put(b"empty", b"")
        assert store.has(b"empty")
        assert store.get(b"empty") == b""

    @COPIES
    def test_bytes_like_values_are_copied(self, store: KeyValueStore) -> None:
        """bytearray and memoryview values are stored as copies of their bytes at put time."""
        data = bytearray(b"mutable")
        store.put(b"k1", data)
        store.put(b"k2", memoryview(b"viewed"))
        data[0:1] = b"X"
        assert store.get(b"k1") == b"mutable"
        assert store.get(b"k2") == b"viewed"
        assert type(store.get(b"k1")) is bytes

    @pytest.mark.parametrize(
        ("key", "error"),
        [
            ("text", TypeError),
            (7, TypeError),
            (bytearray(b"k"), TypeError),
            (b"", ValueError),
            (b"k" * (MAX_KEY_LEN + 1), ValueError),
        ],
    )
    @KEYS_RULE
    def test_bad_keys_are_rejected(
        self, store: KeyValueStore, key: object, error: type[Exception]
    ) -> None:
        """Non-bytes, empty and over-long keys raise TypeError / ValueError on every
        operation."""
        with pytest.raises(error):
            store.get(key)  # type: ignore[arg-type]
        with pytest.raises(error):
            store.has(key)  # type: ignore[arg-type]
        with pytest.raises(error):
            store.put(key, b"v")  # type: ignore[arg-type]
        with pytest.raises(error):
            store.delete(key)  # type: ignore[arg-type]
        with store.write_batch() as batch, pytest.raises(error):
            batch.put(key, b"v")  # type: ignore[arg-type]
        with store.snapshot() as snap, pytest.raises(error):
            snap.get(key)  # type: ignore[arg-type]

    @KEYS_RULE
    def test_longest_key_is_accepted(self, store: KeyValueStore) -> None:
        """A key of MAX_KEY_LEN bytes (less any view prefix) is stored and read back."""
        room = self.max_key_len(store)
        key = b"k" * room
        store.put(key, b"long")
        assert store.get(key) == b"long"
        assert [k for k, _ in store.iterate(b"k")] == [key]

    @VALUES_RULE
    def test_bad_values_are_rejected(self, store: KeyValueStore) -> None:
        """A value that is not bytes-like raises TypeError and writes nothing."""
        with pytest.raises(TypeError):
            store.put(b"k", "text")  # type: ignore[arg-type]
        assert not store.has(b"k")

    @BATCH_ATOMIC
    def test_batch_commits_at_exit(self, store: KeyValueStore) -> None:
        """Writes queued in a batch are invisible until the with-block exits, then all visible."""
        store.put(b"old", b"x")
        with store.write_batch() as batch:
            batch.put(b"a", b"1")
            batch.put(b"b", b"2")
            batch.delete(b"old")
            assert not store.has(b"a")
            assert store.has(b"old")
        assert store.get(b"a") == b"1"
        assert store.get(b"b") == b"2"
        assert not store.has(b"old")

    @BATCH_ATOMIC
    def test_batch_that_raises_writes_nothing(self, store: KeyValueStore) -> None:
        """An exception inside the with-block discards every queued put and delete."""
        store.put(b"keep", b"x")
        with pytest.raises(KitFault), store.write_batch() as batch:
            batch.put(b"a", b"1")
            batch.delete(b"keep")
            raise KitFault
        assert not store.has(b"a")
        assert store.get(b"keep") == b"x"

    @BATCH_ORDER
    def test_batch_applies_operations_in_order(self, store: KeyValueStore) -> None:
        """Within one batch the later operation on a key wins."""
        store.put(b"b", b"old")
        with store.write_batch() as batch:
            batch.put(b"a", b"1")
            batch.delete(b"a")
            batch.delete(b"b")
            batch.put(b"b", b"new")
        assert not store.has(b"a")
        assert store.get(b"b") == b"new"

    @BATCH_ONCE
    def test_batch_is_used_once_inside_its_block(self, store: KeyValueStore) -> None:
        """A batch refuses writes before its with-block and after it."""
        batch = store.write_batch()
        with pytest.raises(StoreError):
            batch.put(b"a", b"1")
        with batch:
            batch.put(b"a", b"1")
        with pytest.raises(StoreClosed):
            batch.put(b"b", b"2")
        assert not store.has(b"b")

    @ITERATE_ORDER
    def test_iterate_in_key_order_with_prefix_and_start(self, store: KeyValueStore) -> None:
        """iterate yields pairs in ascending key order, filtered by prefix and start."""
        keys = [b"a", b"a\x00", b"ab", b"ab\xff", b"a\xff", b"b", b"ba", b"\x01"]
        shuffled = keys[:]
        random.Random(1).shuffle(shuffled)
        for key in shuffled:
            store.put(key, key + b"!")
        assert [k for k, _ in store.iterate()] == sorted(keys)
        assert list(store.iterate(b"a")) == [(k, k + b"!") for k in sorted(keys) if k[:1] == b"a"]
        assert [k for k, _ in store.iterate(b"ab")] == [b"ab", b"ab\xff"]
        assert [k for k, _ in store.iterate(b"a", start=b"ab")] == [b"ab", b"ab\xff", b"a\xff"]
        assert [k for k, _ in store.iterate(start=b"b")] == [b"b", b"ba"]
        assert [k for k, _ in store.iterate(b"b", start=b"a")] == [b"b", b"ba"]
        assert list(store.iterate(b"c")) == []
        assert list(store.iterate(b"a", start=b"b")) == []

    @ITERATE_ORDER
    def test_iterate_many_keys_spans_chunks(self, store: KeyValueStore) -> None:
        """Iteration over more keys than one read chunk returns every key exactly once."""
        with store.write_batch() as batch:
            for number in range(700):
                batch.put(b"n%05d" % number, b"%d" % number)
            batch.put(b"o", b"after")
        pairs = list(store.iterate(b"n"))
        assert pairs == [(b"n%05d" % n, b"%d" % n) for n in range(700)]

    @ITERATE_ARGUMENTS
    def test_iterate_rejects_bad_arguments(self, store: KeyValueStore) -> None:
        """A non-bytes prefix or start raises TypeError before any iteration."""
        with pytest.raises(TypeError):
            store.iterate("a")  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            store.iterate(b"a", start="b")  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            store.iterate(b"p" * (MAX_KEY_LEN + 1))

    @SNAPSHOT_ISOLATION
    def test_snapshot_ignores_later_writes(self, store: KeyValueStore) -> None:
        """A snapshot keeps the view it opened with through puts, deletes and new keys."""
        store.put(b"k1", b"v1")
        store.put(b"k2", b"v2")
        with store.snapshot() as snap:
            with store.write_batch() as batch:
                batch.put(b"k1", b"changed")
                batch.delete(b"k2")
                batch.put(b"k3", b"new")
            store.put(b"k1", b"changed again")
            assert bytes(snap.get(b"k1")) == b"v1"
            assert bytes(snap.get(b"k2")) == b"v2"
            assert not snap.has(b"k3")
            with pytest.raises(KeyError):
                snap.get(b"k3")
            assert [(k, bytes(v)) for k, v in snap.iterate(b"k")] == [
                (b"k1", b"v1"),
                (b"k2", b"v2"),
            ]
        with store.snapshot() as fresh:
            assert bytes(fresh.get(b"k1")) == b"changed again"
            assert not fresh.has(b"k2")
            assert [k for k, _ in fresh.iterate(b"k")] == [b"k1", b"k3"]

    @SNAPSHOT_VALUES
    def test_snapshot_values_are_usable_inside_the_block(self, store: KeyValueStore) -> None:
        """Snapshot values slice, compare and copy like bytes inside the with-block."""
        store.put(b"header", b"\xf9\x02\x16" + b"h" * 100)
        with store.snapshot() as snap:
            value = snap.get(b"header")
            assert isinstance(value, bytes | memoryview)
            assert len(value) == 103
            assert bytes(value[:3]) == b"\xf9\x02\x16"
            assert b"".join([bytes(value[3:5]), b"!"]) == b"hh!"

    @SNAPSHOT_CLOSES
    def test_snapshot_is_unusable_after_its_block(self, store: KeyValueStore) -> None:
        """Reading through a snapshot after its with-block raises StoreClosed."""
        store.put(b"k", b"v")
        with store.snapshot() as snap:
            pass
        with pytest.raises(StoreClosed):
            snap.get(b"k")
        with pytest.raises(StoreClosed):
            snap.has(b"k")
        with pytest.raises(StoreClosed):
            list(snap.iterate())

    @SNAPSHOT_ISOLATION
    def test_snapshot_reads_are_consistent_while_a_thread_writes(
        self, store: KeyValueStore
    ) -> None:
        """Readers never see half of a batch that rewrites a group of keys together."""
        group = [b"g%02d" % i for i in range(16)]
        with store.write_batch() as batch:
            for key in group:
                batch.put(key, b"0")
        stop = threading.Event()
        errors: list[BaseException] = []

        def write() -> None:
            try:
                for version in range(1, 150):
                    with store.write_batch() as batch:
                        for key in group:
                            batch.put(key, b"%d" % version)
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)
            finally:
                stop.set()

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        seen: set[bytes] = set()
        deadline = time.monotonic() + 60
        while not stop.is_set() or not seen:
            assert time.monotonic() < deadline, "the writer thread did not finish within 60 s"
            with store.snapshot() as snap:
                versions = {bytes(snap.get(key)) for key in group}
                listed = {bytes(value) for _, value in snap.iterate(b"g")}
            assert len(versions) == 1
            assert listed == versions
            seen |= versions
        writer.join(timeout=60)
        assert not writer.is_alive(), "the writer thread did not finish within 60 s"
        assert not errors
        assert store.get(group[0]) == b"149"

    @CLOSE
    def test_closed_store_raises_store_closed(self, store: KeyValueStore) -> None:
        """Every operation on a closed store raises StoreClosed; close is idempotent."""
        store.put(b"k", b"v")
        store.close()
        store.close()
        for call in (
            lambda: store.get(b"k"),
            lambda: store.has(b"k"),
            lambda: store.put(b"k", b"v"),
            lambda: store.delete(b"k"),
            lambda: list(store.iterate()),
            store.write_batch,
            store.snapshot,
        ):
            with pytest.raises(StoreClosed):
                call()

    @PREFIXED
    def test_prefixed_views_are_isolated(self, store: KeyValueStore) -> None:
        """Two prefixed views of one store never see each other's keys."""
        left, right = PrefixedStore(store, b"L/"), PrefixedStore(store, b"R/")
        left.put(b"k", b"left")
        right.put(b"k", b"right")
        assert left.get(b"k") == b"left"
        assert right.get(b"k") == b"right"
        assert store.get(b"L/k") == b"left"
        left.delete(b"k")
        assert not left.has(b"k")
        assert right.has(b"k")
        with pytest.raises(KeyError) as missing:
            left.get(b"k")
        assert missing.value.args == (b"k",)

    @PREFIXED
    def test_prefixed_view_iterates_without_its_prefix(self, store: KeyValueStore) -> None:
        """A view's iteration strips its prefix and ignores keys outside it."""
        view = PrefixedStore(store, b"ns:")
        store.put(b"ns", b"outside")
        store.put(b"nt:a", b"outside")
        for key in (b"b", b"a2", b"a1"):
            view.put(key, key)
        assert list(view.iterate()) == [(b"a1", b"a1"), (b"a2", b"a2"), (b"b", b"b")]
        assert [k for k, _ in view.iterate(b"a")] == [b"a1", b"a2"]
        assert [k for k, _ in view.iterate(start=b"a2")] == [b"a2", b"b"]

    @PREFIXED
    def test_prefixed_batches_and_snapshots_map_onto_the_store(self, store: KeyValueStore) -> None:
        """A view's batch is atomic and its snapshot is consistent, like the store's own."""
        view = PrefixedStore(store, b"v/")
        assert isinstance(view, KeyValueStore)
        with pytest.raises(KitFault), view.write_batch() as batch:
            batch.put(b"a", b"1")
            raise KitFault
        assert not view.has(b"a")
        with view.write_batch() as batch:
            batch.put(b"a", b"1")
            batch.put(b"b", b"2")
        with view.snapshot() as snap:
            view.put(b"a", b"changed")
            assert bytes(snap.get(b"a")) == b"1"
            assert [k for k, _ in snap.iterate()] == [b"a", b"b"]
            with pytest.raises(KeyError):
                snap.get(b"c")
        assert store.get(b"v/a") == b"changed"

    @PREFIXED
    def test_nested_prefixed_views_compose(self, store: KeyValueStore) -> None:
        """A view of a view prefixes keys with both prefixes, outermost first."""
        inner = PrefixedStore(PrefixedStore(store, b"outer/"), b"inner/")
        inner.put(b"k", b"v")
        assert store.get(b"outer/inner/k") == b"v"
        assert list(inner.iterate()) == [(b"k", b"v")]

    @PREFIXED
    def test_closed_view_leaves_the_store_open(self, store: KeyValueStore) -> None:
        """Closing a view retires the view only; the underlying store keeps working."""
        view = PrefixedStore(store, b"v/")
        view.close()
        with pytest.raises(StoreClosed):
            view.put(b"k", b"v")
        store.put(b"k", b"v")
        assert store.get(b"k") == b"v"

    @MODEL
    def test_store_matches_a_dict_model(self) -> None:
        """Random puts, deletes and (possibly failing) batches leave the store equal to a
        dict (a Hypothesis property, each example on a new store)."""

        @settings(max_examples=25, deadline=None)
        @given(ops=OPS, prefix=st.binary(max_size=2))
        def check(ops: list[tuple[object, ...]], prefix: bytes) -> None:
            model: dict[bytes, bytes] = {}
            store = self.make_store()
            try:
                for op in ops:
                    if op[0] == "put":
                        _, key, value = op
                        store.put(key, value)  # type: ignore[arg-type]
                        model[key] = value  # type: ignore[index, assignment]
                    elif op[0] == "delete":
                        store.delete(op[1])  # type: ignore[arg-type]
                        model.pop(op[1], None)  # type: ignore[call-overload]
                    else:
                        _, writes, fails = op
                        staged = dict(model)
                        with (
                            pytest.raises(KitFault) if fails else nullcontext(),
                            store.write_batch() as batch,
                        ):
                            for key, value in writes:  # type: ignore[attr-defined]
                                if value is None:
                                    batch.delete(key)
                                    staged.pop(key, None)
                                else:
                                    batch.put(key, value)
                                    staged[key] = value
                            if fails:
                                raise KitFault
                        if not fails:
                            model = staged
                expected = sorted((k, v) for k, v in model.items() if k.startswith(prefix))
                assert list(store.iterate(prefix)) == expected
                with store.snapshot() as snap:
                    assert [(k, bytes(v)) for k, v in snap.iterate(prefix)] == expected
                    for key, value in model.items():
                        assert bytes(snap.get(key)) == value
            finally:
                self.close_store(store)

        check()
