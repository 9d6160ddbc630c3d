"""Debian bookworm root filesystems for emulated Raspberry Pi OS nodes, built once per machine.

Raspberry Pi OS bookworm is Debian bookworm plus the Pi's own packages: the same glibc 2.36 and
Python 3.11, armv7l (32-bit, `armhf`) or aarch64 (`arm64`). `debootstrap` builds such a root
(about 2.5 minutes and 260 MB each), and qemu-user-static runs its binaries through binfmt_misc.

The roots are cached under CACHE_DIR, one directory per architecture and recipe (suite, package
list, mirror, setup steps: the key changes when any of them does), built into a scratch
directory and renamed into place, so a cached root is always complete. A lock file per root
keeps two builders (the CI step and a test session) from building the same one. Tests never
write into a cached root: they mount it read-only under an overlay (tests.emulated.node).

`python -m tests.emulated.rootfs` builds the missing roots in parallel (.ci/run does, before
the tests) and prints where each is and how long it took.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

CACHE_DIR = Path(os.environ.get("H2IOT_ROOTFS_CACHE", "/var/cache/h2iot/rootfs"))
SUITE = "bookworm"
# What a freshly installed Raspberry Pi OS Lite brings that the agent and its deploy use.
PACKAGES = ("python3", "python3-venv", "openssh-server")
# The ordinary user the nodes run as (configs/study.toml's `pi`).
NODE_USER = "pi"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
# About 2.5 minutes each on an idle machine; a loaded one (CI beside other jobs) took 35.
BUILD_TIMEOUT_S = 5400.0
# A change to the steps after debootstrap must change the cache key: bump this.
SETUP_VERSION = 1


@dataclass(frozen=True)
class Arch:
    """A Debian architecture, what `uname -m` says on it and the binfmt_misc entry running it."""

    debian: str
    machine: str
    binfmt: str


ARCHES = {
    "armhf": Arch("armhf", "armv7l", "qemu-arm"),
    "arm64": Arch("arm64", "aarch64", "qemu-aarch64"),
}


class RootfsError(RuntimeError):
    """A root could not be built or emulated; the message names the step and its output."""


def apt_mirror(sources: Path = Path("/etc/apt")) -> str:
    """The Debian mirror this machine's apt uses (deb822 `.sources` first, then sources.list)."""
    for path in sorted(sources.glob("sources.list.d/*.sources")):
        for stanza in path.read_text().split("\n\n"):
            fields = dict(
                line.split(":", 1) for line in stanza.splitlines() if ":" in line and line[0] != "#"
            )
            uris = fields.get("URIs", "").split()
            if uris and SUITE in fields.get("Suites", "").split():
                return uris[0]
    legacy = sources / "sources.list"
    if legacy.is_file():
        for line in legacy.read_text().splitlines():
            words = line.split()
            if len(words) >= 3 and words[0] == "deb" and words[2] == SUITE:
                return words[1]
    return DEFAULT_MIRROR


def root_dir(arch: str, mirror: str) -> Path:
    """Where the cached root of arch lives (whether or not it is built yet)."""
    recipe = f"{SUITE}|{arch}|minbase|{','.join(sorted(PACKAGES))}|{mirror}|{SETUP_VERSION}"
    key = hashlib.sha256(recipe.encode()).hexdigest()[:12]
    return CACHE_DIR / f"{SUITE}-{arch}-{key}"


BINFMT_DIR = Path("/proc/sys/fs/binfmt_misc")
# One mount at a time, across the threads of ensure_roots and the processes that build roots at
# once (.ci/run's step and a test session): a second `mount` of binfmt_misc fails with
# "already mounted", which is the state it wanted.
_BINFMT_THREADS = threading.Lock()
BINFMT_LOCK = Path(os.environ.get("H2IOT_BINFMT_LOCK", "/run/lock/h2iot-binfmt.lock"))


