"""The layer conformance kit: inherit :class:`LayerConformance`, get the layer tests.

A layer's author writes, in their own test suite::

    from vmstack.conformance import LayerConformance

    class TestMyLayer(LayerConformance):
        def wrap(self, inner):
            return MyLayer(inner)

and pytest collects the inherited tests. They put the layer over a recording in-memory VM
(:func:`vmstack.conformance.memory_vm`) — once over one that batches and once over one that
does not — on a simulated clock that moves with every block read below, and check every
promise a layer makes, each as a named rule
(:data:`~vmstack.conformance.declarations.RULES`); a failure starts with ``[kit rule NAME]``
and says what was expected.

:class:`LayerConformance` is the contract mixins together: :class:`ForwardingContract`,
:class:`BudgetContract`, :class:`ParsingContract`, :class:`ErrorContract`,
:class:`DecisionContract` and :class:`WrappingContract`. A layer that is not a plain
pass-through says what it is with ``declarations`` (see
:class:`~vmstack.conformance.declarations.Declaration`: it answers batched calls itself,
serves blocks from memory, has blocks of its own, or sits across a process boundary) and
lists the rules it cannot meet by design in ``not_applicable`` (rule name -> reason). Both
are checked: an unknown name is an error, a declaration that does not hold fails the test
that checks it.

Hooks for layers that need more than ``wrap``:
:meth:`~vmstack.conformance.base.KitBase.make_inner` (another inner VM setup) and
:meth:`~vmstack.conformance.base.KitBase.extend_chain` (grow the chain through the layer).
Hypothesis draws chain lengths, requested blocks and budgets; its example count per property
is :attr:`~vmstack.conformance.base.KitBase.max_examples`, or ``--vmstack-max-examples N``
on the pytest command line.

This module imports pytest and Hypothesis: it is for test suites, and
:mod:`vmstack.conformance` imports it only when one of its names is asked for.
"""

from __future__ import annotations

from vmstack.conformance.contracts import (
    BudgetContract,
    DecisionContract,
    ErrorContract,
    ForwardingContract,
    ParsingContract,
    WrappingContract,
)

__all__ = ["LayerConformance"]


class LayerConformance(
    ForwardingContract,
    BudgetContract,
    ParsingContract,
    ErrorContract,
    DecisionContract,
    WrappingContract,
):
    """Mixin test class: every conformance test of a layer. Override :meth:`wrap`.

    Subclass it in a module pytest collects, under a name pytest collects (``Test...``).
    Set ``declarations`` and ``not_applicable`` when the layer is more than a
    pass-through (see :mod:`vmstack.conformance.kit`).
    """
