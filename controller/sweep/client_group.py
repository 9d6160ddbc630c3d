"""Several client nodes as the sweep's one client (`nodes.clients`).

`ClientGroup` is an `AgentNode` to the rest of the sweep: its `run_trial` spreads the trial's
load over the K client nodes (`controller.config.clients`), starts them together and returns one
merged record (`controller.sweep.merge`). The start: an instant agreed on the controller's wall
clock, `lead` ahead of now, handed to each node as `--start-at` on its own clock through its
offset measured when the sweep opened; each node's agent prepares the workload, then sleeps to
it. The K trial commands run concurrently through fabric's `ThreadingGroup` (each member runs its
own node's command line over that node's own fabric connection): its `GroupResult` is the
per-node results map and a `GroupException` keeps the results of the nodes that did not fail.

Each node's figures, also those of a trial that failed, go to the run's side table
`trial_clients.csv`. A node that failed makes the trial fail, naming it; a node whose connection
is lost fails its trial the same way, and the next trial pauses the sweep (a lost node).

The meter has one client channel: it measures the first node (the metered one). The trial's
energy window is that node's own trial span, and the row's energy is that node's alone.
"""

from __future__ import annotations

import csv
import os
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from fabric import ThreadingGroup
from fabric.exceptions import GroupException

from agent import __version__
from agent.protocols import protocols_where
from agent.trial_request import TrialRequest
from controller.config.clients import node_params, spread_param
from controller.config.model import Config, NodeConfig
from controller.errors import ControllerError, DeviceError
from controller.nodes.agent import POLL_S, AgentNode
from controller.nodes.clock import PeerOffset
from controller.nodes.connect import connect
from controller.nodes.errors import NodeError, NodeUnreachableError
from controller.nodes.facts import inspect_node
from controller.nodes.group import fan_out
from controller.nodes.warm import WarmAgent
from controller.sweep.merge import (
    NodeRun,
    merge,
    merge_server,
    requests_sent,
    side_header,
    side_row,
)

SIDE_TABLE = "trial_clients.csv"
MIN_LEAD_S = 0.3
# The agreed instant lies this many times the slowest node's agent start-up ahead: a trial's
# command imports more than `--version` does.
LEAD_FACTOR = 3.0


@dataclass(frozen=True)
class ClientMember:
    """One client node of the group: its agent, and its clock against the controller's."""

    name: str
    agent: AgentNode
    offset_ns: int
    uncertainty_ns: int


class _NodeTrial:
    """One node's part of one trial, as a member of a fabric `ThreadingGroup` (which calls
    each member's `run` on a thread of its own)."""

    def __init__(self, member: ClientMember, request: TrialRequest) -> None:
        self.member = member
        self.request = request

    def run(self) -> dict[str, Any]:
        return self.member.agent.run_trial(self.request)


class SideTable:
    """trial_clients.csv: a row per node per attempt, appended and synced before the trial's
    own row is written."""

    def __init__(self, path: Path, kind: str) -> None:
        self.path = path
        self.header = side_header(kind)
        self._attempts: Counter[str] = Counter()
        if path.exists():
            with path.open(newline="") as file:
                seen = {(row["trial_id"], row["attempt"]) for row in csv.DictReader(file)}
            self._attempts.update(trial_id for trial_id, _ in seen)
        else:
            with path.open("w", newline="") as file:
                csv.writer(file).writerow(self.header)

    def next_attempt(self, trial_id: str) -> int:
        self._attempts[trial_id] += 1
        return self._attempts[trial_id]

    def append(self, rows: Sequence[Mapping[str, object]]) -> None:
        with self.path.open("a", newline="") as file:
            writer = csv.DictWriter(file, self.header)
            writer.writerows({k: "" if v is None else v for k, v in row.items()} for row in rows)
            file.flush()
            os.fsync(file.fileno())


