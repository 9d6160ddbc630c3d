"""Benchmark: what the nghttp2 engine's server traces cost its servers' own CPU: `nghttpd -v`
(its frame log, a line or more per frame, read from a pipe as the agent's relay reads it)
against plain `nghttpd`, and `gtlsserver --qlog-dir` against plain `gtlsserver`
(agent/README.md, Event traces).

Per protocol, the two servers run side by side pinned to one core (the traced one's output
read and dropped by a thread, as the agent reads it), the study's client fetches the default
site's page from each in turn pinned to the other core (`nghttp -nas` over h2c, `gtlsclient`
over HTTP/3 with every URL), and each fetch's server CPU is the server process's scheduler time
(/proc/PID/task/*/schedstat) before and after: the figure the nghttp2 engine's trial records as
`server_cpu_s`. Fetches alternate which server goes first, so the machine's other work falls
on both; the table gives each median and the median of the paired ratios with a seeded 90 %
bootstrap interval.

Run from the repository root with the project's venv:
    .venv/bin/python benchmarks/server_trace_cost.py [--fetches 20] [--windows 4095,65535]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from agent_vs_nghttp2 import nghttp2_bits, prepare_site
from bench_support import (
    free_port,
    median_interval,
    pinned,
    process_cpu_s,
    terminated,
    write_csv,
)
from h3_vs_ngtcp2 import fixed_windows

from controller.run.tls import run_credentials

REPO = Path(__file__).resolve().parent.parent
START_S = 1.0  # neither server says when it listens: give it this long


@dataclass(frozen=True)
class Fetch:
    round: int
    protocol: str  # h2c (nghttpd) or h3 (gtlsserver)
    window: int
    traced: bool
    server_cpu_s: float


def _drain(stream: IO[bytes]) -> None:
    while stream.read(65536):
        pass


@contextmanager
def _server(argv: Sequence[str], core: int) -> Iterator[int]:
    """The server pinned to `core`, its output read and dropped; its pid."""
    with pinned(core):
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert process.stdout is not None
    threading.Thread(target=_drain, args=(process.stdout,), daemon=True).start()
    with terminated(process):
        time.sleep(START_S)
        if process.poll() is not None:
            raise RuntimeError(f"{argv[0]} exited {process.returncode}")
        yield process.pid


def _fetch(argv: Sequence[str], core: int, server_pid: int) -> float:
    """One client run to completion on `core`; the server's CPU seconds over it."""
    before = process_cpu_s(server_pid)
    with pinned(core):
        result = subprocess.run(argv, capture_output=True, timeout=600, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{argv[0]} exited {result.returncode}: {result.stderr[-300:]!r}")
    time.sleep(0.2)  # the server's close (QUIC's draining period) falls in this fetch's count
    return process_cpu_s(server_pid) - before


def measure(args: argparse.Namespace, paths: Sequence[str], out: Path) -> list[Fetch]:
    site, windows = str(args.site), [int(w) for w in args.windows.split(",")]
    credentials = run_credentials(out, ["127.0.0.1", "localhost"], "bench")
    tls = [str(credentials.server_key), str(credentials.server_cert)]
    fetches: list[Fetch] = []
    qlog_dir = Path(tempfile.mkdtemp(prefix="bench-gtlsserver-qlog-"))
    ports = {name: free_port() for name in ("plain", "v", "q", "qlog")}
    try:
        with (
            _server(["nghttpd", "--no-tls", "-d", site, str(ports["plain"])], args.server_core)
            as h2_plain,
            _server(
                ["nghttpd", "-v", "--no-tls", "-d", site, str(ports["v"])], args.server_core
            ) as h2_traced,
            _server(
                ["gtlsserver", "-q", "-d", site, "127.0.0.1", str(ports["q"]), *tls],
                args.server_core,
            ) as h3_plain,
            _server(
                [
                    "gtlsserver", "-q", f"--qlog-dir={qlog_dir}", "-d", site,
                    "127.0.0.1", str(ports["qlog"]), *tls,
                ],
                args.server_core,
            ) as h3_traced,
        ):  # fmt: skip
            for round_ in range(args.fetches):
                for window in windows:
                    bits = str(nghttp2_bits(window))
                    cases = []
                    for traced, pid, port in ((False, h2_plain, "plain"), (True, h2_traced, "v")):
                        nghttp = ["nghttp", "-nas", "--no-push", "--no-dep", "-w", bits, "-W"]
                        url = f"http://127.0.0.1:{ports[port]}/"
                        cases.append(("h2c", traced, pid, [*nghttp, bits, url]))
                    for traced, pid, port in ((False, h3_plain, "q"), (True, h3_traced, "qlog")):
                        urls = [f"https://127.0.0.1:{ports[port]}/{path}" for path in paths]
                        gtls = ["gtlsclient", "-q", "--exit-on-all-streams-close"]
                        argv = [*gtls, *fixed_windows(window), "127.0.0.1", str(ports[port])]
                        cases.append(("h3", traced, pid, [*argv, *urls]))
                    order = cases if round_ % 2 == 0 else cases[::-1]
                    for protocol, traced, pid, argv in order:
                        cpu_s = _fetch(argv, args.client_core, pid)
                        fetches.append(Fetch(round_, protocol, window, traced, cpu_s))
                    for path in qlog_dir.iterdir():
                        path.unlink()
                print(f"round {round_ + 1}/{args.fetches}", flush=True)
                write_csv(out / "measurements.csv", fetches)
    finally:
        shutil.rmtree(qlog_dir, ignore_errors=True)
    return fetches


def summary(fetches: Sequence[Fetch]) -> str:
    lines = [
        "| server | window (bytes) | fetches | untraced: server CPU ms | traced: server CPU ms "
        "| traced / untraced (median of paired ratios) | 90 % interval |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    names = {"h2c": "nghttpd -v", "h3": "gtlsserver --qlog-dir"}
    for protocol in ("h2c", "h3"):
        for window in sorted({f.window for f in fetches}):
            pairs: dict[int, dict[bool, float]] = {}
            for f in fetches:
                if f.protocol == protocol and f.window == window:
                    pairs.setdefault(f.round, {})[f.traced] = f.server_cpu_s
            both = [p for p in pairs.values() if len(p) == 2]
            ratios = [p[True] / p[False] for p in both]
            low, high = median_interval(ratios)
            lines.append(
                f"| {names[protocol]} | {window} | {len(both)} "
                f"| {1e3 * statistics.median(p[False] for p in both):.1f} "
                f"| {1e3 * statistics.median(p[True] for p in both):.1f} "
                f"| {statistics.median(ratios):.2f} | {low:.2f} .. {high:.2f} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fetches", type=int, default=20, help="fetches per server and window")
    parser.add_argument("--windows", default="4095,65535", help="2^N - 1 bytes each (nghttp's)")
    parser.add_argument("--site", type=Path, default=REPO / "data" / "site")
    parser.add_argument("--out", type=Path, help="results directory (default data/bench/...)")
    parser.add_argument("--server-core", type=int, default=0)
    parser.add_argument("--client-core", type=int, default=1)
    args = parser.parse_args(argv)
    for tool in ("nghttp", "nghttpd", "gtlsclient", "gtlsserver"):
        if shutil.which(tool) is None:
            print(f"server_trace_cost: error: {tool} not on PATH", file=sys.stderr)
            return 2
    args.site = args.site.resolve()
    paths, _page_bytes = prepare_site(args.site)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = args.out or REPO / "data" / "bench" / f"server-trace-cost-{stamp}"
    out.mkdir(parents=True, exist_ok=True)
    table = summary(measure(args, paths, out))
    (out / "summary.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
