"""Lower layers never reach back up: each import below runs in a fresh interpreter and must not
load the modules named beside it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def loaded_by(module: str) -> set[str]:
    probe = f"import sys, json, {module}; print(json.dumps(sorted(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    return set(json.loads(result.stdout))


@pytest.mark.parametrize(
    ("module", "forbidden_prefixes"),
    [
        # A connection knows its server only through agent.server.host's Protocol.
        ("agent.server.connection", ("agent.server.app",)),
        # The client shares nothing with the server but leaves (the trial header's name).
        ("agent.client.run", ("agent.server",)),
        ("agent.client.connection", ("agent.server",)),
        # What both clients share about a response loads neither protocol's stack.
        ("agent.client.response", ("agent.server", "h2", "qh3")),
        # The error tree is the root every part imports: no protocol library under it.
        ("agent.errors", ("h2", "qh3", "asyncio")),
        ("agent.trial_header", ("agent.server", "agent.client", "h2", "asyncio")),
        # The registry is declarations only: the controller imports it at config load.
        (
            "agent.workloads",
            (
                "asyncio",
                "h2",
                "hpack",
                "psutil",
                "agent.server",
                "agent.client",
                "agent.site.builder",
            ),
        ),
        # Parsing the command line (`--version`) loads no HTTP/2 machinery and no workload side.
        ("agent.cli", ("asyncio", "agent.server", "agent.client", "agent.workloads.page.client")),
    ],
)
def test_module_does_not_load(module: str, forbidden_prefixes: tuple[str, ...]) -> None:
    loaded = loaded_by(module)
    wrong = sorted(
        name
        for name in loaded
        for prefix in forbidden_prefixes
        if name == prefix or name.startswith(prefix + ".")
    )
    assert not wrong, f"importing {module} loads {wrong}"
