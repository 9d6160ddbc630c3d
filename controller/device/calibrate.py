"""Which CPU quota makes one of this machine's cores as fast as the reference device's core.

The probe (`controller.device.probe`) runs once unthrottled, timed by its own CPU time (so other
load on the machine does not count), and once under each candidate quota in a cgroup pinned to
one core, timed by the wall clock (what a throttled node lives by). The reference device does
`reference_fraction` of this machine's unthrottled work per second (`PI3B_CORE_FRACTION` for a
Pi 3B, from published figures). A throttled core's speed is close to proportional to its quota,
so a line through the origin fitted to the candidates gives the quota that meets that speed
(`fit_quota`, pure); the kernel's throttling granularity is what it corrects for.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from controller.config.profile import MIN_QUOTA_US, DeviceProfile
from controller.device.cgroup import NodeCgroup
from controller.device.errors import EmulationError

PROBE_TIMEOUT_S = 120.0
CANDIDATE_SCALES = (0.75, 1.0, 1.5)


@dataclass(frozen=True)
class ProbeRun:
    """One run of the probe; `quota` None when unthrottled."""

    quota: float | None
    units: int
    wall_s: float
    cpu_s: float

    @property
    def units_per_wall_s(self) -> float:
        return self.units / self.wall_s

    @property
    def units_per_cpu_s(self) -> float:
        return self.units / self.cpu_s


@dataclass(frozen=True)
class Calibration:
    reference_fraction: float
    host: ProbeRun
    candidates: tuple[ProbeRun, ...]
    quota: float  # as fast as the reference device, within the kernel's bounds

    @classmethod
    def from_dict(cls, found: dict[str, Any]) -> Calibration:
        """The inverse of `dataclasses.asdict` (how a node reports its calibration)."""
        return cls(
            float(found["reference_fraction"]),
            ProbeRun(**found["host"]),
            tuple(ProbeRun(**run) for run in found["candidates"]),
            float(found["quota"]),
        )

    @property
    def reference_units_per_s(self) -> float:
        """The reference device's estimated speed on the probe."""
        return self.reference_fraction * self.host.units_per_cpu_s

    def facts(self) -> dict[str, object]:
        return {
            "reference_fraction": self.reference_fraction,
            "host_units_per_cpu_s": self.host.units_per_cpu_s,
            "reference_units_per_s": self.reference_units_per_s,
            "candidates": [
                {"quota": run.quota, "units_per_s": run.units_per_wall_s} for run in self.candidates
            ],
            "quota": self.quota,
        }


def fit_quota(reference_units_per_s: float, candidates: Sequence[ProbeRun]) -> float:
    """The quota whose speed is the reference's, on the least-squares line through the origin
    of speed against quota. Raises ValueError without a usable candidate."""
    usable = [(run.quota, run.units_per_wall_s) for run in candidates if run.quota]
    slope_num = sum(quota * speed for quota, speed in usable)
    slope_den = sum(quota * quota for quota, _ in usable)
    if not usable or slope_num <= 0:
        raise ValueError("no throttled probe run did any work")
    return reference_units_per_s / (slope_num / slope_den)


def candidate_quotas(profile: DeviceProfile, reference_fraction: float) -> list[float]:
    """Quotas around the reference fraction, each at least the kernel's smallest per period."""
    floor = MIN_QUOTA_US / profile.cpu_period_us
    return sorted({min(1.0, max(floor, reference_fraction * s)) for s in CANDIDATE_SCALES})


def run_probe(
    seconds: float, cgroup: NodeCgroup | None = None, quota: float | None = None
) -> ProbeRun:
    """The probe in a child process, moved into `cgroup` (if any) before it starts timing."""
    command = [sys.executable, "-m", "controller.device.probe", "--seconds", str(seconds), "--wait"]
    with subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as process:
        assert process.stdin is not None and process.stdout is not None
        try:
            if process.stdout.readline().strip() != "ready":
                error = process.stderr.read() if process.stderr else ""
                raise EmulationError(f"calibration probe did not start: {error.strip()}")
            if cgroup is not None:
                cgroup.add(process.pid)
            process.stdin.write("go\n")
            process.stdin.flush()
            line = process.stdout.readline()
            process.wait(timeout=PROBE_TIMEOUT_S)
        except BaseException:
            process.kill()
            raise
    if process.returncode != 0 or not line:
        raise EmulationError(f"calibration probe failed (exit status {process.returncode})")
    return parse_probe(line, quota)


def parse_probe(line: str, quota: float | None) -> ProbeRun:
    """A ProbeRun from the probe's JSON line."""
    found = json.loads(line)
    return ProbeRun(quota, int(found["units"]), float(found["wall_s"]), float(found["cpu_s"]))


def calibrate(
    profile: DeviceProfile, reference_fraction: float, seconds: float, cpu: int, tag: str = ""
) -> Calibration:
    """Measure this machine unthrottled and under candidate quotas on core `cpu` (needs root);
    `tag` (lower-case letters) tells apart calibrations that run at the same time."""
    host = run_probe(seconds)
    candidates = []
    for quota in candidate_quotas(profile, reference_fraction):
        trial = replace(profile, cpu_quota=quota, cores=1, memory_mib=None)
        cgroup = NodeCgroup.create(f"h2iot-{os.getpid()}-calibrate{tag}", trial, (cpu,))
        try:
            candidates.append(run_probe(seconds, cgroup, quota))
        finally:
            cgroup.remove()
    fitted = fit_quota(reference_fraction * host.units_per_cpu_s, candidates)
    floor = MIN_QUOTA_US / profile.cpu_period_us
    return Calibration(reference_fraction, host, tuple(candidates), min(1.0, max(floor, fitted)))
