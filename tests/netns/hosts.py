"""Test SSH hosts: a client key pair and sshd processes with a fresh host key each.

sshd runs as a daemon with a private config under the host's directory; its pidfile appears once
it listens, and it is stopped by that pidfile. Its sessions get `HOME` set to the host's own home
directory, which also keeps the invoking user's shell start-up files (for root here: a pyenv init
that costs about 150 ms per command) out of every SSH command.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

SSHD = "/usr/sbin/sshd"
START_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class SshKey:
    """An ed25519 client key pair; `public_line` is what authorized_keys holds."""

    private_path: Path
    public_line: str


@dataclass(frozen=True)
class SshHost:
    """A running sshd that authorizes `SshKey` for the current user.

    `address`/`port` is where the controller reaches it; `known_hosts` a file with its host key
    only (`known_hosts_line`); `home` the `HOME` of its sessions; `netns` the namespace it runs in
    (None on 127.0.0.1); `data_address` its end of the namespaces' data link (None on 127.0.0.1).
    """

    name: str
    address: str
    port: int
    user: str
    key: Path
    known_hosts: Path
    known_hosts_line: str
    home: Path
    pidfile: Path
    log: Path
    netns: str | None = None
    data_address: str | None = None

    def stop(self) -> None:
        """Stop this sshd by its pidfile (and so every session it still serves)."""
        stop_by_pidfile(self.pidfile)


def run_checked(argv: list[str]) -> str:
    """Run a setup command; a failure raises with the command and its stderr."""
    result = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=30)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {result.returncode}: {result.stderr.strip()}")
    return result.stdout


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def make_key(directory: Path, name: str = "id_ed25519") -> SshKey:
    directory.mkdir(parents=True, exist_ok=True)
    private = directory / name
    run_checked(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "h2iot-test", "-f", str(private)]
    )
    return SshKey(private, private.with_suffix(".pub").read_text().strip())


def _known_hosts_name(address: str, port: int) -> str:
    return address if port == 22 else f"[{address}]:{port}"


def _sshd_config(directory: Path, address: str, port: int, home: Path) -> str:
    return "\n".join(
        [
            f"ListenAddress {address}",
            f"Port {port}",
            f"HostKey {directory / 'host_ed25519'}",
            f"PidFile {directory / 'sshd.pid'}",
            f"AuthorizedKeysFile {directory / 'authorized_keys'}",
            "PermitRootLogin prohibit-password",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            "StrictModes no",
            "UseDNS no",
            "PrintMotd no",
            "Subsystem sftp internal-sftp",
            f"SetEnv HOME={home}",
            "",
        ]
    )


def start_sshd(
    directory: Path,
    name: str,
    address: str,
    port: int,
    key: SshKey,
    netns: str | None = None,
    data_address: str | None = None,
) -> SshHost:
    """Start sshd on address:port (inside netns if given) with a fresh host key."""
    directory.mkdir(parents=True, exist_ok=True)
    home = directory / "home"
    home.mkdir(exist_ok=True)
    Path("/run/sshd").mkdir(exist_ok=True)  # privilege separation needs it; no systemd made it
    host_key = directory / "host_ed25519"
    run_checked(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(host_key)])
    (directory / "authorized_keys").write_text(key.public_line + "\n")
    config = directory / "sshd_config"
    config.write_text(_sshd_config(directory, address, port, home))
    run_checked([SSHD, "-t", "-f", str(config)])
    pidfile = directory / "sshd.pid"
    log = directory / "sshd.log"
    # Into the namespace's network only: `ip netns exec` would also remount /sys for it, hiding
    # the cgroup hierarchies a real host has (and a node-side device emulation needs).
    prefix = ["nsenter", f"--net=/run/netns/{netns}"] if netns else []
    run_checked([*prefix, SSHD, "-f", str(config), "-E", str(log)])
    deadline = time.monotonic() + START_TIMEOUT_S
    while not pidfile.exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"sshd for {name} wrote no pidfile: {log.read_text()[-500:]}")
        time.sleep(0.02)
    return started_host(
        directory,
        name=name,
        address=address,
        port=port,
        user=os.environ.get("USER") or run_checked(["id", "-un"]).strip(),
        key=key,
        host_key=host_key,
        home=home,
        pidfile=pidfile,
        log=log,
        netns=netns,
        data_address=data_address,
    )


def started_host(
    directory: Path,
    *,
    name: str,
    address: str,
    port: int,
    user: str,
    key: SshKey,
    host_key: Path,
    home: Path,
    pidfile: Path,
    log: Path,
    netns: str | None,
    data_address: str | None,
) -> SshHost:
    """The `SshHost` of an sshd that has started with `host_key`: its public half becomes the
    only line of a known_hosts file in `directory`."""
    key_type, key_b64 = host_key.with_suffix(".pub").read_text().split()[:2]
    line = f"{_known_hosts_name(address, port)} {key_type} {key_b64}"
    known_hosts = directory / "known_hosts"
    known_hosts.write_text(line + "\n")
    return SshHost(
        name=name,
        address=address,
        port=port,
        user=user,
        key=key.private_path,
        known_hosts=known_hosts,
        known_hosts_line=line,
        home=home,
        pidfile=pidfile,
        log=log,
        netns=netns,
        data_address=data_address,
    )


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    # A zombie is gone for our purposes; the field after the command name is the state.
    return stat.rpartition(")")[2].split()[0] != "Z"


def stop_by_pidfile(pidfile: Path, grace_s: float = 5.0) -> None:
    """TERM the process named in pidfile, wait for it, KILL it if it lingers."""
    try:
        pid = int(pidfile.read_text().split()[0])
    except (FileNotFoundError, IndexError, ValueError):
        return
    kill_and_wait(pid, grace_s)
    pidfile.unlink(missing_ok=True)


def kill_and_wait(pid: int, grace_s: float = 5.0) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while _alive(pid):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + grace_s
        time.sleep(0.02)
