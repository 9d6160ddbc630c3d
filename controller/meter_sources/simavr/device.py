"""The firmware in simavr as a sweep's or a rig check's modelled device."""

from __future__ import annotations

from analysis.truth import TRUTH_FILE
from controller.meter.modelled_device import DeviceOptions
from controller.meter.simulate import SimulatedMeter, SimulateOptions

FACTS = {"simulator": "simavr"}


def build(options: DeviceOptions) -> SimulatedMeter:
    return SimulatedMeter(
        SimulateOptions(
            watch=options.watch,
            truth_path=options.output(TRUTH_FILE),
            marker_fifo=options.marker_fifo,
            model=options.model,
            ina219_sources=options.ina219_sources,
            ina226_sources=options.ina226_sources,
            ina219=options.ina219,
        )
    )
