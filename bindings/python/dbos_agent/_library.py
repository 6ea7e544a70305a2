"""The agent through ``libdbos.so`` (cgo/README.md is its C ABI): a
``Stream`` over a library handle, so the one ``Connection`` of
``_transport`` speaks the same frames over the library as over the socket.

Which transport, from the config (DBOS's config or DBOSClient's arguments)
or the environment:

- ``agent_library`` / ``DBOS_AGENT_LIBRARY``: the path of ``libdbos.so``.
  Without it, the Unix socket (``agent_socket``) as always.
- ``agent_mode`` / ``DBOS_AGENT_MODE``: ``embedded`` (the default when a
  library is given: the engine in this process), ``sidecar`` (a private
  ``dbos-agent`` child the library starts) or ``connect`` (the library as
  the transport to a running agent's socket, ``agent_socket``).
- embedded and sidecar: the system database from ``system_database_url`` /
  ``DBOS_SYSTEM_DATABASE_URL`` (a SQLAlchemy-style URL as DBOS takes it is
  passed without its driver), its schema from ``dbos_system_schema``.

The library is loaded once per process, at the first session (not at
import: a process that imports the binding and forks before launching
loads it in each child). In a child forked after it was loaded, the library
refuses every call (DBOS_ERR_FORKED), which is DBOSAgentForkedError here. Every call of it goes through ``ctypes.CDLL``,
which releases the GIL for the call's length: the blocking ``dbos_recv``
runs on the connection's reader thread and holds no lock of Python's, so
the main thread's Ctrl-C and the event loops run on."""

from __future__ import annotations

import ctypes
import json
import os
import re
import threading
from typing import Any, Dict, Iterable, Iterator, Optional, Union

from . import _protocol as proto
from ._error import (
    DBOSAgentForkedError,
    DBOSAgentUnavailableError,
    DBOSException,
    DBOSInitializationError,
)
from ._migrate import AGENT_BINARY_ENV, agent_database_url
from ._transport import Endpoint, SocketEndpoint, Stream, resolve_socket_path, resolve_trusted_uids, untrusted_error

LIBRARY_ENV = "DBOS_AGENT_LIBRARY"
MODE_ENV = "DBOS_AGENT_MODE"
DATABASE_URL_ENV = "DBOS_SYSTEM_DATABASE_URL"
MODES = ("embedded", "sidecar", "connect")

# The return codes of libdbos.h.
OK = 0
TIMEOUT = 1
CLOSED = 2
ERR_INVALID = 3
ERR_FORKED = 4
ERR_UNAVAILABLE = 5
ERR_INTERNAL = 6

# How connect mode's refusal of a socket served by an untrusted user names the
# user (cgo/README.md).
_UNTRUSTED = re.compile(r"served by uid (\d+)")


