"""Benchmark: the periodic workload's client CPU per exchange, ours against the C tools.

Per protocol, one server agent of ours (`serve --workload periodic`, pinned to one core) and,
on the other core, every client in turn, round by round in a rotating order (so a disturbance
from other work on the machine falls on all of them):

- ours: `h2iot-agent trial --workload periodic` with `connection` = keep, new and resume
  (h2c: keep and new; resume needs TLS), `count` GETs of `response_bytes` every `interval_s`.
- h2c and h2: `nghttp -n -s`, a new process per exchange (as the study's client would run
  it), paced at the same interval. nghttp cannot resume a session nor keep a connection
  across processes, so our keep, new and resume are all read against this one anchor.
- h3: `gtlsclient` a new process per exchange without a session file (a full handshake each),
  the anchor of our new and keep; and with `--session-file`/`--tp-file`, fresh each round like
  our trial's first connect, so its first exchange is a full handshake and the rest resume
  with the GET in 0-RTT: the anchor of our resume.

CPU per exchange, two ways: `process` is getrusage(RUSAGE_CHILDREN) of the reaped client
processes (user + sys, start-up included) over the exchanges, the same for both sides (ours
pays its interpreter's start once per trial, the tools once per exchange); `window` is ours
from the trial record's `cpu_s` (the trial's own window: connects, exchanges and the idle
between, not the interpreter's start) over the exchanges, the tools' again their processes'.
Ratios are medians of the rounds' paired ratios with a 90 % bootstrap interval.

Run from the repository root with the project's venv (the h3 extra installed):
    .venv/bin/python benchmarks/periodic_cpu.py [--rounds 7] [--count 20] [--interval-s 0.1]
    .venv/bin/python benchmarks/periodic_cpu.py --quick
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from agent_vs_nghttp2 import BenchError
from bench_support import REPO, median_interval, write_csv
from client_vs_nghttp import check_nghttp, run_pinned
from h3_vs_ngtcp2 import pinned_server

from controller.run.tls import RunCredentials, run_credentials

PROTOCOLS = ("h2c", "h2", "h3")
NGHTTP = "nghttp"
GTLSCLIENT = "gtlsclient"
GTLSCLIENT_SESSION = "gtlsclient/session"
# (protocol, our connection policy, its anchor): the anchor does the same where a C tool can.
PAIRS = (
    ("h2c", "keep", NGHTTP),
    ("h2c", "new", NGHTTP),
    ("h2", "keep", NGHTTP),
    ("h2", "new", NGHTTP),
    ("h2", "resume", NGHTTP),
    ("h3", "keep", GTLSCLIENT),
    ("h3", "new", GTLSCLIENT),
    ("h3", "resume", GTLSCLIENT_SESSION),
)


@dataclass(frozen=True)
class Trial:
    """One client's `exchanges` exchanges in one round: CPU per exchange in ms."""

    round: int
    protocol: str
    client: str  # "ours/<connection>", NGHTTP, GTLSCLIENT or GTLSCLIENT_SESSION
    exchanges: int
    window_cpu_ms: float  # ours: the record's cpu_s; a tool: its processes' user + sys
    process_cpu_ms: float  # the client processes' user + sys (getrusage), both sides
    wall_s: float  # first spawn to last exit
    handshakes: str  # ours: the record's per-exchange handshakes counted ("full:1 0rtt:19")
    loadavg_1m: float


@dataclass(frozen=True)
class Plan:
    credentials: RunCredentials
    count: int
    interval_s: float
    response_bytes: int
    client_core: int
    out: Path


def our_trial(plan: Plan, round_: int, protocol: str, port: int, connection: str) -> Trial:
    scheme = "http" if protocol == "h2c" else "https"
    trial_id = f"r{round_}-{protocol}-{connection}"
    argv = [
        sys.executable, "-m", "agent.cli", "trial", f"{scheme}://127.0.0.1:{port}/", "--json",
        "--workload", "periodic", "--protocol", protocol, "--trial-id", trial_id,
        "--ca-file", str(plan.credentials.ca_cert),
        "--param", f"count={plan.count}", "--param", f"interval_s={plan.interval_s}",
        "--param", f"connection={connection}", "--param", f"response_bytes={plan.response_bytes}",
    ]  # fmt: skip
    child = run_pinned(argv, plan.client_core, 120 + plan.count * plan.interval_s)
    record = json.loads(child.stdout.splitlines()[0])
    if not record["ok"]:
        raise BenchError(f"ours {protocol}/{connection}: {record['error']}")
    handshakes = Counter(exchange["handshake"] for exchange in record["exchanges"])
    per = 1e3 / plan.count
    return Trial(
        round_, protocol, f"ours/{connection}", plan.count, record["cpu_s"] * per,
        (child.user_s + child.sys_s) * per, child.wall_s,
        " ".join(f"{kind}:{n}" for kind, n in sorted(handshakes.items())), os.getloadavg()[0],
    )  # fmt: skip


