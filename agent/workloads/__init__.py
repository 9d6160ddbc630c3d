"""The workloads a trial can run, by kind: what each declares (`WorkloadSpec`).

Importing this package loads no declaration: `spec_of(kind)` imports that kind's spec module
alone (a trial's process needs only its own), and `SPECS`, every declaration, is loaded on
first use (the controller reads it at config load). No handler or workload library is ever
imported from here.

A workload of one's own needs no change here: a package installed beside the agent (on every
node that runs it) names its declaration in the `h2iot.workloads` entry-point group, e.g.
`mine = "my_workload.spec:MINE"` in its pyproject's [project.entry-points."h2iot.workloads"]; its
package then holds `client.py` and `server.py` as agent/workloads/<kind>/ does
(`package_of`). The installed packages are scanned only for a kind not built in, so a built-in
kind's trial pays nothing for it.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

from agent.errors import UsageError
from agent.workloads.spec import Field, Param, ParamError, ParamValue, WorkloadSpec

__all__ = [
    "SPECS",
    "Field",
    "Param",
    "ParamError",
    "ParamValue",
    "WorkloadSpec",
    "package_of",
    "spec_of",
]

DEFAULT_KIND = "page"

if TYPE_CHECKING:
    SPECS: Mapping[str, WorkloadSpec]

# kind: the module and name of its declaration, in the order listings show them.
_DECLARATIONS: Mapping[str, tuple[str, str]] = MappingProxyType(
    {
        "page": ("agent.workloads.page.spec", "PAGE"),
        "blob": ("agent.workloads.blob.spec", "BLOB"),
        "payload": ("agent.workloads.payload.spec", "PAYLOAD"),
        "stream": ("agent.workloads.stream.spec", "STREAM"),
        "api": ("agent.workloads.api.spec", "API"),
    }
)


ENTRY_POINTS = "h2iot.workloads"


def _installed() -> dict[str, tuple[str, str]]:
    """The workloads installed packages declare (ENTRY_POINTS), by kind; built-ins win."""
    from importlib.metadata import entry_points  # noqa: PLC0415  (scans every installed package)

    found = {}
    for point in entry_points(group=ENTRY_POINTS):
        module, _, name = point.value.partition(":")
        if point.name not in _DECLARATIONS and module and name:
            found[point.name] = (module.strip(), name.strip())
    return found


def _declaration(kind: str) -> tuple[str, str]:
    known = _DECLARATIONS.get(kind) or _installed().get(kind)
    if known is None:
        names = ", ".join([*_DECLARATIONS, *_installed()])
        raise UsageError(f"unknown workload {kind!r} (known: {names})")
    return known


def spec_of(kind: str) -> WorkloadSpec:
    module, name = _declaration(kind)
    spec: WorkloadSpec = getattr(importlib.import_module(module), name)
    if spec.kind != kind:
        raise UsageError(f"workload {kind!r}: {module}:{name} declares {spec.kind!r}")
    return spec


def package_of(kind: str) -> str:
    """The package holding kind's declaration and its `client` and `server` modules."""
    return _declaration(kind)[0].rpartition(".")[0]


def __getattr__(name: str) -> Mapping[str, WorkloadSpec]:
    if name != "SPECS":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    kinds = [*_DECLARATIONS, *_installed()]
    specs = MappingProxyType({kind: spec_of(kind) for kind in kinds})
    globals()["SPECS"] = specs
    return specs
