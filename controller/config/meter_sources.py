"""The meter sources a sweep can read, by name: the registry of their declarations
(`MeterSourceSpec`), as `agent.workloads` is the workloads'.

Each source lives in its own folder, `controller/meter_sources/<name>/`: its `spec.py` declares
it as data and points, by dotted path, at the rest of the folder (the sweep's tap, the rig
check, its modelled device, its command-line verbs). The config, the sweep's set-up, the rig
check and the CLI ask this registry and the spec it returns; none of them names a source.

Importing this module loads no declaration, and a declaration loads none of the modules it
points at: the config is imported on SSH nodes, which have no meter code (no numpy), so
`spec_of(name)` imports that source's `spec.py` alone, and `SPECS` every one on first use.

A source of one's own needs no change here: a package names its declaration in the
`h2iot.meter_sources` entry-point group, e.g. `mine = "my_meter.spec:MINE"` in its pyproject's
[project.entry-points."h2iot.meter_sources"]. The installed packages are scanned only for a
name not built in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

from agent.registry import Registry, load_dotted
from controller.errors import ConfigError

__all__ = [
    "BUILT_IN",
    "DEFAULT_SOURCE",
    "ENTRY_POINTS",
    "SPECS",
    "MeterSourceSpec",
    "Modelled",
    "source_names",
    "spec_of",
]

Modelled = Literal["always", "without_port", "never"]

DEFAULT_SOURCE = "virtual"
ENTRY_POINTS = "h2iot.meter_sources"

if TYPE_CHECKING:
    SPECS: Mapping[str, MeterSourceSpec]


@dataclass(frozen=True)
class MeterSourceSpec:
    """What a meter source is, as data; every `module:name` is loaded only when asked for."""

    name: str
    doc: str
    modelled: Modelled  # when the sweep runs the device from the local nodes' power model
    # module:function opening the sweep's tap, `(TapRequest) -> PowerMeter`
    # (controller.sweep.meter_tap); where a sweep reads its samples.
    tap: str
    # module:function running `h2iot rig check`'s meter lines, `(config, nodes, emit, *,
    # marker, seconds) -> None` (controller.rig.bench); None: the check says it has none.
    rig_check: str | None = None
    # A module building its modelled device: `build(DeviceOptions) -> ModelledDevice` and
    # `FACTS`, what a run's manifest says of it beside its ground truth and model
    # (controller.meter.modelled_device); None: no device (a port, or the tap is all of it).
    device: str | None = None
    # It answers as the firmware would without running it (no build to compare versions with).
    models_firmware: bool = False
    # A module of `h2iot meter` verbs with `register(actions)`; None: it has none of its own.
    cli: str | None = None
    # A module serving it emulated for `h2iot meter virtual --device NAME` (NAME its name),
    # with `add_options(parser)` and `serve(args) -> int`; None: it has no such device.
    emulator: str | None = None
    # module:function `(MeterConfig) -> Resolution` (controller.meter.resolution): what the
    # meter can see (rate, step, noise, full scale, voltage measured or assumed, conversion
    # time) from the config alone, before any device is opened (a nominal calibration), as
    # `h2iot rig check` prints it; the tap records the device's own in the manifest. None:
    # the source states none.
    facts: str | None = None
    # module:function `(Stack, MeterConfig) -> None` refusing what a config cannot ask of it,
    # naming the key (a light module: the config loads it); None: nothing beyond the schema.
    config_check: str | None = None

    def is_modelled(self, port: str | None) -> bool:
        return self.modelled == "always" or (self.modelled == "without_port" and not port)

    @property
    def needs_port(self) -> bool:
        return self.modelled == "never"

    def load(self, dotted: str) -> Any:
        """The object a `module:name` field points at, its module imported now."""
        return load_dotted(dotted)


# name: the module and name of its declaration, in the order listings show them.
_DECLARATIONS: Mapping[str, tuple[str, str]] = MappingProxyType(
    {
        "serial": ("controller.meter_sources.serial.spec", "SERIAL"),
        "virtual": ("controller.meter_sources.virtual.spec", "VIRTUAL"),
        "simavr": ("controller.meter_sources.simavr.spec", "SIMAVR"),
        "ppk2": ("controller.meter_sources.ppk2.spec", "PPK2"),
    }
)


_REGISTRY: Registry[MeterSourceSpec] = Registry(
    "meter source",
    _DECLARATIONS,
    entry_points=ENTRY_POINTS,
    name_of=lambda spec: spec.name,
    error=ConfigError,
)
BUILT_IN: tuple[str, ...] = _REGISTRY.built_in


def source_names() -> tuple[str, ...]:
    """Every source a config may name: the built-in ones, then the installed ones."""
    return _REGISTRY.names()


def spec_of(name: str) -> MeterSourceSpec:
    return _REGISTRY.load(name)


def __getattr__(name: str) -> Mapping[str, MeterSourceSpec]:
    if name != "SPECS":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    specs = MappingProxyType({source: spec_of(source) for source in source_names()})
    globals()["SPECS"] = specs
    return specs
