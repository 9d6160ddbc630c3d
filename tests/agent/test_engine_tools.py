"""Which of an engine's programs a node installs from its distribution, per side and protocol
(agent.engines: what `nodes deploy` and `nodes check` look for on a node)."""

from __future__ import annotations

import pytest

from agent.engines import ENGINE_SPECS, Engine
from agent.nghttp2.tools import PACKAGES


@pytest.mark.parametrize(
    ("client", "protocols", "tools"),
    [
        (True, ("h2c",), ("nghttp",)),
        (False, ("h2",), ("nghttpd",)),
        (True, ("h3",), ("gtlsclient",)),
        (False, ("h3",), ("gtlsserver",)),
        (True, ("h2", "h3"), ("nghttp", "gtlsclient")),
        (False, ("h2c", "h2", "h3"), ("nghttpd", "gtlsserver")),
    ],
)
def test_the_nghttp2_engine_needs_its_tools_per_protocol(
    client: bool, protocols: tuple[str, ...], tools: tuple[str, ...]
) -> None:
    assert ENGINE_SPECS["nghttp2"].system_tools(client, protocols) == tools
    assert all(tool in PACKAGES for tool in tools)  # each names its Debian package


@pytest.mark.parametrize("engine", ["h2", "hypercorn"])
def test_engines_the_agent_carries_need_nothing_from_the_distribution(engine: Engine) -> None:
    spec = ENGINE_SPECS[engine]
    assert spec.system_tools(True, ("h2c", "h2", "h3")) == ()
    assert spec.system_tools(False, ("h2c", "h2", "h3")) == ()
