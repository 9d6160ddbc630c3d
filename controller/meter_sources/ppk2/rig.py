"""The PPK2's lines of `h2iot rig check` (`check_ppk2_meter`, which `probe.check_rig` runs for
this source once the nodes are checked): its port (a real one, or the emulated
PPK2's pty following the local client); its identity from the metadata reply (hardware id,
calibrated or not, VDD, mode), parsed strictly; the 100 kS/s stream, every sample accounted for
by its counter; the client's idle power; the marker loop on its logic input (D0 by default),
both edges inside the sample words. Judgments every meter shares are `controller.rig.checks`'s."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from controller.config.model import Config
from controller.errors import ControllerError, MeterError
from controller.meter.modelled_device import DeviceOptions, build_device
from controller.meter.ppk2.decoder import SAMPLE_RATE_HZ, Ppk2Totals
from controller.meter.ppk2.metadata import Ppk2Metadata
from controller.meter.ppk2.session import Ppk2Session
from controller.meter.ppk2.store import first_pulse
from controller.meter_sources.ppk2.tap import ppk2_supply
from controller.rig import checks, meter_facts
from controller.rig.bench import (
    Emit,
    Nodes,
    marker_fifo,
    port_check,
    pulse_marker,
    serving,
    watch,
)
from controller.rig.checks import Check

__all__ = ["check_ppk2_meter", "identity_check", "stream_check"]

_BRING_UP = "docs/ppk2-bring-up.md"


def check_ppk2_meter(
    config: Config, nodes: Nodes, emit: Emit, *, marker: str | None, seconds: float
) -> None:
    """The PPK2's checks (module doc), each handed to `emit` as it is judged; the nodes were
    checked and opened before (`probe.check_rig`)."""
    meter = config.meter
    try:
        with _port(config, nodes, marker, emit) as port:
            session = Ppk2Session.open(
                port,
                rate_hz=meter.rate_hz,
                marker_bit=meter.marker_input,
                spike_filter=not meter.modelled,
            )
            with session:
                power_v = _start(config, session, emit)
                # One start for the stream and the marker loop: a restart would first have to
                # drain the stream's tail, which the reader thread is still reading.
                try:
                    time.sleep(seconds)
                    _stream_checks(config, session, emit, power_v)
                    emit(_marker_loop(config, session, nodes, marker))
                finally:
                    session.stop()
    except ControllerError as exc:
        emit(Check("meter", "fail", str(exc), f"see the checks above; {_BRING_UP}"))


@contextmanager
def _port(config: Config, nodes: Nodes, marker: str | None, emit: Emit) -> Iterator[str]:
    meter = config.meter
    if not meter.modelled:
        check = port_check(meter.port or "")
        emit(check)
        if check.failed:
            raise MeterError(f"PPK2 port {meter.port}: not usable, the PPK2 was not checked")
        yield meter.port or ""
        return
    options = DeviceOptions(
        watch=watch(config, nodes),
        marker_fifo=marker_fifo(marker),
        supply_mv=round(meter.power_v * 1000),  # as the session converts back
        marker_input=meter.marker_input,
        rate_hz=meter.rate_hz,
    )
    modelled = build_device(meter.spec, options)
    with serving(modelled, "the emulated PPK2's pty", emit) as port:
        yield port


def _start(config: Config, session: Ppk2Session, emit: Emit) -> float:
    """Identify, configure and start the PPK2; the voltage its current is power at."""
    meter = config.meter
    session.drain()
    emit(identity_check(session.read_metadata(), emulated=meter.modelled))
    vdd_mv, power_v = ppk2_supply(meter)
    session.configure(meter.mode, vdd_mv)
    session.start()
    return power_v


def _stream_checks(config: Config, session: Ppk2Session, emit: Emit, power_v: float) -> None:
    """The stream and the client's idle power, over what the session read so far."""
    elapsed_s = (time.monotonic_ns() - session.started_ns) / 1e9
    store = session.store
    totals = session.decoder.totals if session.decoder is not None else Ppk2Totals()
    last, arrived_ns = store.arrivals()
    achieved = checks.arrival_rate_hz(last.tolist(), arrived_ns.tolist())
    emit(stream_check(totals, seconds=elapsed_s, achieved_hz=achieved))
    if store.next_index:
        power_mw = store.window(0, store.next_index).current_ua * power_v / 1000
        for check in meter_facts.idle_checks(
            config,
            "client",
            f"PPK2 {config.meter.mode} mode",
            mean_mw=float(power_mw.mean()),
            sd_mw=float(np.std(power_mw)),
        ):
            emit(check)


