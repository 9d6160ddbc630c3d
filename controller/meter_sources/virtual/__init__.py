"""The virtual meter: the firmware's frames from the local nodes' power model on a pty
(`controller.meter.virtual`), read as a board is (controller.meter_sources.board)."""