class ClientGroup(AgentNode):
    """The client agents of K nodes, driven as one; the first is the metered one."""

    def __init__(
        self,
        members: Sequence[ClientMember],
        *,
        kind: str,
        side_table: Path,
        lead_s: float,
        server_clock: PeerOffset | None = None,
    ) -> None:
        """`server_clock`: the server node's wall clock minus the controller's (its facts)."""
        first = members[0].agent
        super().__init__(first.node, first.python, first.state_dir, first.cpu)
        self.members = tuple(members)
        self.kind = kind
        self.lead_s = lead_s
        self.server_clock = server_clock
        self.side_table = SideTable(side_table, kind)
        self._lost: str | None = None
        # Per trial id, the requests the nodes sent in its last attempt (the server's count).
        self.requests_sent: dict[str, int | None] = {}
        self.before_trial: Callable[[str], None] = lambda _trial_id: None

    def keep_warm(self) -> WarmAgent:
        """Every member's trials in a warm agent of its own; the first member's is returned."""
        warm = [member.agent.keep_warm() for member in self.members]
        return warm[0]

    def end_warm(self) -> None:
        for member in self.members:
            member.agent.end_warm()

    def run_trial(self, request: TrialRequest) -> dict[str, Any]:
        if self._lost is not None:
            raise NodeUnreachableError(self._lost)
        trial_id = str(request.trial_id)
        self.before_trial(trial_id)
        shares = node_params(self.kind, request.params, len(self.members))
        start_at_ns = time.time_ns() + int(self.lead_s * 1e9)
        jobs = [
            _NodeTrial(
                member,
                replace(
                    self._peer_clock(request, index, member),
                    workload=self.kind,
                    params=share,
                    marker=request.marker if index == 0 else None,  # the metered node's wire only
                    start_at_s=(start_at_ns + member.offset_ns) / 1e9,
                ),
            )
            for index, (member, share) in enumerate(zip(self.members, shares, strict=True))
        ]
        try:
            results = ThreadingGroup.from_connections(jobs).run()
        except GroupException as exc:
            results = exc.result
        runs = [self._node_run(job, results[job]) for job in jobs]
        attempt = self.side_table.next_attempt(trial_id)
        spread = spread_param(self.kind)
        self.side_table.append(
            [
                side_row(
                    trial_id,
                    attempt,
                    run,
                    kind=self.kind,
                    metered=index == 0,
                    start_at_ns=start_at_ns,
                    spread_param=spread,
                )
                for index, run in enumerate(runs)
            ]
        )
        failed = [run for run in runs if not run.ok]
        if failed:
            return {"ok": False, "error": "; ".join(run.failure() for run in failed)}
        self.requests_sent[trial_id] = requests_sent(runs)
        return merge(self.kind, runs)

    def _peer_clock(self, request: TrialRequest, index: int, member: ClientMember) -> TrialRequest:
        """The request with the server's clock minus the member's: the pair's own (the
        request's) for the first node, the others' from their offsets to the controller; none
        where the pair has none."""
        if request.peer_clock_offset_ns is None or index == 0:
            return request
        offset = None
        if self.server_clock is not None:
            offset = self.server_clock.minus(PeerOffset(member.offset_ns, member.uncertainty_ns))
        return replace(
            request,
            peer_clock_offset_ns=None if offset is None else offset.offset_ns,
            peer_clock_uncertainty_ns=None if offset is None else offset.uncertainty_ns,
        )

    def _node_run(self, job: _NodeTrial, result: object) -> NodeRun:
        member = job.member
        label = member.agent.node.label
        record: dict[str, Any] | None = None
        error: str | None = None
        if isinstance(result, NodeUnreachableError):
            self._lost = str(result)
            error = str(result)
        elif isinstance(result, ControllerError):
            error = str(result)
        elif isinstance(result, BaseException):
            raise result  # not a node's failure: a bug
        else:
            record = dict(result) if isinstance(result, Mapping) else None
        return NodeRun(
            member.name,
            label,
            job.request.params,
            member.offset_ns,
            member.uncertainty_ns,
            record,
            error,
        )