def identity_check(metadata: Ppk2Metadata, *, emulated: bool) -> Check:
    """The device's own account of itself (command 0x19), parsed strictly."""
    found = (
        f"PPK2 hardware {metadata.hardware_id}, "
        f"{'calibrated' if metadata.calibrated else 'not calibrated'}, VDD {metadata.vdd_mv} mV, "
        f"reports {metadata.mode.name.lower()} mode"
    )
    if emulated:
        return Check(
            "board identity",
            "unavailable",
            f"{found}: the emulated PPK2 (no device is plugged in)",
            "a bench run needs meter.port, the PPK2's serial device",
        )
    if not metadata.calibrated:
        return Check(
            "board identity",
            "warn",
            f"{found}: its currents use uncalibrated factors",
            "calibrate it in nRF Connect's Power Profiler, or measure a known load first",
        )
    return Check("board identity", "pass", found)


def stream_check(totals: Ppk2Totals, *, seconds: float, achieved_hz: float | None) -> Check:
    """The stream at the PPK2's fixed 100 kS/s, every sample accounted for by its counter."""
    name = "sample stream"
    if totals.samples == 0:
        why = f"{totals.skipped_bytes} bytes, none a sample word" if totals.bytes_in else "nothing"
        return Check(
            name,
            "fail",
            f"no samples in {seconds:.1f} s ({why})",
            f"is it a PPK2 (USB 1915:C00A, its lowest interface)? {_BRING_UP}",
        )
    rate = achieved_hz if achieved_hz is not None else totals.samples / seconds
    detail = (
        f"{rate:.0f} samples/s of {SAMPLE_RATE_HZ} over {seconds:.1f} s, {totals.samples} "
        f"samples, {totals.lost_samples} lost in {totals.gaps} counter gaps, {totals.resyncs} "
        f"framing resyncs, {totals.skipped_bytes} bytes skipped"
    )
    if totals.lost_samples or totals.resyncs:
        status: checks.Status = (
            "fail" if totals.lost_samples > totals.samples * 0.001 or totals.resyncs else "warn"
        )
        return Check(name, status, detail, "a slow or shared USB link: no hub, another port")
    if abs(rate - SAMPLE_RATE_HZ) > checks.RATE_TOLERANCE * SAMPLE_RATE_HZ:
        return Check(name, "warn", detail, "the host reads too slowly: is the machine loaded?")
    return Check(name, "pass", detail)


def _marker_loop(
    config: Config,
    session: Ppk2Session,
    nodes: Nodes,
    marker: str | None,
) -> Check:
    bit = config.meter.marker_input
    wire = f"wire the client's marker GPIO to D{bit} and VCC to its level: {_BRING_UP}"
    if marker is None or "client" not in nodes:
        why = "no marker line (nodes.client.marker, --marker)" if marker is None else "no client"
        return dataclasses.replace(
            checks.marker_check(node_width_s=None, meter_width_s=None, why=why), fix=wire
        )
    seen = session.store.edge_count
    node_width_s = pulse_marker(config, nodes["client"][0], marker)
    if isinstance(node_width_s, Check):
        return node_width_s
    # The edges are inside the sample words: once the stream is the wait's margin past the
    # pulse's end, what it holds is the answer, by the PPK2's own clock. Should the stream
    # stall, twice the margin of wall time ends the wait.
    until = session.store.next_index + int(checks.MARKER_EDGE_WAIT_S * SAMPLE_RATE_HZ)
    deadline = time.monotonic() + 2 * checks.MARKER_EDGE_WAIT_S
    while session.store.next_index < until and time.monotonic() < deadline:
        time.sleep(0.02)
    pulse = first_pulse(session.store.edges(seen))
    if pulse is None:
        why = f"no rising and falling edge on D{bit} within {checks.MARKER_EDGE_WAIT_S:g} s"
        found = checks.marker_check(node_width_s=node_width_s, meter_width_s=None, why=why)
        return dataclasses.replace(found, fix=wire)
    width_s = (pulse[1] - pulse[0]) / SAMPLE_RATE_HZ
    return checks.marker_check(node_width_s=node_width_s, meter_width_s=width_s)
