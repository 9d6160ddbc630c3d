"""The serial source's declaration."""

from controller.config.meter_sources import MeterSourceSpec

SERIAL = MeterSourceSpec(
    name="serial",
    doc="the Arduino sketch on meter.port (ACS712, INA219, INA226), its frames",
    modelled="never",
    tap="controller.meter_sources.board.tap:open_board_tap",
    rig_check="controller.meter_sources.board.rig:check_board_meter",
    facts="controller.meter_sources.board.resolution:board_facts",
    cli="controller.meter_sources.board.cli",
)
