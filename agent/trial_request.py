"""What a controller asks of a client agent for one trial, declared once (`TrialRequest`), in
the forms it crosses the process boundary in: the `h2iot-agent trial` command line a fresh
agent is started with (`argv`) and the JSON line a warm agent reads (`json_line`). The agent
turns either back into the same request (`from_args`, `from_json`), so a trial option is added
here and where it is used, nothing in between.

Vocabulary only, as agent.workloads.spec is: light, no I/O; the controller builds one per trial
from its trial point.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import PurePath
from typing import Any

from agent.errors import UsageError
from agent.workloads import DEFAULT_KIND
from agent.workloads.spec import ParamValue

DEFAULT_TIMEOUT_S = 120.0

# field -> its option on `h2iot-agent trial`, for the fields written as `--option VALUE` (the
# URL is positional; settings and params repeat as NAME=VALUE).
_OPTIONS: Mapping[str, str] = {
    "workload": "--workload",
    "protocol": "--protocol",
    "engine": "--engine",
    "timeout_s": "--timeout",
    "connection_window": "--connection-window",
    "window_update_policy": "--window-update",
    "trial_id": "--trial-id",
    "manifest": "--manifest",
    "marker": "--marker",
    "unrepresentable_window": "--unrepresentable-window",
    "trial_control": "--trial-control",
    "start_at_s": "--start-at",
    "peer_clock_offset_ns": "--peer-clock-offset-ns",
    "peer_clock_uncertainty_ns": "--peer-clock-uncertainty-ns",
    "ca_file": "--ca-file",
    "datagram_bytes": "--datagram-size",
    "ack_eliciting_threshold": "--ack-eliciting-threshold",
    "max_ack_delay_ms": "--max-ack-delay-ms",
    "event_loop": "--event-loop",
    "cpu": "--cpu",
    "events_dir": "--events-dir",
    "events_max_bytes": "--events-max-bytes",
}
_PAIRS: Mapping[str, str] = {"settings": "--setting", "params": "--param"}
# argparse's names for the fields whose option is named otherwise.
_DESTS: Mapping[str, str] = {
    "timeout_s": "timeout",
    "window_update_policy": "window_update",
    "start_at_s": "start_at",
    "datagram_bytes": "datagram_size",
    "settings": "setting",
    "params": "param",
}


@dataclass(frozen=True)
class TrialRequest:
    """One trial (or, from a person's command line, `repeat` of them). None: the agent's
    default for that option."""

    url: str
    workload: str = DEFAULT_KIND
    protocol: str | None = None  # agent.protocols; None: the URL's scheme says which HTTP/2
    engine: str | None = None  # agent.engines; None: the agent's default
    params: tuple[tuple[str, ParamValue], ...] = ()  # the workload's client params
    settings: tuple[tuple[str, int], ...] = ()  # the SETTINGS the client announces
    connection_window: int | None = None
    window_update_policy: str | None = None
    trial_id: str | None = None
    manifest: str | None = None  # page: the site's manifest, a path on the node
    marker: str | None = None  # none | gpio:CHIP:LINE | fifo:PATH
    timeout_s: float = DEFAULT_TIMEOUT_S
    unrepresentable_window: str | None = None
    trial_control: str | None = None  # HOST:PORT of the server agent that counts by messages
    start_at_s: float | None = None  # the instant on the node's wall clock (Unix seconds)
    peer_clock_offset_ns: int | None = None  # the server's wall clock minus the node's
    peer_clock_uncertainty_ns: int | None = None
    ca_file: str | None = None  # TLS: the authority, a path on the node
    datagram_bytes: int | None = None  # QUIC: the largest UDP payload
    ack_eliciting_threshold: int | None = None  # QUIC: packets the client takes per ACK
    max_ack_delay_ms: int | None = None  # QUIC: the longest the client holds an ACK
    event_loop: str | None = None
    cpu: int | None = None  # the core the agent pins itself to
    events_dir: str | None = None  # each trial's qlog goes here, a folder on the node; None: none
    events_max_bytes: int | None = None  # a trace longer is cut; None: agent.qlog's default

    def argv(self) -> list[str]:
        """The `h2iot-agent trial` words for it, one JSON record per line."""
        words = ["trial", self.url, "--json"]
        for name, option in _OPTIONS.items():
            value = getattr(self, name)
            if value is not None:
                words += [option, _word(value)]
        for name, option in _PAIRS.items():
            for key, value in getattr(self, name):
                words += [option, f"{key}={_word(value)}"]
        return words

    def json_line(self) -> bytes:
        """The line a warm agent reads: `{"request": {...}}`."""
        return json.dumps({"request": asdict(self)}, separators=(",", ":")).encode() + b"\n"

    @classmethod
    def from_json(cls, document: Any) -> TrialRequest:
        """The request a JSON document holds; UsageError naming the field at fault."""
        if not isinstance(document, dict):
            raise UsageError("trial request: expected a JSON object")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(document) - known)
        if unknown:
            raise UsageError(f"trial request: unknown field {unknown[0]!r}")
        if not isinstance(document.get("url"), str):
            raise UsageError("trial request: url: expected a string")
        values: dict[str, Any] = {}
        for name, value in document.items():
            if name in _PAIRS:
                values[name] = _pairs(name, value)
            elif value is not None and not isinstance(value, str | int | float):
                raise UsageError(f"trial request: {name}: expected a string or a number")
            else:
                values[name] = value
        return cls(**values)

    @classmethod
    def from_args(cls, args: argparse.Namespace, settings: Mapping[str, int]) -> TrialRequest:
        """The request `h2iot-agent trial` was given (`settings` already parsed and checked:
        `fetch` folds its --initial-window-size into them)."""
        values: dict[str, Any] = {"url": args.url, "settings": tuple(settings.items())}
        values["params"] = tuple(_split(word) for word in args.param)
        for name in _OPTIONS:
            value = getattr(args, _DESTS.get(name, name))
            values[name] = str(value) if isinstance(value, PurePath) else value
        return cls(**values)


def _word(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _split(word: str) -> tuple[str, ParamValue]:
    name, _, value = word.partition("=")
    return name, value


def _pairs(name: str, value: Any) -> tuple[tuple[str, Any], ...]:
    if not isinstance(value, list) or not all(
        isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str) for pair in value
    ):
        raise UsageError(f"trial request: {name}: expected [[NAME, VALUE], ...]")
    return tuple((key, item) for key, item in value)
