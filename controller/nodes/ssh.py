"""SSH transport through fabric, with host keys checked and low per-command latency.

fabric's `Connection` trusts any host key (it installs paramiko's AutoAddPolicy) and reads the
user's ssh_config; here the configured known_hosts file is loaded and unknown hosts are refused
(a RejectPolicy) unless the first-contact flag records them, and no ssh_config is read. Nagle is
off on the TCP socket and invoke's end-of-command polling is 1 ms instead of 10 ms, which takes a
command's round trip on loopback from about 48 ms to a few ms.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fabric
import paramiko
from fabric.runners import Remote
from invoke.exceptions import CommandTimedOut

from controller.nodes import shell
from controller.nodes.clock import Reading, RoundTrip, clock_offset, parse_reply
from controller.nodes.errors import (
    CommandTimeoutError,
    HostKeyError,
    NodeError,
    NodeUnreachableError,
)
from controller.nodes.records import ClockOffset, CommandResult
from controller.nodes.transport import Stream

CONNECT_TIMEOUT_S = 10.0
CLOCK_WARMUP = 5
CLOCK_REPLY_TIMEOUT_S = 5.0

NewHostKeyNotice = Callable[[str], None]
"""Receives one line announcing a host key recorded on first contact (with its fingerprint)."""

_KNOWN_HOSTS_LOCK = threading.Lock()  # fan-out threads may record keys into the same file


class _LowLatencyRemote(Remote):  # type: ignore[misc]
    # invoke sleeps this long between checks for the command's end (10 ms by default).
    input_sleep = 0.001


@dataclass(frozen=True)
class SshTarget:
    """Where and how to log in. `key` None uses the user's default keys and agent."""

    host: str
    port: int
    user: str | None
    key: Path | None
    known_hosts: Path


class _RejectUnknown(paramiko.RejectPolicy):  # type: ignore[misc]
    def __init__(self, label: str, known_hosts: Path) -> None:
        self._label = label
        self._known_hosts = known_hosts

    def missing_host_key(self, client: Any, hostname: str, key: paramiko.PKey) -> None:
        raise HostKeyError(
            f"{self._label}: host key of {hostname} ({key.get_name()} {key.fingerprint}) is not "
            f"in {self._known_hosts}; verify it and rerun with --accept-new-host-key to record it"
        )


class _RecordNew(paramiko.MissingHostKeyPolicy):  # type: ignore[misc]
    def __init__(self, known_hosts: Path, notice: NewHostKeyNotice) -> None:
        self._known_hosts = known_hosts
        self._notice = notice

    def missing_host_key(self, client: Any, hostname: str, key: paramiko.PKey) -> None:
        with _KNOWN_HOSTS_LOCK:
            self._known_hosts.parent.mkdir(parents=True, exist_ok=True)
            with self._known_hosts.open("a+b") as file:
                file.seek(0, 2)
                if file.tell():
                    file.seek(-1, 2)
                    if file.read(1) != b"\n":
                        file.write(b"\n")
                file.write(f"{hostname} {key.get_name()} {key.get_base64()}\n".encode())
        self._notice(
            f"recorded new host key of {hostname}: {key.get_name()} {key.fingerprint} "
            f"in {self._known_hosts}"
        )


