"""Device emulation failures: the machine refused a cgroup or namespace step."""

from __future__ import annotations

from controller.errors import DeviceError


class EmulationError(DeviceError):
    """Making, joining or removing a node's cgroup or network namespace failed; the message
    names the path or command at fault."""
