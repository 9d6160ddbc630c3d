"""The PPK2's tap: one `Ppk2Session` (a PPK2 on `meter.port`, or the emulated one's pty) as the
sweep's `PowerMeter`, opened as the config says (`open_ppk2_tap`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import asdict
from typing import Any, Literal

import numpy as np

from controller.config.model import MeterConfig
from controller.meter.ppk2.decoder import SAMPLE_RATE_HZ as PPK2_SAMPLE_RATE_HZ
from controller.meter.ppk2.decoder import ua_per_code
from controller.meter.ppk2.session import Ppk2Session
from controller.meter.ppk2.store import Ppk2Window
from controller.meter.ppk2.store import first_pulse as first_ppk2_pulse
from controller.meter_sources.ppk2.resolution import ppk2_resolution
from controller.sweep.errors import MeterLost
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

__all__ = ["Ppk2Tap", "open_ppk2_tap", "ppk2_supply"]


class Ppk2Tap(StreamTap[Ppk2Window]):
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
        self._edges_seen = self.session.store.edge_count
        self._release_old()

    def window(
        self, start_wall_ns: int, end_wall_ns: int, *, before_s: float = 0.0, after_s: float = 0.0
    ) -> PowerWindow:
        self._check()
        # The trial's edges are in the samples up to its end: wait for those (by the clock,
        # with slack for the marker line's own delay) before looking for them.
        clock = self._indices_of(start_wall_ns, end_wall_ns)
        self._await(int(clock[1] + MARKER_SLACK_S * self.rate_hz))
        edges = self.session.store.edges(self._edges_seen)
        pulse = first_ppk2_pulse(edges)
        source: Literal["marker", "clock"] = "clock"
        start_index, end_index = clock
        reason = ""
        if pulse is not None:
            start_index, end_index = float(pulse[0]), float(pulse[1])
            source = "marker"
        elif edges:
            reason = INCOMPLETE_PULSE
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
            # A bin is a sample of the trace: clipped when any sample averaged into it was.
            samples_saturated=saturated_in(span.trace, window.saturated > 0),
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
    def _samples(self) -> SampleSource:
        return self.session.store

    def _release(self, index: int) -> None:
        self.session.store.release_before(index)

    def _power(self, first: int, end: int) -> tuple[FloatArray, FloatArray, Ppk2Window]:
        window = self.session.store.window(first, end)
        power_mw = window.current_ua * self.supply_v / 1000  # uA x V = uW
        return window.t_s, np.asarray(power_mw, dtype=np.float64), window


def ppk2_supply(meter: MeterConfig) -> tuple[int | None, float]:
    """(the mV the PPK2's regulator is set to, or None to leave it; the V its current is
    multiplied by for power). In source mode the PPK2 powers the node at `supply_mv`; in
    ampere mode it sits in series with the node's own supply, `supply_v`, unless `supply_mv`
    says what that supply is (and then sets the regulator, the conversion's VDD, to it)."""
    return meter.supply_mv, meter.power_v


def open_ppk2_tap(request: TapRequest) -> Ppk2Tap:
    """Open, drain, read the metadata, configure and start a PPK2 as `meter` says. The
    emulated PPK2 (no port) steps its current without the transients a real one has when
    it changes range, so its stream is decoded without the spike filter that smooths those
    (it would smear a modelled step, up to a few hundred mW in one averaged sample); a real
    PPK2's is filtered as ppk2-api and nRF Connect do. The manifest says which."""
    meter = request.meter
    session = Ppk2Session.open(
        request.device_port,
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
        return Ppk2Tap(
            session, meter.source, power_v, request.facts, source_error=request.source_error
        )
    except BaseException:
        session.close()
        raise
