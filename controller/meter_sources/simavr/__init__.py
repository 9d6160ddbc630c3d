"""The real firmware in the AVR simulator simavr (`controller.meter.simulate`), its ADC and I2C
parts fed from the local nodes' power model, read as a board is (controller.meter_sources.board)."""
