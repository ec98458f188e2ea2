"""A plugin's transaction gossip over the node's network: what the node hands the plugin in
``AppGossip``, ``AppRequest``, ``AppResponse`` and ``AppRequestFailed`` reaches a
:class:`~vmstack.gossip.TransactionGossip` over the served stack, and what that gossip sends
leaves through the node's ``appsender.AppSender`` service (``appsender.proto``) at the
``server_addr`` of the node's ``Initialize``.

- A push (``AppGossip``) puts its transactions in the mempool; a pull request
  (``AppRequest`` with a ``PullGossipRequest``) is answered with ``SendAppResponse``: the
  transactions held that the request's filter does not contain.
- Transactions submitted to the plugin (``SubmitTransactions``) are pushed with
  ``SendAppGossip``, its node IDs and counts the push's ``SendConfig`` (the plugin knows no
  stakes, so a push names no node and asks for coreth's 100 validators); a pull request goes
  with ``SendAppRequest`` to one peer the node reported ``Connected``, and its
  ``AppResponse`` adds what the peer sent.
- A payload that does not read, and items the mempool refuses, are told to the refusal log
  (the plugin writes them to standard error) and dropped: the node is answered without an
  error, as avalanchego's p2p network answers its peers' bad messages, so a bad peer never
  stops the chain; a request that does not read is answered with ``SendAppError``
  (:data:`APP_ERROR_UNEXPECTED`).

A background thread pushes every ``config.push_frequency`` seconds, pulls every
``config.pull_frequency`` seconds while a peer is connected, and forgets the transactions
of newly accepted blocks, all under the server's lock; every call to the node has a
deadline (:data:`SEND_TIMEOUT`).
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import grpc
from google.protobuf import empty_pb2

from vmstack.errors import BlockNotFound, MalformedRequest
from vmstack.gossip import CORETH_GOSSIP, GossipConfig, ResponseCallback, SendConfig
from vmstack.gossip import TransactionGossip as _TransactionGossip
from vmstack.wrappers.rpc import appsender_pb2, vm_pb2

__all__ = ["APP_ERROR_UNEXPECTED", "PluginGossip", "SEND_TIMEOUT", "app_handlers"]

#: Seconds one call to the node's appsender may take.
SEND_TIMEOUT = 5.0
#: The error code of an AppRequest that cannot be answered (avalanchego's
#: ``p2p.ErrUnexpected``).
APP_ERROR_UNEXPECTED = -1

#: What the plugin is told of each gossip message it drops: the method and the error.
GossipRefusalLog = Callable[[str, BaseException], None]


class PluginGossip:
    """The transaction gossip of the stack ``vm``, over the node's appsender at
    ``appsender_address``; ``lock`` is the lock every call on ``vm`` is made under (the
    server's), held by the caller of the ``app_*`` methods and taken by the background
    thread. :meth:`start` starts that thread, :meth:`close` stops it and closes the
    channel."""

    def __init__(
        self,
        vm: object,
        appsender_address: str,
        *,
        lock: threading.Lock,
        on_refusal: GossipRefusalLog | None = None,
        config: GossipConfig = CORETH_GOSSIP,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._vm = vm
        self._lock = lock
        self._on_refusal = on_refusal
        self._config = config
        self._channel = grpc.insecure_channel(appsender_address)
        self._send_request_stub = self._stub("SendAppRequest", appsender_pb2.SendAppRequestMsg)
        self._send_response_stub = self._stub("SendAppResponse", appsender_pb2.SendAppResponseMsg)
        self._send_error_stub = self._stub("SendAppError", appsender_pb2.SendAppErrorMsg)
        self._send_gossip_stub = self._stub("SendAppGossip", appsender_pb2.SendAppGossipMsg)
        self._peers: set[bytes] = set()
        self._pending: dict[int, ResponseCallback] = {}
        self._request_ids = itertools.count(1)
        self._random = random.Random()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._accepted_height = self._height()
        self.gossip = _TransactionGossip(
            vm,
            validator_weights=dict,
            send_push=self._send_push,
            send_request=self._send_request,
            clock=clock,
            config=config,
        )

    def _stub(self, method: str, message: Any) -> Callable[..., Any]:
        return self._channel.unary_unary(
            f"/appsender.AppSender/{method}",
            request_serializer=message.SerializeToString,
            response_deserializer=empty_pb2.Empty.FromString,
        )

    # --- what the node hands the plugin (called under the server's lock) -------------------

    def connected(self, node_id: bytes) -> None:
        """The node connected to peer ``node_id``: pull requests may go there."""
        self._peers.add(bytes(node_id))

    def disconnected(self, node_id: bytes) -> None:
        """The node lost peer ``node_id``."""
        self._peers.discard(bytes(node_id))

    def app_gossip(self, node_id: bytes, message: bytes) -> None:
        """A peer's push: its transactions go to the mempool; what does not read or what
        the mempool refuses is told to the refusal log and dropped."""
        self._forget_accepted()
        statistics = self.gossip.handler.statistics
        unreadable, refused = statistics.unreadable, statistics.refused
        try:
            self.gossip.app_gossip(message)
        except MalformedRequest as error:
            self._refused("AppGossip", error)
            return
        if statistics.unreadable > unreadable or statistics.refused > refused:
            self._refused(
                "AppGossip",
                MalformedRequest(
                    f"PushGossip from {bytes(node_id).hex()}: "
                    f"{statistics.unreadable - unreadable} item(s) did not unmarshal, "
                    f"{statistics.refused - refused} refused by the mempool"
                ),
            )

    def app_request(self, node_id: bytes, request_id: int, request: bytes) -> None:
        """A peer's pull request, answered with ``SendAppResponse`` (``SendAppError``
        and the refusal log for a request that does not read)."""
        self._forget_accepted()
        try:
            response = self.gossip.app_request(request)
        except MalformedRequest as error:
            self._refused("AppRequest", error)
            self._call(
                self._send_error_stub,
                appsender_pb2.SendAppErrorMsg(
                    node_id=node_id,
                    request_id=request_id,
                    error_code=APP_ERROR_UNEXPECTED,
                    error_message=str(error),
                ),
            )
            return
        self._call(
            self._send_response_stub,
            appsender_pb2.SendAppResponseMsg(
                node_id=node_id, request_id=request_id, response=response
            ),
        )

    def app_response(self, node_id: bytes, request_id: int, response: bytes) -> None:
        """The answer to one of the plugin's pull requests: what it sent goes to the
        mempool. A response to no request of the plugin's is told to the refusal log."""
        callback = self._pending.pop(request_id, None)
        if callback is None:
            self._refused(
                "AppResponse", MalformedRequest(f"no pull request {request_id} is waiting")
            )
            return
        statistics = self.gossip.pull_gossiper.statistics
        unreadable = statistics.unreadable
        callback(bytes(node_id), bytes(response))
        if statistics.unreadable > unreadable:
            self._refused(
                "AppResponse",
                MalformedRequest(f"the answer to pull request {request_id} did not read"),
            )

    def app_request_failed(self, node_id: bytes, request_id: int) -> None:
        """One of the plugin's pull requests will get no answer."""
        self._pending.pop(request_id, None)

    def submit(self, transactions: Iterable[Any]) -> int:
        """Submit ``transactions`` to the mempool (all or none, with its refusals) and
        queue them for push gossip; how many were queued."""
        return self.gossip.submit(transactions)

    @property
    def waiting_requests(self) -> int:
        """The plugin's pull requests not yet answered."""
        return len(self._pending)

    # --- what the plugin sends ------------------------------------------------------------

    def _send_push(self, config: SendConfig, payload: bytes) -> None:
        self._call(
            self._send_gossip_stub,
            appsender_pb2.SendAppGossipMsg(
                node_ids=list(config.node_ids),
                validators=config.validators,
                non_validators=config.non_validators,
                peers=config.peers,
                msg=payload,
            ),
        )

    def _send_request(self, payload: bytes, on_response: ResponseCallback) -> None:
        if not self._peers:
            return
        peer = self._random.choice(sorted(self._peers))
        request_id = next(self._request_ids) & 0xFFFF_FFFF
        self._pending[request_id] = on_response
        if not self._call(
            self._send_request_stub,
            appsender_pb2.SendAppRequestMsg(
                node_ids=[peer], request_id=request_id, request=payload
            ),
        ):
            self._pending.pop(request_id, None)

    def _call(self, stub: Callable[..., Any], message: Any) -> bool:
        try:
            stub(message, timeout=SEND_TIMEOUT)
        except grpc.RpcError as error:
            details = error.details() if isinstance(error, grpc.Call) else str(error)
            self._refused(
                type(message).__name__.removesuffix("Msg"),
                ConnectionError(f"the node's appsender did not take it: {details}"),
            )
            return False
        return True

    def _refused(self, method: str, error: BaseException) -> None:
        if self._on_refusal is not None:
            self._on_refusal(method, error)

    # --- the background cycle -------------------------------------------------------------

    def _chain(self) -> Any:
        from vmstack.cchain import CChainVM
        from vmstack.interfaces import find_layer

        try:
            return find_layer(self._vm, CChainVM)
        except LookupError:
            return self._vm

    def _height(self) -> int:
        chain = self._chain()
        return int(chain.get_block(chain.last_accepted()).height)

    def _forget_accepted(self) -> None:
        """Forget the transactions of the blocks accepted since the last look."""
        height = self._height()
        if height <= self._accepted_height:
            return
        chain = self._chain()
        included: list[bytes] = []
        for number in range(self._accepted_height + 1, height + 1):
            try:
                block = chain.get_block(chain.get_block_id_at_height(number))
            except (BlockNotFound, LookupError):
                continue
            for transaction in getattr(block, "transactions", ()):
                included.append(transaction.hash)
        self._accepted_height = height
        self.gossip.on_accepted(included)

    def start(self) -> None:
        """Start pushing and pulling in the background."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="vmstack-gossip", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        next_pull = time.monotonic() + self._config.pull_frequency
        while not self._stop.wait(self._config.push_frequency):
            try:
                with self._lock:
                    if self._stop.is_set():
                        break
                    self._forget_accepted()
                    self.gossip.push()
                    if time.monotonic() >= next_pull:
                        next_pull = time.monotonic() + self._config.pull_frequency
                        self.gossip.pull()
            except Exception as error:  # the cycle goes on; the log says why
                self._refused("gossip cycle", error)

    def close(self, timeout: float = 5.0) -> None:
        """Stop the background thread (within ``timeout`` seconds) and close the channel."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        self._channel.close()


