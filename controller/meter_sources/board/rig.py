"""The board sources' lines of `h2iot rig check` (`check_board_meter`, which `probe.check_rig`
runs once the nodes are checked): the board's port, or the virtual or simavr meter following
the local nodes as a sweep's does; its identity, the stream, each channel's zero and idle
power, and the marker loop."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from controller.config.channels import (
    channel_kind,
    channel_label,
    i2c_address,
    i2c_mask,
    is_i2c,
)
from controller.config.model import (
    Config,
)
from controller.errors import ControllerError, MeterError
from controller.meter.ina226 import i2c_calibration
from controller.meter.modelled_device import build_device
from controller.meter.protocol import PROTOCOL_VERSION, Info, channels_of_mask
from controller.meter.samples import SampleWindow
from controller.meter.session import MeterSession, first_pulse
from controller.meter_sources.board import checks as board_checks
from controller.meter_sources.board.resolution import board_calibration
from controller.nodes.wheel import project_root
from controller.rig import checks, meter_facts
from controller.rig.bench import Emit, Nodes, marker_fifo, port_check, pulse_marker, serving, watch
from controller.rig.checks import Check
from controller.sweep.setup import device_options

__all__ = ["check_board_meter"]


def check_board_meter(
    config: Config, nodes: Nodes, emit: Emit, *, marker: str | None, seconds: float
) -> None:
    meter = config.meter
    try:
        with _device(config, nodes, marker, emit) as port:
            session = MeterSession.open(port, meter.baud)
            with session:
                _check_session(config, session, nodes, emit, marker=marker, seconds=seconds)
    except ControllerError as exc:
        emit(Check("meter", "fail", str(exc), "see the checks above; h2iot meter info --port"))


@contextmanager
def _device(config: Config, nodes: Nodes, marker: str | None, emit: Emit) -> Iterator[str]:
    """The serial device to open: the board's (its port checked first), or a modelled
    meter's pty, following the local nodes' anchors like a sweep's."""
    meter = config.meter
    if not meter.modelled:
        port = meter.port or ""
        check = port_check(port)
        emit(check)
        if check.failed:
            raise MeterError(f"meter port {port}: not usable, the meter was not checked")
        yield port
        return
    options = device_options(meter, watch(config, nodes), marker_fifo(marker))
    modelled = build_device(meter.spec, options)
    with serving(modelled, f"the {meter.source} meter's pty", emit) as port:
        yield port


def _check_session(
    config: Config,
    session: MeterSession,
    nodes: Nodes,
    emit: Emit,
    *,
    marker: str | None,
    seconds: float,
) -> None:
    meter = config.meter
    info = session.identify()
    emit(
        board_checks.identity_check(
            board=info.board,
            firmware=info.fw_version,
            protocol=info.protocol_version,
            expected_firmware=_built_version(),
            expected_protocol=PROTOCOL_VERSION,
            modelled=meter.source if meter.spec.models_firmware else None,
        )
    )
    analog = tuple(sorted(c for _r, c in meter.channels if not is_i2c(c)))
    i2c = i2c_mask(c for _r, c in meter.channels)
    session.set_rate(meter.rate_hz)
    if i2c:
        session.set_i2c_channels(i2c)
    session.set_channels(sum(1 << n for n in analog))
    info = session.identify()
    session.start()
    time.sleep(seconds)
    final = session.stop()
    health = session.health()
    window = session.samples.all()
    last_indices, arrived_ns = session.samples.arrivals()
    achieved_hz = checks.arrival_rate_hz(last_indices.tolist(), arrived_ns.tolist())
    emit(
        board_checks.stream_check(
            configured_hz=info.sample_rate_hz,
            achieved_hz=achieved_hz,
            seconds=health.elapsed_s,
            taken=final.samples_taken,
            received=len(window.indices),
            dropped=final.samples_dropped,
            crc_failures=health.crc_failures,
            frames_missed=health.frames_missed,
        )
    )
    calibration = board_calibration(meter)
    midscale = (1 << (info.adc_bits - 1)) - 0.5
    columns = {n: column for column, n in enumerate(info.channels)}
    for role, channel in meter.channels:
        label = channel_label(channel)
        if is_i2c(channel):
            chip = channel_kind(channel).upper()
            emit(Check(f"zero offset {label}", "unavailable", f"an {chip} has no analog zero"))
            for check in _i2c_checks(config, role, channel, window, info):
                emit(check)
            continue
        emit(
            board_checks.zero_check(
                label,
                zero_code=calibration.channel(channel).zero_code
                if meter.calibration is not None
                else None,
                midscale=midscale,
                source=str(meter.calibration),
            )
        )
        if len(window.indices) and channel in columns:
            power = np.asarray(
                calibration.power_mw(window.values[:, columns[channel]], channel), dtype=float
            )
            for check in meter_facts.idle_checks(
                config, role, label, mean_mw=float(power.mean()), sd_mw=float(power.std())
            ):
                emit(check)
    # A board slower than real time (simavr on a loaded machine) falls behind by this much.
    stream = _Stream(
        rate_hz=info.sample_rate_hz,
        measured_hz=achieved_hz or len(window.indices) / health.elapsed_s,
        lag_s=health.elapsed_s - len(window.indices) / info.sample_rate_hz,
    )
    emit(_marker_loop(config, session, nodes, marker, stream))