class Library:
    """``libdbos.so``, loaded in this process."""

    def __init__(self, path: str):
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            raise DBOSInitializationError(f"cannot load libdbos.so from {path} (agent_library, {LIBRARY_ENV}): {e}") from None
        self.path = path
        u64, size, vp = ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p
        lib.dbos_version.argtypes, lib.dbos_version.restype = [], ctypes.c_char_p
        lib.dbos_open.argtypes, lib.dbos_open.restype = [ctypes.c_char_p, size, ctypes.POINTER(u64)], ctypes.c_int
        lib.dbos_send.argtypes, lib.dbos_send.restype = [u64, ctypes.c_char_p, size], ctypes.c_int
        lib.dbos_recv.argtypes = [u64, ctypes.c_int32, ctypes.POINTER(vp), ctypes.POINTER(size)]
        lib.dbos_recv.restype = ctypes.c_int
        lib.dbos_free.argtypes, lib.dbos_free.restype = [vp], None
        lib.dbos_close.argtypes, lib.dbos_close.restype = [u64], ctypes.c_int
        lib.dbos_last_error.argtypes, lib.dbos_last_error.restype = [], ctypes.c_char_p
        self._lib = lib
        self.version = (lib.dbos_version() or b"").decode("utf-8", "replace")

    def last_error(self) -> str:
        """The message of this thread's last failing call (call it right after)."""
        return (self._lib.dbos_last_error() or b"").decode("utf-8", "replace")

    def open(self, config: bytes) -> int:
        handle = ctypes.c_uint64(0)
        rc = self._lib.dbos_open(config, len(config), ctypes.byref(handle))
        if rc != OK:
            raise self.error(rc, "dbos_open")
        return int(handle.value)

    def error(self, rc: int, call: str) -> Exception:
        """The exception of a failing call's code, with the library's message."""
        message = self.last_error() or f"{call} returned {rc}"
        if rc == ERR_FORKED:
            # The library refuses every call of a child forked from the
            # process that loaded it, before entering its Go runtime.
            return DBOSAgentForkedError(
                f"DBOS cannot be used in this process ({os.getpid()}), a child forked after libdbos.so was "
                f"loaded; launch DBOS after forking. libdbos.so: {message}"
            )
        if rc == ERR_INVALID:
            return DBOSInitializationError(f"libdbos.so refused {call}: {message}")
        if rc == CLOSED:
            return ConnectionResetError(f"the libdbos.so session ended: {message}")
        if rc == ERR_INTERNAL:
            return DBOSAgentUnavailableError(f"a failure inside libdbos.so ({call}; the session is closed): {message}")
        return DBOSAgentUnavailableError(message)


_loaded: Optional[Library] = None
_load_lock = threading.Lock()


def load(path: str) -> Library:
    """The process's one ``libdbos.so`` (one Go runtime per process): loaded
    at the first call, the same one after; another path is refused."""
    global _loaded
    with _load_lock:
        if _loaded is None:
            _loaded = Library(path)
        elif os.path.realpath(_loaded.path) != os.path.realpath(path):
            raise DBOSInitializationError(
                f"libdbos.so is already loaded from {_loaded.path}; a process holds one Go runtime, "
                f"so it cannot load {path} beside it"
            )
        return _loaded


class _LibraryStream(Stream):
    """One library handle: a session's frames."""

    def __init__(self, lib: Library, handle: int):
        self._lib = lib
        self._handle = handle
        self._closed = False
        self._close_lock = threading.Lock()

    def send(self, frame: bytes) -> None:
        rc = self._lib._lib.dbos_send(self._handle, frame, len(frame))
        if rc != OK:
            err = self._lib.error(rc, "dbos_send")
            if isinstance(err, DBOSInitializationError) and self._closed:
                # A send racing close: the handle is gone, as a socket is.
                raise ConnectionResetError("the libdbos.so session was closed")
            raise err

    def frames(self) -> Iterator[bytes]:
        lib = self._lib._lib
        data = ctypes.c_void_p()
        size = ctypes.c_size_t()
        while True:
            # Blocks without the GIL (ctypes.CDLL) until frames come or the
            # session ends; close() from another thread wakes it.
            rc = lib.dbos_recv(self._handle, -1, ctypes.byref(data), ctypes.byref(size))
            if rc == CLOSED:
                return
            if rc == TIMEOUT:
                continue
            if rc != OK:
                if self._closed:
                    return  # the handle was closed under it
                raise self._lib.error(rc, "dbos_recv")
            try:
                buf = ctypes.string_at(data.value or 0, size.value) if size.value else b""
            finally:
                lib.dbos_free(data)
            yield from _split(buf)

    def close(self) -> None:
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        # Its code tells nothing the caller acts on: a handle the agent ended
        # first, or one of the parent in a forked child, is closed anyway.
        self._lib._lib.dbos_close(self._handle)


def _split(buf: bytes) -> Iterator[bytes]:
    """The envelopes of whole frames, as ``dbos_recv`` returns them."""
    at = 0
    while at < len(buf):
        if len(buf) - at < proto.HEADER.size:
            raise proto.MalformedFrame(f"libdbos.so returned a partial frame header ({len(buf) - at} bytes)")
        (n,) = proto.HEADER.unpack_from(buf, at)
        at += proto.HEADER.size
        if len(buf) - at < n:
            raise proto.MalformedFrame(f"libdbos.so returned a partial frame ({len(buf) - at} of {n} bytes)")
        yield buf[at : at + n]
        at += n


