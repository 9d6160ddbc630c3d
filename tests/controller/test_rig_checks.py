"""`h2iot rig check`'s judgments, each way they can go: every meter's and the nodes'
(controller.rig.checks), and the board sources' (controller.meter_sources.board.checks)."""

from __future__ import annotations

import pytest

from controller.meter_sources.board import checks as board_checks
from controller.rig import checks
from controller.rig.checks import Check


def test_port() -> None:
    assert checks.port_check("/dev/ttyACM0", exists=False, opens=False).status == "fail"
    denied = checks.port_check(
        "/dev/ttyACM0", exists=True, opens=False, why="Permission denied", group="dialout"
    )
    assert denied.status == "fail"
    assert denied.fix == "sudo usermod -aG dialout $USER, then log in again"
    assert "(group dialout): Permission denied" in denied.detail
    assert checks.port_check("/dev/ttyACM0", exists=True, opens=True).status == "pass"


def _identity(**changes: object) -> Check:
    found: dict[str, object] = {
        "board": "mega2560",
        "firmware": "1.1.0",
        "protocol": 2,
        "expected_firmware": "1.1.0",
        "expected_protocol": 2,
        "modelled": None,
    }
    found.update(changes)
    return board_checks.identity_check(**found)  # type: ignore[arg-type]


def test_identity() -> None:
    assert _identity().status == "pass"
    assert _identity(firmware="1.0.0").status == "fail"
    assert "h2iot firmware flash" in _identity(firmware="1.0.0").fix
    assert _identity(protocol=1).status == "fail"
    assert _identity(modelled="virtual").status == "unavailable"
    assert _identity(modelled="virtual", protocol=1).status == "fail"


def _stream(**changes: int | float | None) -> Check:
    found: dict[str, int | float | None] = {
        "configured_hz": 1000,
        "seconds": 2.0,
        "taken": 2000,
        "received": 2000,
        "dropped": 0,
        "crc_failures": 0,
        "frames_missed": 0,
    }
    found.update(changes)
    return board_checks.stream_check(**found)  # type: ignore[arg-type]


def test_stream() -> None:
    assert _stream().status == "pass"
    assert _stream(received=0).status == "fail"
    assert _stream(received=1999, taken=2000, frames_missed=1).status == "warn"
    dropped = _stream(received=1900, taken=2000, dropped=100)
    assert dropped.status == "fail" and "lower meter.rate_hz" in dropped.fix
    assert _stream(received=1900, taken=1900).status == "warn"  # 950 Hz: 5 % slow
    assert _stream(crc_failures=3).status == "warn"


def test_the_rate_is_fitted_to_the_arrivals() -> None:
    """A 1 kHz board's frames of 10 samples arriving late by up to 30 ms each (a loaded
    machine's reader), over 2 s: the fit is within 1 %, where samples / duration would count a
    slow START and STOP (here 60 ms) as a slow board."""
    lateness_ns = [(k * 7919) % 30 * 1_000_000 for k in range(200)]
    last = [10 * k + 9 for k in range(200)]
    arrived = [(10 * k + 10) * 1_000_000 + late for k, late in enumerate(lateness_ns)]
    fitted = checks.arrival_rate_hz(last, arrived)
    assert fitted == pytest.approx(1000.0, rel=0.01)
    fine = _stream(seconds=2.06, achieved_hz=fitted)
    assert fine.status == "pass"
    assert fine.detail.startswith("1000 Hz of 1000 configured (by the samples' arrivals) over")
    assert _stream(seconds=2.06).status == "warn"  # 971 Hz by the duration alone
    assert checks.arrival_rate_hz([9], [10]) is None
    assert checks.arrival_rate_hz([9, 19], [10, 10]) is None
    # simavr at 40 % of real time: its frames arrive at 400 samples per second.
    slow = checks.arrival_rate_hz(last, [25 * (k + 1) * 1_000_000 for k in range(200)])
    assert _stream(received=800, taken=800, achieved_hz=slow).status == "warn"


@pytest.mark.parametrize(
    ("zero", "status"),
    [(None, "warn"), (511.5, "pass"), (519.0, "pass"), (521.0, "warn"), (532.0, "fail")],
)
def test_zero(zero: float | None, status: str) -> None:
    check = board_checks.zero_check("A0", zero_code=zero, midscale=511.5, source="cal.json")
    assert check.status == status
    if status != "pass":
        assert "h2iot meter calibrate" in check.fix


