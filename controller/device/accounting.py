"""A cgroup that only counts a local node's CPU time, for the modelled meters.

A modelled meter follows a node's CPU use. A process tree read from /proc finds each new
process within a reading and books its time from its start (`controller.meter.cpu_load`), but
the kernel's per-cgroup counter is exact: every process of the node is in the cgroup from its
first instruction, nothing is found late, nothing is missed. So every local node without a
device profile (which has a cgroup of its own already) gets one whenever this process may make
it (root, a v1 cpuacct controller or a v2 hierarchy), and its commands join it the same way as
an emulated device's (`controller.device.transport`). It limits nothing: under v1 it is made in
the cpuacct hierarchy only (where cpu and cpuacct are mounted together, the node becomes a
scheduling group of its own, with the default weight and no quota); under v2 no controller is
enabled for it. Where it cannot be made, the meter follows the node's process tree, and the
manifest says why (`Accounting.facts`).

Names are `h2iot-<controller pid>-<role>`, as node cgroups: those of a controller that died are
removed the next time one is made.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.device.cgroup import reap_stale, remove_directory
from controller.device.errors import EmulationError
from controller.device.hierarchy import AccountingPlace, LayoutError, accounting_place

_REMOVE_TIMEOUT_S = 5.0


def _place() -> AccountingPlace:
    try:
        mountinfo = Path("/proc/self/mountinfo").read_text()
        own = Path("/proc/self/cgroup").read_text()
    except OSError as exc:
        raise EmulationError(f"cgroup: cannot read this process's cgroups: {exc}") from None
    try:
        return accounting_place(mountinfo, own)
    except LayoutError as exc:
        raise EmulationError(f"cgroup: {exc}") from None


@dataclass
class AccountingCgroup:
    """One node's accounting cgroup: a directory with `cgroup.procs` and a usage counter."""

    directory: Path
    version: int

    @classmethod
    def create(cls, name: str, place: AccountingPlace | None = None) -> AccountingCgroup:
        """Make it; EmulationError (naming the path) when this process may not."""
        place = place or _place()
        parent = Path(place.parent)
        try:
            if place.version == 2:
                parent.mkdir(exist_ok=True)
            reap_stale(parent)
            directory = parent / name
            directory.mkdir()
        except OSError as exc:
            raise EmulationError(
                f"cgroup: cannot make {parent / name}: {exc.strerror or exc}"
            ) from None
        cgroup = cls(directory, place.version)
        if not cgroup.usage_file.is_file():
            cgroup.remove()
            raise EmulationError(f"cgroup: {directory} has no CPU usage counter")
        return cgroup

    @property
    def procs_files(self) -> tuple[Path, ...]:
        return (self.directory / "cgroup.procs",)

    @property
    def usage_directory(self) -> Path:
        return self.directory

    @property
    def usage_file(self) -> Path:
        return self.directory / ("cpuacct.usage" if self.version == 1 else "cpu.stat")

    def remove(self) -> None:
        problem = remove_directory(self.directory, _REMOVE_TIMEOUT_S)
        if problem is not None:
            raise EmulationError(f"cgroup: cannot remove {problem}")


@dataclass
class Accounting:
    """What each local node's CPU time is read from, and why (the manifest's
    `meter.accounting`)."""

    cgroups: dict[str, AccountingCgroup]
    reasons: dict[str, str]  # per local node without one: why not

    def facts(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            role: {"source": "cgroup", "cgroup": str(c.directory), "cgroup_version": c.version}
            for role, c in self.cgroups.items()
        }
        for role, reason in self.reasons.items():
            found[role] = {"source": "process tree", "why": reason}
        return found


def accounting_cgroups(roles: tuple[str, ...]) -> Accounting:
    """An accounting cgroup per role where this process may make one (see the module doc)."""
    made: dict[str, AccountingCgroup] = {}
    reasons: dict[str, str] = {}
    if os.geteuid() != 0:
        return Accounting({}, dict.fromkeys(roles, "not root: no cgroup can be made"))
    for role in roles:
        try:
            made[role] = AccountingCgroup.create(f"h2iot-{os.getpid()}-{role}")
        except EmulationError as exc:
            reasons[role] = str(exc)
    return Accounting(made, reasons)
