"""Account state of :class:`~vmstack.cchain.vm.CChainVM`: accounts, the state transition of
a block's transactions, and the state root as Ethereum computes it.

An :class:`Account` is a nonce, a balance and a code hash (only accounts a genesis gives code
have one other than the empty code's). The state root is the root of Ethereum's secure
account trie: key ``keccak256(address)``, value ``rlp([nonce, balance, EMPTY_ROOT,
code_hash])``; an empty account (nonce 0, balance 0, no code) is absent (EIP-161), so an
address never touched reads as nonce 0, balance 0. :class:`AccountTrie` is a persistent
Merkle Patricia trie: an update returns a new trie sharing every untouched node, and each
node's hash is computed once and kept, so the root of a block's post-state costs the nodes
on the touched paths only, and a processing block's state shares its parent's.

:class:`State` is one block's post-state: the accounts changed over its parent's state (a
processing block's, or the accepted base) and the trie after them. :func:`apply_block`
is the state transition, one flat rule per check (``InvalidBlock`` naming the transaction
index, sender, nonce and expected nonce):

- a transaction's nonce equals its sender's nonce in the state before it (a lower one is a
  replay, a higher one a gap; a second transaction of a sender with the same nonce in one
  block is a replay of the first);
- the sender can pay ``value + gas_limit * max price`` (``gas_price``, or
  ``max_fee_per_gas`` for the fee-market types);
- applying it moves the sender's nonce on by one, takes the fee ``gas_used * effective
  price`` (``min(max_fee, base_fee + tip)`` for the fee-market types) from the sender and
  gives it to the block's coinbase. On the Avalanche flavour that coinbase is coreth's
  blackhole address, so fees are burnt as coreth burns them; on the Ethereum flavour the
  whole fee goes to the coinbase (a simplification of EIP-1559, which burns the base fee);
- a successful transaction (its receipt's status, from the execution model) moves
  ``value`` from the sender to the recipient, or to the address a creation derives
  (``keccak256(rlp([sender, nonce]))[12:]``, which starts at nonce 1); a failed one pays
  its fee only;
- withdrawals (Ethereum) credit ``amount`` gwei to their address.

No EVM code runs: contracts keep the code a genesis gives them and no storage; blob fees
and EIP-7702 authorisations are not charged or applied.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import Final

import attrs

from vmstack.cchain.rlpbytes import encode_item, list_prefix
from vmstack.cchain.types import (
    AccessListTx,
    LegacyTx,
    Receipt,
    Transaction,
    Withdrawal,
)
from vmstack.checksum import frame, unframe
from vmstack.errors import InvalidBlock, StoreCorrupted
from vmstack.keccak import keccak256

__all__ = [
    "AcceptedState",
    "Account",
    "AccountTrie",
    "EMPTY_CODE_HASH",
    "EMPTY_TRIE_ROOT",
    "NOBODY",
    "State",
    "account_record",
    "apply_block",
    "contract_address",
    "effective_price",
    "max_price",
    "read_account_record",
    "read_state_head_record",
    "state_head_record",
    "view_trie",
]

#: ``keccak256(b"")``: the code hash of an account without code.
EMPTY_CODE_HASH: Final = keccak256(b"")
#: ``keccak256(rlp(b""))``: the root of an empty trie (and every account's storage root).
EMPTY_TRIE_ROOT: Final = keccak256(b"\x80")
_GWEI: Final = 10**9
_ROOT_AND_CODE_PREFIX: Final = b"\xa0"  # the RLP prefix of a 32-byte string
# An account's storage root item (always the empty trie's) and its code hash's prefix.
_STORAGE_ROOT_AND_CODE_PREFIX: Final = (
    _ROOT_AND_CODE_PREFIX + EMPTY_TRIE_ROOT + _ROOT_AND_CODE_PREFIX
)


def _uint(value: int) -> bytes:
    """An RLP integer: big-endian, no leading zeros (zero is the empty string)."""
    return value.to_bytes((value.bit_length() + 7) // 8, "big")


@attrs.frozen(slots=True)
class Account:
    """An account: ``nonce``, ``balance`` (wei) and ``code_hash``."""

    nonce: int = 0
    balance: int = 0
    code_hash: bytes = EMPTY_CODE_HASH

    @property
    def empty(self) -> bool:
        """Nonce 0, balance 0 and no code: absent from the trie (EIP-161)."""
        return self.nonce == 0 and self.balance == 0 and self.code_hash == EMPTY_CODE_HASH

    def encode(self) -> bytes:
        """The trie value: ``rlp([nonce, balance, EMPTY_TRIE_ROOT, code_hash])``."""
        nonce, balance = self.nonce, self.balance
        payload = (
            _string(nonce.to_bytes((nonce.bit_length() + 7) // 8, "big"))
            + _string(balance.to_bytes((balance.bit_length() + 7) // 8, "big"))
            + _STORAGE_ROOT_AND_CODE_PREFIX
            + self.code_hash
        )
        return list_prefix(len(payload)) + payload

    @classmethod
    def decode(cls, data: bytes) -> Account:
        """The account :meth:`encode` wrote; ``StoreCorrupted`` for other bytes."""
        import rlp

        try:
            nonce, balance, storage_root, code_hash = rlp.decode(data, strict=True)
        except (rlp.DecodingError, ValueError):
            raise StoreCorrupted("a stored account is not an account's RLP") from None
        if storage_root != EMPTY_TRIE_ROOT or len(code_hash) != 32:
            raise StoreCorrupted("a stored account has a malformed root or code hash")
        account = cls(int.from_bytes(nonce, "big"), int.from_bytes(balance, "big"), code_hash)
        if account.encode() != data:
            raise StoreCorrupted("a stored account is not in canonical form")
        return account


NOBODY: Final = Account()


# --- the persistent account trie -------------------------------------------------------


_SHORT_PREFIXES: Final = tuple(bytes((0x80 + n,)) for n in range(56))
# Nibble paths are bytes of values 0-15; these tables turn hex digits into nibbles and back.
_TO_NIBBLES: Final = bytes.maketrans(b"0123456789abcdef", bytes(range(16)))
_TO_HEX: Final = bytes.maketrans(bytes(range(16)), b"0123456789abcdef")


def _string(data: bytes) -> bytes:
    """The RLP string of ``data`` (the same bytes as ``encode_item``)."""
    length = len(data)
    if length == 1 and data[0] < 0x80:
        return data
    if length < 56:
        return _SHORT_PREFIXES[length] + data
    return encode_item(data)


def _hex_prefix(path: bytes, leaf: bool) -> bytes:
    """The hex-prefix encoding of a nibble path (Ethereum's compact encoding)."""
    flag = 0x20 if leaf else 0
    if len(path) % 2:
        return bytes((flag | 0x10 | path[0],)) + bytes.fromhex(path[1:].translate(_TO_HEX).decode())
    return bytes((flag,)) + bytes.fromhex(path.translate(_TO_HEX).decode())


class _Node:
    __slots__ = ("_ref",)

    def __init__(self) -> None:
        self._ref: bytes | None = None

    def encode(self) -> bytes:
        raise NotImplementedError

    def ref(self) -> bytes:
        """How a parent refers to this node: its RLP if shorter than 32 bytes, else the RLP
        string of its hash. Computed once."""
        ref = self._ref
        if ref is None:
            encoded = self.encode()
            ref = self._ref = encoded if len(encoded) < 32 else b"\xa0" + keccak256(encoded)
        return ref


class _Leaf(_Node):
    __slots__ = ("path", "value")

    def __init__(self, path: bytes, value: bytes) -> None:
        self._ref = None
        self.path = path
        self.value = value

    def encode(self) -> bytes:
        payload = _string(_hex_prefix(self.path, True)) + _string(self.value)
        return list_prefix(len(payload)) + payload


class _Extension(_Node):
    __slots__ = ("child", "path")

    def __init__(self, path: bytes, child: _Node) -> None:
        self._ref = None
        self.path = path
        self.child = child

    def encode(self) -> bytes:
        payload = _string(_hex_prefix(self.path, False)) + (self.child._ref or self.child.ref())
        return list_prefix(len(payload)) + payload


class _Branch(_Node):
    __slots__ = ("children",)

    def __init__(self, children: tuple[_Node | None, ...]) -> None:
        self._ref = None
        self.children = children

    def encode(self) -> bytes:
        # A child's cached reference is read in place (most children's are cached: only
        # the nodes on the paths a block touched are new).
        payload = (
            b"".join(
                [
                    b"\x80" if child is None else (child._ref or child.ref())
                    for child in self.children
                ]
            )
            + b"\x80"
        )
        return list_prefix(len(payload)) + payload


def _common(a: bytes, b: bytes) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _with_path(prefix: bytes, node: _Node) -> _Node:
    """``node`` reached through the extra nibbles ``prefix`` (merged into its own path)."""
    if not prefix:
        return node
    if isinstance(node, _Leaf):
        return _Leaf(prefix + node.path, node.value)
    if isinstance(node, _Extension):
        return _Extension(prefix + node.path, node.child)
    return _Extension(prefix, node)


def _branch_of(children: list[_Node | None]) -> _Node | None:
    """A branch over ``children``, collapsed when fewer than two remain."""
    present = [i for i, child in enumerate(children) if child is not None]
    if not present:
        return None
    if len(present) == 1:
        only = present[0]
        child = children[only]
        assert child is not None
        return _with_path(bytes((only,)), child)
    return _Branch(tuple(children))


def _put(node: _Node | None, path: bytes, value: bytes | None) -> _Node | None:
    """``node`` with ``path`` set to ``value`` (removed when ``None``), a new node sharing
    every untouched one (``node`` itself when nothing changes under a branch). Every key has
    the same length, so no branch holds a value."""
    if type(node) is _Branch:
        # The common case first (the upper levels of the trie are branches).
        branch_children = node.children
        index = path[0]
        old = branch_children[index]
        child = _put(old, path[1:], value)
        if child is old:
            return node
        slots = list(branch_children)
        slots[index] = child
        if child is not None:
            # A branch has two children at least; with this slot filled it still has.
            return _Branch(tuple(slots))
        return _branch_of(slots)
    if node is None:
        return None if value is None else _Leaf(path, value)
    if isinstance(node, _Leaf):
        if node.path == path:
            if value == node.value:
                return node
            return None if value is None else _Leaf(path, value)
        if value is None:
            return node
        n = _common(node.path, path)
        children: list[_Node | None] = [None] * 16
        children[node.path[n]] = _Leaf(node.path[n + 1 :], node.value)
        children[path[n]] = _Leaf(path[n + 1 :], value)
        return _with_path(path[:n], _Branch(tuple(children)))
    if isinstance(node, _Extension):
        n = _common(node.path, path)
        if n == len(node.path):
            child = _put(node.child, path[n:], value)
            if child is node.child:
                return node
            return None if child is None else _with_path(node.path, child)
        if value is None:
            return node
        children = [None] * 16
        children[node.path[n]] = _with_path(node.path[n + 1 :], node.child)
        children[path[n]] = _Leaf(path[n + 1 :], value)
        return _with_path(path[:n], _Branch(tuple(children)))
    raise TypeError(f"not a trie node: {node!r}")


def _nibbles(key: bytes) -> bytes:
    return key.hex().encode().translate(_TO_NIBBLES)


class AccountTrie:
    """A persistent secure account trie: :meth:`updated` returns a new trie, this one
    unchanged, and node hashes are cached, so roots cost the touched paths only."""

    __slots__ = ("_root",)

    def __init__(self, root: _Node | None = None) -> None:
        self._root = root

    def updated(self, accounts: Iterable[tuple[bytes, Account]]) -> AccountTrie:
        """The trie with each ``(hashed address, account)`` set (an empty account
        removed)."""
        root = self._root
        for hashed, account in accounts:
            root = _put(root, _nibbles(hashed), None if account.empty else account.encode())
        return AccountTrie(root)

    @property
    def root_hash(self) -> bytes:
        """The state root: keccak256 of the root node's RLP (:data:`EMPTY_TRIE_ROOT` when
        empty)."""
        root = self._root
        if root is None:
            return EMPTY_TRIE_ROOT
        ref = root.ref()
        return ref[1:] if len(ref) == 33 and ref[0] == 0xA0 else keccak256(root.encode())


# --- one block's post-state ------------------------------------------------------------


class State:
    """The post-state of a block: the accounts it changed (by address) over ``parent`` (a
    processing block's state), or over the accepted base read with ``base`` when
    ``parent`` is ``None``; and its trie. Reading walks the parents, then the base."""

    __slots__ = ("_base", "changed", "parent", "trie")

    def __init__(
        self,
        parent: State | None,
        base: AcceptedState | None,
        changed: dict[bytes, Account],
        trie: AccountTrie,
    ) -> None:
        self.parent = parent
        self._base = base
        self.changed = changed
        self.trie = trie

    @property
    def root(self) -> bytes:
        return self.trie.root_hash

    def account(self, address: bytes) -> Account:
        """The account of ``address`` in this state (nonce 0, balance 0 if untouched)."""
        state: State | None = self
        base = self._base
        while state is not None:
            found = state.changed.get(address)
            if found is not None:
                return found
            base = state._base
            state = state.parent
        if base is None:
            return NOBODY
        return base.get(address, NOBODY)


def max_price(tx: Transaction) -> int:
    """The most a unit of gas may cost ``tx``: its gas price, or its max fee."""
    if isinstance(tx, LegacyTx | AccessListTx):
        return tx.gas_price
    return int(getattr(tx, "max_fee_per_gas"))  # noqa: B009


def effective_price(tx: Transaction, base_fee: int) -> int:
    """What a unit of gas costs ``tx`` in a block of ``base_fee``: its gas price, or
    ``min(max_fee, base_fee + tip)``."""
    if isinstance(tx, LegacyTx | AccessListTx):
        return tx.gas_price
    tip = int(getattr(tx, "max_priority_fee_per_gas"))  # noqa: B009
    return min(max_price(tx), base_fee + tip)


def contract_address(sender: bytes, nonce: int) -> bytes:
    """The address a creation by ``sender`` at ``nonce`` gives its contract."""
    return keccak256(encode_item([sender, _uint(nonce)]))[12:]


def apply_block(
    parent: State | None,
    base: AcceptedState,
    transactions: Sequence[Transaction],
    senders: Sequence[bytes],
    receipts: Sequence[Receipt],
    *,
    coinbase: bytes,
    base_fee: int,
    withdrawals: Sequence[Withdrawal] = (),
) -> State:
    """The post-state of a block over ``parent`` (``None``: the accepted ``base``), by the
    rules of the module docstring; ``InvalidBlock`` naming the first transaction that
    breaks one."""
    changed: dict[bytes, Account] = {}
    view = State(parent, base if parent is None else None, changed, AccountTrie())

    get = view.account

    for index, (tx, sender, receipt) in enumerate(
        zip(transactions, senders, receipts, strict=True)
    ):
        account = get(sender)
        if tx.nonce != account.nonce:
            kind = "a replay" if tx.nonce < account.nonce else "a nonce gap"
            raise InvalidBlock(
                f"transaction {index} from 0x{sender.hex()} has nonce "
                f"{tx.nonce}, expected {account.nonce} ({kind})"
            )
        cost = tx.value + tx.gas * max_price(tx)
        if account.balance < cost:
            raise InvalidBlock(
                f"transaction {index} from 0x{sender.hex()} (nonce {tx.nonce},"
                f" expected {account.nonce}) costs up to {cost} wei, its "
                f"balance is {account.balance} (unaffordable)"
            )
        previous = receipts[index - 1].cumulative_gas_used if index else 0
        fee = (receipt.cumulative_gas_used - previous) * effective_price(tx, base_fee)
        moved = tx.value if receipt.status == 1 else 0
        changed[sender] = Account(
            account.nonce + 1, account.balance - fee - moved, account.code_hash
        )
        if moved or (tx.to is None and receipt.status == 1):
            if tx.to is None:
                target = contract_address(sender, tx.nonce)
                created = get(target)
                changed[target] = Account(
                    max(created.nonce, 1), created.balance + moved, created.code_hash
                )
            else:
                recipient = get(tx.to)
                changed[tx.to] = Account(
                    recipient.nonce, recipient.balance + moved, recipient.code_hash
                )
        if fee:
            paid = get(coinbase)
            changed[coinbase] = Account(paid.nonce, paid.balance + fee, paid.code_hash)
    for withdrawal in withdrawals:
        if withdrawal.amount:
            credited = get(withdrawal.address)
            changed[withdrawal.address] = Account(
                credited.nonce, credited.balance + withdrawal.amount * _GWEI, credited.code_hash
            )
    parent_trie = view_trie(parent, base)
    view.trie = parent_trie.updated(
        (_hashed_address(address), account) for address, account in changed.items()
    )
    return view


@functools.lru_cache(maxsize=1 << 13)
def _hashed_address(address: bytes) -> bytes:
    """``keccak256(address)``, an account's trie key, kept for the addresses hashed lately
    (a block's senders and its coinbase come back block after block)."""
    return keccak256(address)


def view_trie(parent: State | None, base: AcceptedState) -> AccountTrie:
    """The trie under a new block: its parent's, or the accepted base's."""
    return base.trie if parent is None else parent.trie


# --- the accepted state in the store ---------------------------------------------------


def account_record(key: bytes, account: Account) -> bytes:
    """What the store keeps under ``key`` of an account: its trie value, framed with a
    checksum over key and value as every stored value is (the one place this module frames
    a stored value), so an account copied under another address's key fails its check."""
    return frame(key, account.encode())


def read_account_record(key: bytes | memoryview, stored: bytes | memoryview) -> Account:
    """The account :func:`account_record` stored under ``key``; ``StoreCorrupted`` for
    damaged bytes or another key's value."""
    return Account.decode(bytes(unframe(bytes(key), stored, "a stored account")))


def state_head_record(key: bytes, block_id: bytes, root: bytes) -> bytes:
    """The state head stored under ``key``: the block the stored accepted state is after,
    and its root."""
    return frame(key, block_id + root)


def read_state_head_record(key: bytes, stored: bytes | memoryview) -> tuple[bytes, bytes]:
    """``(block ID, state root)`` of a stored state head; ``StoreCorrupted`` if damaged."""
    value = bytes(unframe(key, stored, "the stored state head", length=64))
    return value[:32], value[32:]


class AcceptedState:
    """The state after the last accepted block ``block_id``: every non-empty account by
    address, and the trie over them. A mapping for :class:`State` to read through."""

    __slots__ = ("accounts", "block_id", "trie")

    def __init__(
        self, block_id: bytes, accounts: dict[bytes, Account], trie: AccountTrie | None = None
    ) -> None:
        self.block_id = block_id
        self.accounts = accounts
        self.trie = (
            trie
            if trie is not None
            else AccountTrie().updated(
                (keccak256(address), account) for address, account in accounts.items()
            )
        )

    def get(self, address: bytes, default: Account = NOBODY) -> Account:
        return self.accounts.get(address, default)

    def advance(self, block_id: bytes, state: State) -> None:
        """Move on to ``state``, the post-state of the accepted child ``block_id``."""
        accounts = self.accounts
        for address, account in state.changed.items():
            if account.empty:
                accounts.pop(address, None)
            else:
                accounts[address] = account
        self.trie = state.trie
        self.block_id = block_id
        state.parent = None
        state._base = self
