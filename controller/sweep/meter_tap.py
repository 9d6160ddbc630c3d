"""The meter as the sweep engine uses it (`PowerMeter`): one `MeterSession` over a serial port,
whichever device is behind it (a board, the virtual meter's pty, the simavr harness).

A trial's window is cut by its marker edges when they arrived (a rising then a falling edge
after `begin_trial`); otherwise the controller's clock span is mapped onto sample indices. That
mapping uses the arrival time of each SAMPLES frame: a frame's last sample was taken no later
than its arrival, so `arrival - last_index / rate` bounds sample 0's time from above, and the
smallest bound over the recent frames is the best estimate (transmission delays only add).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from controller.meter.calibration import Calibration
from controller.meter.decoder import DecoderStats
from controller.meter.ina219 import Ina219Calibration
from controller.meter.protocol import channels_of_mask
from controller.meter.session import MeterSession, first_pulse
from controller.sweep.errors import MeterLost
from controller.sweep.interfaces import PowerWindow

# Frames considered when mapping a clock span to sample indices: recent enough that the board's
# crystal and the host's clock cannot drift apart noticeably, many enough to find a fast one.
_MAPPING_HORIZON_S = 30.0
# Samples after a trial's end may still be on the wire.
_LATE_SAMPLES_TIMEOUT_S = 3.0
_EDGE_PAD_SAMPLES = 2
# How long a lost pty waits for its modelled meter to say why it stopped.
_SOURCE_ERROR_WAIT_S = 2.0

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class _Counters:
    crc_failures: int
    frames_missed: int

    @classmethod
    def of(cls, stats: DecoderStats) -> _Counters:
        return cls(stats.crc_failures, stats.frames_missed)


class MeterTap:
    def __init__(
        self,
        session: MeterSession,
        calibration: Calibration,
        analog_input: int,
        source: str,
        extra_facts: Mapping[str, Any],
        *,
        ina219: Ina219Calibration | None = None,
        source_error: Callable[[], BaseException | None] | None = None,
    ) -> None:
        """`analog_input` is the client's channel: an analog input, or with `ina219` the
        INA219's I2C address (its two columns give V x I)."""
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
                raise self._lost(f"the INA219 at {analog_input:#04x} is not sampled")
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
            "calibration": self.calibration.to_dict(),
            **(
                {
                    "i2c_mask": info.i2c_mask,
                    "client_sensor": "ina219",
                    "ina219": {
                        "address": self.ina219.address,
                        "shunt_ohm": self.ina219.shunt_ohm,
                        "pga": self.ina219.pga,
                    },
                }
                if self.ina219 is not None
                else {}
            ),
            **self._extra_facts,
        }

    def idle_baseline_mw(self, seconds: float) -> float:
        self._check()
        first = self.session.samples.next_index
        time.sleep(seconds)
        end = self.session.samples.next_index
        if end <= first:
            raise self._lost("no samples during the idle baseline")
        return float(self._power(first, end)[1].mean())

    def begin_trial(self) -> None:
        self._check()
        self._markers_seen = len(self.session.markers())
        self._counters = _Counters.of(self.session.decoder.stats)

    def window(
        self, start_wall_ns: int, end_wall_ns: int, *, before_s: float = 0.0, after_s: float = 0.0
    ) -> PowerWindow:
        self._check()
        edges = self._trial_edges()
        source: Literal["marker", "clock"]
        # Edges stamped with the same sample (a trial shorter than a sample, or a modelled
        # meter's thread woken late reading both at once) do not measure the trial: a window of
        # no length would give it no energy. The clock's mapping of its times still does.
        if edges is not None and edges[1] > edges[0]:
            start_index, end_index = edges
            source = "marker"
        else:
            start_index, end_index = self._indices_of(start_wall_ns, end_wall_ns)
            source = "clock"
        start_index -= before_s * self.rate_hz
        end_index += after_s * self.rate_hz
        self._await(int(np.ceil(end_index)) + _EDGE_PAD_SAMPLES)
        first = max(0, int(np.floor(start_index)) - _EDGE_PAD_SAMPLES)
        end = int(np.ceil(end_index)) + _EDGE_PAD_SAMPLES
        t_s, power_mw, missing = self._power(first, end)
        counters = _Counters.of(self.session.decoder.stats)
        return PowerWindow(
            t_s=t_s,
            power_mw=power_mw,
            start_s=start_index / self.rate_hz,
            end_s=end_index / self.rate_hz,
            source=source,
            samples_lost=missing,
            crc_errors=counters.crc_failures - self._counters.crc_failures,
            frame_gaps=counters.frames_missed - self._counters.frames_missed,
        )

    def health(self) -> tuple[float, int, int, int]:
        health = self.session.health()
        return (
            health.sample_rate_hz,
            health.crc_failures,
            health.frames_missed,
            health.samples_dropped,
        )

    def recent_power(self, seconds: float) -> tuple[FloatArray, FloatArray]:
        """The last `seconds` of power (meter time in s, mW), for the dashboard."""
        end = self.session.samples.next_index
        first = max(0, end - int(seconds * self.rate_hz))
        t_s, power_mw, _missing = self._power(first, end)
        return t_s, power_mw

    def close(self) -> None:
        self.session.close()

    # internals ------------------------------------------------------------------------------

    def _lost(self, what: str) -> MeterLost:
        # A modelled meter whose driver failed keeps its pty open: its samples just stop. Its
        # error, if it has one, is why.
        source = self._source_error() if self._source_error is not None else None
        why = f" ({self.source}: {source})" if source is not None else ""
        lost = MeterLost(f"meter {self.session.name}: {what}{why}", port=self.session.name)
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

    def _trial_edges(self) -> tuple[float, float] | None:
        edges = first_pulse(self.session.markers()[self._markers_seen :])
        if edges is None:
            return None
        return float(edges[0]), float(edges[1])

    def _indices_of(self, start_wall_ns: int, end_wall_ns: int) -> tuple[float, float]:
        last, arrival_ns = self.session.samples.arrivals()
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
        while self.session.samples.next_index <= index:
            self._check()
            if time.monotonic() > deadline:
                raise self._lost(
                    f"sample {index} has not arrived "
                    f"{_LATE_SAMPLES_TIMEOUT_S:g} s after the trial ended"
                )
            time.sleep(0.005)

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
