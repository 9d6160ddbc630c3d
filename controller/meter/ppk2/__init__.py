"""Nordic Power Profiler Kit II (PPK2) as a current meter: sans-IO cores and an emulator.

- `metadata`: the reply of command 0x19 parsed strictly into `Ppk2Metadata` (a split,
  incomplete or malformed reply raises `Ppk2MetadataError`; nothing falls back to default
  resistors), `format_metadata` for the emulator, `scan_metadata_reply` to find a reply
  behind stale stream bytes.
- `decoder`: `Ppk2Decoder.feed(bytes) -> Ppk2Block`, numpy arrays of current (uA), logic
  byte (D0 = the trial marker), counter, range and stream index per sample; counter gaps,
  framing slips and skipped bytes counted with their positions, never closed up or raised.
  Currents agree with ppk2-api 0.9.2 (its spike filter included, in `spike_filter`).
- `device`: `Ppk2Device`, the PPK2 on the wire as a sans-IO model (commands in, metadata and
  100 kS/s sample words out, auto-ranging, injectable faults).
- `emulator`: `Ppk2Emulator`, that model on a raw pty in a thread, which a real serial client
  (ppk2-api's PPK2_API) opens by path. Not imported here: it is the package's only I/O.
- `session`: `Ppk2Session`, a PPK2 (real or emulated) over pyserial: the drain rule below,
  strict metadata, mode and supply, and a reader thread filling a `store.Ppk2Store` (samples
  averaged to the sweep's rate; marker edges, counter gaps and resyncs kept at 100 kS/s).
- `modelled`: `ModelledPpk2`, the emulator driven by the node power model and the marker FIFO,
  writing the ground truth per averaged sample (the sweep's PPK2 when `meter.port` is unset).
  The sweep's view of a session, its rig check and its CLI are the PPK2 source's
  (controller/meter_sources/ppk2/).

Drain rule for a session (a killed session leaves the PPK2 streaming, so thousands of sample
bytes wait in the port and more keep coming): write 0x07 (stop); read and discard until the
port has been quiet for at least 50 ms; write 0x19 and accumulate reads until
`scan_metadata_reply` returns a reply (dropping its `stale` part, counted, as it goes), then
`parse_metadata` it; only then configure, write 0x06 and feed a new `Ppk2Decoder` only bytes
read after that. Sample bytes still in flight when 0x19 was written end up in `stale`; the
reply's final newline is part of the reply, so none of its text is left for the decoder.
"""

from __future__ import annotations

from controller.meter.ppk2.decoder import (
    SAMPLE_RATE_HZ,
    Ppk2Block,
    Ppk2Decoder,
    Ppk2Totals,
    adc_to_ua,
)
from controller.meter.ppk2.device import (
    EXAMPLE_METADATA,
    RANGE_CEILINGS_UA,
    Command,
    Ppk2CommandError,
    Ppk2Device,
    Ppk2Faults,
    ua_to_codes,
)
from controller.meter.ppk2.metadata import (
    MetadataScan,
    Ppk2Error,
    Ppk2Metadata,
    Ppk2MetadataError,
    Ppk2Mode,
    RangeCalibration,
    format_metadata,
    parse_metadata,
    scan_metadata_reply,
)

__all__ = [
    "EXAMPLE_METADATA",
    "RANGE_CEILINGS_UA",
    "SAMPLE_RATE_HZ",
    "Command",
    "MetadataScan",
    "Ppk2Block",
    "Ppk2CommandError",
    "Ppk2Decoder",
    "Ppk2Device",
    "Ppk2Error",
    "Ppk2Faults",
    "Ppk2Metadata",
    "Ppk2MetadataError",
    "Ppk2Mode",
    "Ppk2Totals",
    "RangeCalibration",
    "adc_to_ua",
    "format_metadata",
    "parse_metadata",
    "scan_metadata_reply",
    "ua_to_codes",
]
