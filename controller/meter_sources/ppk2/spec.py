"""The PPK2's declaration."""

from controller.config.meter_sources import MeterSourceSpec

PPK2 = MeterSourceSpec(
    name="ppk2",
    doc="a Nordic PPK2's sample words, from the one on meter.port, or the emulated one",
    modelled="without_port",
    tap="controller.meter_sources.ppk2.tap:open_ppk2_tap",
    rig_check="controller.meter_sources.ppk2.rig:check_ppk2_meter",
    facts="controller.meter_sources.ppk2.resolution:ppk2_facts",
    device="controller.meter_sources.ppk2.device",
    emulator="controller.meter_sources.ppk2.cli",
    config_check="controller.meter_sources.ppk2.config:check",
)
