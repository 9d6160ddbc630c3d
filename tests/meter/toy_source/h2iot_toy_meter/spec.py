"""The toy source's declaration: modelled always (the sweep runs no device for it: its tap is
all of it) and reading the client's marker line as the modelled meters do."""

from controller.config.meter_sources import MeterSourceSpec

TOY = MeterSourceSpec(
    name="toy",
    doc="constant power, trial windows cut by the client's software marker line",
    modelled="always",
    tap="h2iot_toy_meter.tap:open_toy_tap",
)
