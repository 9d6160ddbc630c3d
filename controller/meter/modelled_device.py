"""A modelled meter source's device, whichever source: what it is (`ModelledDevice`), what it is
built from (`DeviceOptions`), and its build and manifest facts through its declaration's
`device` module (`build(options)`, `FACTS`; controller/meter_sources/<name>/device.py). The
sweep (`controller.sweep.setup`) and the rig check both build theirs with `build_device`, and
the sweep's manifest says what it ran from `manifest_facts`.

A source's device module is imported when its device is built, not with this one: a sweep or
a rig check loads the one meter its config names (the simulated one's builds the firmware).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from analysis.truth import TRUTH_FILE
from controller.config.meter_sources import MeterSourceSpec
from controller.errors import MeterError
from controller.meter.ina219 import Ina219Model
from controller.meter.node_power import WatchSpec
from controller.meter.power_model import PI_3B, PowerModel


class ModelledDevice(Protocol):
    """A modelled meter on a pty: `start` runs it on a thread, whose error (should it stop)
    `error` says."""

    @property
    def port(self) -> str: ...

    @property
    def error(self) -> MeterError | None: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class DeviceOptions:
    """What a modelled device is built from; each source takes the fields it has a use for.
    A sweep and a rig check build them alike from the config (controller.sweep.setup's
    device_options)."""

    watch: tuple[WatchSpec, ...]
    marker_fifo: Path | None = None
    run_dir: Path | None = None  # where its ground truth (TRUTH_FILE) is written; None: nowhere
    model: PowerModel = PI_3B
    ina219: Ina219Model = field(default_factory=Ina219Model)  # a board's INA219s in the supply
    ina219_sources: tuple[int, ...] = ()  # simavr's I2C parts: the INA219 at 0x40 + n, source n
    ina226_sources: tuple[int, ...] = ()  # and the INA226s
    # The emulated PPK2's: the mV its current carries the model's mW at (the one its session
    # multiplies the current back by), its marker's logic input and its rate.
    supply_mv: int | None = None
    marker_input: int = 0
    rate_hz: int = 1000

    def output(self, name: str) -> Path | None:
        return None if self.run_dir is None else self.run_dir / name


def _device_module(spec: MeterSourceSpec) -> Any:
    if spec.device is None:
        raise ValueError(f"the {spec.name} meter has no modelled device")
    return importlib.import_module(spec.device)


def build_device(spec: MeterSourceSpec, options: DeviceOptions) -> ModelledDevice:
    """The source's modelled device, built (not started)."""
    device: ModelledDevice = _device_module(spec).build(options)
    return device


def manifest_facts(spec: MeterSourceSpec, options: DeviceOptions) -> dict[str, Any]:
    """What a run's manifest records of the modelled device `options` built."""
    facts: Mapping[str, str] = _device_module(spec).FACTS
    return {"ground_truth": TRUTH_FILE, **facts, "model": asdict(options.model)}