@pytest.mark.parametrize(
    ("mean", "status"), [(50.0, "fail"), (500.0, "warn"), (1300.0, "pass"), (3500.0, "warn")]
)
def test_idle(mean: float, status: str) -> None:
    assert checks.idle_check("client", "A0", mean_mw=mean, sd_mw=20.0).status == status


def test_marker() -> None:
    bound = checks.MARKER_WIDTH_BOUND_S
    assert checks.marker_check(node_width_s=None, meter_width_s=None).status == "unavailable"
    assert checks.marker_check(node_width_s=0.2, meter_width_s=None).status == "fail"
    assert checks.marker_check(node_width_s=0.2, meter_width_s=0.2 + bound).status == "pass"
    late = checks.marker_check(node_width_s=0.2, meter_width_s=0.2 + bound + 0.001)
    assert late.status == "fail"


def test_the_marker_wait_is_two_seconds_of_a_real_time_board() -> None:
    # The pulse ended 1.5 s after START; the board kept up (a little behind: the link's delay).
    wait = board_checks.marker_wait(
        rate_hz=1000, pulse_end_s=1.5, lag_s=0.05, next_index=1480, measured_hz=995.0
    )
    assert wait.end_index == 3550  # 2 s of its clock after the pulse, by its samples
    assert not wait.over(next_index=3549, waited_s=2.0)
    assert wait.over(next_index=3550, waited_s=2.0)
    assert "within 2 s of its own clock after the pulse (up to sample 3550 at 1000 Hz: 2.1 s" in (
        wait.why(next_index=3550, waited_s=2.1)
    )


def test_a_slow_stream_waits_for_its_own_clock() -> None:
    """simavr at 30 % of real time: the stream check took 2 s for 600 samples, so its clock was
    1.4 s behind at START and falls further behind during the pulse; 2 s of its clock after the
    pulse take about 3.3 times that long on the wall, which the backstop must allow."""
    wait = board_checks.marker_wait(
        rate_hz=1000, pulse_end_s=1.5, lag_s=1.4, next_index=450, measured_hz=300.0
    )
    assert wait.end_index == 4900
    assert wait.backstop_s == pytest.approx(2 * (4900 - 450) / 300)
    # 2 s of wall time after the pulse the board has taken 600 more samples: still waiting.
    assert not wait.over(next_index=1050, waited_s=2.0)
    assert not wait.over(next_index=4899, waited_s=14.0)
    assert wait.over(next_index=4900, waited_s=14.8)
    # The samples stalled: the backstop ends the wait and says so.
    assert wait.over(next_index=1050, waited_s=wait.backstop_s)
    stalled = wait.why(next_index=1050, waited_s=29.7)
    assert "samples stalled at 1050 of the 4900 that end the wait" in stalled
    # A board measured slower than MARKER_SLOWEST still gets a bounded backstop.
    crawl = board_checks.marker_wait(
        rate_hz=1000, pulse_end_s=1.0, lag_s=0, next_index=0, measured_hz=0
    )
    assert crawl.backstop_s == pytest.approx(2 * 3.0 / board_checks.MARKER_SLOWEST)


def test_ssh_and_versions_and_clock() -> None:
    assert checks.ssh_check("client", local=True, error=None, host="local").status == (
        "unavailable"
    )
    unknown = checks.ssh_check(
        "client", local=False, error="host x not found in known_hosts", host="x"
    )
    assert unknown.status == "fail" and "--accept-new-host-key" in unknown.fix
    assert checks.ssh_check("client", local=False, error=None, host="x").status == "pass"
    ok = checks.versions_check("client", python="3.11.2", agent="0.1.0", expected_agent="0.1.0")
    assert ok.status == "pass"
    old = checks.versions_check("client", python="3.9.2", agent="0.1.0", expected_agent="0.1.0")
    assert old.status == "fail"
    stale = checks.versions_check("client", python="3.11.2", agent="0.0.9", expected_agent="0.1.0")
    assert stale.status == "fail" and "deploy" in stale.fix
    assert checks.clock_check("c", offset_ns=0, uncertainty_ns=0, samples=0).status == "pass"
    assert checks.clock_check("c", offset_ns=5, uncertainty_ns=400_000, samples=50).status == (
        "pass"
    )
    assert checks.clock_check("c", offset_ns=5, uncertainty_ns=3_000_000, samples=50).status == (
        "warn"
    )