class SshTransport:
    """Commands, files and clock readings over one fabric `Connection`."""

    def __init__(self, label: str, connection: fabric.Connection) -> None:
        self.label = label
        self._connection = connection

    def run(self, command: str, timeout_s: float) -> CommandResult:
        started = time.monotonic()
        try:
            result = self._connection.run(
                command,
                hide=True,
                warn=True,
                in_stream=False,
                pty=False,
                timeout=timeout_s,
                encoding="utf-8",
            )
        except CommandTimedOut:
            raise CommandTimeoutError(
                f"{self.label}: `{command}` still running after {timeout_s:g} s"
            ) from None
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise NodeUnreachableError(f"{self.label}: connection lost: {exc}") from None
        if result.exited == -1 and not self._connection.is_connected:
            raise NodeUnreachableError(f"{self.label}: connection lost during `{command}`")
        return CommandResult(
            command=command,
            stdout=result.stdout,
            stderr=result.stderr,
            exit_status=result.exited,
            duration_s=time.monotonic() - started,
        )

    def put(self, local: Path, remote: str) -> None:
        try:
            self._connection.put(str(local), remote)
        except (OSError, paramiko.SSHException) as exc:
            raise NodeError(f"{self.label}: copying {local} to {remote}: {exc}") from None

    def open_loopback(self, port: int, timeout_s: float) -> Stream:
        """An SSH direct-tcpip channel to the node's 127.0.0.1:port, in this session."""
        try:
            transport = self._connection.client.get_transport()
            if transport is None:
                raise paramiko.SSHException("not connected")
            channel: Stream = transport.open_channel(
                "direct-tcpip", ("127.0.0.1", port), ("127.0.0.1", 0), timeout=timeout_s
            )
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise NodeError(f"{self.label}: forwarding to 127.0.0.1:{port}: {exc}") from None
        return channel

    def clock_offset(self, python: str, samples: int) -> ClockOffset:
        """Round trips over one persistent channel to a loop that prints the node's clocks."""
        channel = None
        try:
            channel = self._connection.client.get_transport().open_session()
            channel.settimeout(CLOCK_REPLY_TIMEOUT_S)
            channel.exec_command(shell.clock_loop(python))
            replies = channel.makefile("rb")
            trips = []
            for index in range(CLOCK_WARMUP + samples):
                wall_send, mono_send = time.time_ns(), time.monotonic_ns()
                channel.sendall(b"\n")
                line = replies.readline()
                mono_receive, wall_receive = time.monotonic_ns(), time.time_ns()
                if not line:
                    raise self._clock_loop_ended(channel, python)
                remote_wall, remote_mono = parse_reply(line)
                if index >= CLOCK_WARMUP:
                    trips.append(
                        RoundTrip(
                            wall=Reading(wall_send, remote_wall, wall_receive),
                            mono=Reading(mono_send, remote_mono, mono_receive),
                        )
                    )
            channel.close()
        except ValueError:
            raise NodeError(f"{self.label}: clock loop with {python} sent a bad line") from None
        except (paramiko.SSHException, OSError, EOFError) as exc:
            # A loop that could not start (no such interpreter) may close the channel before
            # the first send, which then fails with "Socket is closed": say what it printed.
            if channel is not None and (channel.closed or channel.exit_status_ready()):
                raise self._clock_loop_ended(channel, python) from None
            raise NodeUnreachableError(f"{self.label}: clock measurement failed: {exc}") from None
        return clock_offset(trips)

    def _clock_loop_ended(self, channel: paramiko.Channel, python: str) -> NodeError:
        error = channel.makefile_stderr("rb").read().decode(errors="replace")
        return NodeError(
            f"{self.label}: clock loop with {python} ended: {error.strip() or 'no output'}"
        )

    def close(self) -> None:
        self._connection.close()


def open_ssh(
    label: str,
    target: SshTarget,
    *,
    accept_new_host_key: bool = False,
    on_new_host_key: NewHostKeyNotice = print,
    connect_timeout_s: float = CONNECT_TIMEOUT_S,
) -> SshTransport:
    """Connect and authenticate with the key, checking the host key against target.known_hosts.

    An unknown host is refused unless accept_new_host_key, which records its key (never a
    changed one) and announces its fingerprint through on_new_host_key.
    """
    known_hosts = target.known_hosts
    if not known_hosts.exists() and not accept_new_host_key:
        raise HostKeyError(
            f"{label}: known_hosts file {known_hosts} does not exist; rerun with "
            "--accept-new-host-key to create it on first contact"
        )
    try:
        sock = socket.create_connection((target.host, target.port), timeout=connect_timeout_s)
    except OSError as exc:
        raise NodeUnreachableError(
            f"{label}: cannot reach {target.host}:{target.port}: {exc.strerror or exc}"
        ) from None
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    config = fabric.Config(
        ssh_config=paramiko.SSHConfig(),
        lazy=True,
        overrides={"runners": {"remote": _LowLatencyRemote}},
    )
    connect_kwargs: dict[str, Any] = {
        "sock": sock,
        "banner_timeout": connect_timeout_s,
        "auth_timeout": connect_timeout_s,
    }
    if target.key is not None:
        connect_kwargs |= {
            "key_filename": str(target.key),
            "look_for_keys": False,
            "allow_agent": False,
        }
    connection = fabric.Connection(
        target.host,
        user=target.user,
        port=target.port,
        config=config,
        connect_kwargs=connect_kwargs,
    )
    client = connection.client
    if known_hosts.exists():
        client.load_system_host_keys(str(known_hosts))
    client.set_missing_host_key_policy(
        _RecordNew(known_hosts, on_new_host_key)
        if accept_new_host_key
        else _RejectUnknown(label, known_hosts)
    )
    try:
        connection.open()
    except HostKeyError:
        connection.close()
        raise
    except paramiko.BadHostKeyException as exc:
        connection.close()
        raise HostKeyError(
            f"{label}: host key of {exc.hostname} is {exc.key.get_name()} {exc.key.fingerprint} "
            f"but {known_hosts} has {exc.expected_key.fingerprint}: refusing to connect "
            "(if the host was reinstalled, remove its old line)"
        ) from None
    except paramiko.AuthenticationException:
        connection.close()
        raise NodeUnreachableError(
            f"{label}: {connection.user}@{target.host} did not accept key "
            f"{target.key or '(default keys)'}"
        ) from None
    except (paramiko.SSHException, OSError, EOFError) as exc:
        connection.close()
        raise NodeUnreachableError(
            f"{label}: SSH to {target.host}:{target.port} failed: {exc}"
        ) from None
    return SshTransport(label, connection)
