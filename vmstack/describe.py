"""What a stack is made of, read back from its top: :func:`describe_stack` walks ``inner``
down and says, for every layer, what it is (:class:`LayerInfo`) and whether it answers
batched calls; :class:`StackDescription` holds the layers, top to bottom.

Reading a stack needs none of the layers' code: this module imports only the protocols and
the capability check, so the process boundary's client can describe what it serves without
importing the stack's builder (:mod:`vmstack.stack`, the floor above it).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import overload

import attrs

from vmstack.interfaces import ChainVM, iter_layers
from vmstack.layers import supports_batching

__all__ = ["LayerInfo", "StackDescription", "describe_stack"]


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
        :func:`~vmstack.interfaces.find_layer` or :func:`~vmstack.interfaces.iter_layers`)."""
        return self.layers[-1]

    def as_dicts(self) -> list[dict[str, object]]:
        """The layers as plain dicts (``kind``, ``name``, ``batching``), for JSON output."""
        return [
            {"kind": layer.kind, "name": layer.name, "batching": layer.batching}
            for layer in self.layers
        ]

    def __str__(self) -> str:
        width = max(len(layer.label) for layer in self.layers)
        return "\n".join(f"{layer.label:<{width}}  {layer.capability}" for layer in self.layers)


def describe_stack(vm: ChainVM) -> StackDescription:
    """The layers of the stack whose top is ``vm``, top to bottom.

    Follows each layer's ``inner`` until a VM without one (the bottom). A layer's name is
    its ``name`` attribute when that is a string; its capability is what
    :func:`vmstack.layers.supports_batching` says. A bottom that is a process boundary
    (it has ``describe_served()``, as :class:`~vmstack.wrappers.rpc.VMClient` has) is
    followed by the layers it serves, read on the serving side. A stack whose ``inner``
    links loop raises ``ValueError``.
    """
    layers: list[LayerInfo] = []
    for layer in iter_layers(vm):
        name = getattr(layer, "name", None)
        layers.append(
            LayerInfo(
                kind=type(layer).__name__,
                name=name if isinstance(name, str) else None,
                batching=supports_batching(layer),
            )
        )
    served = getattr(layer, "describe_served", None)
    if callable(served):
        layers.extend(served())
    return StackDescription(tuple(layers))
