"""A PPK2 session over pyserial: the drain rule, strict metadata, mode and supply, the stream.

    with Ppk2Session.open("/dev/ttyACM0", rate_hz=1000) as ppk2:
        ppk2.drain()                     # stop a stream a killed session left running
        meta = ppk2.read_metadata()      # complete and strict, or Ppk2MetadataError
        ppk2.configure("source", 3300)   # mode, supply (the metadata's in ampere mode), DUT on
        ppk2.start()                     # a new decoder and store: stream index 0
        ...                              # ppk2.store.window(a, b), ppk2.store.edges()
        ppk2.stop()

The package docstring has the drain rule this follows. A metadata reply may reach the host in
several reads (USB delivers what is there): pieces are joined until `END` and its newline (or
the drain rule's quiet time after `END`, for a device that sends none), and the joined text is
then parsed strictly; a reply without `END` by `metadata_timeout_s` is refused as split or
incomplete, never completed from defaults. The reader thread only moves
bytes into the decoder and the store; an error that ends it is kept (`reader_error`, naming
the port), never lost.
"""

from __future__ import annotations

import threading
import time
from typing import Literal

import serial

from controller.errors import MeterError
from controller.meter.ppk2.decoder import VDD_MAX_MV, VDD_MIN_MV, Ppk2Decoder
from controller.meter.ppk2.metadata import (
    Ppk2Metadata,
    Ppk2MetadataError,
    parse_metadata,
    scan_metadata_reply,
)
from controller.meter.ppk2.store import Ppk2Store
from controller.meter.session import SerialSession

START = b"\x06"
STOP = b"\x07"
GET_METADATA = b"\x19"
QUIET_S = 0.05  # the drain rule: the port quiet this long after a stop
_DRAIN_LIMIT_S = 3.0  # a device still streaming this long after a stop is not obeying it
_READ_BYTES = 1 << 16
_BATCH_S = 0.010  # 4 kB of stream at 100 kS/s
_BATCH_BYTES = 4000

Mode = Literal["ampere", "source"]