class LibraryEndpoint(Endpoint):
    """The agent through ``libdbos.so``, in one of its modes."""

    def __init__(self, path: str, config: Dict[str, Any]):
        self.path = path
        self.config = config
        self.mode = str(config["mode"])
        self.runs_agent = self.mode != "connect"
        if self.mode == "connect":
            self.where = f"at {config['socket']} (through libdbos.so)"
        elif self.mode == "sidecar":
            self.where = "in a sidecar process of libdbos.so"
        else:
            self.where = "embedded in this process (libdbos.so)"

    def dial(self, timeout: float) -> Stream:
        # The library bounds its own waits (connecting, starting the engine
        # or the child); ``timeout`` bounds the handshake that follows.
        lib = load(self.path)
        try:
            handle = lib.open(json.dumps(self.config).encode())
        except DBOSAgentUnavailableError as e:
            if isinstance(e, DBOSAgentForkedError):
                raise
            untrusted = _UNTRUSTED.search(e.detail) if self.mode == "connect" else None
            if untrusted:
                # The library checked who serves the socket and refused it,
                # as the socket transport does: the same typed error.
                raise untrusted_error(str(self.config["socket"]), int(untrusted.group(1)), f" (libdbos.so: {e.detail})") from None
            hint = (
                " (is `dbos-agent serve` running? set config agent_socket or DBOS_AGENT_SOCKET)"
                if self.mode == "connect"
                else ""
            )
            verb = "start" if self.runs_agent else "reach"
            raise DBOSAgentUnavailableError(f"cannot {verb} the dbos-agent {self.where}: {e.detail}{hint}") from None
        return _LibraryStream(lib, handle)


def resolve_endpoint(
    *,
    library: Optional[str] = None,
    mode: Optional[str] = None,
    socket: Optional[str] = None,
    trusted_uids: Union[None, str, Iterable[int]] = None,
    database_url: Optional[str] = None,
    schema: Optional[str] = None,
    executor_id: Optional[str] = None,
) -> Endpoint:
    """The endpoint the config and environment select (see the module)."""
    library = library or os.environ.get(LIBRARY_ENV) or None
    mode = mode or os.environ.get(MODE_ENV) or None
    if mode is not None and mode not in MODES:
        raise DBOSInitializationError(f"agent_mode ({MODE_ENV}) must be one of {', '.join(MODES)}, not {mode!r}")
    if library is None:
        if mode in ("embedded", "sidecar"):
            raise DBOSInitializationError(
                f"agent_mode {mode!r} runs the agent through libdbos.so: name it with agent_library or {LIBRARY_ENV}"
            )
        return SocketEndpoint(resolve_socket_path(socket), resolve_trusted_uids(trusted_uids))
    mode = mode or "embedded"
    config: Dict[str, Any] = {"mode": mode}
    if mode == "connect":
        config["socket"] = resolve_socket_path(socket)
        uids = resolve_trusted_uids(trusted_uids)
        if uids:
            config["trusted_uids"] = sorted(uids)
        return LibraryEndpoint(library, config)
    url = database_url or os.environ.get(DATABASE_URL_ENV) or ""
    if not url:
        raise DBOSInitializationError(
            f"agent_mode {mode!r} runs the agent on the system database: "
            f"set system_database_url or {DATABASE_URL_ENV}"
        )
    try:
        config["database_url"] = agent_database_url(url)
    except DBOSException as e:
        raise DBOSInitializationError(e.message) from None
    if schema:
        config["schema"] = schema
    if executor_id:
        config["executor_id"] = executor_id
    if mode == "sidecar" and os.environ.get(AGENT_BINARY_ENV):
        config["agent_path"] = os.environ[AGENT_BINARY_ENV]
    return LibraryEndpoint(library, config)
