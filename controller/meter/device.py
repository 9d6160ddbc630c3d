"""Sans-IO model of the meter firmware's behaviour on the wire, for the virtual meter.

It follows firmware/PROTOCOL.md: the same command checks in the same order, the same ACK results,
frames of about 10 ms of samples, a STATUS per second of samples, a final STATUS after STOP, and
the same loss accounting: a frame's worth of samples is dropped (and counted) when the modelled
UART link (baud / 10 bytes per second behind a transmit buffer) has no room for it.
Time is passed in (`now_s`, any monotonic clock); values come from a `Sampler` callback.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from controller.meter.commands import (
    CommandRejected,
    GetStatus,
    Identify,
    SetChannels,
    SetOversampling,
    SetRate,
    Start,
    Stop,
    parse_command,
)
from controller.meter.decoder import CommandFrameDecoder, RawFrame
from controller.meter.protocol import (
    MAX_CHANNELS,
    OVERHEAD_BYTES,
    PROTOCOL_VERSION,
    SEQ_MODULUS,
    Ack,
    AckResult,
    Frame,
    Info,
    Marker,
    McuId,
    SampleArray,
    Samples,
    Status,
    channels_of_mask,
    encode_device_frame,
)

RATE_MIN_HZ = 100
RATE_MAX_HZ = 10_000
OVERSAMPLING_MAX = 16
_ADC_CLOCKS_PER_CONVERSION = 13
_ADC_PRESCALER_MIN = 32
_SAMPLES_HEADER_BYTES = 5
_UART_BITS_PER_BYTE = 10

# Reads the ADC: (first sample index, sample count, analog inputs, reads averaged per value)
# -> codes of shape (count, len(inputs)).
Sampler = Callable[[int, int, tuple[int, ...], int], SampleArray]


@dataclass(frozen=True, slots=True)
class BoardIdentity:
    """What the modelled board reports in INFO, and the limits that shape its stream."""

    board: str = "mega2560"
    mcu_id: int = McuId.ATMEGA2560
    fw_major: int = 1
    fw_minor: int = 0
    fw_patch: int = 0
    f_cpu_hz: int = 16_000_000
    adc_bits: int = 10
    adc_ref_mv: int = 5000
    baud: int = 500_000
    marker_pin: int = 2
    values_per_frame_max: int = 128
    tx_buffer_bytes: int = 2048


def check_config(f_cpu_hz: int, rate_hz: int, channel_mask: int, oversampling: int) -> AckResult:
    """The firmware's range checks, including its ADC conversion budget (25 % slack)."""
    channels = bin(channel_mask).count("1")
    if not RATE_MIN_HZ <= rate_hz <= RATE_MAX_HZ or f_cpu_hz % rate_hz:
        return AckResult.BAD_VALUE
    if not 1 <= channels <= MAX_CHANNELS or not 1 <= oversampling <= OVERSAMPLING_MAX:
        return AckResult.BAD_VALUE
    conversions = rate_hz * channels * oversampling
    if conversions * _ADC_CLOCKS_PER_CONVERSION * _ADC_PRESCALER_MIN > f_cpu_hz // 4 * 3:
        return AckResult.BAD_VALUE
    return AckResult.OK


