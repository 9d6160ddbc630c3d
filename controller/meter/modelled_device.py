"""How each modelled meter source's device is built, declared once (`MODELLED`): the sweep
(`controller.sweep.setup`) and the rig check (`controller.rig.probe`) both build theirs with
`build_device`, and the sweep's manifest says what it ran from `manifest_facts`. A new modelled
source is its line in `controller.config.meter_sources` (which says when it is modelled) and
its entry here (how it is built).

Each meter's module is imported when its device is built, not with this one: a sweep or a
rig check loads the one meter its config names (the simulated one's builds the firmware).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from analysis.truth import EDGES_FILE, TRUTH_FILE
from controller.config.meter_sources import MeterSource
from controller.errors import MeterError
from controller.meter.ina219 import Ina219Model
from controller.meter.node_power import ModelledMeterOptions, WatchSpec
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


@dataclass(frozen=True)
class ModelledSource:
    build: Callable[[DeviceOptions], ModelledDevice]
    facts: Mapping[str, str]  # what a run's manifest says of it, beside its truth and its model
    # It answers as the firmware would without running it (no build to compare versions with).
    models_firmware: bool = False


def _virtual(options: DeviceOptions) -> ModelledDevice:
    from controller.meter.virtual import VirtualMeter, VirtualMeterOptions  # noqa: PLC0415

    return VirtualMeter(
        VirtualMeterOptions(
            watch=options.watch,
            truth_path=options.output(TRUTH_FILE),
            edges_path=options.output(EDGES_FILE),
            marker_fifo=options.marker_fifo,
            model=options.model,
            ina219=options.ina219,
        )
    )


def _simavr(options: DeviceOptions) -> ModelledDevice:
    from controller.meter.simulate import SimulatedMeter, SimulateOptions  # noqa: PLC0415

    return SimulatedMeter(
        SimulateOptions(
            watch=options.watch,
            truth_path=options.output(TRUTH_FILE),
            marker_fifo=options.marker_fifo,
            model=options.model,
            ina219_sources=options.ina219_sources,
            ina226_sources=options.ina226_sources,
            ina219=options.ina219,
        )
    )


def _ppk2(options: DeviceOptions) -> ModelledDevice:
    from controller.meter.ppk2.modelled import ModelledPpk2, ModelledPpk2Source  # noqa: PLC0415

    if options.supply_mv is None:
        raise ValueError("the emulated PPK2 is built with a supply_mv")
    meter = ModelledMeterOptions(
        watch=options.watch,
        truth_path=options.output(TRUTH_FILE),
        marker_fifo=options.marker_fifo,
        model=options.model,
    )
    return ModelledPpk2(
        ModelledPpk2Source(meter, options.supply_mv, options.marker_input, rate_hz=options.rate_hz)
    )


MODELLED: dict[MeterSource, ModelledSource] = {
    "virtual": ModelledSource(_virtual, {"edges": EDGES_FILE}, models_firmware=True),
    "simavr": ModelledSource(_simavr, {"simulator": "simavr"}),
    "ppk2": ModelledSource(_ppk2, {"emulated": "ppk2"}),
}


def models_firmware(source: MeterSource) -> bool:
    """The source answers as the firmware would without running it (the virtual meter; simavr
    runs the real build, a board or a PPK2 is itself)."""
    entry = MODELLED.get(source)
    return entry is not None and entry.models_firmware


def build_device(source: MeterSource, options: DeviceOptions) -> ModelledDevice:
    """The source's modelled device, built (not started)."""
    return MODELLED[source].build(options)


def manifest_facts(source: MeterSource, options: DeviceOptions) -> dict[str, Any]:
    """What a run's manifest records of the modelled device `options` built."""
    return {"ground_truth": TRUTH_FILE, **MODELLED[source].facts, "model": asdict(options.model)}
