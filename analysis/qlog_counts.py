"""A trial's event traces (`events/<trial_id>.<role>.sqlog`, data/README.md) read back: counts
by event class for the fit of energy per event (analysis.event_costs), and event times for the
marks on the phase figure (analysis.phases).

Sans-IO core: `parse(data, name)` takes a file's bytes (gzip or not) and returns its events or
raises `RunFormatError` naming the file and the record at fault; `count(trace)` and
`marks(trace)` are pure. Thin reader: `trace_counts(run_dir, trial_ids)`, every role's trace
the run has (the client's always, the server's where its engine writes one).

It reads what the run's engines write: HTTP/2 frames under our `h2iot_http2:` namespace (our
agents, and nghttp's frame log converted), and QUIC's `transport:` events (qh3, ngtcp2's own
qlog). Per direction (sent, received):

| class | HTTP/2 | QUIC |
| --- | --- | --- |
| `data_frames` | DATA frames | - |
| `packets` | - | packets (`packet_sent` / `packet_received`) |
| `datagrams` | - | UDP datagrams (`datagrams_sent` / `_received`, qh3's) |
| `ack_frames` | - | ACK frames in those packets |
| `flow_control_frames` | WINDOW_UPDATE | MAX_DATA and MAX_STREAM_DATA frames |
| `handshake_packets` | - | Initial and Handshake packets |

A count the trace cannot give is None (an empty cell), never zero: a class the protocol does
not have, frames in a trace whose packets list none (qh3 logs each packet's header, not its
frames), packets received in a trace that logs fewer packets than datagrams (qh3 logs its
first few only), and every count of a trace cut at its size limit (`h2iot:trace_cut`: it holds
a part of the trial's events).
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from agent.event_trace import trace_name
from agent.h2.trace import NAMESPACE as H2_NAMESPACE
from agent.qlog import CUT_EVENT
from analysis.errors import RunFormatError

__all__ = [
    "CLASSES",
    "DIRECTIONS",
    "EventCounts",
    "QlogTrace",
    "count",
    "count_columns",
    "marks",
    "parse",
    "trace_counts",
]

ROLES = ("client", "server")
DIRECTIONS = ("sent", "received")
CLASSES = (
    "data_frames",
    "packets",
    "datagrams",
    "ack_frames",
    "flow_control_frames",
    "handshake_packets",
)
_RECORD_SEPARATOR = b"\x1e"
_GZIP_MAGIC = b"\x1f\x8b"
_QUIC_FLOW_CONTROL = frozenset({"max_data", "max_stream_data"})
_HANDSHAKE_PACKETS = frozenset({"initial", "handshake"})
# A reference time below this (ms) is not the Unix epoch's: ngtcp2 writes 0.
_EPOCH_MS_AFTER = 1e12


@dataclass(frozen=True)
class QlogTrace:
    """One trace file's events, as written."""

    vantage_point: str  # "client" or "server"
    # The wall clock (Unix ms) at the events' time 0, where the trace gives it; None where its
    # time 0 is its own first event (ngtcp2's).
    reference_time_ms: float | None
    events: tuple[Mapping[str, Any], ...]

    @property
    def cut(self) -> bool:
        return any(event["name"] == CUT_EVENT for event in self.events)


def _fail(name: str, where: str, why: str) -> RunFormatError:
    return RunFormatError(f"{name}: {where}: {why}")


def _decompressed(data: bytes, name: str) -> bytes:
    if not data.startswith(_GZIP_MAGIC):
        return data
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise _fail(name, "gzip", f"not a whole gzip stream ({exc})") from None


def parse(data: bytes, name: str) -> QlogTrace:
    """A qlog JSON-SEQ file (RFC 7464: each record after 0x1E), gzip or not: its header
    record (a `trace` with its `vantage_point`), then events each with a numeric `time` and a
    `name`. `name`: the file, for errors."""
    text = _decompressed(data, name)
    if not text.startswith(_RECORD_SEPARATOR):
        raise _fail(name, "byte 0", "not JSON-SEQ (no record separator 0x1E first)")
    chunks = text.split(_RECORD_SEPARATOR)[1:]
    try:
        # One array, one decoder call: a trace holds tens of thousands of records.
        records: list[Any] = json.loads(b"[" + b",".join(chunks) + b"]")
    except (ValueError, UnicodeDecodeError):
        records = []
    if len(records) != len(chunks):  # not JSON, or a record holding several values
        records = [_record(chunk, index, name) for index, chunk in enumerate(chunks)]
    for index, record in enumerate(records):
        if not isinstance(record, dict):
            raise _fail(name, f"record {index}", "not a JSON object")
    if not records:
        raise _fail(name, "record 0", "missing (no header record)")
    header, events = records[0], records[1:]
    trace = header.get("trace")
    vantage = trace.get("vantage_point") if isinstance(trace, dict) else None
    role = vantage.get("type") if isinstance(vantage, dict) else None
    if role not in ROLES:
        raise _fail(
            name, "record 0, key trace.vantage_point.type", f"{role!r} is not one of {ROLES}"
        )
    for index, event in enumerate(events, start=1):
        if not isinstance(event.get("name"), str):
            raise _fail(name, f"record {index}, key name", "missing or not a string")
        time = event.get("time")
        if not isinstance(time, int | float) or isinstance(time, bool):
            raise _fail(name, f"record {index}, key time", f"{time!r} is not a number")
    common = trace.get("common_fields") if isinstance(trace, dict) else None
    reference = common.get("reference_time") if isinstance(common, dict) else None
    absolute = (
        float(reference)
        if isinstance(reference, int | float) and reference > _EPOCH_MS_AFTER
        else None
    )
    return QlogTrace(str(role), absolute, tuple(events))


