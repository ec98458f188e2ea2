"""Open a vmstack LMDB store and list its blocks, heads and sizes.

    python examples/inspect_store.py [PATH]

With a PATH (the ``serving`` folder of ``vmstack simulate --data-dir DIR``, for example) it
opens that store read-only; without one it builds a small demo chain in a temporary folder
first. It reads the go-ethereum rawdb layout directly through ``vmstack.cchain.rawdb``.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from vmstack import SimClock
from vmstack.cchain import AVALANCHE, generate_chain, rawdb
from vmstack.stack import build_stack
from vmstack.store import LMDBStore


def build_demo(path: Path) -> None:
    clock = SimClock(1_700_000_000.0)
    with LMDBStore(path) as store:
        generate_chain(
            build_stack(store, clock=clock), blocks=12, txs_per_block=4, seed=3, clock=clock
        )


def inspect(path: Path, *, limit: int = 20) -> None:
    schema = rawdb.Schema()
    with LMDBStore(path, readonly=True) as store, store.snapshot() as snapshot:
        head = rawdb.read_last_accepted_hash(snapshot, schema)
        settled = rawdb.read_last_settled_hash(snapshot, schema)
        if head is None:
            print(f"{path}: no chain (no last-accepted pointer)")
            return
        head_number = rawdb.read_header_number(snapshot, schema, head)
        assert head_number is not None
        print(f"store {path}: {len(store)} keys, map {store.map_size >> 20} MiB")
        print(f"last accepted: #{head_number} {head.hex()}")
        if settled is not None:
            print(
                f"last settled:  #{rawdb.read_header_number(snapshot, schema, settled)} "
                f"{settled.hex()}"
            )
        print(
            f"{'height':>6}  {'hash':<18} {'txs':>4} {'header B':>9} {'body B':>7} "
            f"{'receipts B':>10}"
        )
        for number in range(head_number, max(head_number - limit, -1), -1):
            block_hash = rawdb.read_canonical_hash(snapshot, schema, number)
            if block_hash is None:
                print(f"{number:>6}  (no canonical hash)")
                continue
            header = rawdb.read_header_rlp(snapshot, schema, number, block_hash) or b""
            body = rawdb.read_body_rlp(snapshot, schema, number, block_hash) or b""
            receipts = rawdb.read_receipts_rlp(snapshot, schema, number, block_hash)
            txs = len(AVALANCHE.decode_body(body).transactions) if body else 0
            print(
                f"{number:>6}  {block_hash.hex()[:16]}… {txs:>4} {len(header):>9} "
                f"{len(body):>7} {'-' if receipts is None else len(receipts):>10}"
            )


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        inspect(Path(argv[1]))
        return
    with tempfile.TemporaryDirectory(prefix="vmstack-inspect-") as folder:
        path = Path(folder) / "demo"
        build_demo(path)
        inspect(path)


if __name__ == "__main__":
    main(sys.argv)
