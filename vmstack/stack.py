"""The layer order of a stack: the one module that knows which layer sits over which.

:func:`wrap_layers` is the one place that knows how the pass-through layers sit over a VM:
``MeteredVM`` directly over it, ``TracedVM`` outermost (ARCHITECTURE.md, section 2), so a
span covers the metered call and the histogram does not time the span. A full stack is the
same step twice::

    CChainVM  ->  wrap_layers(name="C")  ->  ProposerVM  ->  wrap_layers(name="proposervm")

:func:`build_stack` builds the whole C-chain stack over one store in that order. What
surrounds a built stack lives with what it speaks: reading one back in
:mod:`vmstack.describe`, closing it in :mod:`vmstack.closing`, submitting transactions in
:mod:`vmstack.submission`, the configuration a store was written with in
:mod:`vmstack.store.configuration`.

This module imports the layers only when :func:`wrap_layers` or :func:`build_stack` runs:
``vmstack`` is imported by its pytest plugin in every test run, and the kit needs neither
OpenTelemetry nor prometheus-client.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from vmstack.defaults import DEFAULT_CACHE_SIZE, DEFAULT_CHAIN_ID
from vmstack.interfaces import ChainVM
from vmstack.options import check_stack_options, recorded_settings, served_part_options

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer
    from prometheus_client import CollectorRegistry

    from vmstack.cchain.codec import Flavour
    from vmstack.cchain.genesis import Genesis
    from vmstack.clock import Clock
    from vmstack.store import KeyValueStore
    from vmstack.store.history import EraArchive
    from vmstack.wrappers.proposer import StakingKey
    from vmstack.wrappers.proposer.windower import ValidatorSource, Windower

__all__ = ["build_stack", "wrap_layers"]


def wrap_layers(
    inner: ChainVM,
    *,
    name: str,
    tracer: Tracer | None = None,
    registry: CollectorRegistry | None = None,
) -> ChainVM:
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
    stack with a pool with :func:`~vmstack.closing.close_stack` (a forgotten pool is still
    reaped when collected or at exit).

    ``validators`` and ``durango_time`` go to the proposer layer: with a validator set (a
    mapping of NodeID to weight, a callable of the P-chain height giving one, or a
    ``Windower``) its ``verify`` enforces the proposer windows and ``build_block`` waits
    for this node's slot (docs/stack.md, "Proposer windows (Snowman++)"); without one any
    node proposes at any time, as before. They need a ``fork_time``. ``pchain_height`` (an int or a
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
    the C-chain part's store (docs/history.md, "A C-chain VM over era1 archives"): an empty
    store's chain is then the archive's, served at once.

    The store remembers the configuration it was first built with (flavour, EVM chain ID,
    transition time, settle lag and key prefix for the C-chain part; fork time and chain ID
    for the proposer layer): building a stack over it with another raises
    :class:`~vmstack.errors.ConfigMismatch` naming the option, before anything is served.

    Every keyword's default, kind and check are those of :data:`vmstack.options.STACK_OPTIONS`
    (a test holds this signature to it): a value a keyword does not take is
    :class:`~vmstack.errors.InvalidOption` naming it.
    """
    # Every keyword as given, checked against the options' record (vmstack.options).
    given = {name: value for name, value in locals().items() if name != "store"}
    check_stack_options(given)

    import time

    from vmstack.cchain import AVALANCHE, CChainVM
    from vmstack.store.configuration import check_configuration
    from vmstack.transition import SerialChainVM, TransitionVM
    from vmstack.wrappers.proposer import ProposerVM

    clock = time.time if clock is None else clock
    flavour = AVALANCHE if flavour is None else flavour

    if fork_time is None and validators is not None:
        raise ValueError("validators belong to the proposer layer: give a fork_time too")
    layers = dict(extra_layers or {})
    unknown = sorted(set(layers) - {"C", "proposervm"})
    if unknown:
        raise ValueError(f'extra_layers go under "C" or "proposervm", not {unknown}')
    if layers.get("proposervm") and fork_time is None:
        raise ValueError('extra_layers["proposervm"] needs a proposer layer (a fork_time)')
    if genesis is not None:
        chain_id = genesis.chain_id_for(chain_id)

    def chain_vm() -> CChainVM:
        return CChainVM(
            store,
            flavour=flavour,
            key_prefix=key_prefix,
            clock=clock,
            chain_id=chain_id,
            settle_lag=settle_lag,
            cache_size=cache_size,
            genesis=genesis,
            history=history,
        )

    def user_layers(vm: ChainVM, position: str) -> ChainVM:
        for make in layers.get(position, ()):
            vm = make(vm)
        return vm

    if out_of_process is None:
        check_configuration(
            store,
            "chain",
            recorded_settings("chain", given | {"flavour": flavour, "chain_id": chain_id}),
        )
    if served_part:
        if fork_time is not None or out_of_process is not None:
            raise ValueError(
                "a served part is the C-chain part alone: no fork_time and no out_of_process"
            )
    else:
        check_configuration(
            store, "proposer", recorded_settings("proposer", given | {"chain_id": chain_id})
        )
    if out_of_process is not None:
        misplaced = served_part_options(given)
        if misplaced:
            raise ValueError(
                f"{', '.join(misplaced)} shape the served C-chain part: give "
                "them to the serving side (spawn), not with out_of_process"
            )
        vm: ChainVM = out_of_process
    else:
        vm = chain_vm()
    if transition_time is not None:
        vm = TransitionVM(
            SerialChainVM(chain_vm()), vm, transition_time=transition_time, clock=clock
        )
    vm = wrap_layers(user_layers(vm, "C"), name="C", tracer=tracer, registry=registry)
    if fork_time is not None:
        parse_pool = None
        if parse_workers > 0:
            from vmstack.parsepool import ParsePool

            parse_pool = ParsePool(parse_workers)
        vm = ProposerVM(
            vm,
            fork_time=fork_time,
            chain_id=chain_id,
            store=store,
            staking_key=staking_key,
            clock=clock,
            parse_pool=parse_pool,
            validators=validators,
            durango_time=durango_time,
            pchain_height=pchain_height,
        )
        vm = wrap_layers(
            user_layers(vm, "proposervm"), name="proposervm", tracer=tracer, registry=registry
        )
    return vm
