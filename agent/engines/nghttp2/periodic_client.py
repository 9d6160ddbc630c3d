"""`h2iot-agent trial --engine nghttp2 --workload periodic`: the periodic workload as the
study's client would run it, one tool process per exchange on the agent's monotonic-clock
schedule (agent.workloads.periodic.schedule), each exchange recorded by the workload's own
record (agent.workloads.periodic.record).

- h2c / h2: `nghttp` per exchange (`connection = "new"`); its HAR gives the connect time (from
  its start, name resolution included) and request -> last byte. Bytes on the wire: not shown.
- h3: `gtlsclient` per exchange, verbose (its log says what the handshake did,
  agent.engines.nghttp2.gtls_log); `"resume"` keeps its session and transport-parameter files
  across the trial's exchanges, so each after the first resumes and sends its request as
  0-RTT early data. Connect time: the handshake's completion in its log, request -> last
  byte: the request stream's first frame sent to its fin received (ms steps); bytes: its UDP
  payloads sent and received.

Inside the measured window the agent only starts each process and waits for its exit (its
output goes to a file, agent.engines.nghttp2.process): what the tools showed is read after the
window, so the agent's reading of a verbose log per exchange is not on the meter's samples.
Per exchange the CPU is the process's own (wait4), listed in the record's `exchange_cpu_s`;
the record's CPU, RSS and window cover the processes from the first's start to the last's
exit. An exchange's `start_mono_ns` is its process's start and `response_end_mono_ns` its
exit (the tool ends on the last byte); the tool's own clock is not mapped onto the agent's, so
`connected_mono_ns` and `request_mono_ns` are null. The record's `phases` come from the same
instants (`phases_of`): connect ends at the first process's start plus the connect time it
showed, exchange at the last one's exit, close with the window (the tool closes before it
exits), so the controller places the exchanges and their idle tails on the meter's samples as
it does our client's. What the engine's client cannot do is
refused by its declaration (EngineSpec.client_refusals) before any of this runs.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from agent.client.connect import Target
from agent.client.options import RunPlan
from agent.client.record import ClientRecord
from agent.conditions import TrialWatch
from agent.engines.nghttp2.client import run_trials
from agent.engines.nghttp2.errors import NghttpOutputError
from agent.engines.nghttp2.gtls import GtlsOptions
from agent.engines.nghttp2.gtls_client import GtlsFlow
from agent.engines.nghttp2.gtls_log import parse_gtls_log
from agent.engines.nghttp2.har import parse_har
from agent.engines.nghttp2.options import NghttpOptions
from agent.engines.nghttp2.process import ChildOutcome, run_child
from agent.engines.nghttp2.record import ToolOptions, tool_fields
from agent.engines.nghttp2.tools import find_tool
from agent.marker import Marker
from agent.trial_header import TRIAL_CONTINUES_HEADER
from agent.workloads.bodies import blob_body
from agent.workloads.periodic import record as exchange_record
from agent.workloads.periodic.protocol import PATH_PREFIX
from agent.workloads.periodic.record import Exchange
from agent.workloads.periodic.schedule import Schedule, lateness_s
from agent.workloads.periodic.spec import PERIODIC

_NS = 1_000_000_000


@dataclass(frozen=True)
class Seen:
    """What one tool run showed of its exchange."""

    status: int | None  # None: no response
    body_bytes: int | None
    resumed: bool = False
    early_data_sent: bool = False
    early_data_refused: bool = False
    connect_s: float | None = None
    response_s: float | None = None
    wire_bytes: tuple[int, int] | None = None  # sent, received; None: not shown


class ExchangeTool(Protocol):
    """One process per exchange: its command line, and what its output (stdout and stderr
    together) and files show, read after the trial."""

    name: str
    options: ToolOptions

    def argv(self, trial_id: str, index: int, last: bool, workdir: Path) -> list[str]: ...
    def seen(self, index: int, output: str, workdir: Path) -> Seen: ...


@dataclass(frozen=True)
class PeriodicRequest:
    """The trial's params as the tools take them."""

    url: str
    schedule: Schedule
    post: bool
    request_bytes: int
    response_bytes: int
    resume: bool

    @classmethod
    def of(cls, run: RunPlan) -> PeriodicRequest:
        params = run.params
        size = int(params["response_bytes"])
        target = Target.parse(run.url)
        base = f"{target.scheme}://{target.host}:{target.port}{target.path.rstrip('/')}"
        return cls(
            url=f"{base}{PATH_PREFIX}{size}",
            schedule=Schedule(
                int(params["count"]), float(params["interval_s"]), float(params["jitter_s"])
            ),
            post=params["method"] == "POST",
            request_bytes=int(params["request_bytes"]),
            response_bytes=size,
            resume=params["connection"] == "resume",
        )

    def body_file(self, workdir: Path) -> str | None:
        """The POST's body, written once per trial outside the exchanges; None for a GET."""
        if not self.post:
            return None
        path = workdir / "request.body"
        if not path.exists():
            path.write_bytes(blob_body(self.request_bytes))
        return str(path)


