"""ACS712 calibration: ADC codes -> current (mA) -> power (mW), stored as a JSON file.

An ACS712 outputs Vcc/2 at zero current and moves by its sensitivity per ampere; the Arduino's
ADC, referenced to the same 5 V, turns millivolts into codes `floor(mV * 2**bits / ref_mv)`.
The zero offset is measured with no load (`h2iot meter calibrate`): the mean code then already
includes the half-LSB that floor quantisation removes, so converting with it is unbiased. Without
a measurement the nominal zero is Vcc/2, i.e. `2**(bits-1) - 0.5` codes for the same reason.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from controller.errors import ConfigError

FORMAT = "h2iot-meter-calibration"
VERSION = 1

# Datasheet sensitivities (Allegro ACS712, at Vcc = 5 V) and typical peak-to-peak output noise.
ACS712_SENSITIVITY_MV_PER_A: Mapping[str, float] = {"5A": 185.0, "20A": 100.0, "30A": 66.0}
ACS712_NOISE_PP_MV: Mapping[str, float] = {"5A": 21.0, "20A": 11.0, "30A": 7.0}
ACS712_PP_PER_SIGMA = 6.0  # peak-to-peak noise taken as six standard deviations

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class ChannelCalibration:
    """One ACS712 on one analog input."""

    analog_input: int
    variant: str  # "5A" | "20A" | "30A"
    sensitivity_mv_per_a: float
    zero_code: float  # mean ADC code at zero current
    supply_v: float  # the node's supply voltage: power = current x this
    zero_samples: int = 0  # samples behind zero_code; 0 = nominal, not measured
    zero_noise_code: float = 0.0  # standard deviation of those samples


@dataclass(frozen=True, slots=True)
class Calibration:
    """The meter's conversion from codes to power; a run manifest embeds `to_dict()`."""

    adc_bits: int
    adc_ref_mv: float
    channels: tuple[ChannelCalibration, ...]
    board: str = ""
    measured_utc: str = ""

    @property
    def lsb_mv(self) -> float:
        return self.adc_ref_mv / (1 << self.adc_bits)

    def channel(self, analog_input: int) -> ChannelCalibration:
        for channel in self.channels:
            if channel.analog_input == analog_input:
                return channel
        raise ConfigError(f"calibration: no entry for analog input A{analog_input}")

    def current_ma(self, codes: npt.ArrayLike, analog_input: int) -> FloatArray:
        ch = self.channel(analog_input)
        scale = self.lsb_mv / ch.sensitivity_mv_per_a * 1000.0
        return (np.asarray(codes, dtype=np.float64) - ch.zero_code) * scale

    def power_mw(self, codes: npt.ArrayLike, analog_input: int) -> FloatArray:
        return self.current_ma(codes, analog_input) * self.channel(analog_input).supply_v

    def with_channel(self, channel: ChannelCalibration) -> Calibration:
        others = tuple(c for c in self.channels if c.analog_input != channel.analog_input)
        merged = tuple(sorted((*others, channel), key=lambda c: c.analog_input))
        return Calibration(self.adc_bits, self.adc_ref_mv, merged, self.board, self.measured_utc)

    def to_dict(self) -> dict[str, Any]:
        record = asdict(self)
        record["channels"] = [asdict(c) for c in self.channels]
        return {"format": FORMAT, "version": VERSION, **record}

    @classmethod
    def from_dict(cls, record: Mapping[str, Any], source: str = "calibration") -> Calibration:
        """Raises ConfigError naming `source` (a file) and the key at fault."""
        if record.get("format") != FORMAT:
            raise ConfigError(f"{source}: format: expected {FORMAT!r}")
        if record.get("version") != VERSION:
            raise ConfigError(f"{source}: version: {record.get('version')!r}, expected {VERSION}")
        raw_channels = _get(record, "channels", list, source)
        channels = tuple(
            _channel(entry, f"channels[{n}]", source) for n, entry in enumerate(raw_channels)
        )
        if not channels:
            raise ConfigError(f"{source}: channels: empty")
        inputs = [c.analog_input for c in channels]
        if len(set(inputs)) != len(inputs):
            raise ConfigError(f"{source}: channels: analog input listed twice")
        bits = _get(record, "adc_bits", int, source)
        if not 8 <= bits <= 16:
            raise ConfigError(f"{source}: adc_bits: {bits} outside 8..16")
        ref = float(_get(record, "adc_ref_mv", float, source))
        if ref <= 0:
            raise ConfigError(f"{source}: adc_ref_mv: must be positive")
        return cls(
            bits,
            ref,
            channels,
            str(record.get("board", "")),
            str(record.get("measured_utc", "")),
        )

    def save(self, path: Path) -> None:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=2) + "\n")
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path) -> Calibration:
        try:
            record = json.loads(path.read_text())
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}: not JSON: {exc.msg} at line {exc.lineno}") from None
        if not isinstance(record, dict):
            raise ConfigError(f"{path}: expected a JSON object")
        return cls.from_dict(record, str(path))


