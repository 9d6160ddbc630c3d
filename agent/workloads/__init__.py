"""The workloads a trial can run, by kind: what each declares (`WorkloadSpec`).

Importing this package loads no declaration: `spec_of(kind)` imports that kind's spec module
alone (a trial's process needs only its own), and `SPECS`, every declaration, is loaded on
first use (the controller reads it at config load). No handler or workload library is ever
imported from here.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

from agent.errors import UsageError
from agent.workloads.spec import Field, Param, ParamError, ParamValue, WorkloadSpec

__all__ = ["SPECS", "Field", "Param", "ParamError", "ParamValue", "WorkloadSpec", "spec_of"]

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


def spec_of(kind: str) -> WorkloadSpec:
    try:
        module, name = _DECLARATIONS[kind]
    except KeyError:
        known = ", ".join(_DECLARATIONS)
        raise UsageError(f"unknown workload {kind!r} (known: {known})") from None
    spec: WorkloadSpec = getattr(importlib.import_module(module), name)
    return spec


def __getattr__(name: str) -> Mapping[str, WorkloadSpec]:
    if name != "SPECS":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    specs = MappingProxyType({kind: spec_of(kind) for kind in _DECLARATIONS})
    globals()["SPECS"] = specs
    return specs
