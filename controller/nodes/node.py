"""`Node`: what the sweep engine does on a node, the same over either transport."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from controller.nodes import shell
from controller.nodes.errors import CommandFailedError, CommandTimeoutError, NodeError
from controller.nodes.records import (
    BackgroundProcess,
    ClockOffset,
    CommandResult,
    NewLines,
    StopOutcome,
)
from controller.nodes.transport import Transport

DEFAULT_TIMEOUT_S = 60.0
BACKSTOP_S = 10.0  # extra time the transport waits for `timeout` on the node to act


class Node:
    """One node. Every command runs under a timeout enforced on the node itself.

    Paths are strings in the node's file system; `~` and `~/...` are expanded with the node's
    home. Commands are argv lists (quoted here) or command lines from `controller.nodes.shell`.
    """

    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self._home: str | None = None

    @property
    def label(self) -> str:
        return self.transport.label

    def shell(
        self, command: str, *, timeout_s: float = DEFAULT_TIMEOUT_S, check: bool = True
    ) -> CommandResult:
        """Run a command line built with shlex quoting. With check, a non-zero exit raises
        CommandFailedError; a command past timeout_s is killed and raises CommandTimeoutError."""
        result = self.transport.run(shell.with_timeout(command, timeout_s), timeout_s + BACKSTOP_S)
        result = replace(result, command=command)
        if shell.is_timeout(result.exit_status, result.duration_s, timeout_s):
            raise CommandTimeoutError(f"{self.label}: `{command}` killed after {timeout_s:g} s")
        if check and not result.ok:
            detail = (result.stderr.strip() or result.stdout.strip()).splitlines()
            raise CommandFailedError(
                f"{self.label}: `{_short(command)}` exited {result.exit_status}"
                + (f": {detail[-1]}" if detail else "")
            )
        return result

    def run(
        self, argv: Sequence[str], *, timeout_s: float = DEFAULT_TIMEOUT_S, check: bool = True
    ) -> CommandResult:
        """Run argv (words quoted, no shell syntax) like `shell`."""
        return self.shell(shell.join(argv), timeout_s=timeout_s, check=check)

    @property
    def home(self) -> str:
        if self._home is None:
            self._home = self.shell(shell.home()).stdout.strip()
        return self._home

    def path(self, path: str) -> str:
        """The path with `~` expanded to the node's home."""
        return shell.expand_home(path, self.home) if path.startswith("~") else path

    def makedirs(self, directory: str) -> None:
        self.run(["mkdir", "-p", "--", self.path(directory)])

    def start_background(self, argv: Sequence[str], *, pidfile: str, log: str) -> BackgroundProcess:
        """Start argv detached, its output to log, its pid and start time in pidfile.

        Refuses (NodeError) while the pidfile's process still runs: stop it first.
        """
        pidfile, log = self.path(pidfile), self.path(log)
        running = self.running_pid(pidfile)
        if running is not None:
            raise NodeError(f"{self.label}: {pidfile} names running process {running}")
        stdout = self.shell(shell.start_background(argv, pidfile, log)).stdout
        return BackgroundProcess(pid=int(stdout.split()[-1]), pidfile=pidfile, log=log)

    def running_pid(self, pidfile: str) -> int | None:
        """The pid in pidfile if that process is alive (health check), else None."""
        stdout = self.shell(shell.running_pid(self.path(pidfile))).stdout.strip()
        return int(stdout) if stdout else None

    def stop_background(self, pidfile: str, *, grace_s: float = 10.0) -> StopOutcome:
        """TERM the pidfile's process, KILL it after grace_s; remove the pidfile."""
        command = shell.stop_background(self.path(pidfile), grace_s)
        stdout = self.shell(command, timeout_s=2 * grace_s + 10).stdout
        return shell.parse_stop_outcome(stdout)

    def read_file(self, path: str, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> str:
        """The whole file as text (UTF-8)."""
        return self.run(["cat", "--", self.path(path)], timeout_s=timeout_s).stdout

    def read_new_lines(self, path: str, offset_bytes: int = 0) -> NewLines:
        """Complete lines added since offset_bytes (none while the file does not exist yet).

        Offsets count bytes; lines are decoded as UTF-8 (JSON lines are ASCII).
        """
        path = self.path(path)
        stdout = self.shell(shell.read_since(path, offset_bytes)).stdout
        try:
            return shell.parse_new_lines(stdout, offset_bytes)
        except ValueError as exc:
            raise NodeError(f"{self.label}: {path}: {exc}") from None

    def put_file(self, local: Path, remote: str) -> str:
        """Copy a local file to the node (creating its directory); returns the absolute path."""
        remote = self.path(remote)
        self.makedirs(remote.rsplit("/", 1)[0] or "/")
        self.transport.put(local, remote)
        return remote

    def clock_offset(self, python: str, *, samples: int = 200) -> ClockOffset:
        """The node's clocks minus the controller's (0 +/- 0 for a local node)."""
        return self.transport.clock_offset(self.path(python), samples)

    def close(self) -> None:
        self.transport.close()


def _short(command: str, limit: int = 120) -> str:
    """The command on one line, cut to limit characters."""
    line = command.replace("\n", "; ")
    return line if len(line) <= limit else line[: limit - 3] + "..."
