"""What a served VM keeps on the local machine: its private directory and its token file.

A private directory (mode 0700) holds a server's Unix socket, and the token file of a TCP
server. Its name carries the ID and start time of the process that made it and a count of
the directories the process made (``vmstack-PID-START-N``, every number in base 36: about
20 bytes, to leave a socket's path room under a deep temporary directory, which holds
:data:`MAX_SOCKET_PATH` bytes at most; a longer path is refused with
:class:`SocketPathTooLong`); an empty file in it names the PID namespace it was made in
(``ns-NAMESPACE``). A process killed by SIGKILL has no
chance to remove its directory, so each new one is made after removing the directories of
this name, owned by this user, marked as made in this PID namespace, whose process is gone
(:func:`remove_stale_private_dirs`). A directory whose process still runs, one made in
another namespace (a container sharing the temporary directory), one without the mark (being
made, say), or one named otherwise is never touched.

A token file holds the secret a client of a TCP server presents with every call (as the
call metadata :data:`TOKEN_METADATA_KEY`). It is created with mode 0600, and a token file
that other users may read or write is refused: the secret is only as private as its file.
"""

from __future__ import annotations

import hmac
import itertools
import os
import re
import secrets
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

from vmstack.errors import VMStackError

__all__ = [
    "MAX_SOCKET_PATH",
    "PRIVATE_DIR_PREFIX",
    "SocketPathTooLong",
    "TOKEN_METADATA_KEY",
    "TokenCheck",
    "check_socket_path",
    "create_token_file",
    "make_private_dir",
    "read_token_file",
    "remove_stale_private_dirs",
]

#: The start of every private directory's name.
PRIVATE_DIR_PREFIX = "vmstack-"
#: The longest path of a Unix socket, in bytes: ``sun_path`` holds 108 on Linux, the last
#: one the terminating NUL.
MAX_SOCKET_PATH = 107
#: The call metadata that carries a client's token.
TOKEN_METADATA_KEY = "vmstack-token"

_PRIVATE_DIR_NAME = re.compile(rf"{re.escape(PRIVATE_DIR_PREFIX)}([0-9a-z]+)-([0-9a-z]+)-[0-9a-z]+")
#: The empty file in a private directory that names the PID namespace it was made in.
_NAMESPACE_MARK = "ns-{}"
_made = itertools.count()
_TOKEN = re.compile(r"[A-Za-z0-9._~+/=-]{32,1024}")
_PROC = Path("/proc")


class SocketPathTooLong(VMStackError, ValueError):
    """A Unix socket's path longer than :data:`MAX_SOCKET_PATH` bytes, the most the kernel
    takes; ``path`` is the path, ``length`` its length in bytes."""

    def __init__(self, path: str, length: int) -> None:
        self.path = path
        self.length = length
        super().__init__(
            f"cannot serve at unix:{path}: a Unix socket's path holds at most "
            f"{MAX_SOCKET_PATH} bytes (this one {length}); set TMPDIR to a shorter directory"
        )


def check_socket_path(path: str | os.PathLike[str]) -> str:
    """``path`` as a string, if a Unix socket may have it; :class:`SocketPathTooLong` if it
    is longer than :data:`MAX_SOCKET_PATH` bytes."""
    text = os.fspath(path)
    length = len(os.fsencode(text))
    if length > MAX_SOCKET_PATH:
        raise SocketPathTooLong(text, length)
    return text


def _base36(number: int) -> str:
    """``number`` (>= 0) in base 36, lower case: how a private directory's name holds it."""
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    text = ""
    while True:
        number, digit = divmod(number, 36)
        text = digits[digit] + text
        if number == 0:
            return text


def _start_time(pid: int) -> str | None:
    """The start time of ``pid`` (clock ticks since boot, from ``/proc``); None once it has
    exited (gone, or a zombie)."""
    try:
        fields = (_PROC / str(pid) / "stat").read_text().rpartition(")")[2].split()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The fields after the command name start at field 3 (the state); field 22 is the start.
    return None if fields[0] == "Z" else _base36(int(fields[19]))


def _pid_namespace() -> str:
    """This process's PID namespace (the inode of ``/proc/self/ns/pid`` in base 36; "0"
    without it)."""
    try:
        return _base36(os.stat(_PROC / "self" / "ns" / "pid").st_ino)
    except OSError:
        return "0"


def _owner_runs(pid: int, start: str) -> bool:
    """Whether the process that made a directory (``pid``, started at ``start``) still runs."""
    if not (_PROC / "self" / "stat").exists():
        # No /proc: the process ID alone decides (a reused ID keeps the directory).
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return _start_time(pid) == start


