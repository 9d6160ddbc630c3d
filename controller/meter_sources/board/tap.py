"""The board sources' tap (serial, virtual, simavr): one `MeterSession` over a serial port,
whichever device is behind it (a board, the virtual meter's pty, the simavr harness), set up
as the config's channels say (`open_board_tap`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from controller.config.channels import (
    i2c_address,
    i2c_mask,
    is_i2c,
)
from controller.errors import ConfigError
from controller.meter.calibration import Calibration
from controller.meter.decoder import DecoderStats
from controller.meter.ina219 import Ina219Calibration
from controller.meter.ina226 import Ina226Calibration, i2c_calibration
from controller.meter.protocol import channels_of_mask
from controller.meter.session import MeterSession, first_pulse
from controller.meter_sources.board.resolution import board_calibration, tap_resolution
from controller.sweep.interfaces import PowerWindow
from controller.sweep.meter_tap import (
    INCOMPLETE_PULSE,
    MARKER_SLACK_S,
    FloatArray,
    SampleSource,
    StreamTap,
    TapRequest,
    saturated_in,
)

__all__ = ["MeterTap", "open_board_tap"]

_EDGE_PAD_SAMPLES = 2


@dataclass(frozen=True)
class _Counters:
    crc_failures: int
    frames_missed: int

    @classmethod
    def of(cls, stats: DecoderStats) -> _Counters:
        return cls(stats.crc_failures, stats.frames_missed)


@dataclass(frozen=True)
class _Unread:
    """What a window's samples did not measure: how many never arrived (or an INA2xx did not
    answer them), and which of those that did arrived clipped at the channel's full scale."""

    lost: int
    clipped: npt.NDArray[np.bool_]  # beside the samples returned


class MeterTap(StreamTap[_Unread]):
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
        self._adc_top = (1 << info.adc_bits) - 1  # the ADC's upper rail, as INFO gives its bits
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
                self.calibration,
                self.analog_input,
                self.ina219,
                rate_hz=info.sample_rate_hz,
                analog_inputs=len(info.channels),
                i2c_sensors=len(info.i2c_addresses),
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
        self._markers_seen = self.session.marker_count
        self._counters = _Counters.of(self.session.decoder.stats)
        self._release_old()

    def window(
        self, start_wall_ns: int, end_wall_ns: int, *, before_s: float = 0.0, after_s: float = 0.0
    ) -> PowerWindow:
        self._check()
        clock = self._indices_of(start_wall_ns, end_wall_ns)
        # The trial's falling edge is stamped before any sample taken after it is sent (a pin
        # interrupt; a modelled meter reads its marker line before it samples up to now), so
        # once the stream passes the trial's end by the clock, both edges are here, however
        # late a busy machine ran the reader.
        self._await(int(np.ceil(clock[1] + MARKER_SLACK_S * self.rate_hz)))
        edges = self._trial_edges()
        source: Literal["marker", "clock"] = "clock"
        start_index, end_index = clock
        reason = ""
        if edges is None:
            if self.session.marker_count > self._markers_seen:
                reason = INCOMPLETE_PULSE
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
            samples_lost=span.rest.lost,
            crc_errors=counters.crc_failures - self._counters.crc_failures,
            frame_gaps=counters.frames_missed - self._counters.frames_missed,
            samples_saturated=saturated_in(span.trace, span.rest.clipped),
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
    def _samples(self) -> SampleSource:
        return self.session.samples

    def _release(self, index: int) -> None:
        self.session.release_before(index)

    def _trial_edges(self) -> tuple[float, float] | None:
        edges = first_pulse(self.session.markers(self._markers_seen))
        if edges is None:
            return None
        return float(edges[0]), float(edges[1])

    def _power(self, first: int, end: int) -> tuple[FloatArray, FloatArray, _Unread]:
        window = self.session.samples.window(first, end)
        t_s = window.indices.astype(np.float64) / self.rate_hz
        if self.ina219 is not None:
            shunt, bus = window.values[:, self.column], window.values[:, self.column + 1]
            power = self.ina219.power_mw(shunt, bus)
            answered = np.isfinite(power)  # a sample the INA219 did not answer is missing
            missing = window.missing + int((~answered).sum())
            clipped = self.ina219.saturated(shunt, bus)[answered]
            return t_s[answered], power[answered], _Unread(missing, clipped)
        codes = window.values[:, self.column]
        power_mw = self.calibration.power_mw(codes, self.analog_input)
        # An ACS712's output beyond the ADC's range reads as a rail (a current past the
        # sensor's span, or an offset that pushed it there).
        clipped = (codes == 0) | (codes >= self._adc_top)
        return t_s, np.asarray(power_mw, dtype=np.float64), _Unread(window.missing, clipped)


def open_board_tap(request: TapRequest) -> MeterTap:
    """Identify the board, set its rate and channels as the config says, start it."""
    meter = request.meter
    channels = [index for _role, index in meter.channels]
    inputs = tuple(sorted(c for c in channels if not is_i2c(c)))
    addresses = tuple(sorted(c for c in channels if is_i2c(c)))
    client_input = meter.channel_of("client")
    if client_input is None:
        raise ConfigError("meter.channels: the client node must be metered (client = A0, ...)")
    session = MeterSession.open(request.device_port, meter.baud)
    try:
        session.identify()
        session.set_rate(meter.rate_hz)
        if addresses:  # first: the analog mask may be 0 only once an INA219 is enabled
            session.set_i2c_channels(i2c_mask(addresses))
        session.set_channels(sum(1 << index for index in inputs))
        session.identify()  # INFO as configured: the tap reads the rate and columns from it
        session.start()
        return MeterTap(
            session,
            board_calibration(meter),
            i2c_address(client_input) if is_i2c(client_input) else client_input,
            meter.source,
            request.facts,
            ina219=i2c_calibration(client_input, meter.shunt_ohm) if is_i2c(client_input) else None,
            source_error=request.source_error,
        )
    except BaseException:
        session.close()
        raise
