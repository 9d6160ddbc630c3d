"""Benchmark: our server against nghttpd under load, on small resources.

Where the page benchmark (agent_vs_nghttp2.py) measures one connection moving a 7 MB page at
the study's windows, this one measures many clients asking for small bodies, the shape of the
API workload to come: `h2load -c C -m M -n N` for the load profiles (default `-c100 -m10` and
`-c500 -m1`), all requests for the same resource, `/blob/<size>`.

Both servers serve the same bytes at the same path: ours mounts the blob workload (`serve
--workload blob`, which builds each body once, in memory), nghttpd gets a directory holding
`blob/<size>` with the blob workload's body of that size (agent.workloads.bodies), so the
bytes on the wire differ only in the response headers each server adds. For every run and
load profile both servers start afresh, side by side as children of this script, pinned to one
core, h2load to the other, and are measured one after the other in an order that alternates
between runs:

- req/s: h2load's own figure (requests completed over its run time); every run must end with
  all N requests succeeded (h2load's "N succeeded, 0 failed, 0 errored"), else it is an error;
- peak RSS: the server's VmHWM over the h2load run, its mark reset just before
  (`/proc/PID/clear_refs`); a fresh process each time, so no profile inherits the memory an
  earlier one left allocated; idle RSS: VmRSS just before;
- server CPU per request: the scheduler's count for the server (/proc/PID/task/*/schedstat).

The machine may be shared: each ratio is ours / nghttpd's within one run, and the table shows
the median over runs of those paired ratios, beside the medians of the absolute figures.

Run from the repository root with the project's venv:
    .venv/bin/python benchmarks/small_resources.py [--runs 3] [--requests 20000] [--size 1024]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench_support import free_port, pinned, process_cpu_s, terminated, write_csv

from agent.workloads.blob.body import PATH_PREFIX
from agent.workloads.bodies import blob_body

REPO = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 20.0
PROFILES = ((100, 10), (500, 1))  # (connections, streams per connection), as issue 13 measured


class BenchError(Exception):
    pass


@dataclass(frozen=True)
class Setup:
    size_bytes: int
    requests: int
    server_core: int
    client_core: int
    timeout_s: float


@dataclass(frozen=True)
class Measurement:
    run: int
    server: str  # "ours" or "nghttpd"
    clients: int  # h2load -c
    streams: int  # h2load -m
    requests: int
    req_per_s: float
    rss_idle_bytes: int
    rss_peak_bytes: int
    server_cpu_s: float
    wall_s: float


# processes -------------------------------------------------------------------------------------


def _listening_port(stderr: Path, process: subprocess.Popen[bytes]) -> int:
    """Our server's port from its JSON listening line."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        for line in stderr.read_text().splitlines():
            if line.startswith("{") and json.loads(line).get("event") == "listening":
                return int(json.loads(line)["port"])
        if process.poll() is not None:
            raise BenchError(f"our server exited {process.returncode}: {stderr.read_text()}")
        time.sleep(0.05)
    raise BenchError("our server is not listening")


def _nghttpd_port(pid: int, process: subprocess.Popen[bytes]) -> int:
    """nghttpd's port: it was given one; wait until a socket of its listens on it."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise BenchError(f"nghttpd exited {process.returncode}")
        inodes = set()
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            for row in Path(table).read_text().splitlines()[1:]:
                fields = row.split()
                if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                    return int(fields[1].rsplit(":", 1)[1], 16)
        time.sleep(0.05)
    raise BenchError("nghttpd is not listening")


@contextmanager
def our_server(setup: Setup, log: Path) -> Iterator[tuple[int, int]]:
    """`serve --workload blob` on a free port, pinned; yields (pid, port)."""
    args = [sys.executable, "-m", "agent.cli", "serve", "--workload", "blob", "--port", "0"]
    args += ["--trial-log", os.devnull]
    with log.open("w") as err, pinned(setup.server_core):
        process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err)
    with terminated(process):
        yield process.pid, _listening_port(log, process)


@contextmanager
def nghttpd(setup: Setup, root: Path, port: int, log: Path) -> Iterator[tuple[int, int]]:
    args = ["nghttpd", "--no-tls", "-d", str(root), str(port)]
    with log.open("w") as err, pinned(setup.server_core):
        process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err)
    with terminated(process):
        yield process.pid, _nghttpd_port(process.pid, process)


def reset_peak_rss(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_bytes(b"5")


def status_bytes(pid: int, field: str) -> int:
    """A memory figure of /proc/PID/status (VmRSS, VmHWM), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise BenchError(f"no {field} for {pid}")


