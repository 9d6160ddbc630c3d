"""The workloads a trial can run, by kind: what each declares (`WorkloadSpec`).

Importing this package loads only the declarations, never a workload's handlers or libraries:
the controller reads it at config load, and `--version` stays cheap.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from agent.errors import UsageError
from agent.workloads.blob.spec import BLOB
from agent.workloads.page.spec import PAGE
from agent.workloads.payload.spec import PAYLOAD
from agent.workloads.spec import Field, Param, ParamError, ParamValue, WorkloadSpec
from agent.workloads.stream.spec import STREAM

__all__ = ["SPECS", "Field", "Param", "ParamError", "ParamValue", "WorkloadSpec", "spec_of"]

DEFAULT_KIND = "page"

SPECS: Mapping[str, WorkloadSpec] = MappingProxyType(
    {spec.kind: spec for spec in (PAGE, BLOB, PAYLOAD, STREAM)}
)


def spec_of(kind: str) -> WorkloadSpec:
    try:
        return SPECS[kind]
    except KeyError:
        raise UsageError(f"unknown workload {kind!r} (known: {', '.join(SPECS)})") from None
