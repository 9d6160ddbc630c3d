"""Per-trial server accounting, sans-IO: the caller supplies probe samples and frame counts.

A client tags every request of one page fetch with the same trial id (header `h2iot-trial-id`).
A trial opens at its first request and its serve time runs to the last byte of its last response
handed to the kernel. It closes, and its record is emitted, when no connection carries it any
more (the client closes the connection, or the same connection starts another trial), unless
its latest request said it continues (agent.trial_header.TRIAL_CONTINUES_HEADER: a new
connection per exchange): then it lingers until a connection brings its last request, the
client ends it by a control message (`end`: agent.server.control), or another trial begins or
the server stops (a client that gave up: its record is written then, as it stands).

Besides requests and frames, a trial counts what its connections' handshakes and early data
were (`Note`): resumed handshakes, requests taken in 0-RTT early data, and those refused there.

CPU time is the process's own (getrusage) over the trial's window, so it is the trial's alone
when trials do not overlap; overlapping trials are named in each other's records.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from agent.probe import ProbeSample, ProbeSpan
from agent.traffic import FrameCounts


class Note(enum.Enum):
    """What a trial's connection tells its ledger besides requests and frames."""

    CONTINUES = "continues"  # its latest request: the trial goes on after it
    RESUMED = "resumed"  # a connection carrying it resumed a TLS session
    EARLY_ACCEPTED = "early_accepted"  # a request of it came in 0-RTT and was answered
    EARLY_REFUSED = "early_refused"  # a request of it came in 0-RTT and was refused (425)


@dataclass(frozen=True)
class TrialRecord:
    trial_id: str
    workload: str
    ok: bool
    requests: int
    responses_completed: int
    streams_reset: int
    serve_s: float
    cpu_user_s: float
    cpu_sys_s: float
    cpu_s: float
    cpu_pct: float
    rss_peak_bytes: int
    rss_peak_is_trial: bool
    sent: FrameCounts
    received: FrameCounts
    t_wall_start_ns: int
    t_wall_end_ns: int
    t_mono_start_ns: int
    t_mono_end_ns: int
    overlapping_trials: tuple[str, ...]
    # Highest CPU % over the trial's 100 ms intervals (agent.cpu_peak); None where unmeasured.
    cpu_peak_pct: float | None = None
    # HTTP/3: the QUIC connection's counts over the trial (agent.server.h3_connection); None
    # over HTTP/2.
    transport: Mapping[str, object] | None = None
    # What the server announced on the trial's connection and received from the client, by
    # the protocol's own names (agent.protocols.in_force); None where not read (hypercorn).
    settings_announced: Mapping[str, int] | None = None
    settings_received: Mapping[str, int] | None = None
    # Connections that resumed a TLS session for the trial; its requests that arrived in 0-RTT
    # early data and were answered, and those refused there (425 Too Early).
    handshakes_resumed: int = 0
    early_data_accepted: int = 0
    early_data_refused: int = 0

    @classmethod
    def over(
        cls,
        span: ProbeSpan,
        *,
        trial_id: str,
        workload: str,
        ok: bool,
        requests: int,
        responses_completed: int,
        streams_reset: int,
        rss_peak_is_trial: bool,
        sent: FrameCounts,
        received: FrameCounts,
        overlapping_trials: tuple[str, ...] = (),
        cpu_peak_pct: float | None = None,
        notes: Mapping[Note, int] | None = None,
    ) -> TrialRecord:
        """A trial's record whose serve time, CPU, peak RSS and clocks are `span`'s: one place
        that turns what the probes measured into a record, for every engine the agent serves
        with itself."""
        return cls(
            trial_id=trial_id,
            workload=workload,
            ok=ok,
            requests=requests,
            responses_completed=responses_completed,
            streams_reset=streams_reset,
            serve_s=span.duration_s,
            cpu_user_s=span.cpu_user_s,
            cpu_sys_s=span.cpu_sys_s,
            cpu_s=span.cpu_s,
            cpu_pct=span.cpu_pct,
            rss_peak_bytes=span.rss_peak_bytes,
            rss_peak_is_trial=rss_peak_is_trial,
            sent=sent,
            received=received,
            t_wall_start_ns=span.start.t_wall_ns,
            t_wall_end_ns=span.end.t_wall_ns,
            t_mono_start_ns=span.start.t_mono_ns,
            t_mono_end_ns=span.end.t_mono_ns,
            overlapping_trials=overlapping_trials,
            cpu_peak_pct=cpu_peak_pct,
            handshakes_resumed=(notes or {}).get(Note.RESUMED, 0),
            early_data_accepted=(notes or {}).get(Note.EARLY_ACCEPTED, 0),
            early_data_refused=(notes or {}).get(Note.EARLY_REFUSED, 0),
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "trial_id": self.trial_id,
            "workload": self.workload,
            "ok": self.ok,
            "requests": self.requests,
            "responses_completed": self.responses_completed,
            "streams_reset": self.streams_reset,
            "serve_s": self.serve_s,
            "cpu_user_s": self.cpu_user_s,
            "cpu_sys_s": self.cpu_sys_s,
            "cpu_s": self.cpu_s,
            "cpu_pct": self.cpu_pct,
            "rss_peak_bytes": self.rss_peak_bytes,
            "rss_peak_is_trial": self.rss_peak_is_trial,
            "sent": self.sent.to_dict(),
            "received": self.received.to_dict(),
            "t_wall_start_ns": self.t_wall_start_ns,
            "t_wall_end_ns": self.t_wall_end_ns,
            "t_mono_start_ns": self.t_mono_start_ns,
            "t_mono_end_ns": self.t_mono_end_ns,
            "overlapping_trials": list(self.overlapping_trials),
            "cpu_peak_pct": self.cpu_peak_pct,
            "handshakes_resumed": self.handshakes_resumed,
            "early_data_accepted": self.early_data_accepted,
            "early_data_refused": self.early_data_refused,
            **({} if self.transport is None else {"transport": dict(self.transport)}),
            **{
                name: None if value is None else dict(value)
                for name, value in (
                    ("settings_announced", self.settings_announced),
                    ("settings_received", self.settings_received),
                )
            },
        }


