"""Settings in force, not only asked: what an endpoint announced to its peer and received from
it (`SettingsExchange`), and where the values in force differ from the trial's point
(`mismatches`). Pure.

Both maps are keyed by the protocol's own names: HTTP/2's `SETTINGS_INITIAL_WINDOW_SIZE`, ...;
over HTTP/3 QUIC's transport parameters (`initial_max_stream_data_bidi_local`, ...) beside
HTTP/3's SETTINGS (`SETTINGS_QPACK_MAX_TABLE_CAPACITY`, ...). A name absent from a map was
not observed (an engine that announces it from its argv alone, a peer that left it out): it is
never compared. Which of the protocol's names carries a study setting, on each side, is the
protocol's `settings_map` module's `IN_FORCE_KEYS` (agent.h2.settings for HTTP/2).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass

from agent.protocols import protocol_spec

# The sides of a trial, as a client's record sees them: the client's own announcement, and
# the server's (what the client received).
SIDES = ("client", "server")


@dataclass(frozen=True)
class SettingsExchange:
    """One endpoint's view: what it announced, and what it received (None: not observed)."""

    announced: Mapping[str, int]
    received: Mapping[str, int] | None


@dataclass(frozen=True)
class SettingMismatch:
    setting: str  # the study's name (agent.h2.settings), as the point asks it
    key: str  # the protocol's name of what carries it
    side: str  # whose announcement: "client" or "server"
    asked: int
    in_force: int

    def describe(self) -> str:
        where = f"{self.side} {self.key}"
        return f"{self.setting} {self.asked} asked, {self.in_force} in force ({where})"


def in_force_keys(protocol: str) -> Mapping[str, tuple[str, str]]:
    """The study's setting -> the protocol's names carrying it in the client's and the server's
    announcements."""
    module = protocol_spec(protocol).settings_map or "agent.h2.settings"
    keys: Mapping[str, tuple[str, str]] = importlib.import_module(module).IN_FORCE_KEYS
    return keys


def in_force(protocol: str, setting: str, side: str, exchange: SettingsExchange) -> int | None:
    """The value `side` announced for `setting`, as the client's `exchange` saw it; None where
    it was not observed or the protocol has no counterpart."""
    keys = in_force_keys(protocol).get(setting)
    values = exchange.announced if side == "client" else exchange.received
    if keys is None or values is None:
        return None
    return values.get(keys[SIDES.index(side)])


def mismatches(
    protocol: str, asked: Mapping[str, int], exchange: SettingsExchange
) -> tuple[SettingMismatch, ...]:
    """Each setting the point asked whose value in force, on either side, differs from it:
    nghttp2's 2^N - 1 windows, an engine's own defaults, a stack that overrode the value."""
    found = []
    keys = in_force_keys(protocol)
    for setting, value in asked.items():
        for side in SIDES:
            held = in_force(protocol, setting, side, exchange)
            if held is not None and held != value:
                key = keys[setting][SIDES.index(side)]
                found.append(SettingMismatch(setting, key, side, value, held))
    return tuple(found)
