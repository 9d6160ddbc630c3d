"""A workload's server and client sides, imported only when a command runs them: the registry
(agent.workloads) stays declarations only, so the controller and `--version` load no handler,
driver or workload library."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from agent.workloads import package_of

if TYPE_CHECKING:
    from agent.client.run import Prepare
    from agent.server.handler import Handler

Mount = Callable[[Path | None, Mapping[str, object]], "Handler"]


def server_mount(kind: str) -> Mount:
    """`<package>.server.mount` (agent.workloads.<kind>, or an installed workload's package):
    the root (page) and server params -> handler."""
    module = importlib.import_module(f"{package_of(kind)}.server")
    mount: Mount = module.mount
    return mount


def client_prepare(kind: str) -> Prepare:
    """`<package>.client.prepare`: readies the trials of a run."""
    module = importlib.import_module(f"{package_of(kind)}.client")
    prepare: Prepare = module.prepare
    return prepare