# one measurement -------------------------------------------------------------------------------

_REQ_PER_S = re.compile(r"finished in [\d.]+\w+, ([\d.]+) req/s")


def load(
    run: int, name: str, pid: int, port: int, profile: tuple[int, int], setup: Setup
) -> Measurement:
    clients, streams = profile
    url = f"http://127.0.0.1:{port}{PATH_PREFIX}{setup.size_bytes}"
    args = ["h2load", "-n", str(setup.requests), "-c", str(clients), "-m", str(streams), url]
    idle = status_bytes(pid, "VmRSS")
    reset_peak_rss(pid)
    cpu_before = process_cpu_s(pid)
    with pinned(setup.client_core):
        started = time.monotonic()
        result = subprocess.run(
            args, capture_output=True, text=True, timeout=setup.timeout_s, check=False
        )
        wall_s = time.monotonic() - started
    cpu_s = process_cpu_s(pid) - cpu_before
    peak = status_bytes(pid, "VmHWM")
    done = f"{setup.requests} succeeded, 0 failed, 0 errored"
    rate = _REQ_PER_S.search(result.stdout)
    if result.returncode != 0 or done not in result.stdout or rate is None:
        raise BenchError(f"{name}: h2load {' '.join(args[1:])} did not complete:\n{result.stdout}")
    body = re.search(r"traffic: .*\((\d+)\) data", result.stdout)
    if body is None or int(body.group(1)) != setup.requests * setup.size_bytes:
        raise BenchError(f"{name}: h2load received the wrong number of body bytes")
    return Measurement(
        run, name, clients, streams, setup.requests, float(rate.group(1)), idle, peak, cpu_s, wall_s
    )


# summary ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    clients: int
    streams: int
    runs: int
    req_per_s_ratio: float  # ours / nghttpd's, median of paired runs
    rss_peak_ratio: float
    cpu_per_request_ratio: float
    ours_req_per_s: float  # medians
    nghttpd_req_per_s: float
    ours_rss_peak_mib: float
    nghttpd_rss_peak_mib: float
    ours_rss_idle_mib: float
    nghttpd_rss_idle_mib: float
    ours_cpu_us_per_request: float
    nghttpd_cpu_us_per_request: float


def summarise(measurements: Sequence[Measurement]) -> list[Row]:
    rows = []
    for clients, streams in sorted({(m.clients, m.streams) for m in measurements}):
        runs: dict[int, dict[str, Measurement]] = {}
        for m in measurements:
            if (m.clients, m.streams) == (clients, streams):
                runs.setdefault(m.run, {})[m.server] = m
        paired = [pair for pair in runs.values() if set(pair) == {"ours", "nghttpd"}]
        if not paired:
            continue

        rows.append(
            Row(
                clients=clients,
                streams=streams,
                runs=len(paired),
                req_per_s_ratio=_ratio(paired, _req_per_s),
                rss_peak_ratio=_ratio(paired, _rss_peak_mib),
                cpu_per_request_ratio=_ratio(paired, _cpu_us_per_request),
                ours_req_per_s=_median(paired, "ours", _req_per_s),
                nghttpd_req_per_s=_median(paired, "nghttpd", _req_per_s),
                ours_rss_peak_mib=_median(paired, "ours", _rss_peak_mib),
                nghttpd_rss_peak_mib=_median(paired, "nghttpd", _rss_peak_mib),
                ours_rss_idle_mib=_median(paired, "ours", _rss_idle_mib),
                nghttpd_rss_idle_mib=_median(paired, "nghttpd", _rss_idle_mib),
                ours_cpu_us_per_request=_median(paired, "ours", _cpu_us_per_request),
                nghttpd_cpu_us_per_request=_median(paired, "nghttpd", _cpu_us_per_request),
            )
        )
    return rows


Pair = dict[str, Measurement]


def _ratio(pairs: Sequence[Pair], value: Callable[[Measurement], float]) -> float:
    """Median over runs of ours / nghttpd's, each within one run."""
    return statistics.median(value(p["ours"]) / value(p["nghttpd"]) for p in pairs)


def _median(pairs: Sequence[Pair], server: str, value: Callable[[Measurement], float]) -> float:
    return statistics.median(value(p[server]) for p in pairs)


def _req_per_s(m: Measurement) -> float:
    return m.req_per_s


def _rss_peak_mib(m: Measurement) -> float:
    return m.rss_peak_bytes / 2**20


def _rss_idle_mib(m: Measurement) -> float:
    return m.rss_idle_bytes / 2**20


