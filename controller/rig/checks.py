"""`h2iot rig check`'s judgments, pure: what was found -> a `Check` (pass, warn, fail or
unavailable) with what to do about it. The I/O that finds things out is `controller.rig.probe`
(the nodes) and each meter source's rig check; those of one source's kind alone are in its
folder (controller/meter_sources/board/checks.py, ppk2/rig.py), these are every meter's.

A check whose subject this platform does not have (a local node has no SSH, a modelled meter
no firmware build to compare, a node without cpufreq no governor) is `unavailable`, never a
pass: a researcher reading a healthy report must be able to trust every "pass" on it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from controller.nodes.udp_reach import UdpReach

Status = Literal["pass", "warn", "fail", "unavailable"]

MARKER_EDGE_WAIT_S = 2.0
"""Both edges of the client's test pulse must reach the meter within this long of the pulse's
end, by the board's own clock (the board's `marker_wait`)."""
MARKER_WIDTH_BOUND_S = 0.020
"""The pulse the meter saw may differ from the one the node timed by this much: a modelled
meter stamps an edge when its thread wakes to read the marker FIFO (within a 10 ms tick), a
wired board with the sample it falls in (1 ms at 1 kHz)."""
RATE_TOLERANCE = 0.02  # achieved sample rate within 2 % of the configured one
IDLE_BAND_MW = (700.0, 2500.0)  # a Pi 3B idles at about 1.2-2 W (HDMI and radios on or off)
IDLE_DEAD_MW = 200.0  # below this no node is powered through the sensor
CLOCK_WARN_NS = 1_000_000  # trial windows cut by mapped clocks need a 1 ms offset bound
HOT_WARN_C = 70.0
HOT_FAIL_C = 80.0  # the Pi 3B's firmware throttles from 80 C
BUSY_PCT = 10.0  # another process above this share of one core disturbs a trial
MEMORY_WARN_BYTES = 200 * 2**20
THROTTLE_BITS_NOW = {
    0: "under-voltage",
    1: "ARM clock capped",
    2: "throttled",
    3: "soft temperature limit",
}


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str
    fix: str = ""

    @property
    def failed(self) -> bool:
        return self.status == "fail"

    def line(self, width: int = 24) -> str:
        fix = f"  -> {self.fix}" if self.fix and self.status != "pass" else ""
        return f"{self.status.upper():<11} {self.name:<{width}} {self.detail}{fix}"


# --- the meter ---------------------------------------------------------------------------------


def port_check(
    path: str, *, exists: bool, opens: bool, why: str = "", group: str | None = None
) -> Check:
    """The serial port: present, and this user may open it (the dialout group on Debian)."""
    if not exists:
        return Check(
            "meter port",
            "fail",
            f"{path}: no such device",
            "plug the board in (USB), then check `ls /dev/ttyACM* /dev/ttyUSB*` and "
            "meter.port in the config",
        )
    if not opens:
        owner = f" (group {group})" if group else ""
        return Check(
            "meter port",
            "fail",
            f"{path}: cannot open{owner}: {why}",
            f"sudo usermod -aG {group or 'dialout'} $USER, then log in again",
        )
    return Check("meter port", "pass", f"{path} opens for reading and writing")


def arrival_rate_hz(last_indices: Sequence[int], arrived_ns: Sequence[int]) -> float | None:
    """The board's sample rate against the controller's clock: the least-squares slope of each
    frame's last sample index over the time it arrived. Unlike samples / the run's duration it
    does not count the START and STOP round trips, which a loaded machine stretches; None with
    fewer than two distinct arrival times."""
    n = len(arrived_ns)
    if n < 2:
        return None
    t0 = arrived_ns[0]
    t_s = [(t - t0) / 1e9 for t in arrived_ns]
    mean_t = sum(t_s) / n
    mean_i = sum(last_indices) / n
    spread = sum((t - mean_t) ** 2 for t in t_s)
    if spread == 0:
        return None
    return sum((t - mean_t) * (i - mean_i) for t, i in zip(t_s, last_indices, strict=True)) / spread


def idle_check(role: str, channel: str, *, mean_mw: float, sd_mw: float) -> Check:
    """The node's idle power: a Pi 3B through an ACS712 reads inside IDLE_BAND_MW."""
    name = f"idle power {role}"
    detail = f"{channel}: {mean_mw:.0f} mW (sd {sd_mw:.0f} mW) with the nodes idle"
    if mean_mw < IDLE_DEAD_MW:
        return Check(
            name,
            "fail",
            detail,
            f"no current on {channel}: is the node powered through the sensor (IP+ to IP-)?",
        )
    low, high = IDLE_BAND_MW
    if not low <= mean_mw <= high:
        return Check(
            name,
            "warn",
            detail + f", outside a Pi 3B's {low:.0f}-{high:.0f} mW",
            "is the node idle? is meter.channels right? is the calibration this board's?",
        )
    return Check(name, "pass", detail)


