"""The page workload's server side: the site's files under `--root`, GET and HEAD."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from agent.errors import UsageError
from agent.server.handler import Handler
from agent.workloads.page.files import FileHandler


def mount(root: Path | None, params: Mapping[str, object]) -> Handler:
    if root is None:
        raise UsageError("--root DIR (the site) is required for the page workload")
    return FileHandler(root)