class NghttpExchange:
    name = "nghttp"

    def __init__(self, tool: str, options: NghttpOptions, request: PeriodicRequest) -> None:
        self.tool = tool
        self.options: ToolOptions = options
        self._nghttp = options
        self.request = request

    def argv(self, trial_id: str, index: int, last: bool, workdir: Path) -> list[str]:
        # Our server keeps the trial open across connections until the last exchange's.
        headers = () if last else ((TRIAL_CONTINUES_HEADER, "1"),)
        return self._nghttp.argv(
            self.tool,
            self.request.url,
            trial_id,
            str(workdir / f"exchange-{index}.har"),
            headers=headers,
            data=self.request.body_file(workdir),
        )

    def seen(self, index: int, output: str, workdir: Path) -> Seen:
        har_path = workdir / f"exchange-{index}.har"
        try:
            har = parse_har(har_path.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            raise NghttpOutputError("nghttp wrote no HAR file") from None
        finally:
            har_path.unlink(missing_ok=True)
        if not har.entries:
            return Seen(None, None)
        entry = har.entries[0]
        return Seen(
            entry.status,
            entry.size_bytes,
            connect_s=None if har.connect_end_ms is None else har.connect_end_ms / 1e3,
            response_s=(entry.wait_ms + entry.receive_ms) / 1e3,
        )


class GtlsExchange:
    name = "gtlsclient"

    def __init__(self, tool: str, options: GtlsOptions, request: PeriodicRequest) -> None:
        self.tool = tool
        self.options: ToolOptions = GtlsFlow(options)
        self._gtls = options
        self.request = request
        target = Target.parse(request.url)
        self.host, self.port = target.host, target.port

    def argv(self, trial_id: str, index: int, last: bool, workdir: Path) -> list[str]:
        # gtlsclient sends no header of ours: the server's agent counts by trial control.
        download = workdir / f"download-{index}"
        download.mkdir(exist_ok=True)
        session = (
            (str(workdir / "session.pem"), str(workdir / "tp.pem")) if self.request.resume else None
        )
        return self._gtls.client_argv(
            self.tool,
            self.host,
            self.port,
            [self.request.url],
            str(download),
            verbose=True,
            session=session,
            data=self.request.body_file(workdir),
        )

    def seen(self, index: int, output: str, workdir: Path) -> Seen:
        log = parse_gtls_log(output)
        download = workdir / f"download-{index}"
        saved = download / str(self.request.response_bytes)
        try:
            body_bytes: int | None = saved.stat().st_size
            saved.unlink()
        except OSError:
            body_bytes = None
        shutil.rmtree(download, ignore_errors=True)
        return Seen(
            log.status,
            body_bytes,
            resumed=log.resumed,
            early_data_sent=log.early_data_sent,
            early_data_refused=log.early_data_rejected,
            connect_s=None if log.handshake_done_ms is None else log.handshake_done_ms / 1e3,
            response_s=log.response_s,
            wire_bytes=(log.bytes_sent, log.bytes_received),
        )


def _failure(
    tool: str,
    child: ChildOutcome,
    output: str,
    seen: Seen,
    *,
    expected_bytes: int,
    timeout_s: float,
) -> str | None:
    if child.timed_out:
        return f"timeout: exchange took longer than {timeout_s:g} s ({tool} killed)"
    if child.exit_status != 0:
        said = output.strip().splitlines()[-1:]
        return f"{tool} exited {child.exit_status}" + (f" ({said[0]})" if said else "")
    if seen.status is None:
        return f"{tool}: no response"
    if seen.status != 200:
        return f"{tool}: answered {seen.status}"
    if seen.body_bytes != expected_bytes:
        return f"{tool}: {seen.body_bytes} body bytes, expected {expected_bytes}"
    return None


def exchange_of(
    index: int, due_ns: int, child: ChildOutcome, seen: Seen, error: str | None
) -> Exchange:
    """The workload's record of one tool run. Pure."""
    early = seen.early_data_sent
    handshake = exchange_record.handshake_of(True, seen.resumed, early)
    status = seen.status if seen.status is not None else 0
    return Exchange(
        index=index,
        scheduled_mono_ns=due_ns,
        start_mono_ns=child.t_mono_start_ns,
        connected_mono_ns=None,
        request_mono_ns=None,
        response_end_mono_ns=child.t_mono_end_ns if error is None else None,
        lateness_s=lateness_s(due_ns, child.t_mono_start_ns),
        handshake=handshake,
        early_data_sent=early,
        early_data_accepted=exchange_record.early_accepted(
            early, not seen.early_data_refused, status
        ),
        connect_s=seen.connect_s,
        connect_cpu_s=None,
        response_s=seen.response_s,
        wire_bytes_sent=None if seen.wire_bytes is None else seen.wire_bytes[0],
        wire_bytes_received=None if seen.wire_bytes is None else seen.wire_bytes[1],
        ok=error is None,
        error=error,
    )


def phases_of(
    raised_ns: int, lowered_ns: int, end_ns: int, exchanges: Sequence[Exchange]
) -> dict[str, int] | None:
    """The record's `phases` (agent.client.record.PHASE_MARKS) from the marker's edges, the
    last process's exit (`end_ns`) and the exchanges (module doc); None where one failed, as
    our client leaves a failed trial's out. Pure."""
    if not exchanges or not all(e.ok for e in exchanges):
        return None
    first, last = exchanges[0], exchanges[-1]
    connect_ns = round((first.connect_s or 0.0) * _NS)
    exchange_done = last.response_end_mono_ns
    assert exchange_done is not None, "an ok exchange has its response's end"
    return {
        "marker_raised_mono_ns": raised_ns,
        "connect_done_mono_ns": min(first.start_mono_ns + connect_ns, exchange_done),
        "exchange_done_mono_ns": exchange_done,
        "close_done_mono_ns": end_ns,
        "marker_lowered_mono_ns": lowered_ns,
    }


def _output(workdir: Path, index: int) -> Path:
    """Where the exchange's process writes its stdout and stderr."""
    return workdir / f"exchange-{index}.out"


class PeriodicRunner:
    """A trial: the schedule's exchanges, a tool process each."""

    def __init__(self, run: RunPlan, tool: ExchangeTool, marker: Marker) -> None:
        self.run = run
        self.tool = tool
        self.marker = marker
        self.request = PeriodicRequest.of(run)

    def fetch(self, trial_id: str, repetition: int, workdir: Path) -> tuple[ClientRecord, int]:
        trial_dir = workdir / str(repetition)  # a trial resumes nothing of the one before
        trial_dir.mkdir()
        self.request.body_file(trial_dir)
        due = self.request.schedule.due_ns(trial_id)
        conditions = TrialWatch()
        raised_ns = self.marker.raise_line()
        start_ns = time.monotonic_ns()
        dues: list[int] = []
        children: list[ChildOutcome] = []
        for index, due_after_ns in enumerate(due):
            dues.append(start_ns + due_after_ns)
            time.sleep(max(0, dues[-1] - time.monotonic_ns()) / _NS)
            argv = self.tool.argv(trial_id, index, index == len(due) - 1, trial_dir)
            output = _output(trial_dir, index)
            children.append(run_child(argv, self.run.options.timeout_s, output))
        end_ns = time.monotonic_ns()
        lowered_ns = self.marker.lower_line()
        node = conditions.end()
        exchanges = [
            self._exchange(index, due_ns, child, trial_dir)
            for index, (due_ns, child) in enumerate(zip(dues, children, strict=True))
        ]
        record = self._record(
            trial_id,
            repetition,
            start_ns=start_ns,
            end_ns=end_ns,
            children=children,
            exchanges=exchanges,
        )
        return replace(
            record,
            conditions=node.to_dict(),
            phases=phases_of(raised_ns, lowered_ns, end_ns, exchanges),
        ), sum(e.ok for e in exchanges)

    def _exchange(self, index: int, due_ns: int, child: ChildOutcome, workdir: Path) -> Exchange:
        """What one exchange's process showed, read from its output and files (after the
        trial's window), as the workload records it."""
        path = _output(workdir, index)
        output = path.read_text(encoding="utf-8", errors="replace")
        path.unlink()
        seen = self.tool.seen(index, output, workdir)
        error = _failure(
            self.tool.name,
            child,
            output,
            seen,
            expected_bytes=self.request.response_bytes,
            timeout_s=self.run.options.timeout_s,
        )
        return exchange_of(index, due_ns, child, seen, error)

    def _record(
        self,
        trial_id: str,
        repetition: int,
        *,
        start_ns: int,
        end_ns: int,
        children: Sequence[ChildOutcome],
        exchanges: Sequence[Exchange],
    ) -> ClientRecord:
        failed = [e for e in exchanges if not e.ok]
        error = None
        if failed:
            error = (
                f"{len(failed)} of {len(exchanges)} periodic exchanges failed; the first, "
                f"#{failed[0].index}: {failed[0].error}"
            )
        user_s = sum(c.cpu_user_s for c in children)
        sys_s = sum(c.cpu_sys_s for c in children)
        wall_s = (end_ns - start_ns) / _NS
        protocol = self.run.options.protocol
        options = self.tool.options
        wall_start_ns = children[0].t_wall_start_ns - (children[0].t_mono_start_ns - start_ns)
        return ClientRecord(
            ok=error is None,
            error=error,
            trial_id=trial_id,
            repetition=repetition,
            **tool_fields(self.run.url, protocol, PERIODIC.kind, options),
            response_s=wall_s,
            ttfb_s=None,
            cpu_user_s=user_s,
            cpu_sys_s=sys_s,
            cpu_s=user_s + sys_s,
            cpu_pct=100.0 * (user_s + sys_s) / wall_s if wall_s > 0 else 0.0,
            rss_peak_bytes=max(c.rss_peak_bytes for c in children),
            rss_peak_is_fetch=True,
            sent=None,
            received=None,
            window_updates_sent=None,
            t_wall_start_ns=wall_start_ns,
            t_wall_end_ns=wall_start_ns + (end_ns - start_ns),
            t_mono_start_ns=start_ns,
            t_mono_end_ns=end_ns,
            probe_overhead_s=0.0,
            cpu_pin=self.run.options.cpu_pin,
            marker=self.marker.describe(),
            params=dict(self.run.params),
            metrics=exchange_record.metrics(exchanges, 0, exchange_record.Keepalive()),
            extra={
                "exchanges": [e.to_dict() for e in exchanges],
                "exchange_cpu_s": [c.cpu_user_s + c.cpu_sys_s for c in children],
                "tool": self.tool.name,
            },
        )


def run_nghttp_periodic(run: RunPlan, options: NghttpOptions) -> int:
    """Every trial of the run, nghttp per exchange; exit status 1 if any failed."""
    tool = NghttpExchange(find_tool("nghttp"), options, PeriodicRequest.of(run))
    return run_trials(run, lambda marker: PeriodicRunner(run, tool, marker))


def run_gtls_periodic(run: RunPlan, options: GtlsOptions) -> int:
    """Every trial of the run, gtlsclient per exchange; exit status 1 if any failed."""
    tool = GtlsExchange(find_tool("gtlsclient"), options, PeriodicRequest.of(run))
    return run_trials(run, lambda marker: PeriodicRunner(run, tool, marker))
