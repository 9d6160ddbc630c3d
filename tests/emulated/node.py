"""An emulated Raspberry Pi OS node: the cached root of tests.emulated.rootfs under an overlay
(writes go to the test's directory, the cache stays clean), /proc and /dev inside, and the
root's own sshd (an ARM binary under qemu-user, as on the Pi) chrooted into it and listening in
a network namespace. Sessions log in as the ordinary user `pi`; `uname -m` says armv7l or
aarch64, and every process of the node, qemu included, is a descendant of that sshd.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.emulated.rootfs import NODE_USER
from tests.netns.hosts import (
    START_TIMEOUT_S,
    SshHost,
    SshKey,
    run_checked,
    started_host,
    stop_by_pidfile,
)

SSHD_CONFIG = "/etc/ssh/sshd_config_h2iot"
PIDFILE = "/run/sshd_h2iot.pid"
LOG = "/var/log/sshd_h2iot.log"


def _sshd_config(address: str, port: int) -> str:
    return "\n".join(
        [
            f"ListenAddress {address}",
            f"Port {port}",
            "HostKey /etc/ssh/ssh_host_ed25519_key",
            f"PidFile {PIDFILE}",
            "PermitRootLogin no",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            "UseDNS no",
            "PrintMotd no",
            "Subsystem sftp internal-sftp",
            "",
        ]
    )


@dataclass
class EmulatedNodes:
    """Starts each node's sshd in its own overlay of roots[role]; `release()` unmounts them.

    Its `start` has tests.netns' start_sshd signature, for `Testbed(start_host=...)`."""

    roots: dict[str, Path]  # role -> cached root
    mounts: list[Path] = field(default_factory=list)  # innermost last

    def start(
        self,
        directory: Path,
        name: str,
        address: str,
        port: int,
        key: SshKey,
        netns: str | None = None,
        data_address: str | None = None,
    ) -> SshHost:
        merged = self._mount(directory, self.roots[name])
        _unlock(merged / "etc/shadow")
        home = merged / "home" / NODE_USER
        (home / ".ssh").mkdir(mode=0o700, exist_ok=True)
        (home / ".ssh" / "authorized_keys").write_text(key.public_line + "\n")
        owner = (merged / "home" / NODE_USER).stat()
        for path in (home / ".ssh", home / ".ssh" / "authorized_keys"):
            os.chown(path, owner.st_uid, owner.st_gid)
        host_key = merged / "etc/ssh/ssh_host_ed25519_key"
        host_key.unlink(missing_ok=True)
        # The host's native ssh-keygen: the same key, without a second of emulation.
        run_checked(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(host_key)])
        (merged / SSHD_CONFIG.lstrip("/")).write_text(_sshd_config(address, port))
        (merged / "run/sshd").mkdir(exist_ok=True)  # privilege separation needs it
        prefix = ["nsenter", f"--net=/run/netns/{netns}"] if netns else []
        run_checked(
            [*prefix, "chroot", str(merged), "/usr/sbin/sshd", "-f", SSHD_CONFIG, "-E", LOG]
        )
        pidfile = merged / PIDFILE.lstrip("/")
        _wait_for(pidfile, merged / LOG.lstrip("/"), name)
        return started_host(
            directory,
            name=name,
            address=address,
            port=port,
            user=NODE_USER,
            key=key,
            host_key=host_key,
            home=home,
            pidfile=pidfile,
            log=merged / LOG.lstrip("/"),
            netns=netns,
            data_address=data_address,
        )

    def _mount(self, directory: Path, root: Path) -> Path:
        upper, work, merged = directory / "upper", directory / "work", directory / "root"
        for path in (upper, work, merged):
            path.mkdir(parents=True, exist_ok=True)
        options = f"lowerdir={root},upperdir={upper},workdir={work}"
        run_checked(["mount", "-t", "overlay", "overlay", "-o", options, str(merged)])
        self.mounts.append(merged)
        run_checked(["mount", "-t", "proc", "proc", str(merged / "proc")])
        self.mounts.append(merged / "proc")
        run_checked(["mount", "--bind", "/dev", str(merged / "dev")])
        self.mounts.append(merged / "dev")
        return merged

    def release(self, hosts: list[SshHost]) -> None:
        """Stop each sshd (if still running) and unmount, innermost first."""
        for host in hosts:
            stop_by_pidfile(host.pidfile)
        for mount in reversed(self.mounts):
            subprocess.run(["umount", "--lazy", str(mount)], check=False, capture_output=True)
        self.mounts.clear()


def _unlock(shadow: Path) -> None:
    """useradd leaves the account locked (`!`), and sshd without PAM refuses any key of a locked
    account: `*`, no password but not locked (a Pi's user has a password)."""
    lines = shadow.read_text().splitlines(keepends=True)
    prefix = f"{NODE_USER}:!:"
    shadow.write_text(
        "".join(
            f"{NODE_USER}:*:{line[len(prefix) :]}" if line.startswith(prefix) else line
            for line in lines
        )
    )


def _wait_for(pidfile: Path, log: Path, name: str) -> None:
    # sshd under qemu-user starts in about a second; a loaded machine takes longer.
    deadline = time.monotonic() + 6 * START_TIMEOUT_S
    while not pidfile.exists():
        if time.monotonic() > deadline:
            said = log.read_text()[-500:] if log.exists() else "no log"
            raise RuntimeError(f"emulated sshd for {name} wrote no pidfile: {said}")
        time.sleep(0.05)
