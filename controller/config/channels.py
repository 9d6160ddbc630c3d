"""A meter's channels as configs and the firmware number them: an analog input, an INA219's or
an INA226's I2C address, one int each (data only: the config is imported on SSH nodes)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

ChannelKind = Literal["analog", "ina219", "ina226"]
CHANNEL_KINDS: tuple[ChannelKind, ...] = ("analog", "ina219", "ina226")
I2C_FIRST_ADDRESS = 0x40
INA219_FIRST_ADDRESS = I2C_FIRST_ADDRESS
INA219_RATE_MAX_HZ = 939  # a new shunt and bus pair every 1064 us (firmware/PROTOCOL.md)
# A channel number is an analog input (0..7), an INA219's I2C address (0x40..0x43), or an
# INA226's address with this bit set (0x140..0x143): one int per role keeps meter.channels'
# shape, and the kind travels with the channel to whoever sets the meter up.
INA226_CHANNEL = 0x100
# The fastest rate an INA226 channel takes: its quickest result (2 x 140 us, controller.meter.
# ina226.RATE_MAX_HZ, written out here because the config is imported on SSH nodes, where the
# meter's numpy is not; a test checks the two agree) in 90 % of the sample period.
INA226_RATE_MAX_HZ = 3214
# bit 4 + n of the firmware's I2C mask marks the chip at 0x40 + n as an INA226 (PROTOCOL.md)
_INA226_KIND_SHIFT = 4


def is_i2c(channel: int) -> bool:
    """A meter channel is an I2C monitor (INA219 or INA226), else an analog input (0..7)."""
    return channel >= I2C_FIRST_ADDRESS


def is_ina219(channel: int) -> bool:
    """A meter channel is an INA219's I2C address (0x40..0x43)."""
    return I2C_FIRST_ADDRESS <= channel < INA226_CHANNEL


def is_ina226(channel: int) -> bool:
    """A meter channel is an INA226 (its I2C address with INA226_CHANNEL set)."""
    return channel >= INA226_CHANNEL


def channel_kind(channel: int) -> ChannelKind:
    return "ina226" if is_ina226(channel) else "ina219" if is_ina219(channel) else "analog"


def i2c_address(channel: int) -> int:
    """An I2C channel's 7-bit address (0x40..0x43)."""
    return channel & (INA226_CHANNEL - 1)


def channel_label(channel: int) -> str:
    """How configs spell a channel: "A0", "INA219@0x40" or "INA226@0x40"."""
    if is_i2c(channel):
        return f"{channel_kind(channel).upper()}@{i2c_address(channel):#04x}"
    return f"A{channel}"


def channel_source(channel: int) -> int:
    """The modelled meters' source index: analog input n and the INA219 or INA226 at 0x40 + n
    share n."""
    return i2c_address(channel) - I2C_FIRST_ADDRESS if is_i2c(channel) else channel


def i2c_mask(channels: Iterable[int]) -> int:
    """The firmware's SET_I2C_CHANNELS mask for these channels (analog ones are ignored): bit n
    samples the chip at 0x40 + n, bit 4 + n says it is an INA226."""
    mask = 0
    for channel in channels:
        if is_i2c(channel):
            n = channel_source(channel)
            mask |= 1 << n | (1 << n + _INA226_KIND_SHIFT if is_ina226(channel) else 0)
    return mask
