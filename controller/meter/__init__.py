"""The current meter: wire protocol, sans-IO decoder, serial reader and session, calibration,
the virtual meter and the simavr front end. Public names are re-exported here."""

from __future__ import annotations

from controller.meter.commands import (
    Command,
    CommandEncoder,
    GetStatus,
    Identify,
    SetChannels,
    SetOversampling,
    SetRate,
    Start,
    Stop,
)
from controller.meter.decoder import DecoderStats, FrameDecoder
from controller.meter.protocol import (
    Ack,
    AckResult,
    Frame,
    FrameType,
    Info,
    Marker,
    Samples,
    Status,
)

__all__ = [
    "Ack",
    "AckResult",
    "Command",
    "CommandEncoder",
    "DecoderStats",
    "Frame",
    "FrameDecoder",
    "FrameType",
    "GetStatus",
    "Identify",
    "Info",
    "Marker",
    "Samples",
    "SetChannels",
    "SetOversampling",
    "SetRate",
    "Start",
    "Status",
    "Stop",
]