def _record(chunk: bytes, index: int, name: str) -> Any:
    """One record, for the error naming the first that is not JSON."""
    try:
        return json.loads(chunk)
    except (ValueError, UnicodeDecodeError) as exc:
        raise _fail(name, f"record {index}", f"not JSON ({exc})") from None


@dataclass(frozen=True)
class EventCounts:
    """One trace's counts by class and direction (module doc); None: the trace cannot tell."""

    data_frames_sent: int | None = None
    data_frames_received: int | None = None
    packets_sent: int | None = None
    packets_received: int | None = None
    datagrams_sent: int | None = None
    datagrams_received: int | None = None
    ack_frames_sent: int | None = None
    ack_frames_received: int | None = None
    flow_control_frames_sent: int | None = None
    flow_control_frames_received: int | None = None
    handshake_packets_sent: int | None = None
    handshake_packets_received: int | None = None


FIELDS = tuple(f.name for f in fields(EventCounts))


def _direction(event_name: str) -> str | None:
    """sent or received, from a frame's, packet's or datagram's event name (`packet_sent`)."""
    if event_name.endswith("_sent"):
        return "sent"
    return "received" if event_name.endswith("_received") else None


def _packet_frames(event: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    data = event.get("data")
    frames = data.get("frames") if isinstance(data, dict) else None
    return [f for f in frames if isinstance(f, dict)] if isinstance(frames, list) else []


def _packet_type(event: Mapping[str, Any]) -> object:
    data = event.get("data")
    header = data.get("header") if isinstance(data, dict) else None
    return header.get("packet_type") if isinstance(header, dict) else None


def _tally(events: Iterable[Mapping[str, Any]]) -> tuple[Counter[str], bool, bool, bool, bool]:
    """(counts by field, whether HTTP/2 frames, QUIC packets, packets' frames and datagram
    events were seen)."""
    tally: Counter[str] = Counter()
    h2 = quic = framed = datagrams = False
    for event in events:
        category, _colon, what = str(event["name"]).partition(":")
        direction = _direction(what)
        if direction is None:
            continue
        data = event.get("data")
        data = data if isinstance(data, dict) else {}
        if category == H2_NAMESPACE and what.startswith("frame_"):
            h2 = True
            kind = data.get("frame_type")
            if kind == "data":
                tally[f"data_frames_{direction}"] += 1
            elif kind == "window_update":
                tally[f"flow_control_frames_{direction}"] += 1
        elif category == "transport" and what.startswith("packet_"):
            quic = True
            tally[f"packets_{direction}"] += 1
            if _packet_type(event) in _HANDSHAKE_PACKETS:
                tally[f"handshake_packets_{direction}"] += 1
            frames = _packet_frames(event)
            framed = framed or bool(frames)
            for frame in frames:
                kind = frame.get("frame_type")
                if kind == "ack":
                    tally[f"ack_frames_{direction}"] += 1
                elif kind in _QUIC_FLOW_CONTROL:
                    tally[f"flow_control_frames_{direction}"] += 1
        elif category == "transport" and what.startswith("datagram"):
            quic = datagrams = True
            many = data.get("count", 1)
            tally[f"datagrams_{direction}"] += many if isinstance(many, int) else 1
    return tally, h2, quic, framed, datagrams


def count(trace: QlogTrace) -> EventCounts:
    """The trace's counts by class (module doc: which are None and why)."""
    if trace.cut:
        return EventCounts()
    tally, h2, quic, framed, logged = _tally(trace.events)
    every_packet = _every_packet(tally)
    known: dict[str, int | None] = {}
    for direction in DIRECTIONS:
        if h2:
            known[f"data_frames_{direction}"] = tally[f"data_frames_{direction}"]
            known[f"flow_control_frames_{direction}"] = tally[f"flow_control_frames_{direction}"]
        if quic:
            known[f"datagrams_{direction}"] = tally[f"datagrams_{direction}"] if logged else None
            packets = tally[f"packets_{direction}"]
            known[f"packets_{direction}"] = packets if every_packet[direction] else None
            known[f"handshake_packets_{direction}"] = tally[f"handshake_packets_{direction}"]
            if framed:
                known[f"ack_frames_{direction}"] = tally[f"ack_frames_{direction}"]
                known[f"flow_control_frames_{direction}"] = tally[
                    f"flow_control_frames_{direction}"
                ]
    return EventCounts(**known)


def _every_packet(tally: Counter[str]) -> dict[str, bool]:
    """Per direction, whether the trace logs every packet: a packet per datagram at least
    (fewer means the stack logs only some, as qh3 does its first few received)."""
    return {d: tally[f"packets_{d}"] >= tally[f"datagrams_{d}"] for d in DIRECTIONS}


def count_columns(role: str) -> tuple[str, ...]:
    """The columns a role's counts take in a run's ok rows: `<role>_traced_<field>`."""
    return tuple(f"{role}_traced_{name}" for name in FIELDS)


def trace_counts(run_dir: Path, trial_ids: Sequence[str]) -> dict[str, list[float]]:
    """Per column (`count_columns` of each role), per trial in order: its count, NaN where
    the trial has no trace of that role or its trace cannot tell (module doc). Empty when the
    run has no events folder."""
    folder = run_dir / "events"
    if not folder.is_dir():
        return {}
    columns: dict[str, list[float]] = {}
    for role in ROLES:
        per_trial = []
        for trial_id in trial_ids:
            path = folder / trace_name(trial_id, role)
            found = count(parse(path.read_bytes(), str(path))) if path.exists() else None
            per_trial.append(found)
        if all(found is None for found in per_trial):
            continue
        for column, field in zip(count_columns(role), FIELDS, strict=True):
            columns[column] = [
                float("nan") if c is None or getattr(c, field) is None else float(getattr(c, field))
                for c in per_trial
            ]
    return columns


# What the phase figure marks, per class: the label its legend shows.
MARK_HANDSHAKE = "Initial/Handshake packet"
MARK_ACK = "ACK frame"


def marks(trace: QlogTrace) -> dict[str, list[float]]:
    """The trace's events to mark, per class, in seconds since its time 0: HTTP/2 DATA frames
    and WINDOW_UPDATEs, or QUIC packets (datagrams where the trace logs fewer packets than
    them), ACK frames, MAX_DATA/MAX_STREAM_DATA frames and Initial/Handshake packets, each
    direction apart. Classes with no event are left out."""
    every_packet = _every_packet(_tally(trace.events)[0])
    found: dict[str, list[float]] = {}

    def add(label: str, time_ms: float) -> None:
        found.setdefault(label, []).append(time_ms / 1e3)

    for event in trace.events:
        category, _colon, what = str(event["name"]).partition(":")
        direction = _direction(what)
        if direction is None:
            continue
        time_ms = float(event["time"])
        data = event.get("data")
        data = data if isinstance(data, dict) else {}
        if category == H2_NAMESPACE and what.startswith("frame_"):
            kind = data.get("frame_type")
            if kind == "data":
                add(f"DATA frame {direction}", time_ms)
            elif kind == "window_update":
                add(f"WINDOW_UPDATE {direction}", time_ms)
        elif category == "transport" and what.startswith("packet_"):
            if _packet_type(event) in _HANDSHAKE_PACKETS:
                add(MARK_HANDSHAKE, time_ms)
            elif every_packet[direction]:
                add(f"packet {direction}", time_ms)
            kinds = {frame.get("frame_type") for frame in _packet_frames(event)}
            if "ack" in kinds:
                add(f"{MARK_ACK} {direction}", time_ms)
            if kinds & _QUIC_FLOW_CONTROL:
                add(f"MAX_(STREAM_)DATA {direction}", time_ms)
        elif (
            category == "transport" and what.startswith("datagram") and not every_packet[direction]
        ):
            add(f"datagram {direction}", time_ms)
    return found


def window_marks(trace: QlogTrace, window_start_wall_ns: float) -> dict[str, list[float]]:
    """`marks(trace)` in seconds since the trial window's start (the client's wall clock at it,
    trials.csv's `t_wall_start_ns`), through the trace's reference time; a trace without one
    (ngtcp2's) starts with the connection, which starts the window."""
    # In ms: the two epochs' difference keeps a microsecond's precision there.
    offset_s = (
        0.0
        if trace.reference_time_ms is None
        else (trace.reference_time_ms - window_start_wall_ns / 1e6) / 1e3
    )
    return {name: [t + offset_s for t in times] for name, times in marks(trace).items()}


def client_marks(
    run_dir: Path, trial_id: str, window_start_wall_ns: float
) -> dict[str, list[float]]:
    """The client's trace of a trial as `window_marks`; empty where the run has none."""
    path = run_dir / "events" / trace_name(trial_id, "client")
    if not path.exists():
        return {}
    return window_marks(parse(path.read_bytes(), str(path)), window_start_wall_ns)
