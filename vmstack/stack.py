"""The layer order of a stack, and how to read a stack back.

:func:`wrap_layers` is the one place that knows how the pass-through layers sit over a VM:
``MeteredVM`` directly over it, ``TracedVM`` outermost (ARCHITECTURE.md, section 2), so a
span covers the metered call and the histogram does not time the span. A full stack is the
same step twice::

    CChainVM  ->  wrap_layers(name="C")  ->  ProposerVM  ->  wrap_layers(name="proposervm")

:func:`describe_stack` walks ``inner`` from the top of a stack down and says, for every
layer, what it is and whether it answers batched calls.

This module imports the wrapper layers only when :func:`wrap_layers` runs: ``vmstack`` is
imported by its pytest plugin in every test run, and reading a stack needs neither
OpenTelemetry nor prometheus-client.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, overload

import attrs

from vmstack.capability import supports_batching
from vmstack.defaults import DEFAULT_CACHE_SIZE, DEFAULT_CHAIN_ID
from vmstack.interfaces import ChainVM, SubmitsTransactions, find_layer, iter_layers

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer
    from prometheus_client import CollectorRegistry

    from vmstack.cchain.codec import Flavour
    from vmstack.cchain.genesis import Genesis
    from vmstack.cchain.types import Transaction
    from vmstack.clock import Clock
    from vmstack.store import KeyValueStore
    from vmstack.store.history import EraArchive
    from vmstack.wrappers.proposer import StakingKey
    from vmstack.wrappers.proposer.windower import ValidatorSource, Windower

__all__ = ["CONFIG_KEY_PREFIX", "DEFAULT_CHAIN_ID", "LayerInfo", "StackDescription",
           "build_stack", "check_configuration", "close_stack", "describe_stack", "find_layer",
           "iter_layers", "stored_configuration", "submit_transactions", "wrap_layers"]


@attrs.frozen
class LayerInfo:
    """One layer of a stack: its type's name, its name if it has one, and whether it
    batches (answers ``get_ancestors`` / ``batched_parse_block`` rather than refusing)."""

    kind: str
    name: str | None
    batching: bool

    @property
    def label(self) -> str:
        """``"TracedVM(proposervm)"`` for a named layer, ``"CChainVM"`` for an unnamed one."""
        return self.kind if self.name is None else f"{self.kind}({self.name})"

    @property
    def capability(self) -> str:
        """``"batched"`` or ``"serial"``."""
        return "batched" if self.batching else "serial"

    def __str__(self) -> str:
        return f"{self.label}  {self.capability}"


@attrs.frozen
class StackDescription(Sequence[LayerInfo]):
    """The layers of a stack, top (what the engine calls) to bottom (the VM that owns the
    chain). ``str()`` gives one aligned line per layer."""

    layers: tuple[LayerInfo, ...]

    @overload
    def __getitem__(self, index: int) -> LayerInfo: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[LayerInfo]: ...

    def __getitem__(self, index: int | slice) -> LayerInfo | Sequence[LayerInfo]:
        return self.layers[index]

    def __len__(self) -> int:
        return len(self.layers)

    def __iter__(self) -> Iterator[LayerInfo]:
        return iter(self.layers)

    @property
    def top(self) -> LayerInfo:
        """The layer the engine calls."""
        return self.layers[0]

    @property
    def bottom(self) -> LayerInfo:
        """The description of the VM at the bottom of the stack (to reach the VM itself, use
    :func:`find_layer` or :func:`iter_layers`)."""
        return self.layers[-1]

    def as_dicts(self) -> list[dict[str, object]]:
        """The layers as plain dicts (``kind``, ``name``, ``batching``), for JSON output."""
        return [{"kind": layer.kind, "name": layer.name, "batching": layer.batching}
                for layer in self.layers]

    def __str__(self) -> str:
        width = max(len(layer.label) for layer in self.layers)
        return "\n".join(f"{layer.label:<{width}}  {layer.capability}"
                         for layer in self.layers)


def describe_stack(vm: ChainVM) -> StackDescription:
    """The layers of the stack whose top is ``vm``, top to bottom.

    Follows each layer's ``inner`` until a VM without one (the bottom). A layer's name is
    its ``name`` attribute when that is a string; its capability is what
    :func:`vmstack.batching.supports_batching` says. A bottom that is a process boundary
    (it has ``describe_served()``, as :class:`~vmstack.wrappers.rpc.VMClient` has) is
    followed by the layers it serves, read on the serving side. A stack whose ``inner``
    links loop raises ``ValueError``.
    """
    layers: list[LayerInfo] = []
    for layer in iter_layers(vm):
        name = getattr(layer, "name", None)
        layers.append(LayerInfo(kind=type(layer).__name__,
                                name=name if isinstance(name, str) else None,
                                batching=supports_batching(layer)))
    served = getattr(layer, "describe_served", None)
    if callable(served):
        layers.extend(served())
    return StackDescription(tuple(layers))


#: Where :func:`build_stack` records the configuration a store was written with (keys
#: outside the chain's own keyspace): one record for the C-chain part, one for the
#: proposer layer, each sorted-key JSON framed by :func:`vmstack.checksum.frame` (a CRC-32
#: over its key and the JSON, so one part's record under the other's key fails). Its
#: keys are lines of the store's map, :mod:`vmstack.store.keyspaces` (imported when a
#: stack is built, not with this module), which a test holds this prefix equal to.
CONFIG_KEY_PREFIX = b"vmstack/config/"


def check_configuration(store: KeyValueStore, part: str, settings: dict[str, object]) -> None:
    """Hold ``store`` to the ``settings`` of one part of a stack (``"chain"`` or
    ``"proposer"``): record them if the store has none yet, else compare.

    A setting that differs from the record is :class:`~vmstack.errors.ConfigMismatch`
    naming it; a damaged or misplaced record, or a store of another record format
    (:func:`vmstack.store.format.check_format`), is :class:`~vmstack.errors.StoreCorrupted`.
    A store that cannot be written (opened read-only) and has no record is left as it is.
    """
    import contextlib
    import json

    from vmstack.checksum import frame, unframe
    from vmstack.errors import ConfigMismatch, StoreCorrupted
    from vmstack.store import StoreError, keyspaces
    from vmstack.store.format import check_format

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
    what = f"the {part} configuration record of the store"
    try:
        recorded = json.loads(bytes(unframe(key, stored, what)))
        if not isinstance(recorded, dict):
            raise ValueError("not an object")
    except ValueError:
        raise StoreCorrupted(f"{what} is damaged") from None
    for field in sorted(settings.keys() | recorded.keys()):
        if recorded.get(field) != settings.get(field):
            raise ConfigMismatch(field, recorded.get(field), settings.get(field))


def stored_configuration(store: KeyValueStore, part: str) -> dict[str, object] | None:
    """The settings of one part of a stack (``"chain"`` or ``"proposer"``) that
    :func:`check_configuration` recorded in ``store``, or ``None`` if it has none;
    :class:`~vmstack.errors.StoreCorrupted` for a damaged record."""
    import json

    from vmstack.checksum import unframe
    from vmstack.errors import StoreCorrupted

    key = CONFIG_KEY_PREFIX + part.encode()
    try:
        stored = store.get(key)
    except KeyError:
        return None
    what = f"the {part} configuration record of the store"
    try:
        recorded = json.loads(bytes(unframe(key, stored, what)))
    except ValueError:
        raise StoreCorrupted(f"{what} is damaged") from None
    if not isinstance(recorded, dict):
        raise StoreCorrupted(f"{what} is damaged")
    return recorded


def submit_transactions(vm: ChainVM, transactions: Iterable[Transaction]) -> int:
    """Queue signed ``transactions`` for the blocks ``vm``'s stack builds; the number queued.

    The one entry point for submission. They go to the mempool of the VM in charge now
    (found with :func:`find_layer`; across a transition layer, the pre VM's until the
    transition block is accepted, when the pending ones move to the post VM's). A
    transaction no block could carry now (a missing or bad signature, another chain, gas
    below intrinsic, a nonce below the sender's, a balance too low, a duplicate of a pending
    one) is :class:`~vmstack.errors.InvalidTransaction` (a ``ValueError``) naming the reason,
    and nothing of the call is queued; a nonce above the sender's next one waits. A stack
    whose C-chain part is served in another process submits them there, through the layer
    that has ``submit_transactions`` (a :class:`~vmstack.wrappers.rpc.VMClient`: one round
    trip, the same refusals); a stack with neither is ``ValueError``.
    """
    from vmstack.cchain.generate import find_mempool

    batch = list(transactions)
    try:
        mempool = find_mempool(vm)
    except ValueError:
        for layer in iter_layers(vm):
            if isinstance(layer, SubmitsTransactions):
                return int(layer.submit_transactions(batch))
        raise
    mempool.add_transactions(batch)
    return len(batch)


def wrap_layers(inner: ChainVM, *, name: str, tracer: Tracer | None = None,
                registry: CollectorRegistry | None = None) -> ChainVM:
    """Put the pass-through layers named ``name`` over ``inner``: ``MeteredVM`` (namespace
    ``name``) when a ``registry`` is given, then ``TracedVM`` (span prefix ``name``) when a
    ``tracer`` is given. With neither, ``inner`` itself is returned.

    The result forwards batched calls exactly when ``inner`` batches.
    """
    from vmstack.wrappers.metered import MeteredVM
    from vmstack.wrappers.traced import TracedVM

    vm = inner
    if registry is not None:
        vm = MeteredVM(vm, registry=registry, namespace=name)
    if tracer is not None:
        vm = TracedVM(vm, tracer=tracer, name=name)
    return vm


def build_stack(
    store: KeyValueStore,
    *,
    flavour: Flavour | None = None,
    chain_id: int = DEFAULT_CHAIN_ID,
    fork_time: float | None = None,
    transition_time: float | None = None,
    tracer: Tracer | None = None,
    registry: CollectorRegistry | None = None,
    clock: Clock | None = None,
    staking_key: StakingKey | None = None,
    key_prefix: bytes = b"",
    settle_lag: int = 0,
    cache_size: int = DEFAULT_CACHE_SIZE,
    out_of_process: ChainVM | None = None,
    served_part: bool = False,
    parse_workers: int = 0,
    validators: Windower | ValidatorSource | None = None,
    durango_time: float = 0.0,
    pchain_height: Callable[[], int] | int = 0,
    genesis: Genesis | None = None,
    extra_layers: Mapping[str, Sequence[Callable[[ChainVM], ChainVM]]] | None = None,
    history: EraArchive | None = None,
) -> ChainVM:
    """The full C-chain stack over one ``store``, top layer returned (ARCHITECTURE.md, section 2).

    From the bottom up: ``CChainVM`` (``flavour`` defaults to ``AVALANCHE``); with a
    ``transition_time``, a ``TransitionVM`` that hands the chain from a serial-only pre VM
    (``SerialChainVM`` over a second ``CChainVM`` on the same store, as coreth) to the
    batched one; the pass-through layers named ``"C"``; with a ``fork_time``, a
    ``ProposerVM`` (its blocks signed with ``staking_key``, unsigned without one; its
    records in its own keyspace of ``store``); and the pass-through layers named
    ``"proposervm"``. Traced layers appear when a ``tracer`` is given, metered ones when a
    ``registry`` is given; ``None`` leaves a layer out. ``clock`` (default ``time.time``)
    drives every layer. This is the one function that knows the layer order.

    ``out_of_process`` puts the process boundary where avalanchego puts it for a plugin VM:
    given the client of a VM served in another process (a
    :class:`~vmstack.wrappers.rpc.VMClient`, usually from
    :func:`~vmstack.wrappers.rpc.spawn`, which builds the C-chain part there), that client
    takes the place of the C-chain part and the layers from ``"C"`` up are built over it in
    this process; ``store`` then holds only the proposer layer's records. The options that
    shape the C-chain part (``flavour``, ``transition_time``, ``key_prefix``,
    ``settle_lag``, ``cache_size``, ``genesis``) belong to the serving side and are refused
    here.

    ``served_part`` says the stack built is the C-chain part that another process serves
    to a proposer layer of its own (what ``vmstack serve`` builds without a ``fork_time``);
    it takes no ``fork_time``.

    ``parse_workers`` is how many worker processes the stack's one
    :class:`~vmstack.parsepool.ParsePool` runs, shared by the layers that hand work to one
    (today the proposer layer, which checks a large batch's envelope signatures there
    while this process parses the inner blocks, so even one worker runs beside it). The
    default, 0, parses serially and starts no process: a pool is opt-in, as it owns
    processes, and a script using one must guard its entry point (``if __name__ ==
    "__main__":``, multiprocessing's rule for its ``forkserver`` and ``spawn`` starts). A
    stack without a proposer layer has nothing to hand over and gets no pool. Close a
    stack with a pool with :func:`close_stack` (a forgotten pool is still reaped when
    collected or at exit).

    ``validators`` and ``durango_time`` go to the proposer layer: with a validator set (a
    mapping of NodeID to weight, a callable of the P-chain height giving one, or a
    ``Windower``) its ``verify`` enforces the proposer windows and ``build_block`` waits
    for this node's slot (README, "Proposer windows"); without one any node proposes at
    any time, as before. They need a ``fork_time``. ``pchain_height`` (an int or a
    zero-argument callable) is the P-chain height the proposer layer's blocks name and
    its ``verify`` admits, as ``ProposerVM`` takes it.

    ``genesis`` (a :class:`~vmstack.cchain.Genesis`) is what an empty store's chain starts
    from (default: the development keys funded); ``chain_id`` must then be the genesis's,
    if it names one. ``extra_layers`` puts the caller's own layers in the stack: under
    ``"C"``, each callable ``inner -> ChainVM`` is applied directly over the C-chain part
    (the transition layer or the C-chain VM), under ``"proposervm"`` directly over the
    proposer layer; in both places under that position's metered and traced layers, the
    first item innermost.

    ``history`` (an :class:`~vmstack.store.history.EraArchive`) is settled history beneath
    the C-chain part's store (README, "History from era1 archives"): an empty store's chain
    is then the archive's, served at once.

    The store remembers the configuration it was first built with (flavour, EVM chain ID,
    transition time, settle lag and key prefix for the C-chain part; fork time and chain ID
    for the proposer layer): building a stack over it with another raises
    :class:`~vmstack.errors.ConfigMismatch` naming the option, before anything is served.
    """
    import time

    from vmstack.cchain import AVALANCHE, CChainVM
    from vmstack.transition import SerialChainVM, TransitionVM
    from vmstack.wrappers.proposer import ProposerVM

    clock = time.time if clock is None else clock
    flavour = AVALANCHE if flavour is None else flavour
    if isinstance(parse_workers, bool) or not isinstance(parse_workers, int) or (
            parse_workers < 0):
        raise ValueError(f"parse_workers must be a non-negative int, got {parse_workers!r}")

    if fork_time is None and validators is not None:
        raise ValueError("validators belong to the proposer layer: give a fork_time too")
    layers = dict(extra_layers or {})
    unknown = sorted(set(layers) - {"C", "proposervm"})
    if unknown:
        raise ValueError(f"extra_layers go under \"C\" or \"proposervm\", not {unknown}")
    if layers.get("proposervm") and fork_time is None:
        raise ValueError("extra_layers[\"proposervm\"] needs a proposer layer (a fork_time)")
    if genesis is not None and genesis.chain_id is not None and chain_id != genesis.chain_id:
        if chain_id != DEFAULT_CHAIN_ID:
            raise ValueError(f"chain_id {chain_id} differs from the genesis's "
                             f"{genesis.chain_id}")
        chain_id = genesis.chain_id

    def chain_vm() -> CChainVM:
        return CChainVM(store, flavour=flavour, key_prefix=key_prefix, clock=clock,
                        chain_id=chain_id, settle_lag=settle_lag, cache_size=cache_size,
                        genesis=genesis, history=history)

    def user_layers(vm: ChainVM, position: str) -> ChainVM:
        for make in layers.get(position, ()):
            vm = make(vm)
        return vm

    if out_of_process is None:
        check_configuration(store, "chain", {
            "flavour": flavour.name, "chain_id": chain_id, "transition_time": transition_time,
            "settle_lag": settle_lag, "key_prefix": key_prefix.hex()})
    if served_part:
        if fork_time is not None or out_of_process is not None:
            raise ValueError("a served part is the C-chain part alone: no fork_time and no "
                             "out_of_process")
    else:
        check_configuration(store, "proposer", {"fork_time": fork_time, "chain_id": chain_id})
    if out_of_process is not None:
        served_options = {"flavour": flavour is not AVALANCHE,
                          "transition_time": transition_time is not None,
                          "key_prefix": key_prefix != b"", "settle_lag": settle_lag != 0,
                          "cache_size": cache_size != DEFAULT_CACHE_SIZE,
                          "genesis": genesis is not None, "history": history is not None}
        misplaced = sorted(name for name, given in served_options.items() if given)
        if misplaced:
            raise ValueError(f"{', '.join(misplaced)} shape the served C-chain part: give "
                             "them to the serving side (spawn), not with out_of_process")
        vm: ChainVM = out_of_process
    else:
        vm = chain_vm()
    if transition_time is not None:
        vm = TransitionVM(SerialChainVM(chain_vm()), vm, transition_time=transition_time,
                          clock=clock)
    vm = wrap_layers(user_layers(vm, "C"), name="C", tracer=tracer, registry=registry)
    if fork_time is not None:
        parse_pool = None
        if parse_workers > 0:
            from vmstack.parsepool import ParsePool

            parse_pool = ParsePool(parse_workers)
        vm = ProposerVM(vm, fork_time=fork_time, chain_id=chain_id, store=store,
                        staking_key=staking_key, clock=clock, parse_pool=parse_pool,
                        validators=validators, durango_time=durango_time,
                        pchain_height=pchain_height)
        vm = wrap_layers(user_layers(vm, "proposervm"), name="proposervm", tracer=tracer,
                         registry=registry)
    return vm


def close_stack(vm: ChainVM) -> None:
    """Close the stack whose top is ``vm``: every layer that has a ``close()`` (the
    proposer layer stops its parse pool's worker processes; a
    :class:`~vmstack.wrappers.rpc.VMClient` closes its connection) is closed, top to
    bottom. The store is the caller's to close. Closing twice is harmless; a closed
    stack's layers still answer in this process, parsing serially."""
    for layer in iter_layers(vm):
        close = getattr(layer, "close", None)
        if callable(close):
            close()