def app_handlers(
    gossip_of: Callable[[], PluginGossip | None],
) -> dict[str, Callable[[Any, Any], empty_pb2.Empty]]:
    """A server's handlers of ``Connected``, ``Disconnected`` and the App* messages, by
    method: each hands its message to the gossip ``gossip_of()`` gives and answers
    ``Empty``; without one, the message is taken and dropped."""

    def handler(
        message: type[Any], deliver: Callable[[PluginGossip, Any], None]
    ) -> Callable[[Any, Any], empty_pb2.Empty]:
        def answer(request: Any, call: Any) -> empty_pb2.Empty:
            assert isinstance(request, message)
            gossip = gossip_of()
            if gossip is not None:
                deliver(gossip, request)
            return empty_pb2.Empty()

        return answer

    return {
        "Connected": handler(
            vm_pb2.ConnectedRequest, lambda gossip, r: gossip.connected(r.node_id)
        ),
        "Disconnected": handler(
            vm_pb2.DisconnectedRequest, lambda gossip, r: gossip.disconnected(r.node_id)
        ),
        "AppGossip": handler(
            vm_pb2.AppGossipMsg, lambda gossip, r: gossip.app_gossip(r.node_id, r.msg)
        ),
        "AppRequest": handler(
            vm_pb2.AppRequestMsg,
            lambda gossip, r: gossip.app_request(r.node_id, r.request_id, r.request),
        ),
        "AppResponse": handler(
            vm_pb2.AppResponseMsg,
            lambda gossip, r: gossip.app_response(r.node_id, r.request_id, r.response),
        ),
        "AppRequestFailed": handler(
            vm_pb2.AppRequestFailedMsg,
            lambda gossip, r: gossip.app_request_failed(r.node_id, r.request_id),
        ),
    }
