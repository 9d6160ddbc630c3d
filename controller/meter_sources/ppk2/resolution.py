"""What a PPK2 can see (`controller.meter.resolution`'s record): its step per range, its noise,
full scale and timing; `ppk2_facts` answers from a config alone (the declaration's `facts`)."""

from __future__ import annotations

from controller.config.model import MeterConfig
from controller.meter.ppk2.decoder import SAMPLE_RATE_HZ, ua_per_code
from controller.meter.ppk2.device import EXAMPLE_METADATA, RANGE_CEILINGS_UA
from controller.meter.ppk2.metadata import Ppk2Metadata
from controller.meter.resolution import Resolution, range_steps

__all__ = ["FULL_SCALE_UA", "NOISE_UA", "ppk2_facts", "ppk2_resolution"]

# Nordic's PPK2 specification: currents up to 1 A, its resolution "variable, 100 nA to 1 mA
# depending on the range". It states no rms noise; the coarsest range's 1 mA, the range a
# node-class load (hundreds of mA) sits in or next to, is taken as a sample's noise: an upper
# figure for the finer ranges.
FULL_SCALE_UA = 1_000_000.0
NOISE_UA = 1_000.0


def ppk2_resolution(
    metadata: Ppk2Metadata, supply_v: float, calibration_from: str = "the device's calibration"
) -> Resolution:
    """A PPK2's ranges from a calibration (one ADC code each, `decoder.ua_per_code`), with the
    emulator's range ceilings: the device switches with hysteresis at thresholds it does not
    report, near these. Power is the current at `supply_v`, the regulator's set VDD in source
    mode or the config's supply in ampere mode: assumed, not measured."""
    steps = [ua_per_code(c) for c in metadata.ranges]
    return Resolution(
        current_ua=min(steps),
        supply_v=supply_v,
        basis=f"PPK2 14-bit ADC code per range, from {calibration_from} (metadata R, GI, UG); "
        "range ceilings as the emulator switches (the device's thresholds are near them)",
        sample_rate_hz=float(SAMPLE_RATE_HZ),
        noise_ua=NOISE_UA,
        noise_basis="Nordic PPK2 specification: resolution 100 nA to 1 mA by range, no rms "
        "noise stated; the top range's 1 mA taken as a sample's noise at a node's load",
        full_scale_ua=FULL_SCALE_UA,
        voltage="assumed",
        conversion_us=1e6 / SAMPLE_RATE_HZ,
        ranges=range_steps(steps, RANGE_CEILINGS_UA),
    )


def ppk2_facts(meter: MeterConfig) -> Resolution:
    """The PPK2's `facts` before a device is opened: the emulator's example calibration, at the
    voltage the tap will take power at."""
    return ppk2_resolution(
        EXAMPLE_METADATA, meter.power_v, "the emulator's example calibration (no device read)"
    )
