"""`h2iot-agent serve --engine nghttp2`: nghttpd (or over HTTP/3 ngtcp2's gtlsserver) as the
agent's child, and its trial log.

The agent starts `nghttpd` (cleartext h2c with `--no-tls`, or TLS; gtlsserver over HTTP/3:
agent.engines.nghttp2.gtls, the same accounting), waits until it listens (its UDP port bound),
then listens itself on a control port for the clients' trial-control messages
(agent.trial_control). At `begin` it waits for nghttpd to be idle, samples its CPU time
(schedstat, ns), clock ticks (user/sys split) and write(2) bytes, and resets its peak-RSS mark;
between `begin` and `end` a thread polls nghttpd's CPU counter every POLL_S to find when it
served; at `end` it waits for nghttpd to be idle again, samples, and appends the trial's record
(with --events-dir, after writing the trial's trace: agent.engines.nghttp2.server_traces).
nghttpd dies with the agent (PR_SET_PDEATHSIG), and the agent exits 1 if nghttpd dies first.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import logging
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agent.conditions import Host, TrialWatch, own_cpu_s
from agent.engines.nghttp2.accounting import ActivityTracker, trial_record
from agent.engines.nghttp2.options import NghttpdOptions
from agent.engines.nghttp2.poller import POLL_S, ActivityPoller, wait_until_idle
from agent.engines.nghttp2.procfs import CpuSample, ProcessProbe
from agent.engines.nghttp2.server_traces import ServerTraces
from agent.engines.nghttp2.tools import find_tool
from agent.errors import AgentError, TrialControlError, UsageError
from agent.kernel_counters import own_switches, process_switches
from agent.protocols import protocol_of_scheme, protocol_spec
from agent.trial_control import Begin, End, listen_control
from agent.trial_log import TrialLog

log = logging.getLogger("h2iot.nghttpd")

START_TIMEOUT_S = 10.0
STOP_GRACE_S = 5.0
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class ServedProgram:
    """The server program the engine runs: its name (found by agent.engines.nghttp2.tools), its
    command line from its path, what it announces, and the protocol it speaks."""

    name: str
    argv: Callable[[str], list[str]]
    announced: dict[str, int]
    protocol: str  # h2c, h2 or h3 (then it listens on UDP)

    @classmethod
    def nghttpd(
        cls,
        options: NghttpdOptions,
        root: Path,
        host: str,
        port: int,
        tls: tuple[Path, Path] | None,
        *,
        verbose: bool = False,
    ) -> ServedProgram:
        """`verbose`: its frame log too (-v), for the trials' event traces."""
        files = None if tls is None else (str(tls[0]), str(tls[1]))
        return cls(
            "nghttpd",
            lambda path: options.argv(path, str(root), host, port, files, verbose=verbose),
            options.announced(),
            protocol_of_scheme("http" if tls is None else "https"),
        )


@dataclass(frozen=True)
class NghttpdServeOptions:
    root: Path
    host: str
    port: int
    program: ServedProgram
    tls: tuple[Path, Path] | None  # (cert, key)
    trial_log: Path | None
    control_port: int = 0
    traces: ServerTraces | None = None  # each trial's, written before its record


