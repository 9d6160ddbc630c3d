"""A warm agent: one process that runs a sweep's trials one after another (`h2iot-agent warm`),
so a trial costs its workload and not an interpreter's start-up and imports.

The controller starts it in the background on the client node; it listens on a loopback port
and writes `{"port", "token", "pid"}` to its ready file (mode 0600, so only the node's user,
whom the controller logs in as, learns the token). The controller connects (locally, or through
its SSH session's direct-tcpip channel), sends `{"token": ...}`, then one request per trial,
each a trial request's JSON line (`{"request": {...}}`, agent.trial_request). The agent runs the
request's words, the very ones a fresh `h2iot-agent trial` would get, through its own CLI and
answers one JSON line (`WarmReply`): the trial's
stdout and stderr, its exit status, and its span on the node's CLOCK_MONOTONIC with the CPU
time it used (its own and its children's, e.g. nghttp), as a local node's anchor reports for a
fresh trial process.

What a trial must not inherit from the one before: its connection (each trial opens its own,
on an event loop of its own), its peak-RSS mark (the trial's probe window resets it), and
garbage a collection would charge to it: the agent collects after each answer, before it
reads the next request, so outside every trial's window and marker. Modules stay imported:
that is the point.

It serves one controller connection and exits when that connection ends (a controller that
died or closed its SSH session leaves nothing running) or when nobody authenticates within
`accept_timeout_s`. A connection with a wrong token is dropped and the agent keeps waiting.
"""

from __future__ import annotations

import contextlib
import gc
import hmac
import io
import json
import os
import resource
import secrets
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from agent.errors import UsageError
from agent.trial_request import TrialRequest

ACCEPT_TIMEOUT_S = 60.0
MAX_REQUEST_BYTES = 1 << 20  # a trial request is a few hundred bytes


class WarmProtocolError(UsageError):
    """A request that is not one: the message names what is wrong with it."""


@dataclass(frozen=True)
class WarmReply:
    """One trial's outcome, as a fresh `h2iot-agent trial` process would have left it."""

    exit_status: int
    stdout: str
    stderr: str
    t_mono_start_ns: int
    t_mono_end_ns: int
    cpu_s: float

    def line(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode() + b"\n"


def parse_request(line: bytes) -> list[str]:
    """The `trial` words of one request line; WarmProtocolError names what is wrong."""
    try:
        document = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise WarmProtocolError(f"warm request: not JSON ({exc})") from None
    if not isinstance(document, dict) or set(document) != {"request"}:
        raise WarmProtocolError('warm request: expected {"request": {...}} (a trial request)')
    try:
        return TrialRequest.from_json(document["request"]).argv()
    except UsageError as exc:
        raise WarmProtocolError(f"warm request: {exc}") from None


def _cpu_s() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def run_one(argv: Sequence[str], main: Callable[[Sequence[str]], int]) -> WarmReply:
    """Run one CLI invocation in this process, its output captured."""
    stdout, stderr = io.StringIO(), io.StringIO()
    cpu_start = _cpu_s()
    start_ns = time.monotonic_ns()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            status = main(argv)
        except SystemExit as exc:  # argparse's --help and the like
            status = exc.code if isinstance(exc.code, int) else 2
    end_ns = time.monotonic_ns()
    return WarmReply(
        status, stdout.getvalue(), stderr.getvalue(), start_ns, end_ns, _cpu_s() - cpu_start
    )


def _reply_to(line: bytes, main: Callable[[Sequence[str]], int]) -> WarmReply:
    try:
        argv = parse_request(line)
    except WarmProtocolError as exc:
        now = time.monotonic_ns()
        return WarmReply(exc.exit_status, "", f"h2iot-agent: error: {exc}\n", now, now, 0.0)
    return run_one(argv, main)


def write_ready_file(path: Path, port: int, token: str) -> None:
    """`{"port", "token", "pid"}`, readable by this user only, renamed into place whole."""
    scratch = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump({"port": port, "token": token, "pid": os.getpid()}, handle)
    os.replace(scratch, path)


def _authenticated(conn: socket.socket, reader: io.BufferedReader, token: str) -> bool:
    conn.settimeout(10.0)
    try:
        line = reader.readline(MAX_REQUEST_BYTES)
        given = json.loads(line).get("token")
    except (OSError, ValueError, AttributeError):
        return False
    conn.settimeout(None)
    return isinstance(given, str) and hmac.compare_digest(given, token)


def serve(
    ready_file: Path,
    main: Callable[[Sequence[str]], int],
    *,
    host: str = "127.0.0.1",
    accept_timeout_s: float = ACCEPT_TIMEOUT_S,
) -> int:
    """Listen, write the ready file, serve one authenticated controller until it hangs up."""
    token = secrets.token_hex(16)
    with socket.create_server((host, 0)) as listener:
        listener.settimeout(accept_timeout_s)
        write_ready_file(ready_file, listener.getsockname()[1], token)
        while True:
            try:
                conn, _peer = listener.accept()
            except TimeoutError:
                raise UsageError(
                    f"warm: no controller connected within {accept_timeout_s:g} s"
                ) from None
            with conn, conn.makefile("rb") as reader:
                if not _authenticated(conn, reader, token):
                    continue
                conn.sendall(b'{"ok":true}\n')
                while line := reader.readline(MAX_REQUEST_BYTES):
                    conn.sendall(_reply_to(line, main).line())
                    # Between trials, outside every window: the last trial's garbage is
                    # collected here, not charged to the next.
                    gc.collect()
                return 0
