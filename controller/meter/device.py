"""Sans-IO model of the meter firmware's behaviour on the wire, for the virtual meter.

It follows firmware/PROTOCOL.md: the same command checks in the same order, the same ACK results,
frames of about 10 ms of samples, a STATUS per second of samples, a final STATUS after STOP, and
the same loss accounting: a frame's worth of samples is dropped (and counted) when the modelled
UART link (baud / 10 bytes per second behind a transmit buffer) has no room for it.
Time is passed in (`now_s`, any monotonic clock); values come from a `Sampler` callback, and
INA219 and INA226 channels (protocol 2) from an `I2cSampler` (without one, an enabled chip
reads as the firmware's mark for a chip that does not answer).
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
    SetI2cChannels,
    SetOversampling,
    SetRate,
    Start,
    Stop,
    parse_command,
)
from controller.meter.decoder import CommandFrameDecoder, RawFrame
from controller.meter.ina226 import config_for_rate as ina226_config_for_rate
from controller.meter.protocol import (
    I2C_CHANNELS,
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
    i2c_addresses_of_mask,
    ina226_addresses_of_mask,
)

RATE_MIN_HZ = 100
RATE_MAX_HZ = 10_000
OVERSAMPLING_MAX = 16
_ADC_CLOCKS_PER_CONVERSION = 13
_ADC_PRESCALER_MIN = 32
_SAMPLES_HEADER_BYTES = 5
_UART_BITS_PER_BYTE = 10
_I2C_SENSOR_CYCLES = 4800  # the firmware's budget for reading one INA219/INA226 (PROTOCOL.md)
INA219_RATE_MAX_HZ = 939  # a new shunt and bus pair every 1064 us

# Reads the ADC: (first sample index, sample count, analog inputs, reads averaged per value)
# -> codes of shape (count, len(inputs)).
Sampler = Callable[[int, int, tuple[int, ...], int], SampleArray]
# Reads INA219s: (first sample index, sample count, I2C addresses) -> registers of shape
# (count, 2 * len(addresses)): shunt then bus per address.
I2cSampler = Callable[[int, int, tuple[int, ...]], SampleArray]


@dataclass(frozen=True, slots=True)
class BoardIdentity:
    """What the modelled board reports in INFO, and the limits that shape its stream."""

    board: str = "mega2560"
    mcu_id: int = McuId.ATMEGA2560
    fw_major: int = 1
    fw_minor: int = 2  # the firmware with INA226 channels (firmware/VERSION)
    fw_patch: int = 0
    f_cpu_hz: int = 16_000_000
    adc_bits: int = 10
    adc_ref_mv: int = 5000
    baud: int = 500_000
    marker_pin: int = 2
    values_per_frame_max: int = 128
    tx_buffer_bytes: int = 2048


def check_config(
    f_cpu_hz: int, rate_hz: int, channel_mask: int, oversampling: int, i2c_mask: int = 0
) -> AckResult:
    """The firmware's range checks, including its ADC and I2C budget (25 % slack)."""
    analog = bin(channel_mask).count("1")
    chips = i2c_mask & (1 << I2C_CHANNELS) - 1
    ina226 = i2c_mask >> I2C_CHANNELS
    i2c = bin(chips).count("1")
    if not RATE_MIN_HZ <= rate_hz <= RATE_MAX_HZ or f_cpu_hz % rate_hz:
        return AckResult.BAD_VALUE
    if not 1 <= analog + i2c <= MAX_CHANNELS or not 1 <= oversampling <= OVERSAMPLING_MAX:
        return AckResult.BAD_VALUE
    if ina226 & ~chips or (chips & ~ina226 and rate_hz > INA219_RATE_MAX_HZ):
        return AckResult.BAD_VALUE
    if ina226 and ina226_config_for_rate(rate_hz) is None:
        return AckResult.BAD_VALUE
    conversions = rate_hz * analog * oversampling
    cycles = conversions * _ADC_CLOCKS_PER_CONVERSION * _ADC_PRESCALER_MIN
    if cycles + rate_hz * i2c * _I2C_SENSOR_CYCLES > f_cpu_hz // 4 * 3:
        return AckResult.BAD_VALUE
    return AckResult.OK


