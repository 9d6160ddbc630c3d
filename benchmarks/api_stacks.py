"""Benchmark: the api workload's two anchors, side by side on the same database and load.

1. Our client against h2load: the same 7 list endpoints, the same users as streams on one
   connection (`h2load -c 1 -m USERS -n USERS*LOOPS*7` over the 7 URLs; our client `trial
   --workload api --param users=USERS --param loops=LOOPS`), against the same server, both
   with h2load's default stream and connection windows (2^30 - 1 bytes): req/s of ours /
   h2load's shows whether the client is the bottleneck (target >= 0.8).
2. Our server against hypercorn + Starlette: both serve the same API (agent.workloads.api.rest)
   over the same SQLite file and data layer, each loaded by h2load as above: req/s ours /
   hypercorn's (target >= 1.0) and server CPU per request ours / hypercorn's (target <= 1.0).

For every run, data layer and stack, a fresh server starts pinned to one core (`serve --workload
api [--engine hypercorn] --root DB --param data_layer=...`, MAX_CONCURRENT_STREAMS >= USERS) and
the two clients, pinned to the other core, run one after the other in an order that alternates
between runs. Server CPU: the scheduler's count for the server process over each client's run
(bench_support.process_cpu_s), divided by the requests. Peak RSS: the server's VmHWM over the
run, reset before it. A run counts only if every request was answered 200.

The machine may be shared: each ratio is taken within one run and the table shows the median
over runs, beside the medians of the absolute figures.

    .venv/bin/python benchmarks/api_stacks.py [--runs 3] [--users 64] [--loops 10] [--records 1000]
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench_support import pinned, process_cpu_s, terminated, write_csv

from agent.workloads.api.client import list_paths
from agent.workloads.api.store import build_database

REPO = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 60.0
STACKS = ("h2", "hypercorn")
LAYERS = ("sql", "orm")
H2LOAD_WINDOW = 2**30 - 1  # h2load's default stream and connection windows (-w 30 -W 30)


class BenchError(Exception):
    pass


@dataclass(frozen=True)
class Setup:
    users: int
    loops: int
    database: Path
    server_core: int
    client_core: int
    timeout_s: float

    @property
    def requests(self) -> int:
        return self.users * self.loops * 7


@dataclass(frozen=True)
class Measurement:
    run: int
    stack: str  # the server: "h2" (ours) or "hypercorn"
    data_layer: str
    client: str  # "h2load" or "ours"
    requests: int
    req_per_s: float
    server_cpu_us_per_request: float
    server_rss_peak_mib: float


@contextmanager
def server(
    setup: Setup, stack: str, layer: str, log: Path
) -> Iterator[tuple[int, dict[str, object]]]:
    args = [sys.executable, "-m", "agent.cli", "serve", "--workload", "api", "--port", "0"]
    args += ["--engine", stack, "--root", str(setup.database), "--param", f"data_layer={layer}"]
    args += ["--setting", f"max_concurrent_streams={max(100, setup.users)}"]
    args += ["--trial-log", str(log.with_suffix(".trials"))]
    with log.open("w") as err, pinned(setup.server_core):
        process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err, cwd=REPO)
    with terminated(process):
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            for line in log.read_text().splitlines():
                if line.startswith("{") and json.loads(line).get("event") == "listening":
                    yield process.pid, json.loads(line)
                    return
            if process.poll() is not None:
                raise BenchError(f"{stack} server exited {process.returncode}: {log.read_text()}")
            time.sleep(0.05)
        raise BenchError(f"{stack} server is not listening")


def _status_mib(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise BenchError(f"no {field} for {pid}")


_H2LOAD_RATE = re.compile(r"finished in [\d.]+\w+, ([\d.]+) req/s")


def h2load(setup: Setup, port: int) -> float:
    urls = [f"http://127.0.0.1:{port}{path}" for path in list_paths("/", 50)]
    args = ["h2load", "-n", str(setup.requests), "-c", "1", "-m", str(setup.users), *urls]
    result = subprocess.run(
        args, capture_output=True, text=True, timeout=setup.timeout_s, check=False
    )
    rate = _H2LOAD_RATE.search(result.stdout)
    codes = re.search(r"status codes: (\d+) 2xx", result.stdout)
    if result.returncode != 0 or rate is None or codes is None or int(codes[1]) != setup.requests:
        raise BenchError(f"h2load did not get {setup.requests} 2xx answers:\n{result.stdout}")
    return float(rate[1])


def ours(setup: Setup, port: int, listening: dict[str, object], trial_id: str) -> float:
    args = [sys.executable, "-m", "agent.cli", "trial", f"http://127.0.0.1:{port}/"]
    args += ["--workload", "api", "--json", "--trial-id", trial_id]
    args += ["--param", f"users={setup.users}", "--param", f"loops={setup.loops}"]
    args += ["--setting", f"max_concurrent_streams={max(100, setup.users)}"]
    # h2load's windows (its default -w 30 -W 30): the comparison is of clients, not windows.
    args += ["--setting", f"initial_window_size={H2LOAD_WINDOW}"]
    args += ["--connection-window", str(H2LOAD_WINDOW)]
    if listening.get("control_port") is not None:
        args += ["--trial-control", f"127.0.0.1:{listening['control_port']}"]
    result = subprocess.run(
        args, capture_output=True, text=True, timeout=setup.timeout_s, check=False, cwd=REPO
    )
    try:
        record = json.loads(result.stdout)
    except json.JSONDecodeError:
        raise BenchError(f"our client printed no record: {result.stderr}") from None
    metrics = record["metrics"]
    if not record["ok"] or metrics["errors"] or metrics["requests"] != setup.requests:
        raise BenchError(f"our client's trial failed: {record['error']} {metrics}")
    return float(metrics["throughput_rps"])


def measure(run: int, setup: Setup, stack: str, layer: str, out: Path) -> list[Measurement]:
    clients = ("h2load", "ours") if run % 2 else ("ours", "h2load")
    measured = []
    with server(setup, stack, layer, out / f"server-{run}-{stack}-{layer}.log") as (pid, listening):
        port = int(str(listening["port"]))
        for client in clients:
            Path(f"/proc/{pid}/clear_refs").write_bytes(b"5")
            before = process_cpu_s(pid)
            with pinned(setup.client_core):
                if client == "h2load":
                    rate = h2load(setup, port)
                else:
                    rate = ours(setup, port, listening, f"bench-{run}-{stack}-{layer}")
            cpu_s = process_cpu_s(pid) - before
            measured.append(
                Measurement(
                    run,
                    stack,
                    layer,
                    client,
                    setup.requests,
                    rate,
                    cpu_s / setup.requests * 1e6,
                    _status_mib(pid, "VmHWM"),
                )
            )
    return measured


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def summary(measurements: list[Measurement], setup: Setup, runs: int) -> str:
    def pairs(
        first: tuple[str, str, str], second: tuple[str, str, str]
    ) -> list[tuple[Measurement, Measurement]]:
        """(stack, layer, client) twice -> the two measurements of each run."""
        by_key = {(m.run, m.stack, m.data_layer, m.client): m for m in measurements}
        return [(by_key[(r, *first)], by_key[(r, *second)]) for r in range(1, runs + 1)]

    def ratio(paired: list[tuple[Measurement, Measurement]], field: str) -> str:
        return f"{_median([getattr(a, field) / getattr(b, field) for a, b in paired]):.2f}"

    def both(paired: list[tuple[Measurement, Measurement]], field: str, form: str) -> str:
        a = _median([getattr(m, field) for m, _ in paired])
        b = _median([getattr(m, field) for _, m in paired])
        return f"{a:{form}}, {b:{form}}"

    lines = [
        f"{setup.users} users x {setup.loops} loops x 7 list endpoints = {setup.requests} "
        f"requests per measurement, {runs} runs, server on core {setup.server_core}, clients "
        f"on core {setup.client_core}; medians over runs ({platform.node()}, "
        f"{platform.python_version()}).",
        "",
        "Our client against h2load (same server and endpoints, users as streams of one "
        "connection):",
        "",
        "| server | data layer | req/s ours / h2load | req/s: ours, h2load |",
        "|---|---|---:|---:|",
    ]
    for stack in STACKS:
        for layer in LAYERS:
            paired = pairs((stack, layer, "ours"), (stack, layer, "h2load"))
            lines.append(
                f"| {stack} | {layer} | {ratio(paired, 'req_per_s')} | "
                f"{both(paired, 'req_per_s', ',.0f')} |"
            )
    lines += [
        "",
        "Our server against hypercorn + Starlette (h2load's load, same database and layer):",
        "",
        "| data layer | req/s ours / hypercorn | CPU per request ours / hypercorn "
        "| req/s: ours, hypercorn | CPU us/request: ours, hypercorn "
        "| peak RSS MiB: ours, hypercorn |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for layer in LAYERS:
        paired = pairs(("h2", layer, "h2load"), ("hypercorn", layer, "h2load"))
        lines.append(
            f"| {layer} | {ratio(paired, 'req_per_s')} | "
            f"{ratio(paired, 'server_cpu_us_per_request')} | "
            f"{both(paired, 'req_per_s', ',.0f')} | "
            f"{both(paired, 'server_cpu_us_per_request', ',.0f')} | "
            f"{both(paired, 'server_rss_peak_mib', '.0f')} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--users", type=int, default=64)
    parser.add_argument("--loops", type=int, default=10)
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--server-core", type=int, default=0)
    parser.add_argument("--client-core", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = args.out or REPO / "data" / "bench" / f"api-stacks-{stamp}"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="api-bench-") as tmp:
        database = Path(tmp) / "inventory.sqlite"
        build_database(database, args.records)
        setup = Setup(
            args.users, args.loops, database, args.server_core, args.client_core, args.timeout
        )
        measurements: list[Measurement] = []
        try:
            for run in range(1, args.runs + 1):
                for stack in STACKS if run % 2 else STACKS[::-1]:
                    for layer in LAYERS:
                        measurements += measure(run, setup, stack, layer, out)
                        print(f"run {run} {stack} {layer}: {measurements[-2:]}", flush=True)
        finally:
            write_csv(out / "measurements.csv", measurements)
    text = summary(measurements, setup, args.runs)
    (out / "summary.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
