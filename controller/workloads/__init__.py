"""The controller's side of each workload: how a server node is made ready to serve it.

What a workload *is* (its parameters, its record's fields) is declared once, by the agent
(`agent.workloads`); its trials.csv columns follow from that (`analysis.trial_columns`). Here
lives only what the controller does for a workload beyond passing its parameters on: the page
workload's site, built on the server node for each distinct `site_seed` and `total_bytes`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from agent.workloads import SPECS, ParamValue
from agent.workloads.spec import ParamSide
from controller.config.model import Config
from controller.nodes.agent import AgentNode
from controller.workloads.api import ApiDatabases
from controller.workloads.page import PageSites
from controller.workloads.served import Served

__all__ = ["Served", "params_for", "prepare_sweep", "preparer"]

Prepare = Callable[[Mapping[str, ParamValue]], Served]


def params_for(
    kind: str, params: Sequence[tuple[str, ParamValue]], side: ParamSide
) -> tuple[tuple[str, ParamValue], ...]:
    """The parameters that go to one side (client, server, set-up), as declared."""
    sides = {param.name: param.side for param in SPECS[kind].params}
    return tuple((name, value) for name, value in params if sides[name] == side)


def prepare_sweep(config: Config, prepare: Prepare) -> None:
    """Prepare the server node for every point of the sweep before anything is measured (the
    page's sites), so no trial waits for a set-up step or is disturbed by one."""
    for point in config.trial_points():
        prepare(dict(params_for(config.workload.kind, point.params, "setup")))


def preparer(kind: str, server: AgentNode, state_dir: str, *, client_shares_host: bool) -> Prepare:
    """For a workload kind: set-up parameters -> what the server serves them from."""
    if kind == "page":
        return PageSites(server, state_dir, client_shares_host=client_shares_host)
    if kind == "api":
        return ApiDatabases(server, state_dir)
    return lambda _setup: Served()