def marker_check(
    *, node_width_s: float | None, meter_width_s: float | None, why: str = ""
) -> Check:
    """The marker loop: the node pulsed its marker; the meter must have stamped both edges
    within the `MarkerWait`, the pulse as wide as the node timed it within the bound."""
    name = "marker loop"
    if node_width_s is None:
        return Check(name, "unavailable", why, "wire a client GPIO to D2: --marker gpio:CHIP:LINE")
    if meter_width_s is None:
        return Check(
            name,
            "fail",
            f"the node pulsed {node_width_s * 1000:.0f} ms; {why}",
            "check the wire from the client's GPIO to D2, the common ground, and the level "
            "(docs/bring-up.md)",
        )
    error = meter_width_s - node_width_s
    detail = (
        f"pulse of {node_width_s * 1000:.1f} ms on the node, {meter_width_s * 1000:.1f} ms "
        f"between the edges the meter saw ({error * 1000:+.1f} ms, bound "
        f"{MARKER_WIDTH_BOUND_S * 1000:g} ms)"
    )
    if abs(error) > MARKER_WIDTH_BOUND_S:
        return Check(name, "fail", detail, "a slow or bouncing edge: see docs/bring-up.md")
    return Check(name, "pass", detail)


# --- the nodes ---------------------------------------------------------------------------------


def ssh_check(role: str, *, local: bool, error: str | None, host: str) -> Check:
    name = f"{role} ssh"
    if local:
        return Check(name, "unavailable", "a local node (no SSH, no host key)")
    if error is not None:
        fix = (
            "compare the fingerprint, then rerun with --accept-new-host-key"
            if "known_hosts" in error or "host key" in error
            else "is the node up, on the network, with this key in its authorized_keys?"
        )
        return Check(name, "fail", error, fix)
    return Check(name, "pass", f"{host} reached, host key matches known_hosts")


def versions_check(
    role: str, *, python: str | None, agent: str | None, expected_agent: str, problems: str = ""
) -> Check:
    name = f"{role} agent"
    if python is None or agent is None:
        return Check(name, "fail", problems or "no agent answered", "h2iot nodes deploy CONFIG")
    detail = f"agent {agent}, Python {python}"
    if agent != expected_agent:
        return Check(
            name, "fail", f"{detail}; the controller is {expected_agent}", "h2iot nodes deploy"
        )
    if tuple(int(p) for p in python.split(".")[:2] if p.isdigit()) < (3, 11):
        return Check(name, "fail", f"{detail}: needs Python 3.11", "Raspberry Pi OS bookworm")
    return Check(name, "pass", detail)


def clock_check(
    role: str, *, offset_ns: int | None, uncertainty_ns: int | None, samples: int
) -> Check:
    name = f"{role} clock"
    if offset_ns is None or uncertainty_ns is None:
        return Check(name, "fail", "the clock offset could not be measured", "see the agent check")
    if samples == 0:
        return Check(name, "pass", "the controller's own clock (offset 0)")
    detail = f"offset {offset_ns / 1e6:+.3f} ms +- {uncertainty_ns / 1e6:.3f} ms"
    if uncertainty_ns > CLOCK_WARN_NS:
        return Check(
            name,
            "warn",
            detail + ": windows cut by clocks (no marker) are this uncertain",
            "a wired network, not Wi-Fi; or a marker wire (exact edges)",
        )
    return Check(name, "pass", detail)


def udp_check(reach: UdpReach) -> Check:
    """HTTP/3's UDP path: the client node's datagrams reach the server's port and come back."""
    name = "client->server UDP"
    port = reach.port or "PORT"
    fixes = {
        "refused": f"set nodes.client.address to an address the server listens on "
        f"(nodes.server.address {reach.bind_address})",
        "silence": f"allow UDP {port} both ways on the server's firewall (nft list ruleset; "
        f"ufw allow {port}/udp) and between the nodes",
        # A kernel's send error, or a command that failed on a node.
        "error": f"check the client's route to {reach.address} (ip route get {reach.address}) "
        "and the node checks above",
        "no listener": f"stop what holds UDP {port} on the server (ss -ulpn 'sport = :{port}') "
        "or change nodes.server.http_port",
    }
    if reach.finding == "echo":
        return Check(name, "pass", reach.detail())
    if reach.finding == "not probed":
        return Check(name, "unavailable", reach.detail(), "see the node checks above")
    return Check(name, "fail", f"{reach.finding}: {reach.detail()}", fixes[reach.finding])


