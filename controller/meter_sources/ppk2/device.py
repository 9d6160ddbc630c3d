"""The emulated PPK2 as a sweep's or a rig check's modelled device (no `meter.port`)."""

from __future__ import annotations

from analysis.truth import TRUTH_FILE
from controller.meter.modelled_device import DeviceOptions
from controller.meter.node_power import ModelledMeterOptions
from controller.meter.ppk2.modelled import ModelledPpk2, ModelledPpk2Source

FACTS = {"emulated": "ppk2"}


def build(options: DeviceOptions) -> ModelledPpk2:
    if options.supply_mv is None:
        raise ValueError("the emulated PPK2 is built with a supply_mv")
    meter = ModelledMeterOptions(
        watch=options.watch,
        truth_path=options.output(TRUTH_FILE),
        marker_fifo=options.marker_fifo,
        model=options.model,
    )
    return ModelledPpk2(
        ModelledPpk2Source(meter, options.supply_mv, options.marker_input, rate_hz=options.rate_hz)
    )