def enable_binfmt(arch: str, entries: Path = BINFMT_DIR) -> None:
    """Mount binfmt_misc if needed and enable arch's qemu entry (idempotent, safe to call from
    several threads and processes at once; needs root)."""
    entry = ARCHES[arch].binfmt
    with _BINFMT_THREADS, _locked(BINFMT_LOCK):
        if not (entries / "register").exists():
            try:
                _run(
                    ["mount", "-t", "binfmt_misc", "binfmt_misc", str(entries)],
                    "mounting binfmt_misc",
                )
            except RootfsError:
                # Mounted meanwhile by something outside our locks (systemd, binfmt-support's
                # own scripts): what counts is that it is there now.
                if not (entries / "register").exists():
                    raise
        if not (entries / entry).exists() or "enabled" not in (entries / entry).read_text():
            _run(["update-binfmts", "--enable", entry], f"enabling {entry}")


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_root(arch: str) -> Path:
    """The cached root of arch, built first if missing (binfmt enabled either way)."""
    enable_binfmt(arch)
    mirror = apt_mirror()
    root = root_dir(arch, mirror)
    with _locked(root.with_name(root.name + ".lock")):
        if not root.is_dir():
            _build(arch, mirror, root)
    return root


def _build(arch: str, mirror: str, root: Path) -> None:
    # Under the lock: another scratch root of this recipe is what a killed builder left.
    for left in root.parent.glob(f"{root.name}.building-*"):
        shutil.rmtree(left, ignore_errors=True)
    scratch = root.with_name(f"{root.name}.building-{os.getpid()}")
    _run(
        [
            "debootstrap", f"--arch={arch}", "--variant=minbase",
            f"--include={','.join(PACKAGES)}", SUITE, str(scratch), mirror,
        ],
        f"debootstrap of {arch}",
    )  # fmt: skip
    _finish(arch, scratch)
    os.rename(scratch, root)
    for stale in root.parent.glob(f"{SUITE}-{arch}-*"):
        if stale != root and stale.is_dir() and ".building-" not in stale.name:
            shutil.rmtree(stale, ignore_errors=True)


def _finish(arch: str, scratch: Path) -> None:
    """What a Raspberry Pi OS image has beyond debootstrap's root: its ordinary user."""
    _run(
        ["chroot", str(scratch), "useradd", "--create-home", "--shell", "/bin/sh", NODE_USER],
        f"adding {NODE_USER} to the {arch} root",
    )
    # Caches and host keys stay out of the shared root: each emulated node makes its own keys.
    shutil.rmtree(scratch / "var/cache/apt/archives", ignore_errors=True)
    for key in (scratch / "etc/ssh").glob("ssh_host_*"):
        key.unlink()


def _run(argv: Sequence[str], doing: str) -> None:
    # A session of its own: past the timeout, debootstrap's package scripts (under qemu) are
    # killed with it instead of running on, orphaned, in the scratch root.
    try:
        process = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
    except FileNotFoundError:
        raise RootfsError(f"{doing}: {argv[0]} is missing (Debian packages in .ci/apt/)") from None
    try:
        output, _ = process.communicate(timeout=BUILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise RootfsError(f"{doing}: still running after {BUILD_TIMEOUT_S:g} s, killed") from None
    if process.returncode != 0:
        tail = output.strip().splitlines()[-3:]
        raise RootfsError(f"{doing}: {' '.join(argv)} exited {process.returncode}: {tail}")


def ensure_roots(arches: Sequence[str] = tuple(ARCHES)) -> dict[str, Path]:
    """ensure_root for each arch, in parallel (debootstrap mostly waits on downloads and
    on emulated package scripts, one core each)."""
    with ThreadPoolExecutor(max_workers=len(arches)) as pool:
        return dict(zip(arches, pool.map(ensure_root, arches), strict=True))


def main() -> int:
    started = time.monotonic()
    try:
        roots = ensure_roots()
    except RootfsError as exc:
        print(f"emulated node roots: {exc}", file=sys.stderr)
        return 1
    for arch, root in roots.items():
        print(f"emulated node root {arch}: {root}")
    print(f"emulated node roots ready in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
