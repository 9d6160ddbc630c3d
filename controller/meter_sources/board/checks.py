"""The board sources' judgments for `h2iot rig check`, pure (as `controller.rig.checks`): the
board's identity and stream, an ACS712's zero, an I2C chip's answer, and how long the marker
loop waits by the board's own clock."""

from __future__ import annotations

import math
from dataclasses import dataclass

from controller.rig.checks import MARKER_EDGE_WAIT_S, RATE_TOLERANCE, Check, Status

__all__ = [
    "MarkerWait",
    "i2c_check",
    "identity_check",
    "marker_wait",
    "stream_check",
    "zero_check",
]

MARKER_BACKSTOP_FACTOR = 2.0
"""Should the board's samples stall, the marker loop gives up after this many times the wall time
the board needs, at the rate the stream check measured, to get to the end of the wait."""
MARKER_SLOWEST = 0.1  # of real time: a board measured slower still gets a backstop this long
ZERO_WARN_CODES = 8.0  # ACS712 datasheet: +-40 mV electrical offset, 8 codes at 5 V / 10 bits
ZERO_FAIL_CODES = 20.0  # 0.5 A on the 5 A part: a load was connected when it was calibrated


def identity_check(
    *,
    board: str,
    firmware: str,
    protocol: int,
    expected_firmware: str | None,
    expected_protocol: int,
    modelled: str | None,
) -> Check:
    """The board's INFO against the firmware this controller builds (firmware/VERSION) and the
    protocol it speaks; a modelled meter has no build to compare with."""
    found = f"{board}, firmware {firmware}, protocol {protocol}"
    if protocol != expected_protocol:
        return Check(
            "board identity",
            "fail",
            f"{found}; this controller speaks protocol {expected_protocol}",
            "h2iot firmware flash --port PORT --board BOARD",
        )
    if modelled is not None:
        return Check(
            "board identity",
            "unavailable",
            f"{found}: the {modelled} meter models a board (no firmware was flashed)",
            "a bench run needs meter.source = serial",
        )
    if expected_firmware is not None and firmware != expected_firmware:
        return Check(
            "board identity",
            "fail",
            f"{found}; this build is {expected_firmware}",
            "h2iot firmware flash --port PORT --board BOARD",
        )
    return Check("board identity", "pass", found)


def stream_check(
    *,
    configured_hz: int,
    seconds: float,
    taken: int,
    received: int,
    dropped: int,
    crc_failures: int,
    frames_missed: int,
    achieved_hz: float | None = None,
) -> Check:
    """Samples arrive at the configured rate with no gaps. `achieved_hz`: the rate measured
    from the samples' arrivals (`arrival_rate_hz`); without it, received / seconds."""
    name = "sample stream"
    if received == 0:
        return Check(
            name,
            "fail",
            f"no samples in {seconds:g} s",
            "check meter.baud against the firmware's and the USB cable",
        )
    if achieved_hz is not None:
        achieved, fitted = achieved_hz, " (by the samples' arrivals)"
    else:
        achieved, fitted = (received / seconds if seconds > 0 else 0.0), ""
    missing = max(0, taken - received)
    detail = (
        f"{achieved:.0f} Hz of {configured_hz} configured{fitted} over {seconds:.1f} s, {received} "
        f"samples, {missing} missing ({dropped} dropped by the board), {crc_failures} CRC "
        f"failures, {frames_missed} frames missed"
    )
    if missing or crc_failures or frames_missed:
        fix = (
            "the link is too slow for the rate and channels: lower meter.rate_hz"
            if dropped
            else "a noisy or slow USB link: another cable or port, no USB hub"
        )
        status: Status = "fail" if missing > taken * 0.001 else "warn"
        return Check(name, status, detail, fix)
    if abs(achieved - configured_hz) > RATE_TOLERANCE * configured_hz:
        return Check(
            name,
            "warn",
            detail,
            "the board's clock is off, or (simavr) the simulator runs slower than real time on "
            "a loaded machine",
        )
    return Check(name, "pass", detail)


