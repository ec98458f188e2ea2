"""The contract mixins of the kit, one module per promise a layer makes.

Each mixin is a set of pytest tests over :class:`~vmstack.conformance.base.KitBase`; each test
checks one named rule (see :data:`~vmstack.conformance.declarations.RULES`).
:class:`~vmstack.conformance.LayerConformance` is all of them together; a test class may
also inherit only some.

- :class:`ForwardingContract` (:mod:`.forwarding`): batched calls reach the VM below as ONE
  call (or are refused when it cannot batch, or answered by a layer that declares it
  answers them itself); the capability is visible; answers do not depend on the path or on
  the layer; the one-block methods forward.
- :class:`BudgetContract` (:mod:`.budgets`): the rules of ``get_ancestors`` answers: order,
  the ``[]`` sentinel, the first block, count, size and time budgets over the whole answer,
  long answers, bad limits; every element exactly ``bytes``.
- :class:`ParsingContract` (:mod:`.parsing`): ``batched_parse_block``: input order, ``[]``
  for ``[]``, all-or-nothing with the failing index.
- :class:`ErrorContract` (:mod:`.errors`): errors from below come up unchanged (the very
  object), a failure on the first block is not turned into ``[]`` and a mid-walk failure
  gives the partial answer.
- :class:`DecisionContract` (:mod:`.decisions`): ``verify``, ``accept`` and ``reject``
  reach the block below for blocks from every source; a rejected or replaced block is not
  served afterwards.
- :class:`WrappingContract` (:mod:`.wrapping`): every block returned is a ``Block`` of its
  own that shows the fields of the block below; parent IDs follow the chain; the
  declarations hold.

pytest rewrites the assertions of every module of this package (the plugin registers the
package), so a failing rule shows the values it compared.
"""

from vmstack.conformance.contracts.budgets import BudgetContract
from vmstack.conformance.contracts.decisions import DecisionContract
from vmstack.conformance.contracts.errors import ErrorContract
from vmstack.conformance.contracts.forwarding import ForwardingContract
from vmstack.conformance.contracts.parsing import ParsingContract
from vmstack.conformance.contracts.wrapping import WrappingContract

__all__ = [
    "BudgetContract",
    "DecisionContract",
    "ErrorContract",
    "ForwardingContract",
    "ParsingContract",
    "WrappingContract",
]
