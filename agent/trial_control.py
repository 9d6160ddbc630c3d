"""Trial control: how a client tells the agent of an external server engine where a trial
begins and ends. Every engine whose server the agent cannot see inside uses it: nghttpd and
hypercorn (agent.engines.nghttp2.server, agent.engines.hypercorn.server), so it lives beside
the engines rather than in one of them.

nghttpd logs nothing per request unless verbose, and verbose logging costs it CPU on every frame
(agent/README.md has the figures), so its agent cannot see the trial header. The client brackets
each page fetch instead: before it (and before its manifest download is done, never during),
`begin`; after its connection is closed, `end` with the client's request counts. Each message is
one JSON line over a TCP connection to the server agent's control port, answered by one line;
the client waits for the answer, so the server has sampled nghttpd before the fetch starts.

    -> {"op": "begin", "trial_id": "t1"}
    <- {"ok": true}
    -> {"op": "end", "trial_id": "t1", "ok": true, "requests": 8, "responses_completed": 8}
    <- {"ok": true}                 (or {"ok": false, "error": "..."} to either)
"""

from __future__ import annotations

import asyncio
import json
import socket
from dataclasses import dataclass
from typing import Any, Protocol

from agent.errors import TrialControlError, UsageError

CONTROL_TIMEOUT_S = 30.0
MAX_LINE_BYTES = 4096


@dataclass(frozen=True)
class Begin:
    trial_id: str


@dataclass(frozen=True)
class End:
    trial_id: str
    ok: bool
    requests: int
    responses_completed: int


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def _count(document: dict[str, Any], key: str) -> int:
    value = document.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TrialControlError(f"trial control: {key} must be a count, got {value!r}")
    return value


def parse_request(line: bytes) -> Begin | End:
    """One client line -> Begin or End; TrialControlError naming what is wrong."""
    try:
        document = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise TrialControlError(f"trial control: not a JSON line: {line[:80]!r}") from None
    if not isinstance(document, dict):
        raise TrialControlError("trial control: a message must be a JSON object")
    trial_id = document.get("trial_id")
    if not isinstance(trial_id, str) or not trial_id:
        raise TrialControlError("trial control: trial_id must be a non-empty string")
    op = document.get("op")
    if op == "begin":
        return Begin(trial_id)
    if op == "end":
        ok = document.get("ok")
        if not isinstance(ok, bool):
            raise TrialControlError("trial control: end needs ok true or false")
        return End(
            trial_id, ok, _count(document, "requests"), _count(document, "responses_completed")
        )
    raise TrialControlError(f"trial control: unknown op {op!r} (begin, end)")


class TrialBrackets(Protocol):
    """A server agent's side: what it does at each message (the nghttp2 engine's Supervisor,
    the api workload's hypercorn engine). An error it raises is the answer's `error`."""

    async def begin(self, message: Begin) -> None: ...

    async def end(self, message: End) -> None: ...

    def abandon(self, trial_id: str) -> None:
        """The client hung up between `begin` and `end`."""
        ...


async def listen_control(brackets: TrialBrackets, host: str, port: int) -> asyncio.Server:
    """The control port (`port` 0: the kernel picks), answering each connection with
    `answer_control`; UsageError naming --control-port if it cannot listen."""

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await answer_control(brackets, reader, writer)

    try:
        return await asyncio.start_server(connection, host, port)
    except OSError as exc:
        raise UsageError(
            f"--control-port {port}: cannot listen on {host}: {exc.strerror}"
        ) from None


async def answer_control(
    brackets: TrialBrackets, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """One client's control connection: messages in order; a hang-up abandons its trial."""
    mine: str | None = None
    try:
        while line := await reader.readline():
            try:
                message = parse_request(line[:MAX_LINE_BYTES])
                if isinstance(message, Begin):
                    await brackets.begin(message)
                    mine = message.trial_id
                else:
                    await brackets.end(message)
                    mine = None
                answer: dict[str, object] = {"ok": True}
            except TrialControlError as exc:
                answer = {"ok": False, "error": str(exc)}
            writer.write(encode(answer))
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        if mine is not None:
            brackets.abandon(mine)
        writer.close()


def parse_address(text: str) -> tuple[str, int]:
    """`HOST:PORT` or `[IPV6]:PORT` -> (host, port); UsageError otherwise."""
    host, sep, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"--trial-control {text!r} must be HOST:PORT")
    return host, int(port)


class TrialControl:
    """The client's side: one TCP connection to the server agent, a message at a time."""

    def __init__(self, address: str, timeout_s: float = CONTROL_TIMEOUT_S) -> None:
        self.address = address
        host, port = parse_address(address)
        try:
            self._socket = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as exc:
            raise TrialControlError(
                f"trial control {address}: cannot connect: {exc.strerror or exc}"
            ) from None
        self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._reader = self._socket.makefile("rb")

    def _exchange(self, message: dict[str, Any]) -> None:
        try:
            self._socket.sendall(encode(message))
            line = self._reader.readline(MAX_LINE_BYTES)
        except OSError as exc:
            raise TrialControlError(f"trial control {self.address}: {exc}") from None
        if not line:
            raise TrialControlError(f"trial control {self.address}: the server agent hung up")
        try:
            answer = json.loads(line)
        except json.JSONDecodeError:
            raise TrialControlError(f"trial control {self.address}: bad answer {line!r}") from None
        if not isinstance(answer, dict) or answer.get("ok") is not True:
            error = answer.get("error") if isinstance(answer, dict) else answer
            raise TrialControlError(f"trial control {self.address}: {error}")

    def begin(self, trial_id: str) -> None:
        self._exchange({"op": "begin", "trial_id": trial_id})

    def end(self, trial_id: str, *, ok: bool, requests: int, responses_completed: int) -> None:
        self._exchange(
            {
                "op": "end",
                "trial_id": trial_id,
                "ok": ok,
                "requests": requests,
                "responses_completed": responses_completed,
            }
        )

    def close(self) -> None:
        self._reader.close()
        self._socket.close()
