"""The registry of the workloads' report parts: `report_of(kind)` gives the `WorkloadReport`
that analysis/workloads/<kind>.py declares as `REPORT` (analysis.workloads.base), or the
default for a kind without one. The only place in the analysis core that names the kinds:
adding a workload's report means adding its module and a line here."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from analysis.workloads.base import WorkloadReport

# A run whose manifest names no workload fetched the page (runs before workloads existed).
DEFAULT_KIND = "page"
_MODULES = {
    "page": "analysis.workloads.page",
    "blob": "analysis.workloads.blob",
    "api": "analysis.workloads.api",
    "payload": "analysis.workloads.payload",
    "stream": "analysis.workloads.stream",
}


def report_of(kind: str) -> WorkloadReport:
    """kind's report part (loaded on first use: a report imports only its own workload's)."""
    # Imported here, not at the top: analysis.load reads DEFAULT_KIND, and base imports load.
    from analysis.workloads.base import DEFAULT_REPORT  # noqa: PLC0415

    module = _MODULES.get(kind)
    if module is None:
        return DEFAULT_REPORT
    report: WorkloadReport = importlib.import_module(module).REPORT
    return report
