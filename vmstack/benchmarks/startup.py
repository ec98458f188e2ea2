"""Benchmark case: start-up, what a fresh interpreter pays before it does any work.

Every ``vmstack serve`` child, parse-pool worker, Ray actor and CLI run starts a new
interpreter and imports what it runs. Two rows, each timed cold (a new interpreter per call,
``python -c``, wall time of the whole process) in alternating rounds:

- the import of a stack (:data:`STACK_IMPORT`: ``vmstack.stack`` and every module
  :func:`~vmstack.stack.build_stack` imports for the default stack): fast is the import as it
  is (the ``rlp`` package loads at the first RLP decode); the baseline adds ``import rlp``,
  what the import loaded before;
- a parse-pool worker's start-up (:data:`WORKER_IMPORT`: the pool and the module of the
  signature check it runs): fast is that import as it is; the baseline adds the wrapper
  layers and the proposer layer's lifecycle, which the import loaded before (through the
  packages' ``__init__``).

The floor of both is the interpreter alone (``python -c pass``). Goal: the fast import at
most 0.75x the eager one (at least a quarter of it saved).
"""

from __future__ import annotations

import subprocess
import sys

from vmstack.benchmarks import Comparison, alternated_medians

__all__ = ["STACK_IMPORT", "WORKER_IMPORT", "run"]

GROUP = "start-up, cold"
#: The modules a default stack's build imports.
STACK_IMPORT = (
    "vmstack.stack",
    "vmstack.cchain",
    "vmstack.store.configuration",
    "vmstack.transition",
    "vmstack.wrappers.proposer.vm",
    "vmstack.wrappers.traced",
    "vmstack.wrappers.metered",
)
#: What a parse-pool worker imports for the signature checks it runs.
WORKER_IMPORT = ("vmstack.parsepool", "vmstack.wrappers.proposer.verdicts")


def _interpreter(code: str) -> None:
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def _imports(modules: tuple[str, ...]) -> str:
    return "import " + ", ".join(modules)


def _row(case: str, modules: tuple[str, ...], eager: tuple[str, ...], *, repeat: int) -> Comparison:
    fast, baseline, floor = alternated_medians(
        (
            lambda: _interpreter(_imports(modules)),
            lambda: _interpreter(_imports(modules + eager)),
            lambda: _interpreter("pass"),
        ),
        repeat=repeat,
    )
    return Comparison(
        group=GROUP,
        case=case,
        fast_seconds=fast,
        baseline_seconds=baseline,
        floor_seconds=floor,
        fast_label="import, lazy loads",
        baseline_label="import with the eager loads",
        floor_label="python -c pass",
        goal="<= 0.75x the eager import",
        notes={"eager": ", ".join(eager)},
    ).judged(min_speedup=1 / 0.75)


def run(quick: bool) -> list[Comparison]:
    """The two rows of the module docstring."""
    repeat = 3 if quick else 7
    return [
        _row("import of a stack", STACK_IMPORT, ("rlp",), repeat=repeat),
        _row(
            "a parse-pool worker's imports",
            WORKER_IMPORT,
            ("vmstack.wrappers.metered", "vmstack.wrappers.traced", "vmstack.wrappers.proposer.vm"),
            repeat=repeat,
        ),
    ]
