"""HTTP/2 (RFC 9113) for the agent: the `h2c` and `h2` sides of a sweep, over python-hyper's h2.

What is ours here is sans-IO, one concern a module: the SETTINGS under the command line's names
and RFC 9113's ranges (`settings`), when a receiver sends WINDOW_UPDATE (`flow`), a tally of
frames by type (`frames`), a fresh h2 connection whose SETTINGS are in force from the first
frame (`connection`), and the hot path that reads frames in front of h2 and writes the few the
endpoints send themselves (`fastpath`). The asyncio endpoints that run a workload's exchanges
over them are agent/client and agent/server, above this package, which knows neither;
agent/h3 is HTTP/3's counterpart. Its two forms as the testbed names them, cleartext and
over TLS, are declared in `protocol` (read by agent.protocols, which loads nothing else here).

`connection` and `fastpath` load h2's connection machinery (tens of milliseconds on a small
node), so their names are imported on first use: the controller reads the settings and the
WINDOW_UPDATE policies at config load and needs none of it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from agent.h2.flow import (
    DEFAULT_WINDOW_UPDATE_POLICY,
    MAX_WINDOW,
    WINDOW_UPDATE_POLICIES,
    FlowControlOptions,
    ReceiveWindow,
    WindowUpdatePolicyName,
)
from agent.h2.frames import CLIENT_PREFACE, FrameTally, frame_type_name
from agent.h2.settings import (
    DEFAULT_INITIAL_WINDOW_SIZE,
    SETTING_SPECS,
    SettingSpec,
    canonical_name,
    check_value,
    from_h2,
    initial_window_size,
    parse_setting,
    parse_settings,
    to_h2,
)

if TYPE_CHECKING:
    from agent.h2.connection import h2_connection, initiate_server
    from agent.h2.fastpath import FrameReader, H2Internals, Outgoing, SplitTally

# name: the module it is imported from on first use (module doc).
_ON_FIRST_USE = {
    "h2_connection": "connection",
    "initiate_server": "connection",
    "FrameReader": "fastpath",
    "H2Internals": "fastpath",
    "Outgoing": "fastpath",
    "SplitTally": "fastpath",
}


def __getattr__(name: str) -> Any:
    module = _ON_FIRST_USE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


__all__ = [
    "CLIENT_PREFACE",
    "DEFAULT_INITIAL_WINDOW_SIZE",
    "DEFAULT_WINDOW_UPDATE_POLICY",
    "MAX_WINDOW",
    "SETTING_SPECS",
    "WINDOW_UPDATE_POLICIES",
    "FlowControlOptions",
    "FrameReader",
    "FrameTally",
    "H2Internals",
    "Outgoing",
    "ReceiveWindow",
    "SettingSpec",
    "SplitTally",
    "WindowUpdatePolicyName",
    "canonical_name",
    "check_value",
    "frame_type_name",
    "from_h2",
    "h2_connection",
    "initial_window_size",
    "initiate_server",
    "parse_setting",
    "parse_settings",
    "to_h2",
]
