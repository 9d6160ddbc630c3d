"""Sans-IO model of a PPK2 on its USB serial line, for the emulator and the tests.

Bytes from the host go into `receive(data)` (commands may arrive split across calls); what the
device sends comes out of `data_to_send()`. Samples are made only when the caller says so:
`samples(n, current_ua, logic)` turns n sample instants (10 us apart) into n sample words while
the device is started, so time is the caller's (the emulator reads a clock, a test does not).

Commands (what ppk2-api 0.9.2 sends; its constructor sends nothing, its PPK2_MP sends a stop
before each start), anything else raises `Ppk2CommandError` and discards the input buffer:

    0x19              metadata: reply with `format_metadata` (VDD and mode as currently set)
    0x06              start: stream sample words
    0x07              stop
    0x11 0x01 | 0x02  ampere mode | source mode
    0x0D hi lo        source voltage, (hi << 8 | lo) mV, 800-5000 (ppk2-api's "offset 32"
                      arithmetic comes to exactly that: 3300 mV is 0x0C 0xE4)
    0x0C 0x00 | 0x01  DUT power off | on (in source mode an unpowered DUT draws 0 uA)

Auto-ranging (the model's rule, not the firmware's: the real device switches with hysteresis
at thresholds it does not report): each sample takes the most sensitive range whose ceiling
is above its current, ceilings RANGE_CEILINGS_UA = 500 uA, 5 mA, 50 mA, 500 mA (range 4 above,
and for NaN), then the ADC code that the conversion of `decoder` maps closest to the current
(the inverse of the calibration's quadratic), clipped to 0..16383, so a current below a range's
zero or above its full scale saturates as on the device. The counter starts at 0 at power-up
and counts every sample instant, sent or not; it is not reset by a start.

Faults (`Ppk2Faults`, for tests): samples dropped by sample index (the counter jumps), bytes
inserted or deleted at offsets of the sample byte stream (a framing slip), and every metadata
reply split into two pieces that `data_to_send` returns separately, for the I/O layer to write
with a pause between them (how a reply arrives over two reads).
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

import numpy as np
from numpy.typing import ArrayLike, NDArray

from controller.meter.ppk2.decoder import (
    ADC_MAX,
    COUNTER_MODULUS,
    VDD_MAX_MV,
    VDD_MIN_MV,
    RangeFactors,
)
from controller.meter.ppk2.metadata import (
    Ppk2Error,
    Ppk2Metadata,
    Ppk2Mode,
    RangeCalibration,
    format_metadata,
)

RANGE_CEILINGS_UA: Final = (500.0, 5_000.0, 50_000.0, 500_000.0)

# A plausible calibrated unit (values of the order real PPK2s report), the emulator's default.
EXAMPLE_METADATA: Final = Ppk2Metadata(
    calibrated=True,
    ranges=(
        RangeCalibration(1008.2, 0.0, 1.0, 110.3, 4.6e-8, -1.0e-7, 1.0),
        RangeCalibration(101.31, 108.4, 0.9711, 74.1, 5.8e-7, -1.4e-6, 1.0),
        RangeCalibration(10.214, 17.62, 0.9624, 63.9, 5.2e-6, 3.5e-5, 1.0),
        RangeCalibration(0.9602, 2.388, 0.9507, 51.2, 6.1e-5, -3.6e-4, 1.0),
        RangeCalibration(0.0559, 0.0711, 0.957, 86.5, 2.9e-3, -9.1e-3, 1.0),
    ),
    vdd_mv=3000,
    hardware_id=9102,
    mode=Ppk2Mode.SOURCE,
    ia=52,
)

_EMPTY: Mapping[int, int] = MappingProxyType({})
_EMPTY_BYTES: Mapping[int, bytes] = MappingProxyType({})


class Ppk2CommandError(Ppk2Error):
    """The host sent a command the model does not know, or a bad argument; the message names it."""


@dataclass(frozen=True, slots=True)
class Ppk2Faults:
    """Faults to inject. `drop_samples`: sample index (counted from power-up, every instant)
    -> how many samples from there are never sent. `insert_bytes` / `delete_bytes`: offset in
    the byte stream of sent sample words (after drops, before other slips) -> bytes inserted
    before that byte / how many bytes deleted from it. `split_metadata_at`: byte offset at
    which every metadata reply is cut into two pieces."""

    drop_samples: Mapping[int, int] = field(default_factory=lambda: _EMPTY)
    insert_bytes: Mapping[int, bytes] = field(default_factory=lambda: _EMPTY_BYTES)
    delete_bytes: Mapping[int, int] = field(default_factory=lambda: _EMPTY)
    split_metadata_at: int | None = None


@dataclass(frozen=True, slots=True)
class Command:
    """A command the device received and obeyed."""

    opcode: int
    name: str
    args: bytes


def ua_to_codes(
    metadata: Ppk2Metadata, vdd_mv: int, current_ua: ArrayLike
) -> tuple[NDArray[np.uint8], NDArray[np.uint16]]:
    """(range, 14-bit ADC code) per current, by the auto-ranging rule of the module docstring."""
    current = np.asarray(current_ua, dtype=np.float64)
    r = np.searchsorted(np.array(RANGE_CEILINGS_UA), current, side="right").astype(np.intp)
    f = RangeFactors.of(metadata, vdd_mv)
    quadratic, linear = f.quadratic[r], f.linear[r]
    with np.errstate(all="ignore"):
        # x * (GS*x + GI) = target, solved for x (amperes before the gains); the root written
        # without the cancellation of -GI + sqrt(...) when GS*x is small.
        target = current / 1e6 / f.user_gain[r] - f.constant_a[r]
        root = 2 * target / (linear + np.sqrt(np.maximum(linear**2 + 4 * quadratic * target, 0)))
        x = np.where(quadratic == 0, target / linear, root)
        code = np.rint((x / f.volts_per_ohm[r] + f.offset[r]) / 4)
    code = np.clip(np.nan_to_num(code, nan=0.0, posinf=ADC_MAX, neginf=0.0), 0, ADC_MAX)
    return r.astype(np.uint8), code.astype(np.uint16)


class Ppk2Device:
    """One emulated PPK2, powered up; see the module docstring."""

    def __init__(
        self, metadata: Ppk2Metadata = EXAMPLE_METADATA, *, faults: Ppk2Faults | None = None
    ) -> None:
        self._metadata = metadata
        self._faults = faults or Ppk2Faults()
        self._mode = metadata.mode
        self._vdd_mv = metadata.vdd_mv if VDD_MIN_MV <= metadata.vdd_mv <= VDD_MAX_MV else 3300
        self._dut_power = False
        self._running = False
        self._starts = 0
        self._sample_index = 0
        self._sent_bytes = 0  # of sample words, before slips: the offsets faults name
        self._deleted_until = 0  # nominal offset before which bytes are deleted
        self._inbox = b""
        self._pieces: list[bytearray] = [bytearray()]
        self._commands: list[Command] = []
        self._drops = sorted(self._faults.drop_samples.items())
        self._slip_offsets = sorted({*self._faults.insert_bytes, *self._faults.delete_bytes})
        self._handlers: dict[int, tuple[str, int, Callable[[bytes], None]]] = {
            0x19: ("get_metadata", 0, self._get_metadata),
            0x06: ("average_start", 0, self._start),
            0x07: ("average_stop", 0, self._stop),
            0x11: ("set_power_mode", 1, self._set_mode),
            0x0D: ("regulator_set", 2, self._set_voltage),
            0x0C: ("device_running_set", 1, self._set_dut_power),
        }

    @property
    def metadata(self) -> Ppk2Metadata:
        return self._metadata

    @property
    def running(self) -> bool:
        return self._running

    @property
    def starts(self) -> int:
        """Start commands obeyed so far (a restart between two looks at `running` shows here)."""
        return self._starts

    @property
    def mode(self) -> Ppk2Mode:
        return self._mode

    @property
    def vdd_mv(self) -> int:
        return self._vdd_mv

    @property
    def dut_power(self) -> bool:
        return self._dut_power

    @property
    def sample_index(self) -> int:
        """Sample instants since power-up (sent, dropped and lost alike)."""
        return self._sample_index

    @property
    def commands(self) -> tuple[Command, ...]:
        return tuple(self._commands)

    def receive(self, data: bytes) -> None:
        """Obey every complete command in the bytes received so far."""
        buf = self._inbox + data
        pos = 0
        while pos < len(buf):
            opcode = buf[pos]
            handler = self._handlers.get(opcode)
            if handler is None:
                self._inbox = b""
                raise Ppk2CommandError(f"PPK2 emulator: unknown command byte 0x{opcode:02X}")
            name, arg_bytes, obey = handler
            if pos + 1 + arg_bytes > len(buf):
                break
            args = buf[pos + 1 : pos + 1 + arg_bytes]
            pos += 1 + arg_bytes
            try:
                obey(args)
            except Ppk2CommandError:
                self._inbox = b""
                raise
            self._commands.append(Command(opcode, name, args))
        self._inbox = buf[pos:]

    def data_to_send(self) -> list[bytes]:
        """Bytes to write, in pieces to be written separately (one piece unless a fault split a
        metadata reply); empty when there is nothing."""
        pieces = [bytes(p) for p in self._pieces if p]
        self._pieces = [bytearray()]
        return pieces

    def samples(self, n: int, current_ua: ArrayLike, logic: ArrayLike = 0) -> int:
        """Take n samples of `current_ua` (a value or n values) with logic bytes `logic` (D0 is
        bit 0); returns how many were taken: n while started, else 0 (a stopped PPK2 sends
        nothing and its counter stands)."""
        if not self._running or n <= 0:
            return 0
        current = np.broadcast_to(np.asarray(current_ua, dtype=np.float64), (n,))
        if self._mode is Ppk2Mode.SOURCE and not self._dut_power:
            current = np.zeros(n)
        meas_range, code = ua_to_codes(self._metadata, self._vdd_mv, current)
        logic_bits = np.broadcast_to(np.asarray(logic, dtype=np.uint8), (n,))
        index = self._sample_index + np.arange(n, dtype=np.int64)
        counter = (index % COUNTER_MODULUS).astype(np.uint32)
        words = (
            code.astype(np.uint32)
            | (meas_range.astype(np.uint32) << 14)
            | (counter << 18)
            | (logic_bits.astype(np.uint32) << 24)
        )
        keep = np.ones(n, dtype=np.bool_)
        for start, count in self._drops:
            keep &= (index < start) | (index >= start + count)
        self._sample_index += n
        self._emit(self._slip(words[keep].astype("<u4").tobytes()))
        return n

    def lose(self, n: int) -> None:
        """n sample instants pass unsent (the device's buffer overflowing): the counter jumps."""
        if self._running and n > 0:
            self._sample_index += n

    def _emit(self, data: bytes) -> None:
        self._pieces[-1] += data

    def _slip(self, chunk: bytes) -> bytes:
        start, end = self._sent_bytes, self._sent_bytes + len(chunk)
        self._sent_bytes = end
        out = bytearray()

        def keep(a: int, b: int) -> None:  # nominal offsets [a, b) minus the deleted ones
            a = max(a, self._deleted_until)
            if a < b:
                out.extend(chunk[a - start : b - start])

        cursor = start
        first = bisect.bisect_left(self._slip_offsets, start)
        last = bisect.bisect_left(self._slip_offsets, end)
        for offset in self._slip_offsets[first:last]:
            keep(cursor, offset)
            cursor = offset
            out += self._faults.insert_bytes.get(offset, b"")
            deleted = self._faults.delete_bytes.get(offset, 0)
            self._deleted_until = max(self._deleted_until, offset + deleted)
        keep(cursor, end)
        return bytes(out)

    def _get_metadata(self, _args: bytes) -> None:
        current = dataclasses.replace(self._metadata, vdd_mv=self._vdd_mv, mode=self._mode)
        reply = format_metadata(current)
        at = self._faults.split_metadata_at
        if at is not None and 0 < at < len(reply):
            self._emit(reply[:at])
            self._pieces.append(bytearray(reply[at:]))
        else:
            self._emit(reply)

    def _start(self, _args: bytes) -> None:
        self._running = True
        self._starts += 1

    def _stop(self, _args: bytes) -> None:
        self._running = False

    def _set_mode(self, args: bytes) -> None:
        if args[0] not in tuple(Ppk2Mode):
            raise Ppk2CommandError(f"PPK2 emulator: power mode must be 1 or 2, got {args[0]}")
        self._mode = Ppk2Mode(args[0])

    def _set_voltage(self, args: bytes) -> None:
        mv = args[0] << 8 | args[1]
        if not VDD_MIN_MV <= mv <= VDD_MAX_MV:
            raise Ppk2CommandError(
                f"PPK2 emulator: source voltage must be {VDD_MIN_MV}-{VDD_MAX_MV} mV, got {mv}"
            )
        self._vdd_mv = mv

    def _set_dut_power(self, args: bytes) -> None:
        if args[0] not in (0, 1):
            raise Ppk2CommandError(f"PPK2 emulator: DUT power must be 0 or 1, got {args[0]}")
        self._dut_power = bool(args[0])
