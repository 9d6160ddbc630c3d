"""The virtual meter as a sweep's or a rig check's modelled device."""

from __future__ import annotations

from analysis.truth import EDGES_FILE, TRUTH_FILE
from controller.meter.modelled_device import DeviceOptions
from controller.meter.virtual import VirtualMeter, VirtualMeterOptions

FACTS = {"edges": EDGES_FILE}


def build(options: DeviceOptions) -> VirtualMeter:
    return VirtualMeter(
        VirtualMeterOptions(
            watch=options.watch,
            truth_path=options.output(TRUTH_FILE),
            edges_path=options.output(EDGES_FILE),
            marker_fifo=options.marker_fifo,
            model=options.model,
            ina219=options.ina219,
        )
    )