def governor_check(role: str, report: Mapping[str, object]) -> Check:
    name = f"{role} CPU governor"
    governors = report.get("governors")
    freqs = report.get("cpu_freq_mhz")
    if not isinstance(governors, list) or not governors:
        return Check(name, "unavailable", _why(report, "governor", "no cpufreq on this node"))
    clocks = (
        ", ".join(f"{f:g}" for f in sorted(set(freqs))) + " MHz"
        if isinstance(freqs, list) and freqs
        else "clock unknown"
    )
    found = sorted({str(g) for g in governors})
    detail = f"{'+'.join(found)} at {clocks}"
    if found != ["performance"]:
        return Check(
            name,
            "warn",
            detail + ": the clock follows the load, so trials measure the governor too",
            "echo performance | sudo tee /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor",
        )
    return Check(name, "pass", detail)


def thermal_check(role: str, report: Mapping[str, object]) -> Check:
    name = f"{role} temperature"
    temp = report.get("temp_c")
    if not isinstance(temp, int | float):
        return Check(name, "unavailable", _why(report, "temp_c", "no thermal zone"))
    detail = f"{temp:.1f} C ({report.get('temp_zone')})"
    if temp >= HOT_FAIL_C:
        return Check(name, "fail", detail, "cooling: a heatsink, a fan; wait until it cools")
    if temp >= HOT_WARN_C:
        return Check(name, "warn", detail, "close to the 80 C throttling point: a heatsink")
    return Check(name, "pass", detail)


def throttle_check(role: str, report: Mapping[str, object]) -> Check:
    """The Raspberry Pi firmware's flags: now (bits 0-3) fails, since boot (16-19) warns."""
    name = f"{role} throttling"
    flags = report.get("throttled_flags")
    if not isinstance(flags, int):
        return Check(name, "unavailable", _why(report, "throttled_flags", "not a Raspberry Pi"))
    now = [text for bit, text in THROTTLE_BITS_NOW.items() if flags >> bit & 1]
    since = [text for bit, text in THROTTLE_BITS_NOW.items() if flags >> (bit + 16) & 1]
    detail = f"throttled={flags:#x}"
    if now:
        return Check(
            name,
            "fail",
            f"{detail}, now: {', '.join(now)}",
            "a 5.1 V 2.5 A supply, a short thick cable (the ACS712 adds a little), cooling",
        )
    if since:
        return Check(
            name,
            "warn",
            f"{detail}, since boot: {', '.join(since)}",
            "check the supply, then reboot to clear the flags",
        )
    return Check(name, "pass", f"{detail}: never throttled since boot")


def memory_check(role: str, report: Mapping[str, object]) -> Check:
    name = f"{role} memory/swap"
    memory = report.get("memory_bytes")
    if not isinstance(memory, dict) or "MemAvailable" not in memory:
        return Check(name, "unavailable", _why(report, "memory", "no /proc/meminfo"))
    mib = 2**20
    available, total = memory["MemAvailable"], memory.get("MemTotal", 0)
    swap_total, swap_free = memory.get("SwapTotal", 0), memory.get("SwapFree", 0)
    swap_used = swap_total - swap_free
    detail = (
        f"{available / mib:.0f} of {total / mib:.0f} MiB available, swap "
        f"{swap_used / mib:.0f} of {swap_total / mib:.0f} MiB used"
    )
    if available < MEMORY_WARN_BYTES:
        return Check(name, "warn", detail, "stop services the node does not need")
    if swap_used > 0:
        return Check(
            name,
            "warn",
            detail + ": pages were swapped out, trials may page them in",
            "reboot or stop what filled the memory",
        )
    if swap_total == 0:
        return Check(
            name,
            "warn",
            detail + ": no swap, a memory spike ends in the OOM killer",
            "a swap file (dphys-swapfile on Raspberry Pi OS)",
        )
    return Check(name, "pass", detail)


def busy_check(role: str, report: Mapping[str, object], ignore: Sequence[int] = ()) -> Check:
    name = f"{role} other processes"
    listed = report.get("busy_processes")
    if not isinstance(listed, list):
        return Check(name, "unavailable", "the node did not list its processes")
    seconds = report.get("sample_s")
    busy = [
        p
        for p in listed
        if isinstance(p, dict) and p.get("pid") not in ignore and p.get("cpu_pct", 0) > BUSY_PCT
    ]
    if not busy:
        return Check(name, "pass", f"none above {BUSY_PCT:g} % of a core over {seconds} s")
    named = ", ".join(f"{p['name']} (pid {p['pid']}) {p['cpu_pct']:g} %" for p in busy[:4])
    return Check(
        name,
        "warn",
        f"{named} over {seconds} s",
        "stop them (systemctl, or wait for apt/updates to finish) before the sweep",
    )


def _why(report: Mapping[str, object], field: str, default: str) -> str:
    reasons = report.get("unavailable")
    if isinstance(reasons, dict) and field in reasons:
        return str(reasons[field])
    return default
