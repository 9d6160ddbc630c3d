"""The engines an agent runs HTTP/2 with, declared once: their names, the side each takes, the
SETTINGS each can announce and how each takes a window.

The agent's command line and the controller's config read this one vocabulary; neither copies
it, and the controller never reaches into an engine's own modules to check a config. Light on
purpose (no engine is imported here): every agent command loads it.

- `h2`: the agent's own HTTP/2 (python-hyper/h2 with the agent's fast path), client and server;
  any SETTINGS, exact windows.
- `nghttp2`: the study's tools, `nghttp` (client) and `nghttpd` (server), driven by the agent;
  the SETTINGS their options reach; windows as 2^N - 1 bytes (agent.nghttp2.windows). Over
  HTTP/3 the nghttp2 project's QUIC sibling's tools instead, ngtcp2's `gtlsclient` and
  `gtlsserver` (agent.nghttp2.gtls): the C anchor for both protocols, exact windows there.
- `hypercorn`: hypercorn + Starlette, a server of the api workload only.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

Engine = Literal["h2", "nghttp2", "hypercorn"]
UnrepresentablePolicy = Literal["map", "reject"]
UNREPRESENTABLE_POLICIES: tuple[UnrepresentablePolicy, ...] = ("map", "reject")
"""What an engine that takes windows as 2^N - 1 bytes does with another count: run the nearest
(recorded, with a warning) or refuse it."""

NGHTTP_SETTINGS = (
    "initial_window_size",
    "header_table_size",
    "max_concurrent_streams",
    "enable_push",
)
NGHTTPD_SETTINGS = ("initial_window_size", "header_table_size", "max_concurrent_streams")
NGTCP2_SETTINGS = ("initial_window_size",)
"""What the nghttp2 engine announces over HTTP/3 (ngtcp2's gtlsclient and gtlsserver), as the
transport parameter initial_max_stream_data."""
HYPERCORN_SETTINGS = {
    "max_concurrent_streams": "h2_max_concurrent_streams",
    "max_header_list_size": "h2_max_header_list_size",
    "max_frame_size": "h2_max_inbound_frame_size",
}
"""The SETTINGS the hypercorn engine can announce: our canonical names -> hypercorn's Config
attribute (any other is refused, by the agent and at config load)."""


@dataclass(frozen=True)
class EngineSpec:
    name: Engine
    client_tool: str | None  # what runs a trial's client side, None: the engine only serves
    server_tool: str  # what serves
    # The SETTINGS each side can announce; None: every one the agent knows.
    client_settings: tuple[str, ...] | None
    server_settings: tuple[str, ...] | None
    windows_are_powers_of_two_less_one: bool  # takes windows as 2^N - 1 bytes (nghttp2's -w N)
    # When its client sends WINDOW_UPDATE (agent.flow's policies); None: any policy.
    client_window_update_policies: tuple[str, ...] | None = None
    # The protocols it runs (h2c, h2: HTTP/2 in cleartext or over TLS; h3: HTTP/3).
    protocols: tuple[str, ...] = ("h2c", "h2")
    # Whether its client checks the server's certificate (against the run's authority).
    checks_certificates: bool = True
    # Its tools come from the node's distribution (Debian packages, agent.nghttp2.tools), not
    # from the agent's wheel or an extra: a node must have them installed.
    distribution_tools: bool = False
    # The (client, server) programs it runs over HTTP/3 instead of client_tool, server_tool.
    h3_tools: tuple[str, str] | None = None

    @property
    def serves_only(self) -> bool:
        return self.client_tool is None

    def settings(self, client: bool) -> tuple[str, ...] | None:
        return self.client_settings if client else self.server_settings

    def tool(self, client: bool) -> str:
        return (self.client_tool if client else None) or self.server_tool

    def system_tools(self, client: bool, protocols: Iterable[str]) -> tuple[str, ...]:
        """The distribution's programs this side runs in a run over `protocols` (none for an
        engine the agent's wheel or extras carry)."""
        if not self.distribution_tools:
            return ()
        wanted = set(protocols)
        tools = [self.tool(client)] if wanted - {"h3"} else []
        if "h3" in wanted and self.h3_tools is not None:
            tools.append(self.h3_tools[0 if client else 1])
        return tuple(tools)

    def window_on_wire(self, window: int) -> int:
        """The window this engine announces for `window` bytes: itself, or for nghttp2 the
        nearest 2^N - 1 (agent.nghttp2.windows, imported only for an engine that needs it)."""
        if not self.windows_are_powers_of_two_less_one:
            return window
        from agent.nghttp2.windows import nearest_bits  # noqa: PLC0415

        return (1 << nearest_bits(window)) - 1


ENGINE_SPECS: dict[Engine, EngineSpec] = {
    "h2": EngineSpec(
        "h2", "h2iot-agent", "h2iot-agent", None, None, False, protocols=("h2c", "h2", "h3")
    ),
    "nghttp2": EngineSpec(
        "nghttp2",
        "nghttp",
        "nghttpd",
        NGHTTP_SETTINGS,
        NGHTTPD_SETTINGS,
        True,
        ("half",),
        protocols=("h2c", "h2", "h3"),
        checks_certificates=False,
        distribution_tools=True,
        h3_tools=("gtlsclient", "gtlsserver"),
    ),
    "hypercorn": EngineSpec("hypercorn", None, "hypercorn", None, tuple(HYPERCORN_SETTINGS), False),
}
ENGINES: tuple[Engine, ...] = tuple(ENGINE_SPECS)
DEFAULT_ENGINE: Engine = "h2"
SERVER_ONLY_ENGINES: tuple[Engine, ...] = tuple(e for e, s in ENGINE_SPECS.items() if s.serves_only)