def _i2c_checks(
    config: Config, role: str, channel: int, window: SampleWindow, info: Info
) -> Iterator[Check]:
    """The chip answers its address, and the node's idle power through it."""
    label = channel_label(channel)
    address = i2c_address(channel)
    if address not in info.i2c_addresses:
        yield Check(f"I2C part {label}", "fail", "the board does not sample it")
        return
    column = len(channels_of_mask(info.channel_mask)) + 2 * info.i2c_addresses.index(address)
    calibration = i2c_calibration(channel, config.meter.shunt_ohm)
    shunt, bus = window.values[:, column], window.values[:, column + 1]
    power = calibration.power_mw(shunt, bus)
    answered = np.isfinite(power)
    volts = calibration.bus_v(bus[answered])
    yield board_checks.i2c_check(
        label,
        samples=len(power),
        answered=int(answered.sum()),
        bus_v=float(volts.mean()) if len(volts) else math.nan,
    )
    if answered.any():
        live = power[answered]
        yield from meter_facts.idle_checks(
            config, role, label, mean_mw=float(live.mean()), sd_mw=float(live.std())
        )


def _built_version() -> str | None:
    """firmware/VERSION of the source tree this controller runs from (what `h2iot firmware
    flash` writes), or None installed without one."""
    root = project_root()
    if root is None:
        return None
    try:
        return (root / "firmware" / "VERSION").read_text().strip()
    except OSError:
        return None


@dataclass(frozen=True)
class _Stream:
    """What the stream check measured, for the marker loop's wait."""

    rate_hz: int  # declared by the board
    measured_hz: float  # samples received per second of wall time
    lag_s: float  # wall time less the samples' time at rate_hz


def _marker_loop(
    config: Config,
    session: MeterSession,
    nodes: Nodes,
    marker: str | None,
    stream: _Stream,
) -> Check:
    if marker is None:
        why = "no marker line: nodes.client.marker is unset (and no --marker gpio:CHIP:LINE)"
        return checks.marker_check(node_width_s=None, meter_width_s=None, why=why)
    if "client" not in nodes:
        return checks.marker_check(
            node_width_s=None, meter_width_s=None, why="the client node was not reached"
        )
    node = nodes["client"][0]
    session.start()
    started = time.monotonic()
    try:
        seen = session.marker_count
        node_width_s = pulse_marker(config, node, marker)
        if isinstance(node_width_s, Check):
            return node_width_s
        ended = time.monotonic()
        wait = board_checks.marker_wait(
            rate_hz=stream.rate_hz,
            pulse_end_s=ended - started,
            lag_s=stream.lag_s,
            next_index=session.samples.next_index,
            measured_hz=stream.measured_hz,
        )
        while True:
            # The samples reached first, then the markers: an edge before that sample is in.
            reached = session.samples.next_index
            edges = first_pulse(session.markers(seen))
            waited_s = time.monotonic() - ended
            if edges is not None or wait.over(next_index=reached, waited_s=waited_s):
                break
            time.sleep(0.02)
    finally:
        session.stop()
    if edges is None:
        why = wait.why(next_index=reached, waited_s=waited_s)
        return checks.marker_check(node_width_s=node_width_s, meter_width_s=None, why=why)
    return checks.marker_check(
        node_width_s=node_width_s, meter_width_s=(edges[1] - edges[0]) / stream.rate_hz
    )
