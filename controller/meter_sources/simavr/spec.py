"""The simulated board's declaration."""

from controller.config.meter_sources import MeterSourceSpec

SIMAVR = MeterSourceSpec(
    name="simavr",
    doc="the real firmware in the AVR simulator, its ADC and I2C parts fed the power model",
    modelled="always",
    tap="controller.meter_sources.board.tap:open_board_tap",
    rig_check="controller.meter_sources.board.rig:check_board_meter",
    facts="controller.meter_sources.board.resolution:board_facts",
    device="controller.meter_sources.simavr.device",
    cli="controller.meter_sources.simavr.cli",
)
