"""What the INA219 and INA226 firmware-in-the-loop tests share: the supply the parts sit in, the
power trace, scheduling its levels into the harness, running the firmware to the last level's
samples and stopping it, and the samples that came back."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from tests.firmware import _wire
from tests.firmware._sim import MS, Simulator

SHUNT_OHM = 0.1
HOLD = 10  # samples per power level
LEVELS = 60


def supply(power_w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A 5.1 V supply with 60 mOhm of cable and the shunt: bus volts and amps at the load."""
    r = 0.06 + SHUNT_OHM
    # P = V I, V = 5.1 - r I  ->  r I^2 - 5.1 I + P = 0
    current = (5.1 - np.sqrt(5.1**2 - 4 * r * power_w)) / (2 * r)
    return 5.1 - 0.06 * current - SHUNT_OHM * current, current


def power_trace(seed: int) -> np.ndarray:
    """LEVELS power levels (W) of a Pi 3B-like load, every seventh a sleeping MCU-class one."""
    rng = np.random.default_rng(seed)
    power_w = rng.uniform(1.0, 4.0, LEVELS)
    power_w[::7] = rng.uniform(0.005, 0.05, len(power_w[::7]))
    return power_w


@dataclass(frozen=True)
class Levels:
    """Where the levels stand in the samples: the clock (t0, period, in ns), the first level's
    first sample index and the index after the last level's."""

    t0: int
    period: int
    first: int
    last: int


def start_with_levels(sim: Simulator, inputs: Callable[[int], str]) -> Levels:
    """STARTs sampling and schedules the chip at 0x40's inputs (`inputs(j)`: "shunt_uv bus_mv"
    of level j), each from the middle of the sample before its HOLD samples, from two samples
    after START on, and time to 100 ms past them."""
    assert sim.command(_wire.START) == 0
    t0, period = sim.clock()
    first = (sim.now_ns - t0) // period + 2
    lines = []
    for j in range(LEVELS):
        t = t0 + (first + j * HOLD - 1) * period + period // 2
        lines.append(f"{t} i 0 {inputs(j)}\n")
    last = first + LEVELS * HOLD
    lines.append(f"{t0 + last * period + 100 * MS}\n")
    sim.write_lines(lines)
    sim.now_ns = t0 + last * period + 100 * MS
    return Levels(t0, period, first, last)


def run_until_stopped(sim: Simulator, last: int) -> tuple[list[_wire.Frame], str]:
    """Waits for the samples through index `last`, stops sampling and closes the simulator:
    the frames and its stderr."""

    def through_last() -> bool:
        for f in reversed(sim.snapshot()):
            if f.frame_type == _wire.SAMPLES:
                index, values = _wire.samples(f)
                return bool(index + len(values) > last)
        return False

    sim.wait_until(through_last, timeout_s=120)
    assert sim.command(_wire.STOP) == 0
    sim.advance_until(
        lambda: any(
            f.frame_type == _wire.STATUS and _wire.status(f).running == 0
            for f in sim.snapshot()[-4:]
        )
    )
    frames = sim.snapshot()
    return frames, sim.close()


def samples(frames: Sequence[_wire.Frame]) -> tuple[_wire.Status, np.ndarray, np.ndarray]:
    """The last STATUS (nothing dropped), and the sample indices and values (A0, then (shunt,
    bus) x 3 chips) in order, from 0 without gaps."""
    final = [_wire.status(f) for f in frames if f.frame_type == _wire.STATUS][-1]
    assert final.samples_dropped == 0
    chunks = [_wire.samples(f) for f in frames if f.frame_type == _wire.SAMPLES]
    assert all(v.shape[1] == 7 for _, v in chunks)  # A0, then (shunt, bus) x 3
    index = np.concatenate([i + np.arange(len(v)) for i, v in chunks])
    values = np.concatenate([v for _, v in chunks]).astype(np.int64)
    assert (np.diff(index) == 1).all() and index[0] == 0
    assert (values[:, 0] == 511).all()  # A0 at 2500 mV: floor(2500 * 1023 / 5000)
    return final, index, values


def settled_rows(index: np.ndarray, first: int, level: int) -> np.ndarray:
    """The samples of a level after two of settling (a chip's result lags its inputs)."""
    rows = (index >= first + level * HOLD + 2) & (index < first + (level + 1) * HOLD)
    assert rows.sum() == HOLD - 2
    return rows