class GroupServer(AgentNode):
    """The server agent under a group of client nodes. Their connections carry one trial, which
    the server records when the last of them closes; a node whose connection opens after the
    others' closed makes the server record the trial in parts. A trial's record is then every
    part, until they count the requests the nodes sent, merged (`merge_server`)."""

    def __init__(self, server: AgentNode, group: ClientGroup) -> None:
        super().__init__(server.node, server.python, server.state_dir, server.cpu, server.trial_log)
        self.group = group
        self._parts: dict[str, list[dict[str, Any]]] = {}
        group.before_trial = self._forget

    def _collect(self) -> None:
        for record in self.new_trial_records():
            trial_id = str(record["trial_id"])
            self._trials.pop(trial_id, None)
            self._parts.setdefault(trial_id, []).append(record)

    def _forget(self, trial_id: str) -> None:
        """A new attempt of the trial begins: what the server recorded of earlier ones goes."""
        self._collect()
        self._parts.pop(trial_id, None)

    def trial_record(self, trial_id: str, *, timeout_s: float = 10.0) -> dict[str, Any]:
        expected = self.group.requests_sent.pop(trial_id, None)
        deadline = time.monotonic() + timeout_s
        while True:
            self._collect()
            parts = self._parts.get(trial_id, [])
            counted = sum(int(part.get("requests") or 0) for part in parts)
            if parts and (expected is None or counted >= expected):
                return merge_server(self._parts.pop(trial_id))
            if time.monotonic() > deadline:
                if not parts:
                    raise NodeError(
                        f"{self.node.label}: no record of trial {trial_id} in {self.trial_log} "
                        f"after {timeout_s:g} s"
                    )
                # The server saw fewer requests than the nodes sent: incomplete.
                return {**merge_server(self._parts.pop(trial_id)), "ok": False}
            time.sleep(POLL_S)


def grouped_server(client: AgentNode, server: AgentNode) -> AgentNode:
    """The server agent as the sweep drives it: under a group of client nodes, a `GroupServer`."""
    return GroupServer(server, client) if isinstance(client, ClientGroup) else server


def _state_dir(config: NodeConfig) -> str:
    return f"{config.deploy_dir}/state"


def _open_member(
    config: NodeConfig, accept_new_host_key: bool
) -> tuple[ClientMember, dict[str, Any], float]:
    """A connected, checked client node; its facts and its agent's start-up time (s)."""
    node = connect(config, accept_new_host_key=accept_new_host_key)
    try:
        # Several client nodes run cleartext HTTP/2 only (TLS and HTTP/3 are refused at load).
        found = inspect_node(
            node,
            config,
            expected_version=__version__,
            clock_samples=100,
            protocols=protocols_where(tls=False),
        )
        if found.problems:
            raise DeviceError(found.problems[0])
        agent = AgentNode(node, config.python, _state_dir(config), config.cpu)
        started = time.monotonic()
        agent.version()
        startup_s = time.monotonic() - started
    except BaseException:
        node.close()
        raise
    clock = found.clock
    member = ClientMember(
        str(config.name),
        agent,
        clock.wall_offset_ns if clock else 0,
        clock.uncertainty_ns if clock else 0,
    )
    return member, {**asdict(found), "cpu_pin": config.cpu, "agent_startup_s": startup_s}, startup_s


def client_group(
    config: Config,
    first: AgentNode,
    facts: dict[str, Any],
    stack: ExitStack,
    run_dir: Path,
    *,
    accept_new_host_key: bool = False,
) -> AgentNode:
    """`first` (nodes.client's agent, already open) when there is one client node; else the
    group of every node of nodes.clients, the others opened here (closed with `stack`), their
    facts added to `facts["clients"]` by name."""
    if len(config.clients) < 2:
        return first
    others = {node.name or "": node for node in config.clients[1:]}
    opened = fan_out(others, lambda node: _open_member(node, accept_new_host_key))
    for member, _facts, _startup in opened.succeeded.values():
        stack.callback(member.agent.node.close)
    ready = opened.raise_on_failure()
    clock = facts["client"]["clock"] or {}
    started = time.monotonic()
    first.version()
    head = ClientMember(
        str(config.clients[0].name),
        first,
        int(clock.get("wall_offset_ns", 0)),
        int(clock.get("uncertainty_ns", 0)),
    )
    startups = [time.monotonic() - started, *(startup for _m, _f, startup in ready.values())]
    facts["clients"] = {
        head.name: {**facts["client"], "agent_startup_s": startups[0]},
        **{name: node_facts for name, (_m, node_facts, _s) in ready.items()},
    }
    lead_s = max(MIN_LEAD_S, LEAD_FACTOR * max(startups))
    facts["clients_start_lead_s"] = lead_s
    return ClientGroup(
        [head, *(member for member, _f, _s in ready.values())],
        kind=config.workload.kind,
        side_table=run_dir / SIDE_TABLE,
        lead_s=lead_s,
        server_clock=PeerOffset.of_node(facts.get("server", {}).get("clock")),
    )
