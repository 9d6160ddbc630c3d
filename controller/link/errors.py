"""Link shaping failures."""

from __future__ import annotations

from controller.errors import DeviceError


class LinkError(DeviceError):
    """Shaping or restoring a node's data interface failed; the message names node and interface."""
