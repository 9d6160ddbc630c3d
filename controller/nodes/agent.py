"""`AgentNode`: the node agent's command line (`h2iot-agent`) driven through a `Node`.

The controller talks to agents only through their CLI and JSON lines (agent/README.md has the
options and record fields), the same for local and SSH nodes. The server agent runs in the
background with a pidfile and a log under the node's state directory and appends one JSON line
per trial to its trial log, which is read incrementally.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from agent.engines import DEFAULT_ENGINE, engine_spec
from agent.event_loop import DEFAULT_EVENT_LOOP
from agent.event_trace import trace_name
from agent.protocols import DEFAULT_PROTOCOL
from agent.trial_request import TrialRequest
from agent.workloads import DEFAULT_KIND, ParamValue
from controller.config.model import NodeConfig
from controller.nodes import shell
from controller.nodes.errors import CommandFailedError, NodeError
from controller.nodes.node import Node
from controller.nodes.records import BackgroundProcess, StopOutcome
from controller.nodes.warm import WarmAgent

POLL_S = 0.05
SERVER_START_TIMEOUT_S = 30.0
# The agent finishes the streams in flight for up to 30 s after TERM.
SERVER_STOP_GRACE_S = 35.0
FETCH_MARGIN_S = 15.0  # beyond the agent's own --timeout: start-up and connection set-up
TRIAL_PROCESS = "trial_process"
"""The key `run_trial` adds to a trial's record where the node timed the trial process:
`t_mono_start_ns`, `t_mono_end_ns` (node's CLOCK_MONOTONIC, as the record's `t_mono_*`) and
`cpu_s` (`controller.nodes.records.ProcessSpan`)."""


@dataclass(frozen=True)
class ServerMount:
    """What a server agent serves: a workload (its kind and server-side parameters), the
    SETTINGS it announces, for the page workload the site's directory and, over TLS, its
    certificate and key (paths on the node)."""

    workload: str = DEFAULT_KIND
    settings: tuple[tuple[str, int], ...] = ()
    params: tuple[tuple[str, ParamValue], ...] = ()
    root: str | None = None
    tls: tuple[str, str] | None = None  # (certificate, key): the protocol's, where it has TLS
    protocol: str = DEFAULT_PROTOCOL  # agent.protocols: what the server runs
    datagram_bytes: int | None = None  # HTTP/3's max_udp_payload_size; None: the agent's
    # Each trial's event trace to the node's events_dir, cut at this size; None: no traces.
    events_max_bytes: int | None = None
    # Take trial-control messages (for a client that sends no trial header: gtlsclient) on a
    # port of the node's choosing; an engine counting trials by them alone always does.
    trial_control: bool = False


@dataclass(frozen=True)
class ServerProcess:
    """A running server agent: its process, the port it listens on and what it serves."""

    process: BackgroundProcess
    port: int
    mount: ServerMount
    # Where the server agent takes trial-control messages (agent/README.md); None: it counts
    # trials by the trial header alone.
    control_port: int | None = None
    # Where it reads new SETTINGS on SIGHUP (`reload_settings`); None: a new setting restarts it.
    settings_file: str | None = None


class AgentNode:
    """The agent on one node: server start/stop/health/log, client fetches, trial records.

    `python` is the node's interpreter (absolute for SSH nodes; it runs `-m agent.cli`);
    `state_dir` holds `server.pid` and `server.log`; `trial_log` is the server's per-trial
    JSON lines (default `<state_dir>/server-trials.jsonl`; give each run its own so trial ids
    never meet older records); `cpu` pins both the server and the client to that core.
    """

    def __init__(
        self,
        node: Node,
        python: str,
        state_dir: str,
        cpu: int | None = None,
        trial_log: str | None = None,
    ) -> None:
        self.node = node
        self.python = python
        self._server_log_offset = 0  # how far the server's log has been read
        self._settings_generation = 0
        self.state_dir = node.path(state_dir)
        self.cpu = cpu
        self.pidfile = f"{self.state_dir}/server.pid"
        self.log = f"{self.state_dir}/server.log"
        self.trial_log = node.path(trial_log or f"{self.state_dir}/server-trials.jsonl")
        self.events_dir = f"{self.state_dir}/events"  # where its trials' traces are written
        self._trial_offset_bytes = 0
        self._trials: dict[str, dict[str, Any]] = {}
        self.warm: WarmAgent | None = None
        self._dirs_made = False

    def keep_warm(self) -> WarmAgent:
        """Run this node's trials in one warm agent from now on (`[run] agent = "warm"`,
        controller.nodes.warm), started now: its start-up falls before the sweep's baseline and
        trials, not into the first trial's lead (a replaced one starts with its next trial)."""
        if self.warm is None:
            self.warm = WarmAgent(self.node, self.command(), self.state_dir)
            self.warm.start()
        return self.warm

    def end_warm(self) -> None:
        """Hang up on the warm agent, which then exits; later trials run fresh."""
        if self.warm is not None:
            self.warm.close()
            self.warm = None

    @classmethod
    def from_config(
        cls,
        node: Node,
        config: NodeConfig,
        state_dir: str | None = None,
        trial_log: str | None = None,
    ) -> AgentNode:
        """From the node's config; state_dir defaults to `<deploy_dir>/state` (local nodes
        without a deploy_dir must name one, e.g. under the run directory)."""
        if state_dir is None:
            if not config.deploy_dir:
                raise ValueError(f"{node.label}: no deploy_dir, so a state_dir must be given")
            state_dir = f"{config.deploy_dir}/state"
        return cls(node, config.python, state_dir, config.cpu, trial_log)

    def command(self, *args: str) -> list[str]:
        return [self.node.path(self.python), "-m", "agent.cli", *args]

    def version(self) -> str:
        return agent_version(self.node, self.command())

    def build_site(self, directory: str, *, seed: int, total_bytes: int) -> str:
        """Build the deterministic test page on the node; returns its absolute directory."""
        directory = self.node.path(directory)
        argv = ["site", "build", directory, "--seed", str(seed), "--total-bytes", str(total_bytes)]
        self.node.run(self.command(*argv), timeout_s=600)
        return directory

    def start_server(
        self,
        *,
        mount: ServerMount,
        host: str,
        port: int,
        timeout_s: float = SERVER_START_TIMEOUT_S,
        engine: str | None = None,
        unrepresentable_window: str | None = None,
        reloadable: bool = False,
        event_loop: str = DEFAULT_EVENT_LOOP,
    ) -> ServerProcess:
        """Start `serve` in the background and wait until it listens (port 0 picks a free one);
        `reloadable` (the h2 engine over HTTP/2): it takes new SETTINGS (`reload_settings`).

        Raises NodeError if one already runs (stop it first) or it exits before listening.
        """
        if not self._dirs_made:
            # Once per node: a sweep restarts its server for each setting, and each mkdir is a
            # command on the node (tens of ms through an anchor or SSH).
            self.node.makedirs(self.state_dir)
            self.node.makedirs(self.trial_log.rsplit("/", 1)[0] or "/")
            self._dirs_made = True
        argv = ["serve", *self._mount_args(mount, host, port, engine)]
        argv += ["--trial-log", self.trial_log, *self._cpu_args()]
        argv += _engine_args(engine, unrepresentable_window)
        if event_loop != DEFAULT_EVENT_LOOP:
            argv += ["--event-loop", event_loop]
        settings_file = f"{self.state_dir}/server-settings.json" if reloadable else None
        if settings_file is not None:
            argv += ["--settings-file", self.node.path(settings_file)]
        log_offset = 0
        process = self.node.start_background(
            self.command(*argv), pidfile=self.pidfile, log=self.log
        )
        deadline = time.monotonic() + timeout_s
        while True:
            lines = self.node.read_new_lines(self.log, log_offset)
            log_offset = lines.next_offset_bytes
            for line in lines.lines:
                event = _json_or_none(line)
                if event is not None and event.get("event") == "listening":
                    control = event.get("control_port")
                    self._server_log_offset = log_offset
                    return ServerProcess(
                        process,
                        int(event["port"]),
                        mount,
                        None if control is None else int(control),
                        settings_file,
                    )
            if self.server_pid() is None:
                raise NodeError(
                    f"{self.node.label}: server agent exited before listening: "
                    f"{_last_line(self.server_log())}"
                )
            if time.monotonic() > deadline:
                self.stop_server()
                raise NodeError(
                    f"{self.node.label}: server agent not listening after {timeout_s:g} s"
                )
            time.sleep(POLL_S)

    def _mount_args(
        self, mount: ServerMount, host: str, port: int, engine: str | None
    ) -> list[str]:
        """`serve`'s arguments for what it serves and where."""
        argv = ["--workload", mount.workload, "--host", host, "--port", str(port)]
        if mount.root is not None:
            argv += ["--root", self.node.path(mount.root)]
        argv += _pairs("--setting", mount.settings) + _pairs("--param", mount.params)
        argv += ["--protocol", mount.protocol]
        if mount.tls is not None:
            cert, key = (self.node.path(path) for path in mount.tls)
            argv += ["--cert", cert, "--key", key]
        if mount.datagram_bytes is not None:
            argv += ["--datagram-size", str(mount.datagram_bytes)]
        if mount.events_max_bytes is not None:
            argv += ["--events-dir", self.events_dir, "--events-max-bytes"]
            argv += [str(mount.events_max_bytes)]
        if mount.trial_control and engine_spec(engine or DEFAULT_ENGINE).counts_by_header:
            argv += ["--control-port", "0"]
        return argv

    def reload_settings(
        self,
        running: ServerProcess,
        settings: Sequence[tuple[str, int]],
        timeout_s: float = SERVER_START_TIMEOUT_S,
    ) -> ServerProcess:
        """The running server's SETTINGS for its new connections, without a new process: the
        file it reads on SIGHUP written and the signal sent in one command, then its log read
        until it says they apply. NodeError if it refuses them or says nothing in time."""
        if running.settings_file is None:
            raise NodeError(f"{self.node.label}: the server agent was not started reloadable")
        self._settings_generation += 1
        generation = self._settings_generation
        document = json.dumps(
            {"generation": generation, "settings": [f"{k}={v}" for k, v in settings]}
        )
        path = self.node.path(running.settings_file)
        write = shell.join(["printf", "%s", document])
        self.node.shell(f"{write} > {shell.join([path])} && kill -HUP {running.process.pid}")
        deadline = time.monotonic() + timeout_s
        while True:
            lines = self.node.read_new_lines(self.log, self._server_log_offset)
            self._server_log_offset = lines.next_offset_bytes
            for line in lines.lines:
                event = _json_or_none(line) or {}
                if event.get("event") == "settings_refused":
                    raise NodeError(f"{self.node.label}: server agent: {event.get('error')}")
                if event.get("event") == "settings" and event.get("generation") == generation:
                    return replace(running, mount=replace(running.mount, settings=tuple(settings)))
            if time.monotonic() > deadline:
                raise NodeError(
                    f"{self.node.label}: server agent took no new SETTINGS in {timeout_s:g} s"
                )
            time.sleep(POLL_S)

    def server_pid(self) -> int | None:
        """Health check: the server agent's pid while it runs, else None."""
        return self.node.running_pid(self.pidfile)

    def server_log(self) -> str:
        """The server agent's stdout and stderr so far."""
        return self.node.read_file(self.log)

    def stop_server(self, grace_s: float = SERVER_STOP_GRACE_S) -> StopOutcome:
        """TERM the server agent (it drains its streams), KILL it after grace_s."""
        return self.node.stop_background(self.pidfile, grace_s=grace_s)

    def run_trial(self, request: TrialRequest) -> dict[str, Any]:
        """One trial by the client agent (`h2iot-agent trial`, or its warm agent); its JSON
        record (agent/README.md), also when the trial failed (`ok` false: a body mismatch, a
        refused connection, a timeout). A failure before any record (a usage error, an agent
        that died) raises CommandFailedError with the agent's error. The request's paths
        (`manifest`, `ca_file`) are the controller's for a local node: mapped to the node's
        here, with the node's core (`cpu`)."""
        request = replace(
            request,
            manifest=None if request.manifest is None else self.node.path(request.manifest),
            ca_file=None if request.ca_file is None else self.node.path(request.ca_file),
            cpu=self.cpu,
        )
        timeout_s = request.timeout_s
        url = request.url
        if self.warm is not None:
            result = self.warm.run(request, timeout_s + FETCH_MARGIN_S)
        else:
            result = self.node.run(
                self.command(*request.argv()), timeout_s=timeout_s + FETCH_MARGIN_S, check=False
            )
        records = [_json_or_none(line) for line in result.stdout.splitlines()]
        found = [record for record in records if record is not None]
        if result.exit_status in (0, 1) and found:
            record = found[-1]
            if result.process is not None:
                # The node saw the trial process itself (a local node's anchor): its whole
                # life, for the energy window "process". The controller's, not the agent's.
                # A warm agent's is its own account of the trial, start-up being no part of it.
                record[TRIAL_PROCESS] = asdict(result.process)
            return record
        raise CommandFailedError(
            f"{self.node.label}: trial {url} exited {result.exit_status} without a record: "
            f"{_last_line(result.stderr or result.stdout)}"
        )

    def new_trial_records(self) -> list[dict[str, Any]]:
        """Trial records the server appended since the last call, in order. A line that is not
        one is read past (the records after it still count) and named in a NodeError."""
        lines = self.node.read_new_lines(self.trial_log, self._trial_offset_bytes)
        self._trial_offset_bytes = lines.next_offset_bytes
        records = []
        bad: list[str] = []
        for line in lines.lines:
            record = _json_or_none(line)
            if record is None or "trial_id" not in record:
                bad.append(line)
                continue
            self._trials[str(record["trial_id"])] = record
            records.append(record)
        if bad:
            raise NodeError(f"{self.node.label}: {self.trial_log}: not a trial record: {bad[0]}")
        return records

    def trial_record(self, trial_id: str, *, timeout_s: float = 10.0) -> dict[str, Any]:
        """The server's record of one trial, waiting for it: the server writes it when the
        trial's connection closes, just after the client has its response."""
        deadline = time.monotonic() + timeout_s
        self.new_trial_records()
        while trial_id not in self._trials:
            if time.monotonic() > deadline:
                raise NodeError(
                    f"{self.node.label}: no record of trial {trial_id} in {self.trial_log} "
                    f"after {timeout_s:g} s"
                )
            time.sleep(POLL_S)
            self.new_trial_records()
        return self._trials.pop(trial_id)

    def take_events(self, trial_id: str, role: str) -> bytes:
        """The trial's event trace its agent wrote (agent.event_trace), removed from the node
        once read: the run keeps the copy."""
        path = f"{self.events_dir}/{trace_name(trial_id, role)}"
        data = self.node.read_file(path).encode()
        self.node.run(["rm", "-f", "--", path])
        return data

    def _cpu_args(self) -> list[str]:
        return [] if self.cpu is None else ["--cpu", str(self.cpu)]


