"""Measure each channel's zero offset with no load and build a calibration record from it."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from controller.errors import MeterError
from controller.meter.calibration import Calibration, ChannelCalibration, sensitivity_of
from controller.meter.session import MeterSession

# A zero this far from mid-scale (about 0.5 A on the 5 A part) means a load is connected.
SUSPICIOUS_ZERO_CODES = 20


def measure_zero(meter: MeterSession, seconds: float, variant: str, supply_v: float) -> Calibration:
    """Run the meter for `seconds` with no load; the mean code per channel is its zero."""
    info = meter.info or meter.identify()
    sensitivity = sensitivity_of(variant)
    meter.start()
    time.sleep(seconds)
    meter.stop()
    window = meter.samples.all()
    if len(window.indices) < 10:
        raise MeterError(
            f"meter on {meter.name}: only {len(window.indices)} samples in {seconds} s"
        )
    channels = tuple(
        ChannelCalibration(
            analog_input=analog_input,
            variant=variant,
            sensitivity_mv_per_a=sensitivity,
            zero_code=float(window.values[:, column].mean()),
            supply_v=supply_v,
            zero_samples=len(window.indices),
            zero_noise_code=float(window.values[:, column].std()),
        )
        for column, analog_input in enumerate(info.channels)
    )
    return Calibration(
        adc_bits=info.adc_bits,
        adc_ref_mv=float(info.adc_ref_mv),
        channels=channels,
        board=info.board,
        measured_utc=datetime.now(UTC).isoformat(timespec="seconds"),
    )


def suspicious_channels(calibration: Calibration) -> list[ChannelCalibration]:
    middle = (1 << (calibration.adc_bits - 1)) - 0.5
    return [c for c in calibration.channels if abs(c.zero_code - middle) > SUSPICIOUS_ZERO_CODES]