def tool_trial(
    plan: Plan, round_: int, protocol: str, client: str, argv: Sequence[str], nghttp: bool
) -> Trial:
    """`argv` once per exchange, each due `interval_s` after the one before (a late one is not
    made up for: the CPU per exchange does not depend on it)."""
    cpu = 0.0
    start = time.monotonic()
    for index in range(plan.count):
        time.sleep(max(0.0, start + index * plan.interval_s - time.monotonic()))
        child = run_pinned(list(argv), plan.client_core, 60)
        if nghttp:
            check_nghttp(child.stdout, 1)
        cpu += child.user_s + child.sys_s
    per = 1e3 / plan.count
    wall = time.monotonic() - start
    return Trial(
        round_, protocol, client, plan.count, cpu * per, cpu * per, wall, "", os.getloadavg()[0]
    )


def nghttp_argv(plan: Plan, protocol: str, port: int) -> list[str]:
    scheme = "http" if protocol == "h2c" else "https"
    return [NGHTTP, "-n", "-s", f"{scheme}://127.0.0.1:{port}/periodic/{plan.response_bytes}"]


def gtlsclient_argv(plan: Plan, port: int, session: Path | None, quiet: bool = True) -> list[str]:
    files = [] if session is None else [f"--session-file={session}", f"--tp-file={session}.tp"]
    return [
        GTLSCLIENT, *(["-q"] if quiet else []), "--exit-on-all-streams-close", *files,
        "127.0.0.1", str(port), f"https://127.0.0.1:{port}/periodic/{plan.response_bytes}",
    ]  # fmt: skip


def gtlsclient_session_trial(plan: Plan, round_: int, port: int) -> Trial:
    session = plan.out / "gtlsclient.session"
    for stale in (session, Path(f"{session}.tp")):
        stale.unlink(missing_ok=True)
    argv = gtlsclient_argv(plan, port, session)
    return tool_trial(plan, round_, "h3", GTLSCLIENT_SESSION, argv, nghttp=False)


def check_gtlsclient_resumes(plan: Plan, port: int) -> None:
    """Unmeasured, before the rounds: gtlsclient (verbose: its quiet runs say nothing) gets 200
    with a full handshake, then 200 with its GET in 0-RTT from the session it saved."""
    session = plan.out / "check.session"
    for expect_0rtt in (False, True):
        argv = gtlsclient_argv(plan, port, session, quiet=False)
        result = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        out = result.stdout + result.stderr
        if ":status: 200" not in out or ("type=0RTT" in out) != expect_0rtt:
            state = "in 0-RTT" if expect_0rtt else "on a full handshake"
            raise BenchError(f"gtlsclient did not get 200 {state} from our h3 server")


def cases(plan: Plan, round_: int, protocol: str, port: int) -> list[Callable[[], Trial]]:
    ours = [
        partial(our_trial, plan, round_, protocol, port, connection)
        for connection in ("keep", "new", *(() if protocol == "h2c" else ("resume",)))
    ]
    if protocol != "h3":
        argv = nghttp_argv(plan, protocol, port)
        return [*ours, partial(tool_trial, plan, round_, protocol, NGHTTP, argv, True)]
    argv = gtlsclient_argv(plan, port, None)
    return [
        *ours,
        partial(tool_trial, plan, round_, protocol, GTLSCLIENT, argv, False),
        partial(gtlsclient_session_trial, plan, round_, port),
    ]


@contextmanager
def our_servers(plan: Plan, protocols: Sequence[str], core: int) -> Iterator[dict[str, int]]:
    """A periodic server agent per protocol, pinned to `core`: their ports."""
    tls = ["--cert", str(plan.credentials.server_cert), "--key", str(plan.credentials.server_key)]
    with ExitStack() as stack:
        ports = {}
        for protocol in protocols:
            argv = [
                sys.executable, "-m", "agent.cli", "serve", "--workload", "periodic",
                "--protocol", protocol, "--port", "0", *([] if protocol == "h2c" else tls),
                "--trial-log", str(plan.out / f"server-{protocol}.jsonl"),
            ]  # fmt: skip
            log = plan.out / f"server-{protocol}.log"
            ports[protocol] = stack.enter_context(pinned_server(argv, core, log, True)).port
        yield ports


def _ms(values: Sequence[float]) -> str:
    return f"{statistics.median(values):.2f}" if values else "-"


def _ratio(values: Sequence[float]) -> str:
    if not values:
        return "-"
    low, high = median_interval(values)
    return f"{statistics.median(values):.2f} ({low:.2f}..{high:.2f})"


def _rounds(
    by_round: dict[tuple[int, str], dict[str, Trial]], protocol: str, *clients: str
) -> list[dict[str, Trial]]:
    """The rounds of `protocol` in which all of `clients` ran, in order."""
    return [
        r for (_, p), r in sorted(by_round.items()) if p == protocol and set(clients) <= r.keys()
    ]