def nominal_channel(
    analog_input: int, variant: str = "5A", supply_v: float = 5.0, adc_bits: int = 10
) -> ChannelCalibration:
    """A channel with the datasheet sensitivity and the nominal (unmeasured) zero."""
    return ChannelCalibration(
        analog_input,
        variant,
        sensitivity_of(variant),
        (1 << (adc_bits - 1)) - 0.5,
        supply_v,
    )


def nominal(
    analog_inputs: tuple[int, ...] = (0, 1),
    variant: str = "5A",
    supply_v: float = 5.0,
    adc_bits: int = 10,
    adc_ref_mv: float = 5000.0,
) -> Calibration:
    channels = tuple(nominal_channel(n, variant, supply_v, adc_bits) for n in analog_inputs)
    return Calibration(adc_bits, adc_ref_mv, channels)


def sensitivity_of(variant: str) -> float:
    try:
        return ACS712_SENSITIVITY_MV_PER_A[variant]
    except KeyError:
        known = ", ".join(ACS712_SENSITIVITY_MV_PER_A)
        raise ConfigError(f"ACS712 variant {variant!r}: expected one of {known}") from None


def _get(record: Mapping[str, Any], key: str, kind: type, source: str, where: str = "") -> Any:
    name = f"{where}.{key}" if where else key
    if key not in record:
        raise ConfigError(f"{source}: {name}: missing")
    value = record[key]
    numeric = kind is float and isinstance(value, int | float)
    if isinstance(value, bool) or not (numeric or isinstance(value, kind)):
        raise ConfigError(f"{source}: {name}: expected {kind.__name__}, got {value!r}")
    return value


def _channel(entry: Any, where: str, source: str) -> ChannelCalibration:
    if not isinstance(entry, dict):
        raise ConfigError(f"{source}: {where}: expected an object")
    variant = _get(entry, "variant", str, source, where)
    if variant not in ACS712_SENSITIVITY_MV_PER_A:
        raise ConfigError(f"{source}: {where}.variant: {variant!r} is not 5A, 20A or 30A")
    analog_input = _get(entry, "analog_input", int, source, where)
    if not 0 <= analog_input <= 7:
        raise ConfigError(f"{source}: {where}.analog_input: {analog_input} outside 0..7")
    sensitivity = float(_get(entry, "sensitivity_mv_per_a", float, source, where))
    supply = float(_get(entry, "supply_v", float, source, where))
    for key, value in (("sensitivity_mv_per_a", sensitivity), ("supply_v", supply)):
        if value <= 0:
            raise ConfigError(f"{source}: {where}.{key}: must be positive")
    return ChannelCalibration(
        analog_input,
        variant,
        sensitivity,
        float(_get(entry, "zero_code", float, source, where)),
        supply,
        int(entry.get("zero_samples", 0)),
        float(entry.get("zero_noise_code", 0.0)),
    )
