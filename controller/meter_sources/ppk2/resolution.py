"""One step of a PPK2 (`controller.meter.resolution`'s record), per range."""

from __future__ import annotations

from controller.meter.ppk2.decoder import ua_per_code
from controller.meter.ppk2.device import RANGE_CEILINGS_UA
from controller.meter.ppk2.metadata import Ppk2Metadata
from controller.meter.resolution import Resolution, ranged

__all__ = ["ppk2_resolution"]


def ppk2_resolution(metadata: Ppk2Metadata, supply_v: float) -> Resolution:
    """A PPK2's ranges from its own calibration (one ADC code each, `decoder.ua_per_code`),
    with the emulator's range ceilings: the device switches with hysteresis at thresholds it
    does not report, near these."""
    return ranged(
        [ua_per_code(c) for c in metadata.ranges],
        RANGE_CEILINGS_UA,
        supply_v,
        "PPK2 14-bit ADC code per range, from the device's calibration (metadata R, GI, UG); "
        "range ceilings as the emulator switches (the device's thresholds are near them)",
    )
