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

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

from agent.errors import UsageError
from agent.registry import Registry
from agent.workloads.spec import Field, Param, ParamError, ParamValue, Refusal, WorkloadSpec

__all__ = [
    "SPECS",
    "Field",
    "Param",
    "ParamError",
    "ParamValue",
    "Refusal",
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
        "periodic": ("agent.workloads.periodic.spec", "PERIODIC"),
    }
)


ENTRY_POINTS = "h2iot.workloads"


_REGISTRY: Registry[WorkloadSpec] = Registry(
    "workload",
    _DECLARATIONS,
    entry_points=ENTRY_POINTS,
    name_of=lambda spec: spec.kind,
    error=UsageError,
)


def spec_of(kind: str) -> WorkloadSpec:
    return _REGISTRY.load(kind)


def package_of(kind: str) -> str:
    """The package holding kind's declaration and its `client` and `server` modules."""
    return _REGISTRY.declaration(kind)[0].rpartition(".")[0]


def __getattr__(name: str) -> Mapping[str, WorkloadSpec]:
    if name != "SPECS":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    specs = MappingProxyType({kind: spec_of(kind) for kind in _REGISTRY.names()})
    globals()["SPECS"] = specs
    return specs