def _add(total: dict[str, int], part: dict[str, int]) -> None:
    for name, count in part.items():
        total[name] = total.get(name, 0) + count


@dataclass
class _OpenTrial:
    trial_id: str
    start: ProbeSample
    rss_reset: bool
    last_byte: ProbeSample | None = None
    connections: set[int] = field(default_factory=set)
    requests: int = 0
    completed: int = 0
    reset: int = 0
    overlapping: set[str] = field(default_factory=set)
    sent_frames: dict[str, int] = field(default_factory=dict)
    sent_frame_bytes: dict[str, int] = field(default_factory=dict)
    sent_bytes: int = 0
    received_frames: dict[str, int] = field(default_factory=dict)
    received_frame_bytes: dict[str, int] = field(default_factory=dict)
    received_bytes: int = 0
    continues: bool = False
    notes: dict[Note, int] = field(default_factory=dict)


class TrialLedger:
    def __init__(self, workload: str) -> None:
        self.workload = workload
        self._open: dict[str, _OpenTrial] = {}

    @property
    def open_trials(self) -> tuple[str, ...]:
        return tuple(self._open)

    def is_open(self, trial_id: str) -> bool:
        return trial_id in self._open

    def lingering(self) -> tuple[str, ...]:
        """The trials no connection carries, kept open because their latest request said
        they continue."""
        return tuple(t.trial_id for t in self._open.values() if not t.connections)

    def close_lingering(self, rss_peak_bytes: int) -> list[TrialRecord]:
        """The records of the lingering trials, which close now (another trial begins)."""
        return [
            self._record(self._open.pop(trial_id), rss_peak_bytes) for trial_id in self.lingering()
        ]

    def open(self, trial_id: str, now: ProbeSample, rss_reset: bool = False) -> None:
        """The first tagged request of a trial not open yet arrived: its span starts `now` (the
        only request whose probe sample the record uses); `request` counts it. `rss_reset`: the
        caller reset the peak-RSS mark for it."""
        trial = _OpenTrial(trial_id, now, rss_reset)
        for other in self._open.values():
            other.overlapping.add(trial_id)
            trial.overlapping.add(other.trial_id)
        self._open[trial_id] = trial

    def request(self, trial_id: str, connection_id: int) -> None:
        """A tagged request of the open trial arrived on the connection."""
        trial = self._open[trial_id]
        trial.connections.add(connection_id)
        trial.requests += 1
        trial.continues = False

    def note(self, trial_id: str, note: Note) -> None:
        """What the trial's connection saw (`Note`); CONTINUES is its latest request's."""
        trial = self._open.get(trial_id)
        if trial is None:
            return
        if note is Note.CONTINUES:
            trial.continues = True
        else:
            trial.notes[note] = trial.notes.get(note, 0) + 1

    def end(self, trial_id: str, rss_peak_bytes: int) -> TrialRecord | None:
        """The client said the trial is over: it continues no more. Its record when no
        connection carries it (else its last one's `detach` returns it); None for a trial not
        open (one that never sent a request, or closed already)."""
        trial = self._open.get(trial_id)
        if trial is None:
            return None
        trial.continues = False
        if trial.connections:
            return None
        del self._open[trial_id]
        return self._record(trial, rss_peak_bytes)

    def response_done(self, trial_id: str, now: ProbeSample) -> None:
        """The last byte of one of the trial's responses was handed to the kernel."""
        trial = self._open.get(trial_id)
        if trial is not None:
            trial.completed += 1
            trial.last_byte = now

    def stream_reset(self, trial_id: str) -> None:
        trial = self._open.get(trial_id)
        if trial is not None:
            trial.reset += 1

    def detach(
        self,
        trial_id: str,
        connection_id: int,
        sent: FrameCounts,
        received: FrameCounts,
        rss_peak_bytes: int,
    ) -> TrialRecord | None:
        """The connection stopped carrying the trial; `sent`/`received` are its frames while it
        did. Returns the trial's record when this was its last connection and its latest
        request did not say it continues (else it lingers: `lingering`)."""
        trial = self._open.get(trial_id)
        if trial is None:
            return None
        trial.connections.discard(connection_id)
        _add(trial.sent_frames, sent.frames)
        _add(trial.sent_frame_bytes, sent.frame_bytes)
        trial.sent_bytes += sent.bytes_total
        _add(trial.received_frames, received.frames)
        _add(trial.received_frame_bytes, received.frame_bytes)
        trial.received_bytes += received.bytes_total
        if trial.connections or trial.continues:
            return None
        del self._open[trial_id]
        return self._record(trial, rss_peak_bytes)

    def _record(self, trial: _OpenTrial, rss_peak_bytes: int) -> TrialRecord:
        end = trial.last_byte or trial.start
        span = ProbeSpan(trial.start, end, rss_peak_bytes, trial.rss_reset)
        return TrialRecord.over(
            span,
            trial_id=trial.trial_id,
            workload=self.workload,
            ok=trial.reset == 0 and trial.completed == trial.requests,
            requests=trial.requests,
            responses_completed=trial.completed,
            streams_reset=trial.reset,
            rss_peak_is_trial=trial.rss_reset and not trial.overlapping,
            sent=FrameCounts(trial.sent_frames, trial.sent_frame_bytes, trial.sent_bytes),
            received=FrameCounts(
                trial.received_frames, trial.received_frame_bytes, trial.received_bytes
            ),
            overlapping_trials=tuple(sorted(trial.overlapping)),
            notes=trial.notes,
        )