def _die_with_parent() -> None:
    """In the child before exec: get SIGKILL when the agent dies, so no nghttpd outlives it."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass
class _OpenTrial:
    trial_id: str
    begin: CpuSample
    rss_reset: bool
    poller: ActivityPoller
    watch: TrialWatch
    trace_bytes: int  # what the program had written of its traces at `begin`


def _with_nghttpd_switches(pid: int) -> tuple[int, int] | None:
    """This supervisor's context switches and nghttpd's (a child it does not wait for, so not
    in getrusage's); None once nghttpd is gone."""
    child = process_switches(pid)
    if child is None:
        return None
    own = own_switches()
    return own[0] + child[0], own[1] + child[1]


class Supervisor:
    """Trial bookkeeping around one nghttpd process; one trial at a time."""

    def __init__(
        self, probe: ProcessProbe, trial_log: TrialLog, traces: ServerTraces | None = None
    ) -> None:
        self.probe = probe
        self.trial_log = trial_log
        self.traces = traces
        self.trial: _OpenTrial | None = None
        self.cpu_source = "schedstat" if probe.schedstat else "ticks"
        self._read_runtime = probe.leader_runtime_reader()
        # The node's state over each trial (agent.conditions), as the h2 server's records
        # have; nghttpd's CPU time is the trial's own, not another process's.
        self._node = Host(
            own_cpu=lambda: own_cpu_s() + probe.runtime_ns() / 1e9,
            own_switches=lambda: _with_nghttpd_switches(probe.pid),
        )

    async def begin(self, message: Begin) -> None:
        if self.trial is not None:
            raise TrialControlError(
                f"trial {self.trial.trial_id} is still open: nghttpd's trials cannot overlap "
                "(its CPU time is counted per process)"
            )
        if not await asyncio.to_thread(wait_until_idle, self._read_runtime):
            log.warning("trial %s: nghttpd still busy at its start", message.trial_id)
        rss_reset = self.probe.reset_peak_rss()
        begin = self.probe.sample()
        tracker = ActivityTracker(begin.t_mono_ns, self._read_runtime())
        poller = ActivityPoller(self._read_runtime, tracker)
        watch = TrialWatch(self._node, instant_start=False)
        traced = 0
        if self.traces is not None:
            self.traces.begin()
            traced = self.traces.output_bytes()
        self.trial = _OpenTrial(message.trial_id, begin, rss_reset, poller, watch, traced)

    async def end(self, message: End) -> None:
        trial = self.trial
        if trial is None or trial.trial_id != message.trial_id:
            raise TrialControlError(f"trial {message.trial_id} is not open")
        self.trial = None
        await asyncio.to_thread(trial.poller.finish)
        if not trial.poller.settled:
            log.warning("trial %s: nghttpd still busy at its end", message.trial_id)
        end = self.probe.sample()
        traced = 0 if self.traces is None else self.traces.output_bytes() - trial.trace_bytes
        record = trial_record(
            trial.trial_id,
            trial.begin,
            end,
            trial.poller.tracker.window(),
            message,
            rss_peak_bytes=self.probe.peak_rss_bytes(),
            rss_reset=trial.rss_reset,
            cpu_source=self.cpu_source,
            poll_s=POLL_S,
            trace_bytes=traced,
        )
        if self.traces is not None:
            # After the trial's figures were taken: what waiting for its connections to close
            # and writing the trace cost is not the trial's.
            await self.traces.finish(trial.trial_id)
        self.trial_log.append({**record.to_dict(), "conditions": trial.watch.end().to_dict()})

    def abandon(self, trial_id: str) -> None:
        if self.trial is not None and self.trial.trial_id == trial_id:
            log.warning("trial %s: its client hung up before `end`; no record", trial_id)
            self.trial.poller.cancel()
            self.trial = None
            if self.traces is not None:
                self.traces.abandon()


async def _relay(
    stream: asyncio.StreamReader, tail: deque[str], name: str, traces: ServerTraces | None
) -> None:
    """The program's own output, to the agent's stderr (but what its traces take: nghttpd -v's
    frame log); the last lines kept for errors."""
    while line := await stream.readline():
        text = line.decode(errors="replace").rstrip()
        tail.append(text)
        if traces is None or not traces.feed(text):
            print(f"{name}: {text}", file=sys.stderr, flush=True)


async def _listening_port(
    process: asyncio.subprocess.Process,
    probe: ProcessProbe,
    options: NghttpdServeOptions,
    tail: deque[str],
) -> int:
    deadline = time.monotonic() + START_TIMEOUT_S
    name = options.program.name
    while time.monotonic() < deadline:
        if process.returncode is not None:
            await asyncio.sleep(0.05)  # let the relay catch the program's last words
            reason = tail[-1] if tail else f"{name} exited {process.returncode}"
            raise UsageError(f"cannot listen on {options.host}:{options.port}: {reason}")
        with contextlib.suppress(OSError):
            udp = protocol_spec(options.program.protocol).quic
            ports = probe.udp_ports() if udp else probe.listening_ports()
            if ports and (options.port == 0 or options.port in ports):
                return options.port or ports[0]
        await asyncio.sleep(0.01)
    raise AgentError(
        f"{name} not listening on {options.host}:{options.port} after {START_TIMEOUT_S:g} s"
    )


async def serve_nghttpd(options: NghttpdServeOptions) -> int:
    """Run the program and its trial accounting until SIGTERM/SIGINT (exit 0) or the program's
    death (1)."""
    path = find_tool(options.program.name)
    if not options.root.is_dir():
        raise UsageError(f"--root {options.root} is not a directory")
    argv = options.program.argv(path)
    trial_log = TrialLog(options.trial_log)
    started_wall_ns = time.time_ns()
    process = await asyncio.create_subprocess_exec(
        *argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        preexec_fn=_die_with_parent,
    )
    tail: deque[str] = deque(maxlen=20)
    assert process.stdout is not None
    if options.traces is not None:
        options.traces.started(process.pid, started_wall_ns)
    relay = asyncio.get_running_loop().create_task(
        _relay(process.stdout, tail, options.program.name, options.traces)
    )
    try:
        return await _supervise(options, process, tail, trial_log, argv)
    finally:
        if process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), STOP_GRACE_S)
            except TimeoutError:
                process.kill()
                await process.wait()
        relay.cancel()
        trial_log.close()
        if options.traces is not None:
            options.traces.close()


async def _supervise(
    options: NghttpdServeOptions,
    process: asyncio.subprocess.Process,
    tail: deque[str],
    trial_log: TrialLog,
    argv: list[str],
) -> int:
    probe = ProcessProbe(process.pid)
    try:
        port = await _listening_port(process, probe, options, tail)
        supervisor = Supervisor(probe, trial_log, options.traces)
        return await _serve_trials(
            options, process=process, supervisor=supervisor, port=port, tail=tail, argv=argv
        )
    finally:
        probe.close()


async def _serve_trials(
    options: NghttpdServeOptions,
    *,
    process: asyncio.subprocess.Process,
    supervisor: Supervisor,
    port: int,
    tail: deque[str],
    argv: list[str],
) -> int:
    control = await listen_control(supervisor, options.host, options.control_port)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    program = options.program
    scheme = protocol_spec(program.protocol).scheme
    print(
        json.dumps(
            {
                "event": "listening",
                "engine": "nghttp2",
                "scheme": scheme,
                "address": f"{options.host}:{port}",
                "port": port,
                "control_port": control.sockets[0].getsockname()[1],
                "protocol": program.protocol,
                "program": program.name,
                f"{program.name}_pid": process.pid,
                "settings": program.announced,
                "command": argv,
            }
        ),
        file=sys.stderr,
        flush=True,
    )
    died = loop.create_task(process.wait())
    stopped = loop.create_task(stop.wait())
    try:
        await asyncio.wait({died, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        control.close()
        stopped.cancel()
    if died.done():
        await asyncio.sleep(0.05)  # let the relay print the program's last words
        said = tail[-1] if tail else "no output"
        log.error("%s exited %s: %s", program.name, process.returncode, said)
        return 1
    died.cancel()
    return 0
