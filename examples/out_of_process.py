"""Run a node's C-chain VM in a process of its own, as avalanchego runs a plugin VM.

The chain is built in this process on an LMDB store; then ``spawn`` serves that store's
C-chain part from a child process (``vmstack serve``), and the proposer layer and the
pass-through layers are built over its client here. A batched call crosses the boundary
once, whatever its size; the fallback crosses once per block. Run it:

    python examples/out_of_process.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from opentelemetry.trace import NoOpTracer
from prometheus_client import CollectorRegistry

from vmstack import SimClock, batched_parse_block, build_stack, describe_stack, get_ancestors
from vmstack.batching import serial_get_ancestors
from vmstack.cchain import generate_chain
from vmstack.store import LMDBStore
from vmstack.wrappers.rpc import RoundTrips, spawn

START = 1_700_000_000.0
TRANSITION, FORK = START + 20, START + 40


def main() -> None:
    with tempfile.TemporaryDirectory() as temporary:
        chain_dir, proposer_dir = Path(temporary) / "chain", Path(temporary) / "proposervm"
        clock = SimClock(START)
        with LMDBStore(chain_dir) as store:
            generate_chain(
                build_stack(store, transition_time=TRANSITION, clock=clock),
                blocks=30,
                txs_per_block=5,
                seed=1,
                clock=clock,
            )
        # The child serves the C-chain part on its own simulated clock, which follows ours.
        with (
            spawn(chain_dir, transition_time=TRANSITION, clock=clock) as client,
            LMDBStore(proposer_dir) as proposer_store,
        ):
            vm = build_stack(
                proposer_store,
                fork_time=FORK,
                clock=clock,
                tracer=NoOpTracer(),
                registry=CollectorRegistry(),
                out_of_process=client,
            )
            print(f"served by process {client.pid}")
            print(describe_stack(vm))
            tip = vm.last_accepted()
            client.round_trips = RoundTrips()
            blocks = get_ancestors(vm, tip, clock=clock)
            parsed = batched_parse_block(vm, blocks[:10])
            print(
                f"batched: {len(blocks)} ancestors and {len(parsed)} parsed blocks in "
                f"{client.round_trips.total} round trips"
            )
            client.round_trips = RoundTrips()
            walked = serial_get_ancestors(vm, tip, clock=clock)
            print(
                f"fallback: {len(walked)} ancestors in {client.round_trips.total} round "
                "trips (one get_block per block but the tip, which the client holds as the "
                "last accepted, and one for the genesis block's parent)"
            )


if __name__ == "__main__":
    main()