def summary(trials: Sequence[Trial]) -> str:
    """Per pair: medians over rounds, and the medians of the rounds' paired ratios (90 %
    bootstrap intervals); then what resumption saves each client."""
    by_round: dict[tuple[int, str], dict[str, Trial]] = {}
    for trial in trials:
        by_round.setdefault((trial.round, trial.protocol), {})[trial.client] = trial
    lines = [
        "| protocol | ours | anchor (per exchange) | rounds | ours CPU ms/exchange: window "
        "| ours: process | anchor: process | ours / anchor: window | ours / anchor: process "
        "| our handshakes (last round) |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for protocol, connection, anchor in PAIRS:
        ours = f"ours/{connection}"
        rounds = _rounds(by_round, protocol, ours, anchor)
        if not rounds:
            continue
        lines.append(
            f"| {protocol} | {connection} | {anchor} | {len(rounds)} "
            f"| {_ms([r[ours].window_cpu_ms for r in rounds])} "
            f"| {_ms([r[ours].process_cpu_ms for r in rounds])} "
            f"| {_ms([r[anchor].process_cpu_ms for r in rounds])} "
            f"| {_ratio([r[ours].window_cpu_ms / r[anchor].process_cpu_ms for r in rounds])} "
            f"| {_ratio([r[ours].process_cpu_ms / r[anchor].process_cpu_ms for r in rounds])} "
            f"| {rounds[-1][ours].handshakes} |"
        )
    lines += [
        "",
        "| protocol | client | resumed / new (window) | resumed / new (process) |",
        "|---|---|---:|---:|",
    ]
    savings = (
        ("h2", "ours", "ours/resume", "ours/new"),
        ("h3", "ours", "ours/resume", "ours/new"),
        ("h3", GTLSCLIENT, GTLSCLIENT_SESSION, GTLSCLIENT),
    )
    for protocol, name, resumed, new in savings:
        rounds = _rounds(by_round, protocol, resumed, new)
        if rounds:
            lines.append(
                f"| {protocol} | {name} "
                f"| {_ratio([r[resumed].window_cpu_ms / r[new].window_cpu_ms for r in rounds])} "
                f"| {_ratio([r[resumed].process_cpu_ms / r[new].process_cpu_ms for r in rounds])} |"
            )
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--count", type=int, default=20, help="exchanges per client and round")
    parser.add_argument("--interval-s", type=float, default=0.1)
    parser.add_argument("--response-bytes", type=int, default=1024)
    parser.add_argument("--protocols", default=",".join(PROTOCOLS))
    parser.add_argument("--server-core", type=int, default=0)
    parser.add_argument("--client-core", type=int, default=1)
    parser.add_argument("--out", type=Path, help="results directory (default data/bench/...)")
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run: 2 rounds of 5 exchanges 0.05 s apart"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.count, args.interval_s = 2, 5, 0.05
    args.protocols = args.protocols.split(",")
    unknown = [p for p in args.protocols if p not in PROTOCOLS]
    if unknown:
        parser.error(f"--protocols: {', '.join(unknown)} not one of {', '.join(PROTOCOLS)}")
    if args.count < 2 or args.interval_s <= 0:
        parser.error("--count must be 2 or more and --interval-s above 0 (a resumption needs two)")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    tools = [NGHTTP] * bool({"h2c", "h2"} & set(args.protocols)) + [GTLSCLIENT] * (
        "h3" in args.protocols
    )
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        print(f"periodic_cpu: error: {', '.join(missing)} not on PATH (.ci/apt/)", file=sys.stderr)
        return 2
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = args.out or REPO / "data" / "bench" / f"periodic-cpu-{stamp}"
    out.mkdir(parents=True, exist_ok=True)
    credentials = run_credentials(out, ["127.0.0.1", "localhost"], stamp)
    plan = Plan(
        credentials, args.count, args.interval_s, args.response_bytes, args.client_core, out
    )
    try:
        trials = run_rounds(plan, args)
    except (BenchError, RuntimeError, subprocess.TimeoutExpired) as exc:
        print(f"periodic_cpu: error: {exc}", file=sys.stderr)
        return 1
    (out / "summary.md").write_text(summary(trials))
    print((out / "summary.md").read_text())
    return 0


def run_rounds(plan: Plan, args: argparse.Namespace) -> list[Trial]:
    """Every client of every protocol once a round, in an order rotating round by round (each
    takes each place in turn); measurements.csv rewritten after each round."""
    trials: list[Trial] = []
    with our_servers(plan, args.protocols, args.server_core) as ports:
        if "h3" in ports:
            check_gtlsclient_resumes(plan, ports["h3"])
        for round_ in range(args.rounds):
            steps = [
                step
                for protocol in args.protocols
                for step in cases(plan, round_, protocol, ports[protocol])
            ]
            shift = round_ % len(steps)
            for step in steps[shift:] + steps[:shift]:
                trials.append(step())
                print(trials[-1], flush=True)
            write_csv(plan.out / "measurements.csv", trials)
    return trials


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    sys.exit(main())