def test_governor() -> None:
    missing = checks.governor_check(
        "client", {"governors": None, "unavailable": {"governor": "no cpufreq driver"}}
    )
    assert missing.status == "unavailable" and missing.detail == "no cpufreq driver"
    ondemand = checks.governor_check(
        "client", {"governors": ["ondemand"] * 4, "cpu_freq_mhz": [600.0, 1200.0, 600.0, 600.0]}
    )
    assert ondemand.status == "warn" and "600, 1200 MHz" in ondemand.detail
    assert "scaling_governor" in ondemand.fix
    fixed = checks.governor_check(
        "client", {"governors": ["performance"] * 4, "cpu_freq_mhz": [1200.0] * 4}
    )
    assert fixed.status == "pass"


@pytest.mark.parametrize(
    ("temp", "status"), [(None, "unavailable"), (55.0, "pass"), (72.0, "warn"), (81.0, "fail")]
)
def test_temperature(temp: float | None, status: str) -> None:
    assert checks.thermal_check("client", {"temp_c": temp, "temp_zone": "cpu-thermal"}).status == (
        status
    )


@pytest.mark.parametrize(
    ("flags", "status", "words"),
    [
        (None, "unavailable", "not a Raspberry Pi"),
        (0x0, "pass", "never throttled"),
        (0x50000, "warn", "since boot: under-voltage, throttled"),
        (0x50005, "fail", "now: under-voltage, throttled"),
    ],
)
def test_throttling(flags: int | None, status: str, words: str) -> None:
    check = checks.throttle_check("client", {"throttled_flags": flags})
    assert check.status == status
    assert words in check.detail


def test_memory() -> None:
    mib = 2**20
    good = {"MemTotal": 900 * mib, "MemAvailable": 700 * mib, "SwapTotal": 100 * mib}
    assert checks.memory_check("c", {"memory_bytes": {**good, "SwapFree": 100 * mib}}).status == (
        "pass"
    )
    swapped = checks.memory_check("c", {"memory_bytes": {**good, "SwapFree": 10 * mib}})
    assert swapped.status == "warn" and "swapped out" in swapped.detail
    none = {**good, "SwapTotal": 0, "SwapFree": 0}
    assert "no swap" in checks.memory_check("c", {"memory_bytes": none}).detail
    low = {**good, "MemAvailable": 50 * mib, "SwapFree": 100 * mib}
    assert checks.memory_check("c", {"memory_bytes": low}).status == "warn"
    assert checks.memory_check("c", {"unavailable": {}}).status == "unavailable"


def test_busy() -> None:
    report = {
        "sample_s": 1.0,
        "busy_processes": [
            {"pid": 7, "name": "apt", "cpu_pct": 80.0},
            {"pid": 9, "name": "h2iot", "cpu_pct": 30.0},
            {"pid": 11, "name": "sshd", "cpu_pct": 2.0},
        ],
    }
    warned = checks.busy_check("client", report, ignore=(9,))
    assert warned.status == "warn" and warned.detail == "apt (pid 7) 80 % over 1.0 s"
    assert checks.busy_check("client", {**report, "busy_processes": []}).status == "pass"


def test_a_line_shows_the_fix_unless_it_passed() -> None:
    assert Check("x", "fail", "broken", "mend it").line() == (
        "FAIL        x                        broken  -> mend it"
    )
    assert Check("x", "pass", "fine", "mend it").line().endswith("fine")


@pytest.mark.parametrize(
    ("samples", "answered", "status", "detail"),
    [
        (2000, 2000, "pass", "answered 2000 of 2000 samples, bus 5.08 V"),
        (2000, 1990, "warn", "answered 1990 of 2000 samples, bus 5.08 V"),
        (2000, 0, "fail", "no answer in 2000 samples"),
        (0, 0, "unavailable", "no samples to read it in"),
    ],
)
def test_an_i2c_part_answers_its_address(
    samples: int, answered: int, status: str, detail: str
) -> None:
    check = board_checks.i2c_check("INA226@0x40", samples=samples, answered=answered, bus_v=5.08)
    assert (check.name, check.status, check.detail) == ("I2C part INA226@0x40", status, detail)
    assert bool(check.fix) == (status in ("warn", "fail"))
