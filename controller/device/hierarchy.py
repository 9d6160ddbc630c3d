"""Where a node's cgroup goes, and what to write into it (sans-IO).

`find_layout(mountinfo, self_cgroup, v2_controllers)` reads `/proc/self/mountinfo` and
`/proc/self/cgroup` text and picks the cgroup version: v1 when the cpu controller sits on a v1
hierarchy (this project's CI machines), else v2 (`cpu.max`, `memory.max`). Under v1 a node's
cgroup is one directory per controller, made inside the controller's own cgroup so it stays
within whatever limits the controller itself runs under. Under v2 it is one directory below
`<root>/h2iot`: v2 lets a cgroup with processes in it (the controller's own) hand no domain
controller to its children, so the nodes' cgroups cannot live below the controller's.

`limit_writes(layout, profile, cpus, mems)` lists the files and values that apply a profile.
`accounting_place(mountinfo, self_cgroup)` places a cgroup that only counts a node's CPU time
(`controller.device.accounting`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from controller.config.profile import DeviceProfile

Version = Literal[1, 2]
CONTROLLERS = ("cpu", "cpuacct", "cpuset", "memory")
V2_PARENT = "h2iot"
_UNLIMITED_V1 = "-1"
# Ten times the default weight: on a busy machine the node still gets all of its quota (the
# quota, not the weight, is what slows it down).
_WEIGHT_V1, _WEIGHT_V2 = 10 * 1024, 10 * 100


@dataclass(frozen=True)
class Layout:
    """`parents[controller]`: the directory the node's cgroup for that controller goes in
    (v2: the same directory for all; "cpuacct" is the cpu controller's there)."""

    version: Version
    parents: tuple[tuple[str, str], ...]
    v2_root: str | None = None  # v2: the hierarchy's root, whose subtree_control we extend

    def parent(self, controller: str) -> str:
        return dict(self.parents)[controller]

    def directories(self, name: str) -> tuple[str, ...]:
        """The node's cgroup directories, each once (co-mounted controllers share one)."""
        return tuple(dict.fromkeys(f"{parent}/{name}" for _, parent in self.parents))

    def directory(self, controller: str, name: str) -> str:
        return f"{self.parent(controller)}/{name}"


class LayoutError(ValueError):
    """This machine's cgroups cannot hold a node's limits; the message says what is missing."""


@dataclass(frozen=True)
class _Mount:
    root: str
    point: str
    fstype: str
    options: frozenset[str]


def _unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as octal.
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def _mounts(mountinfo: str) -> list[_Mount]:
    mounts = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if "-" not in fields:
            continue
        dash = fields.index("-")
        if len(fields) < dash + 4 or len(fields) < 6:
            continue
        fstype = fields[dash + 1]
        if fstype not in ("cgroup", "cgroup2"):
            continue
        options = frozenset(fields[dash + 3].split(","))
        mounts.append(_Mount(_unescape(fields[3]), _unescape(fields[4]), fstype, options))
    return mounts


def _own_paths(self_cgroup: str) -> tuple[dict[str, str], str | None]:
    """Our cgroup per v1 controller, and our v2 cgroup (None without a v2 line)."""
    v1: dict[str, str] = {}
    v2 = None
    for line in self_cgroup.splitlines():
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and controllers == "":
            v2 = path
            continue
        for controller in controllers.split(","):
            v1[controller] = path
    return v1, v2


def _join(mount: _Mount, path: str) -> str:
    """The directory of cgroup `path` under `mount` (whose root may itself be a cgroup)."""
    root = mount.root.rstrip("/")
    if root and path.startswith(root):
        path = path[len(root) :]
    return (mount.point.rstrip("/") + "/" + path.strip("/")).rstrip("/")


def find_layout(mountinfo: str, self_cgroup: str, v2_controllers: str | None) -> Layout:
    """The layout for this process's cgroups; `v2_controllers` is the v2 root's
    `cgroup.controllers` (None when there is no v2 hierarchy)."""
    mounts = _mounts(mountinfo)
    own_v1, own_v2 = _own_paths(self_cgroup)
    v1 = {
        controller: mount
        for mount in mounts
        if mount.fstype == "cgroup"
        for controller in CONTROLLERS
        if controller in mount.options
    }
    if "cpu" in v1:
        missing = [c for c in CONTROLLERS if c not in v1 or c not in own_v1]
        if missing:
            raise LayoutError(
                f"cgroup v1 has no {', '.join(missing)} controller mounted (needed: "
                f"{', '.join(CONTROLLERS)})"
            )
        return Layout(1, tuple((c, _join(v1[c], own_v1[c])) for c in CONTROLLERS))
    unified = next((m for m in mounts if m.fstype == "cgroup2"), None)
    if unified is None or own_v2 is None:
        raise LayoutError("no cgroup hierarchy with the cpu controller is mounted")
    available = set((v2_controllers or "").split())
    missing = [c for c in ("cpu", "cpuset", "memory") if c not in available]
    if missing:
        raise LayoutError(
            f"the cgroup v2 hierarchy at {unified.point} does not offer {', '.join(missing)}"
        )
    root = unified.point.rstrip("/")
    parent = f"{root}/{V2_PARENT}"
    return Layout(2, tuple((c, parent) for c in CONTROLLERS), v2_root=root)


@dataclass(frozen=True)
class AccountingPlace:
    """Where a node's accounting-only cgroup goes: `parent`/<name>, whose usage counter is
    `cpuacct.usage` (v1) or `cpu.stat` (v2)."""

    version: Version
    parent: str
    v2_root: str | None = None  # v2: the hierarchy's root (the parent is below it)


def accounting_place(mountinfo: str, self_cgroup: str) -> AccountingPlace:
    """Where a cgroup that only counts a node's CPU time goes: under this process's own v1
    cpuacct cgroup (no other controller is needed, and none is joined: scheduling is unchanged),
    else below `<root>/h2iot` of the v2 hierarchy, whose every cgroup counts its CPU time in
    `cpu.stat` whether or not a controller is enabled."""
    mounts = _mounts(mountinfo)
    own_v1, own_v2 = _own_paths(self_cgroup)
    cpuacct = next((m for m in mounts if m.fstype == "cgroup" and "cpuacct" in m.options), None)
    if cpuacct is not None and "cpuacct" in own_v1:
        return AccountingPlace(1, _join(cpuacct, own_v1["cpuacct"]))
    unified = next((m for m in mounts if m.fstype == "cgroup2"), None)
    if unified is None or own_v2 is None:
        raise LayoutError("no cgroup v1 cpuacct controller and no cgroup v2 hierarchy mounted")
    root = unified.point.rstrip("/")
    return AccountingPlace(2, f"{root}/{V2_PARENT}", v2_root=root)


@dataclass(frozen=True)
class Write:
    """One value into one file of the node's cgroup; `optional` files may not exist (swap
    accounting is a kernel option)."""

    controller: str
    file: str
    value: str
    optional: bool = False


def limit_writes(
    layout: Layout, profile: DeviceProfile, cpus: tuple[int, ...], mems: str
) -> list[Write]:
    """The profile's limits on a fresh cgroup, in the order to write them. `mems` is the memory
    nodes the cpuset allows (v1 needs them set explicitly)."""
    cpu_list = ",".join(str(cpu) for cpu in cpus)
    quota = profile.quota_us
    memory = profile.memory_bytes
    if layout.version == 1:
        writes = [
            Write("cpuset", "cpuset.cpus", cpu_list),
            Write("cpuset", "cpuset.mems", mems),
            Write("cpu", "cpu.cfs_period_us", str(profile.cpu_period_us)),
            Write("cpu", "cpu.cfs_quota_us", _UNLIMITED_V1 if quota is None else str(quota)),
            Write("cpu", "cpu.shares", str(_WEIGHT_V1)),
        ]
        if memory is not None:
            # Swapping would dodge the limit: memory + swap gets the same (it must stay >= it).
            writes += [
                Write("memory", "memory.limit_in_bytes", str(memory)),
                Write("memory", "memory.memsw.limit_in_bytes", str(memory), optional=True),
            ]
        return writes
    writes = [
        Write("cpuset", "cpuset.cpus", cpu_list),
        Write("cpu", "cpu.max", f"{'max' if quota is None else quota} {profile.cpu_period_us}"),
        Write("cpu", "cpu.weight", str(_WEIGHT_V2)),
    ]
    if memory is not None:
        writes += [
            Write("memory", "memory.max", str(memory)),
            Write("memory", "memory.swap.max", "0", optional=True),
        ]
    return writes
