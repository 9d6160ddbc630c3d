"""`h2iot rig check`'s I/O: reach each node and ask its agent, open the meter the config names
(a board's serial port, or the virtual or simavr meter following the local nodes, as a sweep
does; a PPK2's lines are `controller.rig.ppk2`'s), measure, and hand each finding to
`controller.rig.checks` for judgment.

The nodes are checked first, while nothing of ours loads them; the meter then runs with the
nodes idle (their anchors, for a modelled meter), then the client node pulses its marker.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from agent import __version__
from controller.config.model import (
    ROLES,
    Config,
    NodeConfig,
    channel_kind,
    channel_label,
    i2c_address,
    i2c_mask,
    is_i2c,
)
from controller.errors import ConfigError, ControllerError, MeterError
from controller.meter.calibration import Calibration, nominal
from controller.meter.ina226 import i2c_calibration
from controller.meter.modelled_device import build_device, models_firmware
from controller.meter.protocol import PROTOCOL_VERSION, Info, channels_of_mask
from controller.meter.samples import SampleWindow
from controller.meter.session import MeterSession, first_pulse
from controller.nodes.errors import NodeError
from controller.nodes.facts import inspect_node
from controller.nodes.node import Node
from controller.nodes.udp_reach import UdpReach, probe_udp, udp_pairs
from controller.nodes.wheel import project_root
from controller.rig import checks
from controller.rig.bench import (
    NODE_TIMEOUT_S,
    Emit,
    Nodes,
    marker_fifo,
    marker_line,
    port_check,
    pulse_marker,
    serving,
    watch,
)
from controller.rig.checks import Check
from controller.rig.ppk2 import check_ppk2_meter
from controller.sweep.setup import device_options, open_node


def check_rig(
    config: Config,
    emit: Emit,
    *,
    marker: str | None = None,
    accept_new_host_key: bool = False,
    seconds: float = 2.0,
    sample_s: float = 1.0,
) -> None:
    """Every check of the rig the config describes, each handed to `emit` as it is judged: the
    nodes first, while nothing of ours loads them, then the meter (a PPK2's own lines for
    `meter.source = "ppk2"`)."""
    with ExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rig-check-")))
        opened: Nodes = {}
        for role in ROLES:
            found = _check_node(
                config.node(role), config.protocols, emit, accept_new_host_key, sample_s
            )
            if found is not None:
                stack.callback(found[0].close)
                opened[role] = found
        if udp_pairs(config):
            emit(checks.udp_check(_udp_reach(config, opened)))
        line = marker_line(config, marker, scratch)
        check_meter = check_ppk2_meter if config.meter.spec.wire == "ppk2" else _check_meter
        check_meter(config, opened, emit, marker=line, seconds=seconds)


# --- nodes ---------------------------------------------------------------------------------


def _check_node(
    config: NodeConfig,
    protocols: Sequence[str],
    emit: Emit,
    accept_new_host_key: bool,
    sample_s: float,
) -> tuple[Node, int | None] | None:
    role = config.role
    try:
        node, anchor = open_node(config, accept_new_host_key=accept_new_host_key)
    except (NodeError, ConfigError) as exc:
        emit(checks.ssh_check(role, local=config.is_local, error=str(exc), host=config.host))
        return None
    emit(checks.ssh_check(role, local=config.is_local, error=None, host=config.host))
    facts = inspect_node(
        node, config, expected_version=__version__, clock_samples=50, protocols=protocols
    )
    emit(
        checks.versions_check(
            role,
            python=facts.python_version,
            agent=facts.agent_version,
            expected_agent=__version__,
            problems="; ".join(facts.problems),
        )
    )
    clock = facts.clock
    emit(
        checks.clock_check(
            role,
            offset_ns=None if clock is None else clock.wall_offset_ns,
            uncertainty_ns=None if clock is None else clock.uncertainty_ns,
            samples=0 if clock is None else clock.samples,
        )
    )
    report = _conditions(node, config, sample_s)
    if isinstance(report, str):
        emit(Check(f"{role} conditions", "fail", report, "h2iot nodes deploy CONFIG"))
        return node, anchor
    emit(checks.governor_check(role, report))
    emit(checks.thermal_check(role, report))
    emit(checks.throttle_check(role, report))
    emit(checks.memory_check(role, report))
    # A local node shares this machine: the controller itself is not another process there.
    emit(checks.busy_check(role, report, ignore=(os.getpid(),) if config.is_local else ()))
    return node, anchor


def _udp_reach(config: Config, nodes: Nodes) -> UdpReach:
    """The metered client's datagrams to the server's HTTP/3 port (HTTP/3 runs one client)."""
    client, server = config.client, config.server
    if "client" not in nodes or "server" not in nodes:
        missing = " and ".join(role for role in ROLES if role not in nodes)
        return UdpReach.of_pair(client, server, "not probed", f"the {missing} node was not reached")
    return probe_udp(nodes["client"][0], client, nodes["server"][0], server)


def _conditions(node: Node, config: NodeConfig, sample_s: float) -> dict[str, Any] | str:
    """The agent's `conditions` report, or why there is none."""
    argv = [node.path(config.python), "-m", "agent.cli", "conditions", "--sample-s", f"{sample_s}"]
    if config.cpu is not None:
        argv += ["--cpu", str(config.cpu)]
    try:
        result = node.run(argv, timeout_s=NODE_TIMEOUT_S + sample_s)
    except NodeError as exc:
        return str(exc)
    try:
        report = json.loads(result.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return f"{node.label}: `h2iot-agent conditions` printed no JSON"
    return report if isinstance(report, dict) else f"{node.label}: conditions: not an object"


# --- the meter -----------------------------------------------------------------------------


def _check_meter(
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
    modelled = build_device(meter.source, options)
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
        checks.identity_check(
            board=info.board,
            firmware=info.fw_version,
            protocol=info.protocol_version,
            expected_firmware=_built_version(),
            expected_protocol=PROTOCOL_VERSION,
            modelled=meter.source if models_firmware(meter.source) else None,
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
        checks.stream_check(
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
    calibration = (
        Calibration.load(meter.calibration)
        if meter.calibration is not None
        else nominal(analog or (0,), meter.sensor, meter.supply_v)
    )
    midscale = (1 << (info.adc_bits - 1)) - 0.5
    columns = {n: column for column, n in enumerate(info.channels)}
    for role, channel in meter.channels:
        label = channel_label(channel)
        if is_i2c(channel):
            chip = channel_kind(channel).upper()
            emit(Check(f"zero offset {label}", "unavailable", f"an {chip} has no analog zero"))
            for check in _i2c_checks(role, channel, window, info, meter.shunt_ohm):
                emit(check)
            continue
        emit(
            checks.zero_check(
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
            emit(
                checks.idle_check(
                    role, label, mean_mw=float(power.mean()), sd_mw=float(power.std())
                )
            )
    # A board slower than real time (simavr on a loaded machine) falls behind by this much.
    stream = _Stream(
        rate_hz=info.sample_rate_hz,
        measured_hz=achieved_hz or len(window.indices) / health.elapsed_s,
        lag_s=health.elapsed_s - len(window.indices) / info.sample_rate_hz,
    )
    emit(_marker_loop(config, session, nodes, marker, stream))


def _i2c_checks(
    role: str, channel: int, window: SampleWindow, info: Info, shunt_ohm: float
) -> Iterator[Check]:
    """The chip answers its address, and the node's idle power through it."""
    label = channel_label(channel)
    address = i2c_address(channel)
    if address not in info.i2c_addresses:
        yield Check(f"I2C part {label}", "fail", "the board does not sample it")
        return
    column = len(channels_of_mask(info.channel_mask)) + 2 * info.i2c_addresses.index(address)
    calibration = i2c_calibration(channel, shunt_ohm)
    shunt, bus = window.values[:, column], window.values[:, column + 1]
    power = calibration.power_mw(shunt, bus)
    answered = np.isfinite(power)
    volts = calibration.bus_v(bus[answered])
    yield checks.i2c_check(
        label,
        samples=len(power),
        answered=int(answered.sum()),
        bus_v=float(volts.mean()) if len(volts) else math.nan,
    )
    if answered.any():
        live = power[answered]
        yield checks.idle_check(role, label, mean_mw=float(live.mean()), sd_mw=float(live.std()))


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
        seen = len(session.markers())
        node_width_s = pulse_marker(config, node, marker)
        if isinstance(node_width_s, Check):
            return node_width_s
        ended = time.monotonic()
        wait = checks.marker_wait(
            rate_hz=stream.rate_hz,
            pulse_end_s=ended - started,
            lag_s=stream.lag_s,
            next_index=session.samples.next_index,
            measured_hz=stream.measured_hz,
        )
        while True:
            # The samples reached first, then the markers: an edge before that sample is in.
            reached = session.samples.next_index
            edges = first_pulse(session.markers()[seen:])
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
