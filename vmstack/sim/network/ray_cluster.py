"""The Ray cluster as the Ray engine (:mod:`vmstack.sim.network.ray_engine`) sees it: its
hosts (:class:`RayHost`), where the actors go (:func:`plan_placement`), and the checks and
one-line errors of joining it (a cluster that cannot be reached, a listener that is not
Ray, a driver the cluster refuses)."""

from __future__ import annotations

import contextlib
import os
import platform
import socket
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import attrs

from vmstack.errors import VMStackError

__all__ = ["RayHost", "plan_placement"]


@attrs.frozen
class RayHost:
    """A host of the Ray cluster: its node ID, its address, and ``room``, how many of the
    engine's actors it can take (``None``: no bound, when an actor asks for no CPU)."""

    node_id: str
    address: str
    room: int | None = None

    def as_dict(self) -> dict[str, object]:
        return {"node_id": self.node_id, "address": self.address}


def plan_placement(workers: int, hosts: Sequence[RayHost]) -> list[int]:
    """The host (an index into ``hosts``) of each of ``workers`` actors: actor ``i`` goes
    to the next host in turn after actor ``i - 1``'s (round-robin, so the actors of any two
    hosts differ by at most one while all have room), skipping a host that is full. When
    the hosts cannot hold ``workers`` actors, the plan holds as many as they can (the nodes
    are then spread over fewer actors); no host, or no room anywhere, is an empty plan."""
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    left = [host.room for host in hosts]

    def has_room(index: int) -> bool:
        room = left[index]
        return room is None or room > 0

    plan: list[int] = []
    turn = 0
    while len(plan) < workers:
        candidates = [(turn + step) % len(hosts) for step in range(len(hosts))]
        chosen = next((index for index in candidates if has_room(index)), None)
        if chosen is None:
            break
        room = left[chosen]
        if room is not None:
            left[chosen] = room - 1
        plan.append(chosen)
        turn = chosen + 1
    return plan


def _check_reachable(address: str, timeout: float = 10.0) -> str | None:
    """Refuse a ``host:port`` cluster address that does not accept a connection within
    ``timeout`` seconds (Ray itself would keep retrying), and return this machine's address
    on the route to it (``None`` for other forms, ``auto`` or ``ray://...``, left to
    Ray)."""
    host, separator, port = address.rpartition(":")
    if not separator or "://" in address or not port.isdigit():
        return None
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout) as connection:
            return str(connection.getsockname()[0])
    except OSError as error:
        raise VMStackError(
            f"no Ray cluster answers at {address}: {error.strerror or error}"
        ) from None


def _one_line(error: BaseException) -> str:
    """The first sentence of ``error``'s message, on one line."""
    text = " ".join(str(error).split())
    sentence = text.split(". ")[0].rstrip(".")
    return sentence or type(error).__name__


def _root_cause(error: BaseException) -> str:
    """``error`` and, after a colon, the first line of the error it was raised from (Ray
    wraps the reason a join failed), on one line."""
    cause = error.__cause__ or error.__context__
    if cause is None:
        return _one_line(error)
    first = next((line for line in str(cause).splitlines() if line.strip()), "")
    return f"{_one_line(error)}: {' '.join(first.split()) or type(cause).__name__}"


def _actor_death(error: BaseException) -> str:
    """Why Ray says an actor died, on one line: the last line of the traceback it quotes
    (the error its creation raised), else the first sentence of its message."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    raised = [
        line
        for line in lines
        if not line.startswith(("File ", "^", "~", "Traceback"))
        and ("Error" in line.split(":")[0] or "Exception" in line.split(":")[0])
    ]
    return raised[-1] if raised else _one_line(error)


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Send what Ray's C++ client writes to the process's stderr (a warning per retry)
    elsewhere for the duration: the caller reports the outcome in one line."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as sink:
            os.dup2(sink.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _within(timeout: float, make: Callable[[], Any]) -> Any:
    """What ``make()`` returns or raises, run in a daemon thread with Ray's client
    warnings silenced; ``TimeoutError`` when it has not finished within ``timeout``
    seconds (the thread is left to end on its own)."""
    outcome: list[Any] = []

    def attempt() -> None:
        try:
            outcome.append((True, make()))
        except BaseException as error:  # handed over to the caller's thread
            outcome.append((False, error))

    with _quiet_stderr():
        thread = threading.Thread(target=attempt, name="vmstack-ray-probe", daemon=True)
        thread.start()
        thread.join(timeout)
    if not outcome:
        raise TimeoutError(f"no answer within {timeout:g} s")
    succeeded, value = outcome[0]
    if not succeeded:
        raise value
    return value


def _probe_cluster(ray: Any, address: str, timeout: float = 15.0) -> None:
    """Ask the cluster's control service at ``host:port`` ``address`` once (within
    ``timeout`` seconds), the way a driver joining it would, and refuse in one line what
    ``ray.init`` would only report after its retries (20 s and more) as "Failed to
    connect": a cluster that needs Ray's authentication token this driver lacks, a service
    that is not a Ray cluster, and a cluster running another Ray or Python version. Other
    address forms, and a Ray without these (private) client calls, are left to
    ``ray.init``."""
    _, separator, port = address.rpartition(":")
    if not separator or "://" in address or not port.isdigit():
        return
    try:
        from ray._common.usage import usage_lib
        from ray._private import utils
        from ray._raylet import GcsClient  # type: ignore[attr-defined]  # not in its stub
    except ImportError:
        return
    try:
        client = _within(timeout, lambda: GcsClient(address=address))
    except TimeoutError:
        raise VMStackError(
            f"no Ray cluster answers at {address} within {timeout:g} s: "
            f"something listens there, but not Ray's control service"
        ) from None
    except ray.exceptions.AuthenticationError as error:
        raise VMStackError(
            f"the Ray cluster at {address} refused this driver: it needs Ray's "
            f"authentication token (set RAY_AUTH_MODE=token and RAY_AUTH_TOKEN or "
            f"RAY_AUTH_TOKEN_PATH to the cluster's token); Ray says: {_one_line(error)}"
        ) from None
    except Exception as error:  # Ray's client raises bare RuntimeErrors and gRPC errors
        raise VMStackError(
            f"no Ray cluster answers at {address}: the service there does "
            f"not answer as Ray's: {_one_line(error)}"
        ) from None
    try:
        metadata = usage_lib.get_cluster_metadata(client)
    except Exception:  # no metadata (yet): ray.init checks the versions itself
        return
    if not isinstance(metadata, dict):
        return
    try:
        utils.check_version_info(metadata, "this driver")
    except RuntimeError:
        raise VMStackError(
            f"the Ray cluster at {address} runs Ray {metadata.get('ray_version')} on Python "
            f"{metadata.get('python_version')}, this driver Ray {ray.__version__} on Python "
            f"{platform.python_version()}: a driver must run the cluster's versions"
        ) from None
