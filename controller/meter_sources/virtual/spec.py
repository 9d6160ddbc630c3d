"""The virtual meter's declaration."""

from controller.config.meter_sources import MeterSourceSpec

VIRTUAL = MeterSourceSpec(
    name="virtual",
    doc="the firmware's frames from the power model of the local nodes, on a pty",
    modelled="always",
    tap="controller.meter_sources.board.tap:open_board_tap",
    rig_check="controller.meter_sources.board.rig:check_board_meter",
    facts="controller.meter_sources.board.resolution:board_facts",
    device="controller.meter_sources.virtual.device",
    models_firmware=True,
    cli="controller.meter_sources.virtual.cli",
)