def samples_per_frame(rate_hz: int, channel_count: int, values_max: int) -> int:
    return max(1, min(rate_hz // 100, values_max // channel_count))


class DeviceCore:
    """The board's protocol state machine: feed it host bytes and time, collect its bytes."""

    def __init__(self, sampler: Sampler, identity: BoardIdentity | None = None) -> None:
        self.identity = identity or BoardIdentity()
        self._sampler = sampler
        self._decoder = CommandFrameDecoder()
        self._out: list[bytes] = []
        self._frames_sent = 0
        self._rejected = 0
        self.rate_hz = 1000
        self.channel_mask = 0x03
        self.oversampling = 1
        self.running = False
        self._t0_s = 0.0
        self._taken = 0
        self._dropped = 0
        self._batch_first = 0
        self._pending: SampleArray = np.empty((0, 2), dtype=np.uint16)
        self._link_free_s = 0.0

    @property
    def channels(self) -> tuple[int, ...]:
        return channels_of_mask(self.channel_mask)

    @property
    def samples_taken(self) -> int:
        return self._taken

    @property
    def samples_dropped(self) -> int:
        return self._dropped

    def receive(self, data: bytes, now_s: float) -> None:
        """Host bytes arrived at `now_s`: every complete command is answered."""
        for raw in self._decoder.feed(data):
            self._handle(raw, now_s)

    def advance(self, now_s: float) -> None:
        """Take every sample due by `now_s` (sample k is due at START + k / rate)."""
        if self.running:
            self._take_until(math.floor((now_s - self._t0_s) * self.rate_hz) + 1)

    def marker(self, edge: int, now_s: float) -> int | None:
        """The marker pin changed at `now_s`; it is stamped with the first sample at or after,
        whose index is returned (None while not sampling)."""
        if not self.running:
            return None
        self.advance(now_s)
        index = max(0, math.ceil((now_s - self._t0_s) * self.rate_hz))
        self._send(Marker(self._seq(), index, self.identity.marker_pin, edge), now_s)
        return index

    def output(self) -> bytes:
        """Bytes the board has sent since the last call."""
        out = b"".join(self._out)
        self._out.clear()
        return out

    # --- commands ---------------------------------------------------------------------------

    def _handle(self, raw: RawFrame, now_s: float) -> None:
        self.advance(now_s)
        try:
            command = parse_command(raw.frame_type, raw.payload)
            result = AckResult.OK
        except CommandRejected as exc:
            command = None
            result = exc.result
        configuring = isinstance(command, SetRate | SetChannels | SetOversampling)
        if self.running and (configuring or isinstance(command, Start)):
            result = AckResult.BUSY
        elif isinstance(command, SetRate | SetChannels | SetOversampling):
            result = self._configure(command)
        if result != AckResult.OK:
            self._rejected += 1
        self._send(Ack(self._seq(), raw.frame_type, raw.seq, result), now_s)
        if result != AckResult.OK:
            return
        if isinstance(command, Identify):
            self._send(self._info(), now_s)
        elif isinstance(command, Start):
            self._start(now_s)
        elif isinstance(command, Stop):
            self._stop(now_s)
        elif isinstance(command, GetStatus):
            self._send(self._status(self._taken, self._dropped), now_s)

    def _configure(self, command: SetRate | SetChannels | SetOversampling) -> AckResult:
        rate, mask, reads = self.rate_hz, self.channel_mask, self.oversampling
        if isinstance(command, SetRate):
            rate = command.rate_hz
        elif isinstance(command, SetChannels):
            mask = command.channel_mask
        else:
            reads = command.oversampling
        result = check_config(self.identity.f_cpu_hz, rate, mask, reads)
        if result == AckResult.OK:
            self.rate_hz, self.channel_mask, self.oversampling = rate, mask, reads
        return result

    def _start(self, now_s: float) -> None:
        self.running = True
        self._t0_s = now_s
        self._taken = 0
        self._dropped = 0
        self._batch_first = 0
        self._pending = np.empty((0, len(self.channels)), dtype=np.uint16)

    def _stop(self, now_s: float) -> None:
        if self.running:
            if len(self._pending):
                self._send_batch(self._pending, now_s)
            self.running = False
        self._send(self._status(self._taken, self._dropped), now_s)

    # --- sampling ---------------------------------------------------------------------------

    def _take_until(self, due: int) -> None:
        if due <= self._taken:
            return
        new = self._sampler(self._taken, due - self._taken, self.channels, self.oversampling)
        self._pending = np.concatenate((self._pending, new)) if len(self._pending) else new
        per_frame = samples_per_frame(
            self.rate_hz, len(self.channels), self.identity.values_per_frame_max
        )
        next_status = (self._taken // self.rate_hz + 1) * self.rate_hz
        self._taken = due
        while True:
            batch_end = self._batch_first + per_frame
            if batch_end <= min(next_status, due):
                self._send_batch(self._pending[:per_frame], self._time_of(batch_end - 1))
                self._pending = self._pending[per_frame:]
            elif next_status <= due:
                self._send(self._status(next_status, self._dropped), self._time_of(next_status))
                next_status += self.rate_hz
            else:
                return

    def _send_batch(self, values: SampleArray, at_s: float) -> None:
        count = len(values)
        frame_bytes = OVERHEAD_BYTES + _SAMPLES_HEADER_BYTES + values.size * 2
        backlog = max(0.0, self._link_free_s - at_s) * self.identity.baud / _UART_BITS_PER_BYTE
        if backlog + frame_bytes > self.identity.tx_buffer_bytes:
            self._dropped += count
        else:
            values = np.ascontiguousarray(values)
            values.flags.writeable = False
            self._send(Samples(self._seq(), self._batch_first, values), at_s)
        self._batch_first += count

    def _time_of(self, index: int) -> float:
        return self._t0_s + index / self.rate_hz

    # --- frames -----------------------------------------------------------------------------

    def _seq(self) -> int:
        return self._frames_sent % SEQ_MODULUS

    def _send(self, frame: Frame, at_s: float) -> None:
        wire = encode_device_frame(frame)
        self._out.append(wire)
        self._frames_sent += 1
        byte_s = _UART_BITS_PER_BYTE / self.identity.baud
        self._link_free_s = max(self._link_free_s, at_s) + len(wire) * byte_s

    def _info(self) -> Info:
        ident = self.identity
        return Info(
            self._seq(),
            PROTOCOL_VERSION,
            ident.fw_major,
            ident.fw_minor,
            ident.fw_patch,
            ident.mcu_id,
            ident.f_cpu_hz,
            ident.adc_bits,
            ident.adc_ref_mv,
            self.rate_hz,
            self.channel_mask,
            self.oversampling,
            ident.baud,
            ident.marker_pin,
            ident.board,
        )

    def _status(self, taken: int, dropped: int) -> Status:
        stats = self._decoder.stats
        rejected = self._rejected + stats.crc_failures + stats.length_errors
        return Status(
            self._seq(), taken, dropped, self._frames_sent, rejected % SEQ_MODULUS, self.running
        )
