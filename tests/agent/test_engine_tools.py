"""Which of an engine's programs a node installs from its distribution, per side and protocol
(agent.engines: what `nodes deploy` and `nodes check` look for on a node)."""

from __future__ import annotations

import pytest

from agent.engines import DEFAULT_ENGINE, engine_spec
from agent.engines.nghttp2.tools import PACKAGES
from agent.protocols import protocol_spec


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
    quic = [protocol_spec(p).quic for p in protocols]
    assert engine_spec("nghttp2").system_tools(client, quic) == tools
    assert all(tool in PACKAGES for tool in tools)  # each names its Debian package


@pytest.mark.parametrize("engine", [DEFAULT_ENGINE, "hypercorn"])
def test_engines_the_agent_carries_need_nothing_from_the_distribution(engine: str) -> None:
    spec = engine_spec(engine)
    assert spec.system_tools(True, (False, True)) == ()
    assert spec.system_tools(False, (False, True)) == ()