class Ppk2Session(SerialSession):
    def __init__(
        self,
        port: serial.Serial,
        *,
        rate_hz: int,
        marker_bit: int = 0,
        metadata_timeout_s: float = 1.0,
        spike_filter: bool = True,
    ) -> None:
        """`spike_filter`: the decoder's smoothing of the samples after a range change, as
        ppk2-api and nRF Connect do for a real PPK2's switching transients (decoder)."""
        self.port = port
        self.name = str(port.port)
        self.rate_hz = rate_hz
        self.marker_bit = marker_bit
        self.metadata_timeout_s = metadata_timeout_s
        self.spike_filter = spike_filter
        self.metadata: Ppk2Metadata | None = None
        self.vdd_mv = 0
        self.mode: Mode = "ampere"
        self.stale_bytes = 0  # drained or set apart before the metadata reply
        self.store = Ppk2Store(rate_hz, marker_bit)
        self.decoder: Ppk2Decoder | None = None
        self.running = False
        self.started_ns = 0
        self._thread: threading.Thread | None = None
        self._halt = threading.Event()
        self._error: MeterError | None = None

    @classmethod
    def open(
        cls,
        path: str,
        *,
        rate_hz: int = 1000,
        marker_bit: int = 0,
        metadata_timeout_s: float = 1.0,
        spike_filter: bool = True,
    ) -> Ppk2Session:
        """Raw, no flow control: XON/XOFF would eat 0x11 (the mode command) and sample bytes."""
        try:
            port = serial.Serial(path, 115200, timeout=0.01, xonxoff=False, rtscts=False)
        except (serial.SerialException, OSError, ValueError) as exc:
            raise MeterError(f"PPK2 port {path}: cannot open: {exc}") from None
        return cls(
            port,
            rate_hz=rate_hz,
            marker_bit=marker_bit,
            metadata_timeout_s=metadata_timeout_s,
            spike_filter=spike_filter,
        )

    def _stop_reader(self) -> None:
        self._halt.set()
        if self._thread is not None:
            self._thread.join()

    # --- before a run -----------------------------------------------------------------------

    def drain(self) -> int:
        """Stop, then discard until the port has been quiet for QUIET_S; the bytes discarded."""
        self._write(STOP)
        drained = 0
        deadline = time.monotonic() + _DRAIN_LIMIT_S
        quiet_since = time.monotonic()
        while time.monotonic() - quiet_since < QUIET_S:
            data = self._read()
            if data:
                drained += len(data)
                quiet_since = time.monotonic()
            if time.monotonic() > deadline:
                raise MeterError(
                    f"PPK2 on {self.name}: still streaming {_DRAIN_LIMIT_S:g} s after stop "
                    f"({drained} bytes drained): not a PPK2, or not obeying"
                )
        self.stale_bytes += drained
        return drained

    def read_metadata(self) -> Ppk2Metadata:
        """Command 0x19; the reply joined from its reads, then parsed strictly."""
        self._write(GET_METADATA)
        buffer = b""
        deadline = time.monotonic() + self.metadata_timeout_s
        # Once END is in, its line end gets the drain rule's quiet time to follow: a device
        # that sends none is not kept waiting for the whole deadline (and then refused).
        line_end_by: float | None = None
        while True:
            due = line_end_by is not None and time.monotonic() > line_end_by
            scan = scan_metadata_reply(buffer, line_end_due=due)
            self.stale_bytes += len(scan.stale)
            buffer = scan.rest
            if scan.reply is not None:
                break
            if scan.awaits_line_end and line_end_by is None:
                line_end_by = time.monotonic() + QUIET_S
            if time.monotonic() > deadline:
                what = "no reply" if not buffer else f"{len(buffer)} bytes without a final END line"
                raise Ppk2MetadataError(
                    f"PPK2 on {self.name}: metadata reply incomplete after "
                    f"{self.metadata_timeout_s:g} s ({what}): a split or truncated reply, "
                    "not completed from defaults"
                )
            buffer += self._read()
        try:
            self.metadata = parse_metadata(scan.reply)
        except Ppk2MetadataError as exc:
            raise Ppk2MetadataError(f"PPK2 on {self.name}: {exc}") from None
        return self.metadata

    def configure(self, mode: Mode, vdd_mv: int | None = None) -> None:
        """Ampere mode (in series with the node's supply) or source mode (the PPK2 powers the
        node at `vdd_mv`, required there). DUT power on. `vdd_mv` is also the conversion's VDD
        (its offset term follows the supply): with None (ampere mode) the regulator is left
        where the metadata says it is, and the conversion uses that, so that the two agree."""
        if vdd_mv is None:
            if mode == "source":
                raise MeterError(f"PPK2 on {self.name}: source mode needs a supply voltage")
            if self.metadata is None:
                raise MeterError(f"PPK2 on {self.name}: configure before its metadata was read")
            vdd_mv = self.metadata.vdd_mv
            command_vdd = b""
        else:
            command_vdd = bytes((0x0D, vdd_mv >> 8, vdd_mv & 0xFF))
        if not VDD_MIN_MV <= vdd_mv <= VDD_MAX_MV:
            raise MeterError(
                f"PPK2 on {self.name}: supply {vdd_mv} mV outside {VDD_MIN_MV}..{VDD_MAX_MV}"
                + ("" if command_vdd else " (its metadata's VDD): set meter.supply_mv")
            )
        self.mode, self.vdd_mv = mode, vdd_mv
        command = b"\x11\x01" if mode == "ampere" else b"\x11\x02"
        self._write(command + command_vdd + b"\x0c\x01")

    # --- a run ------------------------------------------------------------------------------

    def start(self) -> None:
        """A new decoder and store (stream index 0 is the first sample after start)."""
        if self.metadata is None:
            raise MeterError(f"PPK2 on {self.name}: start before its metadata was read")
        self.decoder = Ppk2Decoder(
            self.metadata, self.vdd_mv or 3300, spike_filter=self.spike_filter
        )
        self.store = Ppk2Store(self.rate_hz, self.marker_bit)
        self.started_ns = time.monotonic_ns()
        self._write(START)
        self.running = True
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"ppk2 {self.name}")
            self._thread.start()

    def stop(self) -> None:
        self._write(STOP)
        self.running = False

    @property
    def reader_error(self) -> MeterError | None:
        return self._error

    def _run(self) -> None:
        try:
            while not self._halt.is_set():
                data = self._read()
                decoder = self.decoder
                if data and decoder is not None:
                    self.store.add(decoder.feed(data), time.monotonic_ns())
        except MeterError as exc:
            self._error = exc
        except Exception as exc:  # a thread never dies silently: keep why, naming the port
            self._error = MeterError(f"PPK2 on {self.name}: reading stopped: {exc!r}")
            self._error.__cause__ = exc

    # --- I/O --------------------------------------------------------------------------------

    def _read(self) -> bytes:
        try:
            waiting = self.port.in_waiting
            if waiting < _BATCH_BYTES:
                # A read costs about the same whatever it carries, and the stream's 400 kB/s
                # arrives in writes of a few hundred bytes: waking for each took a fifth of a
                # core (benchmarks/ppk2_reader.py). A pause lets a batch gather, well inside
                # what the port buffers (4 KiB of N_TTY's, more in the USB driver).
                time.sleep(_BATCH_S)
                waiting = self.port.in_waiting
            return bytes(self.port.read(max(1, min(waiting, _READ_BYTES))))
        except (serial.SerialException, OSError) as exc:
            raise MeterError(f"PPK2 on {self.name}: read failed: {exc}") from None

    def _write(self, data: bytes) -> None:
        if self._error is not None:
            raise self._error
        try:
            self.port.write(data)
        except (serial.SerialException, OSError) as exc:
            raise MeterError(f"PPK2 on {self.name}: write failed: {exc}") from None
