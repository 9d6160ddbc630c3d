"""The Arduino sketch on `meter.port` (ACS712, INA219, INA226): the board sources' shared
parts (controller.meter_sources.board) on a real serial port."""
