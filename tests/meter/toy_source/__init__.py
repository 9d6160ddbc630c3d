"""A toy meter source: constant power, trial windows from the client's software marker line.
It is what a package of one's own adds (the `h2iot_toy_meter` package and its dist-info naming
it in the `h2iot.meter_sources` entry-point group), and nothing of the project names it."""
