"""The B-tree pages a key range's scan walks, checked before liblmdb walks them.

liblmdb trusts its pages: a page header damaged on disk (a leaf whose flags now say branch,
an offset past the page) trips one of its assertions (``Assertion 'IS_LEAF(mp)' failed in
mdb_cursor_next()``), which aborts the process with ``SIGABRT``, or reads past the page.
:func:`check_range_pages` reads, with ``os.pread`` on the data file, every page a cursor
scan of one key prefix visits: the root of the main database from the meta page of the read
transaction, each branch page on the way down to the range, every leaf in it, the leaf
after it (where a scan learns the range ended) and each overflow page a value there lives
in; each must be the kind of page its level needs (branch above, leaf at the tree's depth,
overflow for a big value), name its own page number, lie within the pages the meta counts,
and hold its nodes inside itself. Anything else is :class:`~vmstack.errors.StoreCorrupted`
naming the data file and the page, and the scan is never started.

The layout is LMDB 0.9's in the machine's byte order and word size (as in
:mod:`vmstack.store.lmdb.files`): a 16-byte page header (``pgno``, pad, flags, lower,
upper; an overflow page's page count in place of lower and upper), then the node offsets;
a node is ``lo, hi, flags, key size`` (u16 each), its key, then its value (a leaf; an
8-byte overflow page number for a big value) or, in a branch, the child page number
``lo | hi << 16 | flags << 32``.
"""

from __future__ import annotations

import os
import struct
from typing import Final

from vmstack.errors import StoreCorrupted
from vmstack.store.lmdb.files import _PAGE_HEADER, _read_meta

__all__ = ["check_range_pages"]

_P_BRANCH: Final = 0x01
_P_LEAF: Final = 0x02
_P_OVERFLOW: Final = 0x04
_F_BIGDATA: Final = 0x01
_NODE: Final = struct.Struct("@HHHH")
_PGNO: Final = struct.Struct("@N")
_U16: Final = struct.Struct("@H")
_OVERFLOW_PAGES: Final = struct.Struct("@I")
_NO_PAGE: Final = (1 << (8 * _PGNO.size)) - 1
#: The main database's record in the meta: its depth and root page.
_MAIN_DEPTH_FIELD: Final = 14
_MAIN_ROOT_FIELD: Final = 19
_LAST_PAGE_FIELD: Final = 20
_TXNID_FIELD: Final = 21
_PAGE_SIZE_FIELD: Final = 4


