"""The current meter: wire protocol, sans-IO decoder, serial reader and session, calibration.

The modelled meters live in their own modules (not imported here: they pull in psutil, and
the simulated one builds firmware): `controller.meter.virtual` (VirtualMeter),
`controller.meter.simulate` (SimulatedMeter, simavr), `controller.meter.truth` (their ground
truth).
"""

from __future__ import annotations

from controller.meter.calibration import Calibration, ChannelCalibration, nominal
from controller.meter.commands import (
    Command,
    CommandEncoder,
    GetStatus,
    Identify,
    SetChannels,
    SetI2cChannels,
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
    channels_of_mask,
)
from controller.meter.samples import SampleStore, SampleWindow
from controller.meter.session import MarkerEvent, MeterCommandRefused, MeterSession, RunHealth

__all__ = [
    "Ack",
    "AckResult",
    "Calibration",
    "ChannelCalibration",
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
    "MarkerEvent",
    "MeterCommandRefused",
    "MeterSession",
    "RunHealth",
    "SampleStore",
    "SampleWindow",
    "Samples",
    "SetChannels",
    "SetI2cChannels",
    "SetOversampling",
    "SetRate",
    "Start",
    "Status",
    "Stop",
    "channels_of_mask",
    "nominal",
]