def samples_per_frame(rate_hz: int, channel_count: int, values_max: int) -> int:
    return max(1, min(rate_hz // 100, values_max // channel_count))


class DeviceCore:
    """The board's protocol state machine: feed it host bytes and time, collect its bytes."""

    def __init__(
        self,
        sampler: Sampler,
        identity: BoardIdentity | None = None,
        i2c_sampler: I2cSampler | None = None,
    ) -> None:
        self.identity = identity or BoardIdentity()
        self._sampler = sampler
        self._i2c_sampler = i2c_sampler
        self._decoder = CommandFrameDecoder()
        self._out: list[bytes] = []
        self._frames_sent = 0
        self._rejected = 0
        self.rate_hz = 1000
        self.channel_mask = 0x03
        self.i2c_mask = 0x00
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
    def i2c_addresses(self) -> tuple[int, ...]:
        return i2c_addresses_of_mask(self.i2c_mask)

    @property
    def ina226_addresses(self) -> tuple[int, ...]:
        return ina226_addresses_of_mask(self.i2c_mask)

    @property
    def columns(self) -> int:
        return len(self.channels) + 2 * len(self.i2c_addresses)

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

    def marker(self, edge: int, at_s: float) -> int | None:
        """The marker pin changed at `at_s`: it is stamped with the first sample at or after,
        whose index is returned (None while not sampling). A pin interrupt stamps an edge at
        once; a modelled node's edge may be told late, and its index may then be of a sample
        already sent, as the frame allows."""
        if not self.running:
            return None
        # The samples up to the edge, then the edge's frame, sent as by a board whose
        # interrupt fired at `at_s`. Sent when told, the frame would hold the modelled link
        # until then, and the samples taken meanwhile would find its buffer full and be
        # dropped (a marker read 40 ms late at 1 kHz).
        self.advance(at_s)
        index = max(0, math.ceil((at_s - self._t0_s) * self.rate_hz))
        self._send(Marker(self._seq(), index, self.identity.marker_pin, edge), at_s)
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
        configuring = isinstance(command, SetRate | SetChannels | SetOversampling | SetI2cChannels)
        if self.running and (configuring or isinstance(command, Start)):
            result = AckResult.BUSY
        elif isinstance(command, SetRate | SetChannels | SetOversampling | SetI2cChannels):
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

    def _configure(
        self, command: SetRate | SetChannels | SetOversampling | SetI2cChannels
    ) -> AckResult:
        rate, mask, reads, i2c = self.rate_hz, self.channel_mask, self.oversampling, self.i2c_mask
        if isinstance(command, SetRate):
            rate = command.rate_hz
        elif isinstance(command, SetChannels):
            mask = command.channel_mask
        elif isinstance(command, SetI2cChannels):
            i2c = command.i2c_mask
        else:
            reads = command.oversampling
        result = check_config(self.identity.f_cpu_hz, rate, mask, reads, i2c)
        if result == AckResult.OK:
            self.rate_hz, self.channel_mask, self.oversampling = rate, mask, reads
            self.i2c_mask = i2c
        return result

    def _start(self, now_s: float) -> None:
        self.running = True
        self._t0_s = now_s
        self._taken = 0
        self._dropped = 0
        self._batch_first = 0
        self._pending = np.empty((0, self.columns), dtype=np.uint16)

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
        new = self._sample(self._taken, due - self._taken)
        self._pending = np.concatenate((self._pending, new)) if len(self._pending) else new
        per_frame = samples_per_frame(
            self.rate_hz, self.columns, self.identity.values_per_frame_max
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

    def _sample(self, first: int, count: int) -> SampleArray:
        """Analog columns, then (shunt, bus) per INA219, as the firmware lays them out."""
        parts: list[SampleArray] = []
        if self.channels:
            parts.append(self._sampler(first, count, self.channels, self.oversampling))
        addresses = self.i2c_addresses
        if addresses and self._i2c_sampler is not None:
            parts.append(self._i2c_sampler(first, count, addresses))
        elif addresses:  # no INA219 on this board's bus: the firmware's failure marks
            absent = np.zeros((count, 2 * len(addresses)), dtype=np.uint16)
            absent[:, 1::2] = 0xFFFF
            parts.append(absent)
        return parts[0] if len(parts) == 1 else np.hstack(parts)

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
            self.i2c_mask,
        )

    def _status(self, taken: int, dropped: int) -> Status:
        stats = self._decoder.stats
        rejected = self._rejected + stats.crc_failures + stats.length_errors
        return Status(
            self._seq(), taken, dropped, self._frames_sent, rejected % SEQ_MODULUS, self.running
        )
