"""The meter as the sweep engine uses it (`PowerMeter`): one `MeterSession` over a serial port,
whichever device is behind it (a board, the virtual meter's pty, the simavr harness); or
`Ppk2Tap`, one `Ppk2Session` (a PPK2, real or emulated).

A trial's window is cut by its marker edges when they arrived (a rising then a falling edge
after `begin_trial`); otherwise the controller's clock span is mapped onto sample indices. That
mapping uses the arrival time of each SAMPLES frame: a frame's last sample was taken no later
than its arrival, so `arrival - last_index / rate` bounds sample 0's time from above, and the
smallest bound over the recent frames is the best estimate (transmission delays only add).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Generic, Literal, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from controller.config.model import MeterConfig
from controller.errors import MeterError
from controller.meter.calibration import Calibration
from controller.meter.decoder import DecoderStats
from controller.meter.ina219 import Ina219Calibration
from controller.meter.ina226 import Ina226Calibration
from controller.meter.ppk2.decoder import SAMPLE_RATE_HZ as PPK2_SAMPLE_RATE_HZ
from controller.meter.ppk2.decoder import ua_per_code
from controller.meter.ppk2.session import Ppk2Session
from controller.meter.ppk2.store import Ppk2Window
from controller.meter.ppk2.store import first_pulse as first_ppk2_pulse
from controller.meter.protocol import channels_of_mask
from controller.meter.resolution import ppk2 as ppk2_resolution
from controller.meter.resolution import tap_resolution
from controller.meter.session import MeterSession, first_pulse
from controller.sweep.errors import MeterLost
from controller.sweep.interfaces import PowerWindow

# Frames considered when mapping a clock span to sample indices: recent enough that the board's
# crystal and the host's clock cannot drift apart noticeably, many enough to find a fast one.
_MAPPING_HORIZON_S = 30.0
# Samples after a trial's end may still be on the wire.
_LATE_SAMPLES_TIMEOUT_S = 3.0
_EDGE_PAD_SAMPLES = 2
# How long after the controller's end of a trial its marker's falling edge may still be sampled.
_MARKER_SLACK_S = 0.05
_INCOMPLETE_PULSE = "the trial's marker pulse is incomplete (a rising edge, no falling one)"
# How long a lost pty waits for its modelled meter to say why it stopped.
_SOURCE_ERROR_WAIT_S = 2.0

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class _Counters:
    crc_failures: int
    frames_missed: int

    @classmethod
    def of(cls, stats: DecoderStats) -> _Counters:
        return cls(stats.crc_failures, stats.frames_missed)


class _Session(Protocol):
    """What both taps ask of their session."""

    @property
    def name(self) -> str: ...

    @property
    def reader_error(self) -> MeterError | None: ...

    def close(self) -> None: ...


class _Samples(Protocol):
    """What both taps read of their store (`SampleStore`, `Ppk2Store`)."""

    @property
    def next_index(self) -> int:
        """One past the highest sample index received."""
        ...

    def arrivals(self) -> tuple[IntArray, IntArray]:
        """(last sample index of each read or frame, monotonic ns of its arrival)."""
        ...


_Rest = TypeVar("_Rest")


@dataclass(frozen=True)
class _Span(Generic[_Rest]):
    """A window read: (t_s, power_mw, start_s, end_s), and what the tap's `_power` reports of
    the samples that did not arrive."""

    trace: tuple[FloatArray, FloatArray, float, float]
    rest: _Rest


class _StreamTap(Generic[_Rest]):
    """What `MeterTap` and `Ppk2Tap` share: a stream of samples numbered from 0 at `rate_hz`
    (sample indices, or the PPK2's stream indices), the clock's mapping onto them, the wait for
    late samples, and how a lost session is reported. A tap says how to read its store."""

    _label = "meter"  # how its lines name the device
    session: _Session
    source: str
    rate_hz: float
    _source_error: Callable[[], BaseException | None] | None

    @property
    def _samples(self) -> _Samples:
        """The store the session's reader fills."""
        raise NotImplementedError

    def _power(self, first: int, end: int) -> tuple[FloatArray, FloatArray, _Rest]:
        """Meter time (s) and power (mW) of the samples first..end-1 that arrived, and what
        the tap's window reports of the rest."""
        raise NotImplementedError

    def _trace(self, first: int, end: int) -> tuple[FloatArray, FloatArray]:
        t_s, power_mw, _rest = self._power(first, end)
        return t_s, power_mw

    def _read(
        self, start_index: float, end_index: float, before_s: float, after_s: float, pad: int
    ) -> _Span[_Rest]:
        """A trial's window between two sample indices, widened by `before_s` and `after_s`,
        read `pad` samples beyond each end once the last of those has arrived."""
        start_index -= before_s * self.rate_hz
        end_index += after_s * self.rate_hz
        self._await(int(np.ceil(end_index)) + pad)
        first = max(0, int(np.floor(start_index)) - pad)
        t_s, power_mw, rest = self._power(first, int(np.ceil(end_index)) + pad)
        return _Span((t_s, power_mw, start_index / self.rate_hz, end_index / self.rate_hz), rest)

    def idle_baseline_mw(self, seconds: float) -> float:
        self._check()
        first = self._samples.next_index
        time.sleep(seconds)
        end = self._samples.next_index
        if end <= first:
            raise self._lost("no samples during the idle baseline")
        return float(self._trace(first, end)[1].mean())

    def recent_power(self, seconds: float) -> tuple[FloatArray, FloatArray]:
        """The last `seconds` of power (meter time in s, mW), for the dashboard."""
        end = self._samples.next_index
        first = max(0, end - int(seconds * self.rate_hz))
        return self._trace(first, end)

    def close(self) -> None:
        self.session.close()

    # internals ------------------------------------------------------------------------------

    def _lost(self, what: str) -> MeterLost:
        # A modelled meter whose driver failed keeps its pty open: its samples just stop. Its
        # error, if it has one, is why.
        source = self._source_error() if self._source_error is not None else None
        why = f" ({self.source}: {source})" if source is not None else ""
        lost = MeterLost(f"{self._label} {self.session.name}: {what}{why}", port=self.session.name)
        lost.__cause__ = source
        return lost

    def _check(self) -> None:
        error = self.session.reader_error
        if error is None:
            return
        source = self._why_the_source_stopped()
        if source is not None:
            # The pty closed because what drives it stopped (the simavr harness exited): that
            # is the cause to name and keep.
            raise MeterLost(
                f"{error} ({self.source}: {source})", port=self.session.name
            ) from source
        # The reader's error names the port and why reading stopped; keep it as the cause.
        raise MeterLost(str(error), port=self.session.name) from error

    def _why_the_source_stopped(self) -> BaseException | None:
        """The modelled meter's own error, once its driver has seen what closed the pty (it
        looks every tick; a loaded machine may take a moment)."""
        if self._source_error is None:
            return None
        deadline = time.monotonic() + _SOURCE_ERROR_WAIT_S
        while (source := self._source_error()) is None and time.monotonic() < deadline:
            time.sleep(0.01)
        return source

    def _indices_of(self, start_wall_ns: int, end_wall_ns: int) -> tuple[float, float]:
        last, arrival_ns = self._samples.arrivals()
        if last.size == 0:
            raise self._lost("no samples have arrived")
        wall_minus_mono = time.time_ns() - time.monotonic_ns()
        recent = arrival_ns >= arrival_ns[-1] - int(_MAPPING_HORIZON_S * 1e9)
        sample0_mono_ns = float(np.min(arrival_ns[recent] - last[recent] * 1e9 / self.rate_hz))

        def index(wall_ns: int) -> float:
            return (wall_ns - wall_minus_mono - sample0_mono_ns) * self.rate_hz / 1e9

        return index(start_wall_ns), index(end_wall_ns)

    def _await(self, index: int) -> None:
        deadline = time.monotonic() + _LATE_SAMPLES_TIMEOUT_S
        while self._samples.next_index <= index:
            self._check()
            if time.monotonic() > deadline:
                raise self._lost(
                    f"sample {index} has not arrived "
                    f"{_LATE_SAMPLES_TIMEOUT_S:g} s after the trial ended"
                )
            time.sleep(0.005)


class MeterTap(_StreamTap[int]):
    session: MeterSession

    def __init__(
        self,
        session: MeterSession,
        calibration: Calibration,
        analog_input: int,
        source: str,
        extra_facts: Mapping[str, Any],
        *,
        ina219: Ina219Calibration | Ina226Calibration | None = None,
        source_error: Callable[[], BaseException | None] | None = None,
    ) -> None:
        """`analog_input` is the client's channel: an analog input, or with `ina219` the
        INA219's or INA226's I2C address (its two columns give V x I)."""
        self.session = session
        self._source_error = source_error
        info = session.info
        if info is None:
            raise self._lost("no identity (IDENTIFY never answered)")
        self.source = source
        self.calibration = calibration
        self.analog_input = analog_input
        self.rate_hz = float(info.sample_rate_hz)
        self.ina219 = ina219
        channels = channels_of_mask(info.channel_mask)
        if ina219 is not None:
            if analog_input not in info.i2c_addresses:
                raise self._lost(f"the {ina219.kind.upper()} at {analog_input:#04x} is not sampled")
            self.column = len(channels) + 2 * info.i2c_addresses.index(analog_input)
        elif analog_input not in channels:
            raise self._lost(f"analog input A{analog_input} is not sampled")
        else:
            self.column = channels.index(analog_input)
        self._extra_facts = dict(extra_facts)
        self._markers_seen = 0
        self._counters = _Counters.of(session.decoder.stats)

    # PowerMeter ------------------------------------------------------------------------------

    def facts(self) -> Mapping[str, Any]:
        info = self.session.info
        assert info is not None
        return {
            "source": self.source,
            "port": self.session.name,
            "firmware_version": info.fw_version,
            "protocol_version": info.protocol_version,
            "board": info.board,
            "sample_rate_hz": info.sample_rate_hz,
            "channel_mask": info.channel_mask,
            "adc_bits": info.adc_bits,
            "adc_ref_mv": info.adc_ref_mv,
            "client_analog_input": self.analog_input,
            "resolution": tap_resolution(
                self.calibration, self.analog_input, self.ina219
            ).to_dict(),
            "calibration": self.calibration.to_dict(),
            **(
                {
                    "i2c_mask": info.i2c_mask,
                    "client_sensor": self.ina219.kind,
                    self.ina219.kind: self.ina219.facts(info.sample_rate_hz),
                }
                if self.ina219 is not None
                else {}
            ),
            **self._extra_facts,
        }

    def begin_trial(self) -> None:
        self._check()
        self._markers_seen = len(self.session.markers())
        self._counters = _Counters.of(self.session.decoder.stats)

    def window(
        self, start_wall_ns: int, end_wall_ns: int, *, before_s: float = 0.0, after_s: float = 0.0
    ) -> PowerWindow:
        self._check()
        clock = self._indices_of(start_wall_ns, end_wall_ns)
        # The trial's falling edge is stamped before any sample taken after it is sent (a pin
        # interrupt; a modelled meter reads its marker line before it samples up to now), so
        # once the stream passes the trial's end by the clock, both edges are here, however
        # late a busy machine ran the reader.
        self._await(int(np.ceil(clock[1] + _MARKER_SLACK_S * self.rate_hz)))
        edges = self._trial_edges()
        source: Literal["marker", "clock"] = "clock"
        start_index, end_index = clock
        reason = ""
        if edges is None:
            if len(self.session.markers()) > self._markers_seen:
                reason = _INCOMPLETE_PULSE
        elif edges[1] <= edges[0]:
            # Both edges on one sample (a trial shorter than a sample period): a window of no
            # length would give the trial no energy; the clock's mapping of its times does not.
            reason = f"both marker edges on sample {edges[0]:.0f}: a trial shorter than a sample"
        else:
            start_index, end_index = edges
            source = "marker"
        span = self._read(start_index, end_index, before_s, after_s, _EDGE_PAD_SAMPLES)
        counters = _Counters.of(self.session.decoder.stats)
        return PowerWindow(
            *span.trace,
            source=source,
            samples_lost=span.rest,
            crc_errors=counters.crc_failures - self._counters.crc_failures,
            frame_gaps=counters.frames_missed - self._counters.frames_missed,
            clock_reason=reason,
        )

    def health(self) -> tuple[float, int, int, int]:
        health = self.session.health()
        return (
            health.sample_rate_hz,
            health.crc_failures,
            health.frames_missed,
            health.samples_dropped,
        )

    # internals ------------------------------------------------------------------------------

    @property
    def _samples(self) -> _Samples:
        return self.session.samples

    def _trial_edges(self) -> tuple[float, float] | None:
        edges = first_pulse(self.session.markers()[self._markers_seen :])
        if edges is None:
            return None
        return float(edges[0]), float(edges[1])

    def _power(self, first: int, end: int) -> tuple[FloatArray, FloatArray, int]:
        window = self.session.samples.window(first, end)
        t_s = window.indices.astype(np.float64) / self.rate_hz
        if self.ina219 is not None:
            values = window.values
            power = self.ina219.power_mw(values[:, self.column], values[:, self.column + 1])
            answered = np.isfinite(power)  # a sample the INA219 did not answer is missing
            missing = window.missing + int((~answered).sum())
            return t_s[answered], power[answered], missing
        codes = window.values[:, self.column]
        power_mw = self.calibration.power_mw(codes, self.analog_input)
        return t_s, np.asarray(power_mw, dtype=np.float64), window.missing


class Ppk2Tap(_StreamTap[Ppk2Window]):
    """The PPK2 as the sweep's `PowerMeter`: one `Ppk2Session` (a real PPK2, or the emulated one
    of the virtual meter), trial windows from the marker input's edges inside the sample words
    (sample-exact, no host timing), else the clock mapped through the reads' arrival times as
    `MeterTap` does. Counter gaps inside a window are reported (`samples_lost`, `frame_gaps`;
    framing resyncs as `crc_errors`), never repaired."""

    _label = "PPK2"
    session: Ppk2Session

    def __init__(
        self,
        session: Ppk2Session,
        source: str,
        supply_v: float,
        extra_facts: Mapping[str, Any],
        *,
        source_error: Callable[[], BaseException | None] | None = None,
    ) -> None:
        if session.metadata is None:
            raise MeterLost(f"PPK2 {session.name}: no metadata", port=session.name)
        self.session = session
        self.source = source
        self.supply_v = supply_v
        self.rate_hz = float(PPK2_SAMPLE_RATE_HZ)  # stream indices: the tap's timebase
        self._extra_facts = dict(extra_facts)
        self._source_error = source_error
        self._edges_seen = 0

    def facts(self) -> Mapping[str, Any]:
        metadata = self.session.metadata
        assert metadata is not None
        return {
            "source": self.source,
            "kind": "ppk2",
            "port": self.session.name,
            "mode": self.session.mode,
            "vdd_mv": self.session.vdd_mv,  # the regulator, the conversion's VDD
            "power_supply_v": self.supply_v,
            "stream_rate_hz": PPK2_SAMPLE_RATE_HZ,
            "sample_rate_hz": self.session.rate_hz,
            "marker_input": f"D{self.session.marker_bit}",
            "resolution_ua_per_code": [ua_per_code(c) for c in metadata.ranges],
            "resolution": ppk2_resolution(metadata, self.supply_v).to_dict(),
            "calibration": asdict(metadata),
            "spike_filter": self.session.spike_filter,
            "stale_bytes_drained": self.session.stale_bytes,
            **self._extra_facts,
        }

    def begin_trial(self) -> None:
        self._check()
        self._edges_seen = len(self.session.store.edges())

    def window(
        self, start_wall_ns: int, end_wall_ns: int, *, before_s: float = 0.0, after_s: float = 0.0
    ) -> PowerWindow:
        self._check()
        # The trial's edges are in the samples up to its end: wait for those (by the clock,
        # with slack for the marker line's own delay) before looking for them.
        clock = self._indices_of(start_wall_ns, end_wall_ns)
        self._await(int(clock[1] + _MARKER_SLACK_S * self.rate_hz))
        edges = self.session.store.edges()[self._edges_seen :]
        pulse = first_ppk2_pulse(edges)
        source: Literal["marker", "clock"] = "clock"
        start_index, end_index = clock
        reason = ""
        if pulse is not None:
            start_index, end_index = float(pulse[0]), float(pulse[1])
            source = "marker"
        elif edges:
            reason = _INCOMPLETE_PULSE
        # Padded by two bins: the bins holding the ends, and their neighbours to interpolate.
        pad = 2 * self.session.store.bin_samples
        span = self._read(start_index, end_index, before_s, after_s, pad)
        window = span.rest
        return PowerWindow(
            *span.trace,
            source=source,
            samples_lost=window.samples_lost,
            crc_errors=window.resyncs,
            frame_gaps=window.gaps,
            clock_reason=reason,
        )

    def health(self) -> tuple[float, int, int, int]:
        """(received samples/s at 100 kS/s, resyncs, counter gaps, samples lost)."""
        store = self.session.store
        decoder = self.session.decoder
        elapsed = max(1e-9, (time.monotonic_ns() - self.session.started_ns) / 1e9)
        totals = decoder.totals if decoder is not None else None
        return (
            store.received / elapsed,
            totals.resyncs if totals else 0,
            totals.gaps if totals else 0,
            store.lost,
        )

    # internals ------------------------------------------------------------------------------

    def _lost(self, what: str) -> MeterLost:
        # Samples that stopped coming and bytes that kept coming are different faults (a stalled
        # device, a garbled line): the line says which.
        decoder = self.session.decoder
        skipped = decoder.totals.skipped_bytes if decoder is not None else 0
        if skipped:
            what += f"; {skipped} bytes read were not sample words"
        return super()._lost(what)

    @property
    def _samples(self) -> _Samples:
        return self.session.store

    def _power(self, first: int, end: int) -> tuple[FloatArray, FloatArray, Ppk2Window]:
        window = self.session.store.window(first, end)
        power_mw = window.current_ua * self.supply_v / 1000  # uA x V = uW
        return window.t_s, np.asarray(power_mw, dtype=np.float64), window


def ppk2_supply(meter: MeterConfig) -> tuple[int | None, float]:
    """(the mV the PPK2's regulator is set to, or None to leave it; the V its current is
    multiplied by for power). In source mode the PPK2 powers the node at `supply_mv`; in
    ampere mode it sits in series with the node's own supply, `supply_v`, unless `supply_mv`
    says what that supply is (and then sets the regulator, the conversion's VDD, to it)."""
    if meter.supply_mv is not None:
        return meter.supply_mv, meter.supply_mv / 1000
    return None, meter.supply_v


def open_ppk2_tap(
    meter: MeterConfig,
    port: str,
    facts: Mapping[str, Any],
    source_error: Callable[[], BaseException | None] | None = None,
) -> Ppk2Tap:
    """Open, drain, read the metadata, configure and start a PPK2 as `meter` says. The
    emulated PPK2 (no port) steps its current without the transients a real one has when
    it changes range, so its stream is decoded without the spike filter that smooths those
    (it would smear a modelled step, up to a few hundred mW in one averaged sample); a real
    PPK2's is filtered as ppk2-api and nRF Connect do. The manifest says which."""
    session = Ppk2Session.open(
        port,
        rate_hz=meter.rate_hz,
        marker_bit=meter.marker_input,
        spike_filter=not meter.modelled,
    )
    try:
        session.drain()
        session.read_metadata()
        supply_mv, power_v = ppk2_supply(meter)
        session.configure(meter.mode, supply_mv)
        session.start()
        return Ppk2Tap(session, meter.source, power_v, facts, source_error=source_error)
    except BaseException:
        session.close()
        raise