def _prefix_end(prefix: bytes) -> bytes | None:
    """The smallest key above every key that starts with ``prefix`` (``None``: none)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes((stripped[-1] + 1,))


class _Pages:
    def __init__(self, descriptor: int, data_path: str, page_size: int, last_page: int) -> None:
        self.descriptor = descriptor
        self.data_path = data_path
        self.page_size = page_size
        self.last_page = last_page

    def damaged(self, pgno: int, what: str) -> StoreCorrupted:
        return StoreCorrupted(f"the LMDB data file {self.data_path}: page {pgno} {what}")

    def read(self, pgno: int, kinds: int) -> tuple[bytes, int]:
        """Page ``pgno``'s bytes and flags, checked to be of one of ``kinds``."""
        if not 2 <= pgno <= self.last_page:
            raise self.damaged(pgno, f"is outside the data pages 2 to {self.last_page}")
        page = os.pread(self.descriptor, self.page_size, pgno * self.page_size)
        if len(page) != self.page_size:
            raise self.damaged(pgno, "is cut short")
        own, _, flags, _, _ = _PAGE_HEADER.unpack_from(page)
        if own != pgno:
            raise self.damaged(pgno, f"names itself page {own}")
        if flags & ~0x10 != kinds:  # P_DIRTY aside
            raise self.damaged(pgno, f"has flags 0x{flags:x} where 0x{kinds:x} belongs")
        return page, flags

    def nodes(self, pgno: int, page: bytes) -> list[tuple[int, int, int, bytes, int]]:
        """Each node's ``lo, hi, flags, key`` and the offset of what follows its key."""
        _, _, _, lower, upper = _PAGE_HEADER.unpack_from(page)
        header = _PAGE_HEADER.size
        if lower < header or lower % 2 or not lower <= upper <= self.page_size:
            raise self.damaged(pgno, f"has lower {lower} and upper {upper}")
        count = (lower - header) // 2
        if count == 0:
            raise self.damaged(pgno, "holds no node")
        out = []
        for index in range(count):
            (at,) = _U16.unpack_from(page, header + 2 * index)
            if not upper <= at <= self.page_size - _NODE.size:
                raise self.damaged(pgno, f"node {index} at {at} is outside its node area")
            lo, hi, flags, key_size = _NODE.unpack_from(page, at)
            key_end = at + _NODE.size + key_size
            if key_end > self.page_size:
                raise self.damaged(pgno, f"node {index}'s key runs past the page")
            out.append((lo, hi, flags, page[at + _NODE.size : key_end], key_end))
        return out

    def check_leaf(self, pgno: int, page: bytes) -> None:
        for index, (lo, hi, flags, _, value_at) in enumerate(self.nodes(pgno, page)):
            size = lo | hi << 16
            if flags & ~_F_BIGDATA:
                raise self.damaged(pgno, f"node {index} has flags 0x{flags:x} (no sub-databases)")
            if not flags & _F_BIGDATA:
                if value_at + size > self.page_size:
                    raise self.damaged(pgno, f"node {index}'s value runs past the page")
                continue
            if value_at + _PGNO.size > self.page_size:
                raise self.damaged(pgno, f"node {index}'s overflow page number runs past it")
            (first,) = _PGNO.unpack_from(page, value_at)
            overflow, _ = self.read(first, _P_OVERFLOW)
            (pages,) = _OVERFLOW_PAGES.unpack_from(overflow, _PAGE_HEADER.size - 4)
            if pages < 1 or first + pages - 1 > self.last_page:
                raise self.damaged(first, f"counts {pages} overflow pages past the data")
            if size > pages * self.page_size - _PAGE_HEADER.size:
                raise self.damaged(first, f"holds less than the {size} bytes of its value")

    def walk(self, pgno: int, depth: int, low: bytes, high: bytes | None) -> None:
        """Check the subtree at ``pgno`` (``depth`` levels, 1 a leaf) over the keys from
        ``low`` to ``high`` with one child past ``high`` on every level."""
        if depth == 1:
            page, _ = self.read(pgno, _P_LEAF)
            self.check_leaf(pgno, page)
            return
        page, _ = self.read(pgno, _P_BRANCH)
        nodes = self.nodes(pgno, page)
        keys = [key for _, _, _, key, _ in nodes]
        first = 0
        for index in range(1, len(keys)):
            if keys[index] <= low:
                first = index
        last = len(keys) - 1
        if high is not None:
            for index in range(1, len(keys)):
                if keys[index] >= high:
                    last = index
                    break
        for lo, hi, flags, _, _ in nodes[first : last + 1]:
            self.walk(lo | hi << 16 | flags << 32, depth - 1, low, high)


def check_range_pages(path: str, txn_id: int, prefix: bytes) -> bool:
    """Check the pages a scan of ``prefix`` in the read transaction ``txn_id`` of the LMDB
    environment at ``path`` visits (see the module docstring). Call it while that
    transaction is open, so that none of its pages is reused meanwhile. Returns ``False``
    (nothing checked) when neither meta page is that transaction's any more (a writer has
    committed twice since it began) or a meta page is not LMDB's (left to LMDB);
    :class:`StoreCorrupted` naming the data file and page for a damaged page."""
    data_path = os.path.join(path, "data.mdb")
    descriptor = os.open(data_path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        first = _read_meta(descriptor, 0)
        if first is None:
            return False
        page_size = first[_PAGE_SIZE_FIELD]
        second = _read_meta(descriptor, page_size)
        meta = next(
            (m for m in (first, second) if m is not None and m[_TXNID_FIELD] == txn_id), None
        )
        if meta is None:
            return False
        root, depth = meta[_MAIN_ROOT_FIELD], meta[_MAIN_DEPTH_FIELD]
        if root == _NO_PAGE:
            return True
        pages = _Pages(descriptor, data_path, page_size, meta[_LAST_PAGE_FIELD])
        if not 1 <= depth <= 32:
            raise pages.damaged(root, f"is the root of a tree of impossible depth {depth}")
        pages.walk(root, depth, prefix, _prefix_end(prefix))
        return True
    finally:
        os.close(descriptor)
