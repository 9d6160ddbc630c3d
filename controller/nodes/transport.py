"""The transport interface nodes run on, and its local implementation (subprocesses)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Protocol

from controller.nodes.errors import CommandTimeoutError, NodeError
from controller.nodes.namespace import in_netns, same_netns
from controller.nodes.records import ClockOffset, CommandResult


class Stream(Protocol):
    """A byte stream to a port on the node's loopback (a socket, or an SSH channel to one)."""

    def sendall(self, data: bytes) -> None: ...

    def recv(self, size: int) -> bytes: ...

    def settimeout(self, timeout_s: float | None) -> None: ...

    def close(self) -> None: ...


def loopback_socket(label: str, port: int, timeout_s: float, netns: Path | None = None) -> Stream:
    """A TCP connection to 127.0.0.1:port on this machine, on the loopback of the network
    namespace `netns` names (a local node's own, an emulated device's) when it is not ours."""

    def connect() -> Stream:
        return socket.create_connection(("127.0.0.1", port), timeout=timeout_s)

    try:
        if netns is None or same_netns(netns):
            return connect()
        return in_netns(netns, connect)
    except OSError as exc:
        raise NodeError(f"{label}: connecting to 127.0.0.1:{port}: {exc}") from None


class Transport(Protocol):
    """Moves commands, files and clock readings to one node. `Node` builds on it."""

    label: str
    """How messages name the node, e.g. `server (root@10.0.0.2:22)`."""

    def run(self, command: str, timeout_s: float) -> CommandResult:
        """Run a shell command line; raise CommandTimeoutError after timeout_s (a backstop:
        `Node` kills late commands on the node itself)."""
        ...

    def put(self, local: Path, remote: str) -> None:
        """Copy a local file to an absolute path on the node (its directory must exist)."""
        ...

    def clock_offset(self, python: str, samples: int) -> ClockOffset:
        """The node's clocks minus the controller's, measured with the node's interpreter."""
        ...

    def open_loopback(self, port: int, timeout_s: float) -> Stream:
        """A stream to 127.0.0.1:port as seen from the node (a warm agent's control port)."""
        ...

    def close(self) -> None: ...


class LocalTransport:
    """Runs commands as subprocesses of the controller, through `/bin/sh -c`."""

    def __init__(self, label: str) -> None:
        self.label = label

    def run(self, command: str, timeout_s: float) -> CommandResult:
        started = time.monotonic()
        # A session of its own: a late command is killed with everything it started.
        process = subprocess.Popen(
            ["/bin/sh", "-c", command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            stdout, stderr = process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise CommandTimeoutError(
                f"{self.label}: `{command}` still running after {timeout_s:g} s"
            ) from None
        return CommandResult(
            command=command,
            stdout=stdout.decode(errors="replace"),
            stderr=stderr.decode(errors="replace"),
            # As a shell reports it: 128 + N for a command killed by signal N.
            exit_status=process.returncode if process.returncode >= 0 else 128 - process.returncode,
            duration_s=time.monotonic() - started,
        )

    def put(self, local: Path, remote: str) -> None:
        try:
            shutil.copyfile(local, remote)
        except OSError as exc:
            raise NodeError(f"{self.label}: copying {local} to {remote}: {exc}") from None

    def clock_offset(self, python: str, samples: int) -> ClockOffset:
        return ClockOffset.same_clock()

    def open_loopback(self, port: int, timeout_s: float) -> Stream:
        return loopback_socket(self.label, port, timeout_s)

    def close(self) -> None:
        """Nothing to close: each command is its own process."""
