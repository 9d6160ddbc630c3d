"""What every meter source's rig check shares (controller/meter_sources/<name>/rig.py): the
nodes as the node checks opened them, a serial port's check, a modelled meter's sources, the
marker line a check uses, and the client node's marker pulse."""

from __future__ import annotations

import contextlib
import grp
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from controller.config.channels import (
    channel_source,
)
from controller.config.model import (
    Config,
    Role,
)
from controller.errors import ConfigError
from controller.meter.modelled_device import ModelledDevice
from controller.meter.node_power import WatchSpec
from controller.nodes.errors import NodeError
from controller.nodes.node import Node
from controller.rig import checks
from controller.rig.checks import Check

Emit = Callable[[Check], None]
Nodes = dict[Role, tuple[Node, int | None]]
"""The nodes the node checks reached, each with its anchor's pid (a local node's)."""

PULSE_WIDTH_S = 0.2
NODE_TIMEOUT_S = 60.0


def marker_line(config: Config, marker: str | None, scratch: Path) -> str | None:
    """The marker a check pulses: the one given, else a software line in `scratch` to a
    modelled meter following a local client, else the client's wired one (or none)."""
    if marker is None and config.meter.modelled and config.client.is_local:
        marker = f"fifo:{scratch / 'marker.fifo'}"
    return marker or config.client.marker


def marker_fifo(marker: str | None) -> Path | None:
    """The FIFO of a software marker line, which a modelled meter reads its edges from."""
    return Path(marker[len("fifo:") :]) if marker and marker.startswith("fifo:") else None


def port_check(port: str) -> Check:
    """A serial port exists and this user may open it (the group that may, when not)."""
    if not os.path.exists(port):
        return checks.port_check(port, exists=False, opens=False)
    group = None
    with contextlib.suppress(OSError, KeyError):
        group = grp.getgrgid(os.stat(port).st_gid).gr_name
    try:
        fd = os.open(port, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
    except OSError as exc:
        why = exc.strerror or str(exc)
        return checks.port_check(port, exists=True, opens=False, why=why, group=group)
    os.close(fd)
    return checks.port_check(port, exists=True, opens=True, group=group)


def watch(config: Config, nodes: Nodes) -> tuple[WatchSpec, ...]:
    """A modelled meter's sources: the metered local nodes' anchors, in input order."""
    by_input = {channel_source(c): role for role, c in config.meter.channels}
    specs = []
    for source in range(max(by_input, default=-1) + 1):
        role = by_input.get(source)
        pid = nodes[role][1] if role in nodes else None
        if role is None or pid is None:
            raise ConfigError(
                f"meter.channels: input {source} has no local node to model (a modelled meter "
                "follows local nodes only)"
            )
        specs.append(WatchSpec("pid", str(pid)))
    return tuple(specs)


def pulse_marker(config: Config, node: Node, marker: str) -> float | Check:
    """The client node pulses its marker for PULSE_WIDTH_S: the width it held the line, by its
    own clock, or the failed check saying why it could not."""
    argv = [node.path(config.client.python), "-m", "agent.cli", "marker", "pulse"]
    try:
        result = node.run(
            [*argv, "--marker", marker, "--width-s", f"{PULSE_WIDTH_S}"],
            timeout_s=NODE_TIMEOUT_S,
        )
        return float(json.loads(result.stdout.strip().splitlines()[-1])["width_s"])
    except (NodeError, ValueError, KeyError, IndexError) as exc:
        return Check("marker loop", "fail", f"the client could not pulse {marker}: {exc}")


@contextmanager
def serving(modelled: ModelledDevice, what: str, emit: Emit) -> Iterator[str]:
    """A modelled meter started and its pty passed as the meter's port, stopped and closed on
    leaving."""
    modelled.start()
    try:
        emit(Check("meter port", "pass", f"{modelled.port}: {what}"))
        yield modelled.port
    finally:
        modelled.stop()
        modelled.close()
