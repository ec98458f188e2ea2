"""The pull gossiper and the handler that answers it and takes pushes (avalanchego's
``PullGossiper`` and ``Handler``).

The pull gossiper sends its set's salted bloom filter; a peer's :class:`GossipHandler`
answers with what it holds that the filter does not contain, up to a target size. Neither
knows a transport: the gossiper hands each request payload to ``request(payload,
on_response)`` and the transport later calls ``on_response(node_id, response)`` with the
peer's answer (a failed request is simply never answered); the transport hands a peer's
payloads to :class:`GossipRouter`, which strips the handler prefix and answers requests.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from vmstack.errors import MalformedRequest
from vmstack.gossip.bloom import bloom_hash
from vmstack.gossip.messages import (
    TRANSACTION_GOSSIP_HANDLER,
    marshal_pull_request,
    marshal_pull_response,
    parse_pull_request,
    parse_pull_response,
    parse_push_gossip,
    prefix_handler,
    split_handler,
)
from vmstack.gossip.sets import HandlerSet, Marshaller, PullGossiperSet

__all__ = [
    "GossipHandler",
    "GossipRouter",
    "PullGossiper",
    "ReceiveStatistics",
    "ResponseCallback",
]

T = TypeVar("T")

#: What the transport calls with a peer's answer to a pull request: its node ID and the
#: (unprefixed) ``PullGossipResponse``.
ResponseCallback = Callable[[bytes, bytes], None]


@dataclass
class ReceiveStatistics:
    """What arrived: messages, items and their bytes; items that did not unmarshal
    (``unreadable``), that the set refused (``refused``, duplicates included) and that it
    took (``added``)."""

    messages: int = 0
    items: int = 0
    item_bytes: int = 0
    unreadable: int = 0
    refused: int = 0
    added: int = 0


def _receive(
    lock: threading.Lock,
    statistics: ReceiveStatistics,
    marshaller: Marshaller[T],
    add: Callable[[T], None],
    parse: Callable[[bytes], list[bytes]],
    message: bytes,
) -> None:
    """The items of ``message`` (as ``parse`` reads it) unmarshalled and added, each
    counted in ``statistics`` under ``lock``; a message that does not parse is counted as
    unreadable and dropped."""
    try:
        gossip = parse(message)
    except MalformedRequest:
        with lock:
            statistics.unreadable += 1
        return
    with lock:
        statistics.messages += 1
        for data in gossip:
            statistics.items += 1
            statistics.item_bytes += len(data)
            try:
                item = marshaller.unmarshal(data)
            except ValueError:
                statistics.unreadable += 1
                continue
            try:
                add(item)
            except ValueError:
                statistics.refused += 1
                continue
            statistics.added += 1


class PullGossiper(Generic[T]):
    """Asks peers for what its set lacks (upstream's ``PullGossiper``): each
    :meth:`gossip` marshals the set's bloom filter and salt into one handler-prefixed
    ``PullGossipRequest`` and calls ``request(payload, self.handle_response)``
    ``poll_size`` times (coreth: 1)."""

    def __init__(
        self,
        marshaller: Marshaller[T],
        item_set: PullGossiperSet[T],
        request: Callable[[bytes, ResponseCallback], None],
        *,
        poll_size: int = 1,
        handler_id: int = TRANSACTION_GOSSIP_HANDLER,
    ) -> None:
        if poll_size < 0:
            raise ValueError(f"poll_size cannot be negative, not {poll_size}")
        self._marshaller = marshaller
        self._set = item_set
        self._request = request
        self._poll_size = poll_size
        self._handler_id = handler_id
        self._lock = threading.Lock()
        self.requests = 0
        self.request_bytes = 0
        self.statistics = ReceiveStatistics()

    def gossip(self) -> None:
        """Send the request ``poll_size`` times."""
        bloom, salt = self._set.bloom_filter()
        payload = prefix_handler(self._handler_id, marshal_pull_request(bloom.marshal(), salt))
        for _ in range(self._poll_size):
            with self._lock:
                self.requests += 1
                self.request_bytes += len(payload)
            self._request(payload, self.handle_response)

    def handle_response(self, node_id: bytes, response: bytes) -> None:
        """Add the items of a peer's ``PullGossipResponse`` to the set; a response that
        does not parse is counted as unreadable and dropped."""
        _receive(
            self._lock,
            self.statistics,
            self._marshaller,
            self._set.add,
            parse_pull_response,
            response,
        )


class GossipHandler(Generic[T]):
    """Answers pull requests from, and adds pushed items to, ``item_set`` (upstream's
    ``Handler``).

    :meth:`app_request` goes through the set in its order, skipping what the request's
    filter contains under its salt (a bloom hit), and stops once the marshalled items pass
    ``target_response_size`` bytes (the item that crosses it is still sent). ``hits`` and
    ``looked_at`` total the hits and the items looked at over all requests;
    ``last_hit_rate`` is the latest request's ``100 * hits / looked at`` as upstream's
    histogram observes it (``None`` until a request finds the set non-empty; an empty set
    observes nothing).
    """

    def __init__(
        self, marshaller: Marshaller[T], item_set: HandlerSet[T], *, target_response_size: int
    ) -> None:
        if target_response_size < 0:
            raise ValueError("target response size cannot be negative")
        self._marshaller = marshaller
        self._set = item_set
        self._target_response_size = target_response_size
        self._lock = threading.Lock()
        self.hits = 0
        self.looked_at = 0
        self.last_hit_rate: float | None = None
        self.responses = 0
        self.response_bytes = 0
        self.statistics = ReceiveStatistics()

    def app_request(self, request: bytes) -> bytes:
        """The ``PullGossipResponse`` to an unprefixed ``PullGossipRequest``;
        :class:`~vmstack.errors.MalformedRequest` for one that does not parse."""
        bloom, salt = parse_pull_request(request)
        hits = 0
        total = 0
        size = 0
        gossip: list[bytes] = []
        for item in self._set.iterate():
            total += 1
            if bloom.contains(bloom_hash(self._marshaller.gossip_id(item), salt)):
                hits += 1
                continue
            data = self._marshaller.marshal(item)
            gossip.append(data)
            size += len(data)
            if size > self._target_response_size:
                break
        response = marshal_pull_response(gossip)
        with self._lock:
            self.hits += hits
            self.looked_at += total
            if total:
                self.last_hit_rate = 100 * hits / total
            self.responses += 1
            self.response_bytes += len(response)
        return response

    def app_gossip(self, message: bytes) -> None:
        """Add the items of an unprefixed ``PushGossip`` to the set; a message that does
        not parse is counted as unreadable and dropped."""
        _receive(
            self._lock, self.statistics, self._marshaller, self._set.add, parse_push_gossip, message
        )


class GossipRouter:
    """The handlers of one node by handler ID: hands an AppGossip or AppRequest payload to
    the handler its uvarint prefix names (avalanchego's p2p network does this).
    :class:`~vmstack.errors.MalformedRequest` for a payload without a readable prefix or
    for an unknown handler."""

    def __init__(self, handlers: dict[int, GossipHandler[object]] | None = None) -> None:
        self._handlers: dict[int, GossipHandler[object]] = dict(handlers or {})

    def register(self, handler_id: int, handler: GossipHandler[T]) -> None:
        """Route ``handler_id``'s payloads to ``handler``; ``ValueError`` if it is taken."""
        if handler_id in self._handlers:
            raise ValueError(f"handler {handler_id} is already registered")
        self._handlers[handler_id] = handler  # type: ignore[assignment]

    def _handler(self, payload: bytes) -> tuple[GossipHandler[object], bytes]:
        handler_id, message = split_handler(payload)
        handler = self._handlers.get(handler_id)
        if handler is None:
            raise MalformedRequest(f"gossip payload for unknown handler {handler_id}")
        return handler, message

    def app_gossip(self, payload: bytes) -> None:
        """Hand a pushed payload to its handler."""
        handler, message = self._handler(payload)
        handler.app_gossip(message)

    def app_request(self, payload: bytes) -> bytes:
        """The response of the handler a request payload names (unprefixed)."""
        handler, message = self._handler(payload)
        return handler.app_request(message)
