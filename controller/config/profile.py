"""Device profiles: how constrained a local node is made (CPU quota, pinning, memory limit).

A profile emulates `cores` cores of a slower device on as many cores of this machine: each gets
`cpu_quota` of a core (the cgroup's CFS quota is `cores x cpu_quota x cpu_period_us` per
`cpu_period_us`), and everything the node runs shares `memory_mib`. The device's core is
`speed_fraction` as fast as one of this machine's (`PI3B_CORE_FRACTION` for a Pi 3B, from
published figures). A throttled core loses some speed to cold caches after each pause, so the
quota that gives that speed is measured (`controller.device.calibrate`): at the start of each
sweep when `cpu_quota` is unset, and by `h2iot nodes calibrate` to fix it in a config.

Pure data and checks only, part of the configuration (a node's `device` key): the config
package validates it at load, `controller.device.cgroup` applies it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

MIN_QUOTA_US = 1000  # the kernel refuses a smaller CFS quota (v1 cfs_quota_us and v2 cpu.max)
MIN_PERIOD_US, MAX_PERIOD_US = 1000, 1_000_000  # the kernel's bounds on the CFS period

PI3B_CORE_FRACTION = 0.08
"""One Raspberry Pi 3 Model B core (Cortex-A53, in order, 1.2 GHz) as a share of one core of a
2020s x86 machine, for single-threaded integer code like an HTTP/2 stack. From published figures:

- J. Whitham, "Relative speed of Raspberry Pi, Pi 2, and desktop PC (x86 and AMD64)",
  jwhitham.org, 26 April 2015: an integer-only benchmark built from Doom's source took 77.3 s on
  a Pi 2 (Cortex-A7, 900 MHz) and 6.9 s on a Core i3-3220 (Ivy Bridge, 3.3 GHz, x86-64): a Pi 2
  core is 1/11.2 of that core.
- The Raspberry Pi 3 launch announcement (raspberrypi.org, 29 February 2016) puts the Pi 3B at
  50-60 % faster than the Pi 2; sysbench's single-threaded prime test agrees (about 60 %,
  Lifehacker, "How the Raspberry Pi 3 Benchmarks Against Older Models", March 2016). So a Pi 3B
  core is about 1/7.0 of an i3-3220 core.
- A 2020s x86 core (Zen 3/4, Alder Lake or later) runs single-threaded integer code about 1.8x
  as fast as an i3-3220 (about 1.6x the instructions per clock at a similar clock). This step is
  our estimate, the weakest link of the chain.

Hence 1 / (7.0 x 1.8) = 0.079. The issue's own measurement points the same way, a little lower:
nghttp2 refilled a 4 KiB window in about 1.4 ms on the study's Pi and in 85 us here, link
included (1/16). A parameter everywhere (`h2iot nodes calibrate --reference-fraction`)."""

PI3B_PEAK_CURRENT_MA = 730.0
"""A Pi 3 Model B's supply current at 400 % CPU (`stress --cpu 4`), Pidramble's power benchmarks
(Jeff Geerling, pidramble.com/wiki/benchmarks/power-consumption); a Pi 3B+ draws 980 mA there."""


@dataclass(frozen=True)
class DeviceProfile:
    """What a node is limited to; `None` leaves that resource unlimited.

    `profile` names the built-in profile the values started from ("custom" for none).
    """

    profile: str = "custom"
    # The device's core as a share of one of this machine's cores: what the quota is calibrated to.
    speed_fraction: float | None = None
    # Share of one of this machine's cores per emulated core; None: calibrated to speed_fraction
    # at the start of a sweep (no quota at all without a speed_fraction).
    cpu_quota: float | None = None
    cpu_period_us: int = 20_000
    cores: int = 1  # this machine's cores the node is pinned to, one per emulated core
    memory_mib: int | None = None
    # The board's supply current with every core busy, in mA: what the meter's range must hold
    # (`h2iot rig check` warns near a range's full scale); None: judged from the idle power.
    peak_current_ma: float | None = None

    @property
    def quota_us(self) -> int | None:
        """The cgroup's CPU time per period, all cores together (None: no quota)."""
        if self.cpu_quota is None:
            return None
        return round(self.cores * self.cpu_quota * self.cpu_period_us)

    @property
    def memory_bytes(self) -> int | None:
        return None if self.memory_mib is None else self.memory_mib * 1024 * 1024


PROFILES: dict[str, DeviceProfile] = {
    # The study's board, one of its four cores (nghttp, nghttpd and the agent are single-threaded,
    # and a quota shared by several cores would let one thread run faster than one Pi core).
    # 1 GiB is the board's RAM; on a real Pi the GPU and the OS take part of it.
    "rpi3b": DeviceProfile(
        profile="rpi3b",
        speed_fraction=PI3B_CORE_FRACTION,
        cpu_period_us=20_000,
        memory_mib=1024,
        peak_current_ma=PI3B_PEAK_CURRENT_MA,
    ),
    # Towards RFC 7228's class 2 (about 50 KiB RAM, MCU-class cores at tens to a few hundred MHz):
    # an eighth of a Pi 3B core, and the least memory the Python agent and the nghttp2 tools run
    # in. A Linux process cannot be made as small as a real class-2 device; this is "class-2-like".
    "class2": DeviceProfile(
        profile="class2", speed_fraction=0.01, cpu_period_us=100_000, memory_mib=64
    ),
}
CUSTOM = DeviceProfile()
PROFILE_NAMES: tuple[str, ...] = ("custom", *PROFILES)


def resolve(given: Mapping[str, Any]) -> DeviceProfile:
    """A profile from checked config values: the named profile's values, then the given ones.

    Raises ValueError (message without the key) when the values do not fit together."""
    name = str(given.get("profile", "custom"))
    base = PROFILES.get(name, CUSTOM)
    profile = replace(base, **{key: value for key, value in given.items() if key != "profile"})
    # The quota applied is the explicit one, else one near speed_fraction: either must fit.
    key = "cpu_quota" if profile.cpu_quota is not None else "speed_fraction"
    share = getattr(profile, key)
    if share is not None:
        quota = round(profile.cores * share * profile.cpu_period_us)
        if quota < MIN_QUOTA_US:
            least = min(MAX_PERIOD_US, math.ceil(MIN_QUOTA_US / (profile.cores * share)))
            raise ValueError(
                f"{key} {share:g} of a {profile.cpu_period_us} us period is {quota} us per "
                f"period, below the kernel's smallest quota ({MIN_QUOTA_US} us); raise "
                f"cpu_period_us to at least {least}"
            )
    return profile


def not_applied_message(role: str) -> str:
    return (
        "an SSH node's own hardware is its device: to emulate this profile on that host as well "
        f"(a cgroup there, which needs root on it), set nodes.{role}.remote_device = true; or "
        f'unset it, or make nodes.{role}.host "local"'
    )


def pinned_cores(first: int | None, cores: int, available: tuple[int, ...]) -> tuple[int, ...]:
    """The machine's cores a node is pinned to: `cores` of `available` starting at `first` (the
    node's own `cpu` key, where the agent pins itself) and wrapping around; None starts at the
    first available core. Raises ValueError when there are not enough cores or `first` is not
    one of them."""
    if cores > len(available):
        raise ValueError(f"{cores} cores asked, this machine has {len(available)}")
    start = 0 if first is None else available.index(first) if first in available else -1
    if start < 0:
        raise ValueError(f"core {first} is not one of this machine's ({_ranges(available)})")
    return tuple(available[(start + n) % len(available)] for n in range(cores))


def _ranges(cores: tuple[int, ...]) -> str:
    return ",".join(str(core) for core in cores)