def zero_check(
    channel: str, *, zero_code: float | None, midscale: float, source: str | None
) -> Check:
    """The calibration's zero (measured with the nodes unpowered) against the ACS712's band."""
    name = f"zero offset {channel}"
    recalibrate = (
        "with the nodes unpowered: h2iot meter calibrate --port PORT --out FILE, and set "
        "meter.calibration = FILE"
    )
    if zero_code is None:
        return Check(
            name,
            "warn",
            "no calibration: the nominal zero (mid-scale) is assumed",
            recalibrate,
        )
    off = zero_code - midscale
    detail = f"{zero_code:.1f} codes, {off:+.1f} from mid-scale (from {source})"
    if abs(off) > ZERO_FAIL_CODES:
        return Check(name, "fail", detail + ": a load was connected", recalibrate)
    if abs(off) > ZERO_WARN_CODES:
        return Check(name, "warn", detail + ": beyond the ACS712's +-40 mV", recalibrate)
    return Check(name, "pass", detail)


def i2c_check(channel: str, *, samples: int, answered: int, bus_v: float) -> Check:
    """An INA219 or INA226 answers its address: the firmware marks a sample the chip did not
    acknowledge (or an INA226 that failed its identity check at START) with bus 0xFFFF."""
    name = f"I2C part {channel}"
    if samples == 0:
        return Check(name, "unavailable", "no samples to read it in")
    if answered == 0:
        return Check(
            name,
            "fail",
            f"no answer in {samples} samples",
            "is the chip powered (VCC, GND), on SDA and SCL, with its address pins (A0, A1) "
            "set for this address? is it the kind meter.channels names?",
        )
    detail = f"answered {answered} of {samples} samples, bus {bus_v:.2f} V"
    if answered < samples:
        return Check(name, "warn", detail, "a loose SDA or SCL wire, or a bus too long?")
    return Check(name, "pass", detail)


@dataclass(frozen=True)
class MarkerWait:
    """How long the marker loop waits for the pulse's edges: until the board's clock (the
    samples received, at the rate it declares) is MARKER_EDGE_WAIT_S past the pulse's end. A
    board keeps real time, so that is 2 s; the firmware in simavr on a loaded machine runs slower
    than real time and gets as long as its own clock needs. Should the samples stall, a wall-clock
    backstop ends the wait."""

    rate_hz: int
    end_index: int  # the wait is over once the samples reach this index
    backstop_s: float  # wall-clock seconds after the pulse's end

    def over(self, *, next_index: int, waited_s: float) -> bool:
        return next_index >= self.end_index or waited_s >= self.backstop_s

    def why(self, *, next_index: int, waited_s: float) -> str:
        """What was waited for, when no edges came."""
        if next_index >= self.end_index:
            return (
                f"the meter saw no rising and falling edge within {MARKER_EDGE_WAIT_S:g} s of "
                f"its own clock after the pulse (up to sample {self.end_index} at "
                f"{self.rate_hz} Hz: {waited_s:.1f} s here)"
            )
        return (
            f"the meter saw no rising and falling edge, and its samples stalled at "
            f"{next_index} of the {self.end_index} that end the wait ({MARKER_EDGE_WAIT_S:g} s "
            f"of its own clock after the pulse) after {waited_s:.1f} s"
        )


def marker_wait(
    *, rate_hz: int, pulse_end_s: float, lag_s: float, next_index: int, measured_hz: float
) -> MarkerWait:
    """The wait for the edges of a pulse that ended `pulse_end_s` after START (the controller's
    clock), with the board's samples up to `next_index` then.

    A simulated board stamps the marker's edges in its simulated time, which follows real time
    from its launch; running slower than real time it falls behind, so its sample 0 came `lag_s`
    late: what the stream check measured (its duration less the samples' time at `rate_hz`).
    `measured_hz` is that check's rate: the backstop is the wall time the board needs at that
    rate to reach the end of the wait, MARKER_BACKSTOP_FACTOR times over."""
    board_s = pulse_end_s + max(0.0, lag_s) + MARKER_EDGE_WAIT_S
    end_index = math.ceil(board_s * rate_hz)
    speed = min(1.0, max(MARKER_SLOWEST, measured_hz / rate_hz))
    needed_s = max(0, end_index - next_index) / rate_hz / speed
    backstop_s = max(MARKER_EDGE_WAIT_S, MARKER_BACKSTOP_FACTOR * needed_s)
    return MarkerWait(rate_hz=rate_hz, end_index=end_index, backstop_s=backstop_s)
