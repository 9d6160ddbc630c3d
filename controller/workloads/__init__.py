"""The controller's side of each workload: how a server node is made ready to serve it.

What a workload *is* (its parameters, its record's fields) is declared once, by the agent
(`agent.workloads`); its trials.csv columns follow from that (`controller.run.columns`). Here
lives only what the controller does for a workload beyond passing its parameters on: the page
workload's site, built on the server node for each distinct `site_seed` and `total_bytes`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from agent.workloads import ParamValue
from controller.nodes.agent import AgentNode
from controller.workloads.page import PageSites
from controller.workloads.served import Served

__all__ = ["Served", "preparer"]


def preparer(
    kind: str, server: AgentNode, state_dir: str, *, client_shares_host: bool
) -> Callable[[Mapping[str, ParamValue]], Served]:
    """For a workload kind: set-up parameters -> what the server serves them from."""
    if kind == "page":
        return PageSites(server, state_dir, client_shares_host=client_shares_host)
    return lambda _setup: Served()
