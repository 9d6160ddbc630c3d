"""The listening sockets and the accept loop: the thin I/O shell around agent.limits.

asyncio's own server (Python 3.11) accepts whatever comes, and handles accept() running out of
descriptors badly: it logs "socket.accept() out of system resource" and schedules a retry for
every remaining attempt of the same wake-up, so at the descriptor limit it logged hundreds of
thousands of lines in a minute at half a core, and nobody was served until descriptors came
free by themselves. Here accepting stops at the connection cap, before the descriptors run
out, and when accept() fails for want of resources anyway: each time the server is asked to
close idle connections (`make_room`), accepting pauses as `AcceptBackoff` says, and one line
per interval is logged. Every accepted socket becomes a transport through the public
`loop.connect_accepted_socket`.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import socket
import ssl
from collections.abc import Callable
from typing import Protocol

from agent.errors import UsageError
from agent.limits import AcceptBackoff, ConnectionLimits

log = logging.getLogger("h2iot.server")

# As many as nginx and Linux (somaxconn >= 4096) allow by default: h2load -c500 connects
# 500 clients at once, and a full queue makes a client wait a whole SYN retransmission.
LISTEN_BACKLOG = 511
# Connections accepted per wake-up, before the event loop serves the others again.
_ACCEPTS_PER_WAKEUP = 100
# Connections to have closing when accepting has to stop for room: enough that a queue of
# new connections is taken in a few pauses, few enough that no more idle ones go than needed.
_ROOM_PER_PAUSE = 8
_OUT_OF_DESCRIPTORS = {errno.EMFILE, errno.ENFILE}
_OUT_OF_MEMORY = {errno.ENOBUFS, errno.ENOMEM}


def bind(host: str, port: int) -> list[socket.socket]:
    """Listening sockets for every address of `host` (as asyncio's create_server binds them:
    SO_REUSEADDR, IPv6 sockets v6-only). Raises OSError."""
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _name, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(LISTEN_BACKLOG)
            sock.setblocking(False)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def listen(host: str, port: int) -> list[socket.socket]:
    """`bind`, failing as a command line's fault: UsageError naming the address."""
    try:
        return bind(host, port)
    except OSError as exc:
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


class Admission(Protocol):
    """The listener's view of the server: how many sockets its connections hold, and making
    room among them."""

    def sockets_in_use(self) -> int:
        """Sockets held: accepted and being set up, or a connection's (closing ones too)."""
        ...

    def accepted(self) -> None:
        """A socket was accepted; it counts from now until its connection is lost."""
        ...

    def setup_failed(self) -> None:
        """An accepted socket closed before it became a connection (TLS handshake failed)."""
        ...

    def make_room(self, wanted: int) -> int:
        """Close idle connections until `wanted` are closing; how many are."""
        ...


class Listener:
    """Accepts on `sockets` until closed, each connection a protocol from `factory`, keeping
    the sockets in use under `limits.max_connections`."""

    def __init__(
        self,
        sockets: list[socket.socket],
        factory: Callable[[], asyncio.BaseProtocol],
        limits: ConnectionLimits,
        admission: Admission,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.sockets = sockets
        self._factory = factory
        self._limits = limits
        self._admission = admission
        self._tls = tls
        self.cap_backoff = AcceptBackoff()
        self.exhausted_backoff = AcceptBackoff()
        self._loop = asyncio.get_running_loop()
        self._paused: dict[int, asyncio.TimerHandle] = {}
        self._tasks: set[asyncio.Task[None]] = set()  # held, or the loop may drop them

    @property
    def log_interval_s(self) -> float:
        return self.cap_backoff.log_interval_s

    def start(self) -> None:
        for sock in self.sockets:
            self._loop.add_reader(sock.fileno(), self._accept, sock)

    def close(self) -> None:
        """Stop accepting and close the listening sockets: new connections are refused."""
        for timer in self._paused.values():
            timer.cancel()
        self._paused.clear()
        for sock in self.sockets:
            self._loop.remove_reader(sock.fileno())
            sock.close()

    def _accept(self, sock: socket.socket) -> None:
        cap = self._limits.max_connections
        admission = self._admission
        for _ in range(_ACCEPTS_PER_WAKEUP):
            if admission.sockets_in_use() >= cap:
                self._pause(sock, self.cap_backoff, f"connection cap {cap} reached", True)
                return
            try:
                conn, _address = sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:
                continue  # the client gave up while queued
            except OSError as exc:
                self._failed(sock, exc)
                return
            self.cap_backoff.accepted()
            self.exhausted_backoff.accepted()
            conn.setblocking(False)  # asyncio's transport sets TCP_NODELAY itself
            admission.accepted()
            task = self._loop.create_task(self._connect(conn))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _connect(self, conn: socket.socket) -> None:
        try:
            await self._loop.connect_accepted_socket(
                self._factory,
                conn,
                ssl=self._tls,
                ssl_handshake_timeout=self._limits.handshake_timeout_s if self._tls else None,
            )
        except OSError as exc:  # TLS handshake failed or timed out, peer reset: its business
            log.debug("connection not set up: %s", exc)
            conn.close()
            self._admission.setup_failed()

    def _failed(self, sock: socket.socket, exc: OSError) -> None:
        code = exc.errno or 0
        if code in _OUT_OF_DESCRIPTORS:
            reason = f"accept() failed: out of file descriptors ({os.strerror(code)})"
        elif code in _OUT_OF_MEMORY:
            reason = f"accept() failed: out of memory ({os.strerror(code)})"
        else:
            reason = f"accept() failed: {exc.strerror or exc}"
        self._pause(
            sock, self.exhausted_backoff, reason, code in _OUT_OF_DESCRIPTORS | _OUT_OF_MEMORY
        )

    def _pause(
        self, sock: socket.socket, backoff: AcceptBackoff, reason: str, make_room: bool
    ) -> None:
        closing = self._admission.make_room(_ROOM_PER_PAUSE) if make_room else 0
        in_use = self._admission.sockets_in_use()
        delay_s, line = backoff.paused(self._loop.time(), reason, closing, in_use)
        if line is not None:
            log.warning("%s", line)
        # Linux reports the socket readable while the queue holds connections: stop watching
        # it until the pause is over, or the loop spins.
        fd = sock.fileno()
        self._loop.remove_reader(fd)
        self._paused[fd] = self._loop.call_later(delay_s, self._resume, sock)

    def _resume(self, sock: socket.socket) -> None:
        self._paused.pop(sock.fileno(), None)
        self._loop.add_reader(sock.fileno(), self._accept, sock)
