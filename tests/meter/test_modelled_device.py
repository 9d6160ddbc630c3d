"""The modelled meter sources are built one way (`controller.meter.modelled_device`, through each
source's declared `device` module): one per source the config calls modelled, and the sweep and
the rig check each get from it the device, options and manifest facts they built themselves
before."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from analysis.truth import EDGES_FILE, TRUTH_FILE
from controller.config.channels import (
    INA226_CHANNEL,
)
from controller.config.meter_sources import SPECS
from controller.config.model import (
    Config,
    MeterConfig,
)
from controller.meter.ina219 import Ina219Calibration, Ina219Model
from controller.meter.node_power import ModelledMeterOptions, WatchSpec
from controller.meter.power_model import PI_3B
from controller.meter.simulate import SimulateOptions
from controller.meter.virtual import VirtualMeterOptions
from controller.meter_sources.board import rig as board_rig
from controller.rig.checks import Check
from controller.sweep import setup

WATCH = (WatchSpec("pid", "101"), WatchSpec("pid", "102"))
INA219 = 0x41  # source 1
INA226 = INA226_CHANNEL | 0x40  # source 0


@dataclass
class _Built:
    """A stand-in for a modelled device: what it was built from, and what was done to it."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    port: str = "/dev/pts/fake"
    error: None = None
    calls: list[str] = field(default_factory=list)

    def start(self) -> None:
        self.calls.append("start")

    def stop(self) -> None:
        self.calls.append("stop")

    def close(self) -> None:
        self.calls.append("close")


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, _Built]]]:
    """Each meter class the builders import, recording what it is built from."""
    made: list[tuple[str, _Built]] = []

    def recorder(name: str) -> Any:
        def make(*args: Any, **kwargs: Any) -> _Built:
            device = _Built(args, kwargs)
            made.append((name, device))
            return device

        return make

    sources = "controller.meter_sources"
    monkeypatch.setattr(f"{sources}.virtual.device.VirtualMeter", recorder("VirtualMeter"))
    monkeypatch.setattr(f"{sources}.simavr.device.SimulatedMeter", recorder("SimulatedMeter"))
    monkeypatch.setattr(f"{sources}.ppk2.device.ModelledPpk2", recorder("ModelledPpk2"))
    monkeypatch.setattr(f"{sources}.ppk2.device.ModelledPpk2Source", recorder("ModelledPpk2Source"))
    yield made


def test_every_modelled_source_and_no_other_has_a_builder() -> None:
    modelled = {name for name, spec in SPECS.items() if spec.modelled != "never"}
    assert {name for name, spec in SPECS.items() if spec.device is not None} == modelled


def _sweep_meter(source: str) -> MeterConfig:
    return MeterConfig(
        source=source,
        channels=(("client", INA226), ("server", INA219)),
        shunt_ohm=0.05,
        network_nj_per_byte=12.0,
        supply_mv=3700,
        marker_input=3,
        rate_hz=500,
    )


def test_the_sweep_builds_the_virtual_meter(tmp_path: Path, built: list[Any]) -> None:
    meter, marker = _sweep_meter("virtual"), tmp_path / "marker.fifo"
    with setup._device(meter, WATCH, tmp_path, marker) as (port, facts, _error):
        assert port == "/dev/pts/fake"
    model = replace(PI_3B, network_nj_per_byte=12.0)
    [(name, device)] = built
    assert name == "VirtualMeter"
    assert device.args == (
        VirtualMeterOptions(
            watch=WATCH,
            truth_path=tmp_path / TRUTH_FILE,
            edges_path=tmp_path / EDGES_FILE,
            marker_fifo=marker,
            model=model,
            ina219=Ina219Model(Ina219Calibration(shunt_ohm=0.05)),
        ),
    )
    assert device.calls == ["start", "stop", "close"]
    assert facts == {"ground_truth": TRUTH_FILE, "edges": EDGES_FILE, "model": asdict(model)}
    assert list(facts) == ["ground_truth", "edges", "model"]


def test_the_sweep_builds_the_simulated_meter(tmp_path: Path, built: list[Any]) -> None:
    with setup._device(_sweep_meter("simavr"), WATCH, tmp_path, None) as (_port, facts, _e):
        pass
    model = replace(PI_3B, network_nj_per_byte=12.0)
    [(name, device)] = built
    assert name == "SimulatedMeter"
    assert device.args == (
        SimulateOptions(
            watch=WATCH,
            truth_path=tmp_path / TRUTH_FILE,
            model=model,
            ina219_sources=(1,),
            ina226_sources=(0,),
            ina219=Ina219Model(Ina219Calibration(shunt_ohm=0.05)),
        ),
    )
    assert list(facts.items()) == [
        ("ground_truth", TRUTH_FILE),
        ("simulator", "simavr"),
        ("model", asdict(model)),
    ]


def test_the_sweep_builds_the_emulated_ppk2(tmp_path: Path, built: list[Any]) -> None:
    marker = tmp_path / "marker.fifo"
    with setup._device(_sweep_meter("ppk2"), WATCH, tmp_path, marker) as (_port, facts, _e):
        pass
    model = replace(PI_3B, network_nj_per_byte=12.0)
    [(source_name, source), (name, device)] = built
    assert (source_name, name) == ("ModelledPpk2Source", "ModelledPpk2")
    options = ModelledMeterOptions(
        watch=WATCH, truth_path=tmp_path / TRUTH_FILE, marker_fifo=marker, model=model
    )
    assert (source.args, source.kwargs) == ((options, 3700, 3), {"rate_hz": 500})
    assert device.args == (source,)
    assert list(facts.items()) == [
        ("ground_truth", TRUTH_FILE),
        ("emulated", "ppk2"),
        ("model", asdict(model)),
    ]


@pytest.mark.parametrize(
    ("source", "name", "options"),
    [
        ("virtual", "VirtualMeter", VirtualMeterOptions),
        ("simavr", "SimulatedMeter", SimulateOptions),
    ],
)
def test_the_rig_check_builds_the_meter_with_its_defaults(
    source: str, name: str, options: type[ModelledMeterOptions], built: list[Any]
) -> None:
    """No truth, the stock model, no simulated I2C parts: only the nodes and the marker."""
    config = Config()
    config = replace(config, meter=replace(config.meter, source=source))
    nodes: Any = {"client": (None, 101)}
    emitted: list[Check] = []
    with board_rig._device(config, nodes, "fifo:/tmp/m.fifo", emitted.append) as port:
        assert port == "/dev/pts/fake"
    [(built_name, device)] = built
    assert built_name == name
    assert device.args == (options(watch=WATCH[:1], marker_fifo=Path("/tmp/m.fifo")),)
    assert device.args[0].model == PI_3B
    assert device.calls == ["start", "stop", "close"]
    assert [check.name for check in emitted] == ["meter port"]
    assert f"the {source} meter's pty" in emitted[0].detail
