"""A meter session: open a port, command the board and wait for its ACKs, keep what it streams.

    with MeterSession.open("/dev/ttyACM0") as meter:
        info = meter.identify()        # retries for a board that resets when its port opens
        meter.set_rate(1000)
        meter.start()                  # a fresh SampleStore; markers and counters restart
        ...                            # meter.samples.window(a, b), meter.markers()
        meter.release_before(index)    # forget samples and markers no read needs any more
        final = meter.stop()           # the final STATUS: every index below samples_taken
                                       # was either delivered or counted as dropped

The same code path serves a real board, the virtual meter and the simavr harness: all three
are a serial device speaking firmware/PROTOCOL.md.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Self, TypeVar

import serial

from controller.errors import MeterError
from controller.meter.commands import (
    Command,
    CommandEncoder,
    GetStatus,
    Identify,
    SetChannels,
    SetI2cChannels,
    SetOversampling,
    SetRate,
    Start,
    Stop,
)
from controller.meter.decoder import DecoderStats, FrameDecoder
from controller.meter.held import HeldLog
from controller.meter.protocol import (
    PROTOCOL_VERSION,
    Ack,
    AckResult,
    Frame,
    FrameType,
    Info,
    Marker,
    Samples,
    Status,
    info_problem,
)
from controller.meter.reader import MeterReadError, SerialReader
from controller.meter.samples import SampleStore

_F = TypeVar("_F", Info, Status)

DEFAULT_BAUD = 500_000
_IDENTIFY_RETRY_S = 0.25
# INFO frames lost after an ACK (a corrupted frame is dropped by the decoder) before we give up:
# at a byte error rate of 1e-3 about 1 INFO in 20 is lost, 5 in a row about 1 in 3 million.
_IDENTIFY_ATTEMPTS = 5
_FINAL_STATUS_GRACE_S = 0.2


class MeterCommandRefused(MeterError):
    """The board answered a command with a non-zero ACK result."""

    def __init__(self, message: str, result: AckResult) -> None:
        super().__init__(message)
        self.result = result
        # A value the board rejects came from the user (a rate, a mask): their mistake.
        self.exit_status = 2 if result == AckResult.BAD_VALUE else 1


@dataclass(frozen=True, slots=True)
class MarkerEvent:
    marker: Marker
    sample_index: int  # unwrapped like SampleStore's indices
    t_mono_ns: int


def first_pulse(markers: Sequence[MarkerEvent]) -> tuple[int, int] | None:
    """The sample indices of the first rising edge in `markers` and of the falling one after
    it; None until both have arrived."""
    rising = next((m for m in markers if m.marker.rising), None)
    if rising is None:
        return None
    falling = next(
        (m for m in markers if not m.marker.rising and m.sample_index >= rising.sample_index),
        None,
    )
    return None if falling is None else (rising.sample_index, falling.sample_index)


@dataclass(frozen=True, slots=True)
class RunHealth:
    """How the current run (since START) is going."""

    elapsed_s: float
    samples_received: int
    samples_missing: int  # sample indices never received (link losses and device drops)
    samples_dropped: int  # of those, what the device counted as dropped (latest STATUS)
    sample_rate_hz: float  # received samples per second of wall time
    crc_failures: int
    frames_missed: int  # sequence gaps: frames lost or corrupted on the link
    bytes_discarded: int


class SerialSession:
    """How a session over a serial port closes, a board's (`MeterSession`) or a PPK2's
    (`controller.meter.ppk2.session`): a running device is stopped first, best effort (the
    port may be what failed), then the reader, then the port. A subclass has `port`,
    `running`, `reader_error`, `stop()` and `_stop_reader()`."""

    port: serial.Serial
    running: bool

    @property
    def reader_error(self) -> MeterError | None:
        raise NotImplementedError

    def stop(self) -> object:
        raise NotImplementedError

    def _stop_reader(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        if self.running and self.reader_error is None:
            with contextlib.suppress(MeterError):
                self.stop()
        self._stop_reader()
        self.port.close()


class MeterSession(SerialSession):
    def __init__(
        self, port: serial.Serial, *, ack_timeout_s: float = 1.0, batch_s: float = 0.01
    ) -> None:
        self.port = port
        self.name = str(port.port)
        self.ack_timeout_s = ack_timeout_s
        self.decoder = FrameDecoder()
        self._encoder = CommandEncoder()
        self._control: queue.Queue[Frame | None] = queue.Queue()  # None: the reader stopped
        self._lock = threading.Lock()
        self.samples = SampleStore()
        self._markers: HeldLog[MarkerEvent] = HeldLog()
        self.last_status: Status | None = None
        self.info: Info | None = None
        self._run_started_ns = 0
        self.running = False
        self._stats_at_start = DecoderStats()
        self._reader = SerialReader(
            port, self.decoder, self._on_frames, on_lost=self._on_lost, batch_s=batch_s
        )
        self._reader.start()

    @classmethod
    def open(cls, path: str, baud: int = DEFAULT_BAUD, **kwargs: float) -> MeterSession:
        """Open a serial device (a board, the virtual meter's or simavr's pty) raw, no flow
        control: XON/XOFF would eat 0x11/0x13 bytes of binary frames."""
        try:
            port = serial.Serial(path, baud, timeout=0.2, xonxoff=False, rtscts=False)
        except (serial.SerialException, OSError, ValueError) as exc:
            raise MeterError(f"meter port {path}: cannot open: {exc}") from None
        port.reset_input_buffer()
        return cls(port, **kwargs)

    def _stop_reader(self) -> None:
        self._reader.stop()

    # --- commands ---------------------------------------------------------------------------

    def identify(self, timeout_s: float = 3.0) -> Info:
        """Ask until the board answers (a real board spends 1-2 s in its bootloader after the
        port opens); everything before the matching ACK is discarded. An answer lost on the
        line (no ACK, or an ACK whose INFO never came) is asked for again: up to
        `_IDENTIFY_ATTEMPTS` lost INFOs, each retry with `timeout_s` for its ACK."""
        deadline = time.monotonic() + timeout_s
        sent: set[int] = set()
        lost_infos = 0
        while True:
            seq = self._send(Identify())
            sent.add(seq)
            ack = self._wait_ack(sent, FrameType.IDENTIFY, min(_IDENTIFY_RETRY_S, timeout_s))
            if ack is None:
                if time.monotonic() < deadline:
                    continue
                if lost_infos:
                    raise self._no_info(lost_infos)
                raise self._no_answer("IDENTIFY", timeout_s)
            self._check(ack, "IDENTIFY")
            info = self._wait_for(Info, self.ack_timeout_s)
            if info is None:
                lost_infos += 1
                if lost_infos == _IDENTIFY_ATTEMPTS:
                    raise self._no_info(lost_infos)
                deadline = time.monotonic() + timeout_s
                continue
            if info.protocol_version != PROTOCOL_VERSION:
                raise MeterError(
                    f"meter on {self.name}: speaks protocol version {info.protocol_version}, "
                    f"this controller speaks {PROTOCOL_VERSION} (flash the matching firmware)"
                )
            problem = info_problem(info)
            if problem is not None:
                raise MeterError(f"meter on {self.name}: its INFO says {problem}: not usable")
            self.info = info
            return info

    def _no_info(self, times: int) -> MeterError:
        return MeterError(
            f"meter on {self.name}: ACK to IDENTIFY but no INFO, {times} times "
            "(a noisy line, or not an h2iot meter?)"
        )

    def set_rate(self, rate_hz: int) -> None:
        self._command(SetRate(rate_hz), f"SET_RATE {rate_hz} Hz")

    def set_channels(self, channel_mask: int) -> None:
        self._command(SetChannels(channel_mask), f"SET_CHANNELS {channel_mask:#04x}")

    def set_i2c_channels(self, i2c_mask: int) -> None:
        """Protocol 2: sample the INA219s at 0x40 + n for each bit n."""
        self._command(SetI2cChannels(i2c_mask), f"SET_I2C_CHANNELS {i2c_mask:#04x}")

    def set_oversampling(self, reads: int) -> None:
        self._command(SetOversampling(reads), f"SET_OVERSAMPLING {reads}")

    def get_status(self) -> Status:
        self._command(GetStatus(), "GET_STATUS")
        status = self._wait_for(Status, self.ack_timeout_s)
        if status is None:
            raise MeterError(f"meter on {self.name}: ACK to GET_STATUS but no STATUS")
        return status

    def start(self) -> None:
        """Begin a run: sample index 0 is the first sample after this."""
        with self._lock:
            self.samples = SampleStore()
            self._markers = HeldLog()
        self._stats_at_start = self.decoder.stats
        self._run_started_ns = time.monotonic_ns()
        self._command(Start(), "START")
        self.running = True

    def stop(self) -> Status:
        """End the run; returns the final STATUS (after the last SAMPLES frame)."""
        self._command(Stop(), "STOP")
        self.running = False
        deadline = time.monotonic() + max(self.ack_timeout_s, 1.0)
        final: Status | None = None
        while time.monotonic() < deadline:
            status = self._wait_for(Status, deadline - time.monotonic())
            if status is None:
                break
            if status.running:
                continue
            final = status
            # A periodic STATUS due just before STOP can precede the final one; the final one
            # accounts for every sample index (delivered + dropped = taken).
            delivered = self.samples.received + status.samples_dropped
            if delivered == status.samples_taken or self.samples.missing:
                break
            deadline = min(deadline, time.monotonic() + _FINAL_STATUS_GRACE_S)
        if final is None:
            raise MeterError(f"meter on {self.name}: ACK to STOP but no final STATUS")
        return final

    # --- what the board sent ----------------------------------------------------------------

    def markers(self, since: int = 0) -> list[MarkerEvent]:
        """The held markers of the run from its `since`-th on (0: its first)."""
        with self._lock:
            return self._markers.since(since)

    @property
    def marker_count(self) -> int:
        """Markers received over the run (released ones too)."""
        with self._lock:
            return self._markers.count

    def release_before(self, index: int) -> None:
        """Forget the samples below sample `index` and the markers stamped below it
        (`SampleStore.release_before`): no later read reaches back there."""
        self.samples.release_before(index)
        released = self.samples.released_index
        with self._lock:
            self._markers.forget_below(released, key=lambda m: m.sample_index)

    def health(self) -> RunHealth:
        stats = self.decoder.stats
        base = self._stats_at_start
        elapsed = max(1e-9, (time.monotonic_ns() - self._run_started_ns) / 1e9)
        store = self.samples
        dropped = self.last_status.samples_dropped if self.last_status else 0
        return RunHealth(
            elapsed_s=elapsed,
            samples_received=store.received,
            samples_missing=store.missing,
            samples_dropped=dropped,
            sample_rate_hz=store.received / elapsed,
            crc_failures=stats.crc_failures - base.crc_failures,
            frames_missed=stats.frames_missed - base.frames_missed,
            bytes_discarded=stats.bytes_discarded - base.bytes_discarded,
        )

    @property
    def reader_error(self) -> MeterError | None:
        """Set when reading stopped (unplugged board, closed pty, or the decoder or a frame
        handler raised: the error names it): the run is lost."""
        return self._reader.error

    # --- internals --------------------------------------------------------------------------

    def _on_frames(self, frames: list[Frame], t_mono_ns: int) -> None:
        """On the reader thread: file samples and markers, queue the rest for commands."""
        for frame in frames:
            if isinstance(frame, Samples):
                self.samples.add(frame, t_mono_ns)
            elif isinstance(frame, Marker):
                with self._lock:
                    index = self._unwrap_marker(frame.sample_index)
                    self._markers.append(MarkerEvent(frame, index, t_mono_ns))
            else:
                if isinstance(frame, Status):
                    self.last_status = frame
                self._control.put(frame)

    def _on_lost(self, error: MeterReadError | None) -> None:
        """On the reader thread as it ends: a command waiting for an answer raises `error` at
        once rather than at its next poll (None: the session stopped the reader)."""
        if error is not None:
            self._control.put(None)

    def _unwrap_marker(self, raw: int) -> int:
        """The marker's index on SampleStore's unwrapped scale (nearest to what has arrived)."""
        near = self.samples.next_index
        base = near - near % (1 << 32)
        candidates = (base - (1 << 32) + raw, base + raw, base + (1 << 32) + raw)
        return max(0, min(candidates, key=lambda c: abs(c - near)))

    def _send(self, command: Command) -> int:
        seq, wire = self._encoder.encode(command)
        if self._reader.error is not None:
            raise self._reader.error
        try:
            self.port.write(wire)
        except (serial.SerialException, OSError) as exc:
            raise MeterError(f"meter on {self.name}: write failed: {exc}") from None
        return seq

    def _command(self, command: Command, what: str) -> None:
        seq = self._send(command)
        ack = self._wait_ack({seq}, command.TYPE, self.ack_timeout_s)
        if ack is None:
            raise self._no_answer(what, self.ack_timeout_s)
        self._check(ack, what)

    def _check(self, ack: Ack, what: str) -> None:
        if ack.result != AckResult.OK:
            try:
                result = AckResult(ack.result)
                reason = result.name.lower().replace("_", " ")
            except ValueError:
                result, reason = AckResult.BAD_VALUE, f"result {ack.result}"
            raise MeterCommandRefused(f"meter on {self.name} refused {what}: {reason}", result)

    def _wait_ack(self, seqs: set[int], command_type: int, timeout_s: float) -> Ack | None:
        deadline = time.monotonic() + timeout_s
        while (frame := self._next(deadline)) is not None:
            if (
                isinstance(frame, Ack)
                and frame.command_seq in seqs
                and frame.command_type == command_type
            ):
                return frame
        return None

    def _wait_for(self, kind: type[_F], timeout_s: float) -> _F | None:
        deadline = time.monotonic() + timeout_s
        while (frame := self._next(deadline)) is not None:
            if isinstance(frame, kind):
                return frame
        return None

    def _next(self, deadline: float) -> Frame | None:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            try:
                frame = self._control.get(timeout=min(remaining, 0.1))
            except queue.Empty:
                frame = None
            if frame is not None:
                return frame
            if self._reader.error is not None:
                raise self._reader.error  # its cause (what failed) goes with it

    def _no_answer(self, what: str, timeout_s: float) -> MeterError:
        if self._reader.error is not None:
            return self._reader.error
        return MeterError(
            f"meter on {self.name}: no answer to {what} within {timeout_s:g} s "
            "(not an h2iot meter, wrong baud, or not powered?)"
        )
