"""The registry of the workloads' report parts: the module of each kind that has one
(analysis/workloads/<kind>.py, declaring its `REPORT`), and the kind of a run whose manifest
names none. The only place in the analysis core that names the kinds: adding a workload's
report means adding its module and a line here.

Names only, importing nothing: analysis.load reads DEFAULT_KIND, and the report parts import
analysis.load; `report_of` (analysis.workloads.base) loads a kind's part on first use.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

# A run whose manifest names no workload fetched the page (runs before workloads existed).
DEFAULT_KIND = "page"
REPORT_MODULES: Mapping[str, str] = MappingProxyType(
    {
        "page": "analysis.workloads.page",
        "blob": "analysis.workloads.blob",
        "api": "analysis.workloads.api",
        "payload": "analysis.workloads.payload",
        "stream": "analysis.workloads.stream",
        "periodic": "analysis.workloads.periodic",
    }
)

__all__ = ["DEFAULT_KIND", "REPORT_MODULES"]
