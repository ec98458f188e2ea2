"""The wrapping contract: every block returned is a ``Block`` of the layer's own that shows
the fields of the block below, with the right types; parent IDs follow the chain; and the
test class's declarations are true of the layer (rule ``kit.declarations-hold``). Each other
test checks one rule named ``wrapping.*``.
"""

from __future__ import annotations

from vmstack.batching import MAX_CONTAINERS_LEN, batched_parse_block, get_ancestors
from vmstack.conformance.base import KitBase
from vmstack.conformance.checks import batched
from vmstack.conformance.declarations import DECLARATIONS_HOLD, Declaration, rule
from vmstack.conformance.doubles import MemoryBlock
from vmstack.conformance.stacks import CAPABILITIES, KIT_TIME_BUDGET, KitFault, KitStack
from vmstack.errors import BatchingNotImplemented
from vmstack.interfaces import Block

__all__ = ["WrappingContract"]


class WrappingContract(KitBase):
    """Blocks are the layer's own, show the fields below, and the declarations hold."""

    def assert_shows_below(self, stack: KitStack, block: Block, what: str) -> None:
        """``block`` is a ``Block`` that is not the inner VM's own object and shows the
        fields of the block below with its ID (a layer with blocks of its own: the height)."""
        self.check_block(block, what)
        assert not isinstance(block, MemoryBlock), (
            f"{what} returned the inner VM's own block; a layer returns blocks of its own "
            "(wrappers or proxies) so that decisions pass through it"
        )
        below = stack.inner.known_block(block.id)
        if below is None:
            assert self.own_blocks, f"{what} returned a block with an ID the VM below does not know"
            return
        assert (block.id, block.parent_id, block.height, block.timestamp, bytes(block)) == (
            below.id,
            below.parent_id,
            below.height,
            below.timestamp,
            bytes(below),
        ), (
            f"the block {what} returned must show id, parent_id, height, timestamp and bytes "
            "of the block below"
        )

    @CAPABILITIES
    @rule(
        "wrapping.blocks",
        "every block the layer returns is a Block of its own (not the inner VM's object) "
        "showing the fields of the block below",
    )
    def test_returned_blocks_are_the_layers_own(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches)
        chain = self.kit_chain(stack)
        layer = stack.layer
        self.assert_shows_below(stack, layer.get_block(stack.tip), "get_block")
        self.assert_shows_below(stack, layer.parse_block(chain[-1]), "parse_block")
        self.assert_shows_below(stack, layer.build_block(), "build_block")
        for block in batched_parse_block(layer, chain[1:4]):
            self.assert_shows_below(stack, block, "batched_parse_block (engine helper)")
        if self.layer_batches(stack):
            for block in batched(layer).batched_parse_block(chain[1:4]):
                self.assert_shows_below(stack, block, "the layer's batched_parse_block")

    @CAPABILITIES
    @rule(
        "wrapping.types",
        "every element of a get_ancestors answer is exactly bytes (not bytearray or "
        "memoryview), and every block returned satisfies Block with 32-byte IDs and int "
        "height and timestamp",
    )
    def test_answers_have_the_right_types(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches, blocks=5)
        chain = self.kit_chain(stack)
        layer = stack.layer
        self.check_answer_types(
            get_ancestors(layer, stack.tip, clock=stack.clock), "get_ancestors (engine helper)"
        )
        if self.layer_batches(stack):
            self.check_answer_types(
                batched(layer).get_ancestors(stack.tip, 10, MAX_CONTAINERS_LEN, KIT_TIME_BUDGET),
                "the layer's get_ancestors",
            )
            for block in batched(layer).batched_parse_block(chain[1:]):
                self.check_block(block, "the layer's batched_parse_block")
        for block in batched_parse_block(layer, chain[1:]):
            self.check_block(block, "batched_parse_block (engine helper)")
        self.check_block(layer.get_block(stack.tip), "get_block")
        self.check_block(layer.parse_block(chain[-1]), "parse_block")
        self.check_block(layer.build_block(), "build_block")
        assert type(layer.last_accepted()) is bytes, "last_accepted must return bytes"
        assert type(layer.get_block_id_at_height(1)) is bytes, (
            "get_block_id_at_height must return bytes"
        )

    @CAPABILITIES
    @rule(
        "wrapping.parent-ids",
        "every block names its parent's ID as the layer serves it, from every method, "
        "and a built block names the preferred block",
    )
    def test_parent_ids_follow_the_chain(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches, blocks=6)
        chain = self.kit_chain(stack)
        layer = stack.layer
        sources: list[tuple[str, list[Block]]] = [
            ("get_block", [layer.get_block(block_id) for block_id in stack.ids[1:]]),
            ("parse_block", [layer.parse_block(data) for data in chain[1:]]),
            ("batched_parse_block", batched_parse_block(layer, chain[1:])),
        ]
        for what, blocks in sources:
            assert [block.parent_id for block in blocks] == list(stack.ids[:-1]), (
                f"the blocks from {what} must name their parents' IDs"
            )
        for preferred in (stack.ids[3], stack.tip, stack.ids[1]):
            layer.set_preference(preferred)
            assert layer.build_block().parent_id == preferred, (
                "a built block must name the preferred block as its parent"
            )

    @CAPABILITIES
    @rule(
        DECLARATIONS_HOLD,
        "every declaration of the test class is true of the layer (a "
        "declaration that no longer holds must be removed)",
    )
    def test_declarations_hold(self, inner_batches: bool) -> None:
        stack = self.kit_stack(batching=inner_batches, blocks=4)
        layer = stack.layer
        if self.answers_itself and not inner_batches:
            try:
                batched(layer).get_ancestors(stack.tip, 3, MAX_CONTAINERS_LEN, KIT_TIME_BUDGET)
            except BatchingNotImplemented:
                raise AssertionError(
                    "declared answers-batched-calls-itself, but the layer refused a batched "
                    "call over a VM that cannot batch"
                ) from None
        if self.declares(Declaration.SERVES_BLOCKS_FROM_MEMORY):
            layer.get_block(stack.tip)
            stack.settle()
            layer.get_block(stack.tip)
            assert not stack.inner.calls_to("get_block"), (
                "declared serves-blocks-from-memory, but a repeated get_block of an "
                "accepted block was read below again"
            )
        if self.own_blocks:
            assert any(stack.inner.known_block(block_id) is None for block_id in stack.ids[1:]), (
                "declared blocks-of-its-own, but every block the layer serves has the ID of "
                "a block below"
            )
        if self.boundary:
            fault = KitFault("injected into last_accepted")
            stack.inner.fail_next("last_accepted", fault)
            try:
                layer.last_accepted()
            except Exception as raised:
                assert raised is not fault, (
                    "declared process-boundary, but an error came up as the very object "
                    "raised below"
                )