def _pairs(flag: str, pairs: Sequence[tuple[str, object]]) -> list[str]:
    """`--setting NAME=VALUE` / `--param NAME=VALUE` for each pair (booleans as true/false)."""
    argv: list[str] = []
    for name, value in pairs:
        text = str(value).lower() if isinstance(value, bool) else str(value)
        argv += [flag, f"{name}={text}"]
    return argv


def _engine_args(engine: str | None, unrepresentable_window: str | None) -> list[str]:
    """`--engine` and `--unrepresentable-window`, left out at the default engine's (the agent's
    own), whose command line is the shortest."""
    if engine is None or engine == DEFAULT_ENGINE:
        return []
    argv = ["--engine", engine]
    if unrepresentable_window is not None:
        argv += ["--unrepresentable-window", unrepresentable_window]
    return argv


def agent_version(node: Node, agent: Sequence[str]) -> str:
    """The version `AGENT --version` prints (as `h2iot-agent VERSION`)."""
    words = node.run([*agent, "--version"]).stdout.split()
    if len(words) != 2 or words[0] != "h2iot-agent":
        raise NodeError(f"{node.label}: `{' '.join(agent)} --version` printed {' '.join(words)!r}")
    return words[1]


def python_version(node: Node, python: str, *, check: bool = True) -> str | None:
    """The interpreter's version (e.g. 3.11.2); None when it does not run and not check."""
    result = node.run(
        [python, "-c", "import platform; print(platform.python_version())"], check=check
    )
    return result.stdout.strip() if result.ok else None


def _json_or_none(line: str) -> dict[str, Any] | None:
    if not line.startswith("{"):
        return None
    try:
        value = json.loads(line)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1] if lines else "no output"
