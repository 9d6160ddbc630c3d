"""The controller's one exception tree.

`ControllerError` is the root. `ConfigError` is the user's mistake (a file, key or option,
exit status 2); `DeviceError` is the outside world's (a meter, board or node that misbehaves).
Every message is one line naming the file, key, port or frame at fault.
"""

from __future__ import annotations


class ControllerError(Exception):
    """Root of every error the controller raises on purpose."""

    exit_status = 1


class ConfigError(ControllerError):
    """A config file, dotted key, CLI option or input file is wrong; the message names it."""

    exit_status = 2


class DeviceError(ControllerError):
    """Something outside the controller (meter, board, node) failed or broke its protocol."""


class MeterError(DeviceError):
    """The current meter (serial board, virtual meter, simulator) failed."""


class MeterFrameError(MeterError):
    """A frame from the meter is malformed (bad CRC, length, type or payload)."""


class FirmwareError(DeviceError):
    """Building or flashing the firmware failed, or the board reports the wrong identity."""
