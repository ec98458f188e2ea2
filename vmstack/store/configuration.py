"""The configuration a store was first written with, one record per part of a stack.

:func:`vmstack.stack.build_stack` records the settings that shape what a store holds
(the C-chain part's flavour, EVM chain ID, transition time, settle lag and key prefix; the
proposer layer's fork time and chain ID) and holds every later stack over the store to
them, so a store is never served under a configuration it was not written with. Each
record is sorted-key JSON framed by :func:`vmstack.checksum.frame` (a CRC-32 over its key
and the JSON, so one part's record under the other's key fails) under its line of the
store's map (:data:`vmstack.store.keyspaces.CONFIG_CHAIN`,
:data:`~vmstack.store.keyspaces.CONFIG_PROPOSER`).
"""

from __future__ import annotations

import contextlib
import json

from vmstack.checksum import frame, unframe
from vmstack.errors import ConfigMismatch, StoreCorrupted, StoreError
from vmstack.store import keyspaces
from vmstack.store.base import KeyValueStore
from vmstack.store.format import check_format

__all__ = ["check_configuration", "stored_configuration"]


def check_configuration(store: KeyValueStore, part: str, settings: dict[str, object]) -> None:
    """Hold ``store`` to the ``settings`` of one part of a stack (``"chain"`` or
    ``"proposer"``): record them if the store has none yet, else compare.

    A setting that differs from the record is :class:`~vmstack.errors.ConfigMismatch`
    naming it; a damaged or misplaced record, or a store of another record format
    (:func:`vmstack.store.format.check_format`), is :class:`~vmstack.errors.StoreCorrupted`.
    A store that cannot be written (opened read-only) and has no record is left as it is.
    Another ``part`` is ``ValueError``.
    """
    key = keyspaces.config_key(part)
    text = json.dumps(settings, sort_keys=True).encode()
    try:
        stored = store.get(key)
    except KeyError:
        check_format(store, holds_records=False)
        with contextlib.suppress(StoreError):
            store.put(key, frame(key, text))
        return
    check_format(store, holds_records=True)
    recorded = _decode(key, stored, part)
    for field in sorted(settings.keys() | recorded.keys()):
        if recorded.get(field) != settings.get(field):
            raise ConfigMismatch(field, recorded.get(field), settings.get(field))


def stored_configuration(store: KeyValueStore, part: str) -> dict[str, object] | None:
    """The settings of one part of a stack (``"chain"`` or ``"proposer"``) that
    :func:`check_configuration` recorded in ``store``, or ``None`` if it has none;
    :class:`~vmstack.errors.StoreCorrupted` for a damaged record, ``ValueError`` for
    another ``part``."""
    key = keyspaces.config_key(part)
    try:
        stored = store.get(key)
    except KeyError:
        return None
    return _decode(key, stored, part)


def _decode(key: bytes, stored: bytes | memoryview, part: str) -> dict[str, object]:
    """The settings in the framed record ``stored`` under ``key``;
    :class:`~vmstack.errors.StoreCorrupted` if it fails its checksum or is not a JSON
    object."""
    what = f"the {part} configuration record of the store"
    try:
        recorded = json.loads(bytes(unframe(key, stored, what)))
    except ValueError:
        raise StoreCorrupted(f"{what} is damaged") from None
    if not isinstance(recorded, dict):
        raise StoreCorrupted(f"{what} is damaged")
    return recorded