def _cpu_us_per_request(m: Measurement) -> float:
    return m.server_cpu_s / m.requests * 1e6


def markdown_table(rows: Sequence[Row]) -> str:
    lines = [
        "| h2load | req/s ours / nghttpd | peak RSS ours / nghttpd | server CPU per request "
        "ours / nghttpd | req/s: ours, nghttpd | peak RSS MiB: ours, nghttpd | idle RSS MiB: "
        "ours, nghttpd | CPU us/request: ours, nghttpd |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| -c{r.clients} -m{r.streams} | {r.req_per_s_ratio:.3f} | {r.rss_peak_ratio:.2f} | "
            f"{r.cpu_per_request_ratio:.1f} | {r.ours_req_per_s:,.0f}, {r.nghttpd_req_per_s:,.0f} "
            f"| {r.ours_rss_peak_mib:.0f}, {r.nghttpd_rss_peak_mib:.0f} | "
            f"{r.ours_rss_idle_mib:.0f}, {r.nghttpd_rss_idle_mib:.0f} | "
            f"{r.ours_cpu_us_per_request:.0f}, {r.nghttpd_cpu_us_per_request:.0f} |"
        )
    return "\n".join(lines)


def describe(setup: Setup, runs: int) -> str:
    h2load = subprocess.run(["h2load", "--version"], capture_output=True, text=True, check=False)
    return (
        f"{setup.size_bytes}-byte bodies (/blob/{setup.size_bytes}), {setup.requests} requests "
        f"per h2load run, {runs} runs; servers on core {setup.server_core}, h2load on core "
        f"{setup.client_core}; {h2load.stdout.strip()}, Python {platform.python_version()}, "
        f"{platform.machine()}, {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.1f} at the end"
    )


# main ------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="interleaved runs (median is shown)")
    parser.add_argument("--requests", type=int, default=20000, help="h2load -n per run")
    parser.add_argument("--size", type=int, default=1024, help="body bytes of each response")
    parser.add_argument(
        "--profiles",
        default=",".join(f"{c}x{m}" for c, m in PROFILES),
        help="h2load -c and -m pairs, CxM,... (default 100x10,500x1)",
    )
    parser.add_argument("--out", type=Path, help="results directory (default data/bench/...)")
    parser.add_argument("--server-core", type=int, default=0)
    parser.add_argument("--client-core", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per h2load run")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    profiles = [_profile(text) for text in args.profiles.split(",")]
    setup = Setup(args.size, args.requests, args.server_core, args.client_core, args.timeout)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = args.out or REPO / "data" / "bench" / f"small-resources-{stamp}"
    out.mkdir(parents=True, exist_ok=True)
    measurements: list[Measurement] = []
    with tempfile.TemporaryDirectory(prefix="h2iot-bench-") as tmp:
        root = Path(tmp) / "root"
        (root / PATH_PREFIX.strip("/")).mkdir(parents=True)
        (root / PATH_PREFIX.strip("/") / str(setup.size_bytes)).write_bytes(
            blob_body(setup.size_bytes)
        )
        for run in range(args.runs):
            for profile in profiles:
                # Fresh servers for every profile: a peak is that load's alone.
                with (
                    our_server(setup, out / "ours.log") as ours,
                    nghttpd(setup, root, free_port(), out / "nghttpd.log") as theirs,
                ):
                    servers = {"ours": ours, "nghttpd": theirs}
                    order = ["ours", "nghttpd"] if run % 2 == 0 else ["nghttpd", "ours"]
                    for name in order:
                        pid, port = servers[name]
                        m = load(run, name, pid, port, profile, setup)
                        measurements.append(m)
                        print(
                            f"run {run + 1} -c{m.clients} -m{m.streams} {name}: "
                            f"{m.req_per_s:,.0f} req/s, peak RSS {m.rss_peak_bytes / 2**20:.0f} "
                            f"MiB, CPU {m.server_cpu_s / m.requests * 1e6:.0f} us/request",
                            flush=True,
                        )
    rows = summarise(measurements)
    write_csv(out / "measurements.csv", measurements)
    write_csv(out / "summary.csv", rows)
    text = f"{describe(setup, args.runs)}\n\n{markdown_table(rows)}\n"
    (out / "summary.md").write_text(text)
    print(text)
    print(f"written to {out}")
    return 0


def _profile(text: str) -> tuple[int, int]:
    clients, _, streams = text.partition("x")
    return int(clients), int(streams)


if __name__ == "__main__":
    sys.exit(main())