def remove_stale_private_dirs(parent: Path | None = None) -> list[Path]:
    """Remove the private directories in ``parent`` (default: the temporary directory) that
    this user owns and whose process is gone; returns those removed."""
    parent = Path(tempfile.gettempdir()) if parent is None else parent
    removed: list[Path] = []
    try:
        entries = list(parent.iterdir())
    except OSError:
        return removed
    namespace = _pid_namespace()
    for entry in entries:
        match = _PRIVATE_DIR_NAME.fullmatch(entry.name)
        if match is None:
            continue
        try:
            facts = entry.lstat()
        except OSError:
            continue
        if not stat.S_ISDIR(facts.st_mode) or facts.st_uid != os.getuid():
            continue
        if not os.path.lexists(entry / _NAMESPACE_MARK.format(namespace)):
            continue  # another namespace's, or not marked yet
        if _owner_runs(int(match[1], 36), match[2]):
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed


def make_private_dir() -> Path:
    """A fresh directory of this process (mode 0700) in the temporary directory, made after
    removing the stale ones (see the module's docstring). Its name ends in the count of the
    directories this process made (the next count while the name is taken), so the name is
    as short as it can be and still say whose it is."""
    remove_stale_private_dirs()
    pid = os.getpid()
    start = _start_time(pid) or "0"
    stem = f"{PRIVATE_DIR_PREFIX}{_base36(pid)}-{start}-"
    parent = Path(tempfile.gettempdir())
    while True:
        directory = parent / (stem + _base36(next(_made)))
        try:
            directory.mkdir(mode=0o700)
        except FileExistsError:
            continue
        os.chmod(directory, 0o700)
        mark = directory / _NAMESPACE_MARK.format(_pid_namespace())
        os.close(os.open(mark, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
        return directory


def create_token_file(path: Path) -> str:
    """Write a fresh random token to ``path``, a new file of mode 0600, and return it;
    ``ValueError`` if ``path`` exists or cannot be created."""
    token = secrets.token_hex(32)
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError as error:
        raise ValueError(f"cannot create the token file {path}: {error.strerror}") from None
    with os.fdopen(descriptor, "w") as file:
        file.write(token + "\n")
    return token


def read_token_file(path: Path) -> str:
    """The token in ``path``; ``ValueError`` if the file cannot be read, is not a regular
    file, may be read or written by other users (its mode must be 0600 or stricter), or
    does not hold one token (32 to 1024 characters of ``A-Z a-z 0-9 . _ ~ + / = -``)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as error:
        raise ValueError(f"cannot read the token file {path}: {error.strerror}") from None
    with os.fdopen(descriptor, "rb") as file:
        facts = os.fstat(file.fileno())
        if not stat.S_ISREG(facts.st_mode):
            raise ValueError(f"the token file {path} is not a regular file")
        if facts.st_mode & 0o077:
            raise ValueError(
                f"the token file {path} has mode {facts.st_mode & 0o777:#o}: "
                "other users may read it; it must be 0600"
            )
        text = file.read(2048).decode("ascii", errors="replace").strip()
    if _TOKEN.fullmatch(text) is None:
        raise ValueError(
            f"the token file {path} does not hold a token (32 to 1024 "
            "characters of letters, digits and ._~+/=-)"
        )
    return text


class TokenCheck(grpc.ServerInterceptor):  # type: ignore[type-arg]
    """A server's interceptor that refuses (``UNAUTHENTICATED``) every call, of every
    service, that does not present ``token`` (of ``token_file``) as its
    :data:`TOKEN_METADATA_KEY` metadata, before its request is read."""

    def __init__(self, token: str, token_file: Path | None) -> None:
        self._expected = token.encode()
        self._token_file = token_file

    def intercept_service(self, continuation: Callable[[Any], Any], details: Any) -> Any:
        for key, value in details.invocation_metadata or ():
            if key == TOKEN_METADATA_KEY:
                presented = value.encode() if isinstance(value, str) else bytes(value)
                if hmac.compare_digest(presented, self._expected):
                    return continuation(details)
                break
        method = details.method
        message = (
            f"{method}: this VM server requires the token of its token file "
            f"({self._token_file}) as the call's {TOKEN_METADATA_KEY!r} metadata "
            "(VMClient(token_file=...))"
        )

        def refuse(request: bytes, context: grpc.ServicerContext) -> bytes:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, message)
            raise AssertionError("unreachable")  # abort raises

        return grpc.unary_unary_rpc_method_handler(refuse)
