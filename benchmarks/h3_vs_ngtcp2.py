"""Benchmark: the agent's HTTP/3 client against ngtcp2's, and against its own HTTP/2 over TLS.

For each window, page fetches of the default ~7 MB site on loopback, in runs whose cases
alternate order (the machine may be shared: the table shows medians of paired ratios):

1. `gtlsclient` -> `gtlsserver`: ngtcp2's client, one process per fetch (all 8 resources on
   one connection), fixed windows, bodies dropped (ours hashes and checks every one); its whole
   process's CPU (getrusage of the reaped child).
2. our client (`h2iot-agent fetch --protocol h3`) -> `gtlsserver`: the same server; the CPU of
   each fetch as its record gives it (the trial's own window), and the whole process's / F.
3. our client over HTTP/2 with TLS (`fetch https://...`) -> our server (`serve --tls`), and
   our client over HTTP/3 -> our server (`serve --protocol h3`): h3 against h2-over-TLS, the
   comparison that means something (both encrypted), each fetch's own CPU from its record.
4. with --baseline DIR, the client of another checkout (e.g. the previous commit's) ->
   `gtlsserver` as well: before/after ratios measured side by side, in a second table; with
   --events, ours writing each fetch's event trace (`--events-dir`) -> `gtlsserver` too, in
   that table: what a trace costs; with both, the baseline's client traced as well, so the
   table pairs ours traced with it: what a change to the tracing does.

The node's UDP receive-buffer drops (/proc/net/snmp Udp RcvbufErrors) are read around each
HTTP/3 client run: per fetch in the table. Windows are exact in every case: the stream window
W (initial_max_stream_data; SETTINGS_INITIAL_WINDOW_SIZE over h2) and the connection window
W as well, as the study set nghttp's -w and -W alike (ngtcp2: --max-data; auto-tuning off).
Servers run pinned to one core, clients to the other.

Run from the repository root with the project's venv (the h3 extra installed):
    .venv/bin/python benchmarks/h3_vs_ngtcp2.py [--fetches 20] [--runs 3] [--windows 256,4096,65535]
        [--baseline DIR] [--events] [--event-loop asyncio|uvloop] [--verify sha256|size]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from bench_support import pinned, terminated, write_csv

from agent.h3.udp import rcvbuf_errors
from agent.site import DEFAULT_TOTAL_BYTES, build_site, load_manifest
from controller.run.tls import run_credentials

REPO = Path(__file__).resolve().parent.parent
WINDOWS = (256, 4096, 65535)
CASES = ("ngtcp2", "ours-vs-ngtcp2", "ours-h3", "ours-h2-tls")
BASELINE = "baseline-vs-ngtcp2"  # --baseline's client against gtlsserver
TRACED = "traced-vs-ngtcp2"  # --events: ours writing each fetch's event trace, against gtlsserver
BASELINE_TRACED = "baseline-traced-vs-ngtcp2"  # --baseline and --events: the baseline's, traced
START_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class Measurement:
    run: int
    window: int
    case: str  # CASES, or BASELINE
    fetch_cpu_ms: float  # per fetch: the trial's own CPU (ours) or the whole process (ngtcp2)
    process_cpu_ms: float  # per fetch: the client process's whole CPU / fetches
    wall_ms: float  # per fetch: the client process's wall time / fetches
    udp_drops: float  # per fetch, the node's RcvbufErrors over the run (h3 cases)


@dataclass(frozen=True)
class Setup:
    site: Path
    urls: tuple[str, ...]
    ca: Path
    cert: Path
    key: Path
    fetches: int
    server_core: int
    client_core: int
    # Our client's `--event-loop` and the page's `verify`: every case of ours runs with them.
    event_loop: str = "asyncio"
    verify: str = "sha256"

    def client_options(self) -> list[str]:
        """Our client's options for them, none at the defaults (a --baseline checkout may
        predate the options)."""
        options = [] if self.event_loop == "asyncio" else ["--event-loop", self.event_loop]
        return options + ([] if self.verify == "sha256" else ["--param", f"verify={self.verify}"])


class Served(NamedTuple):
    """A running server: where it listens and its process (whose CPU server_vs_nghttpd.py
    reads)."""

    port: int
    pid: int


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def fixed_windows(window: int) -> list[str]:
    return [
        f"--max-stream-data-bidi-local={window}",
        f"--max-data={window}",
        "--max-window=0",
        "--max-stream-window=0",
    ]


def _child_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(
    argv: Sequence[str], core: int, timeout_s: float = 600, cwd: Path | None = None
) -> tuple[str, float, float]:
    """Run `argv` pinned to `core` (in `cwd`); its stdout, CPU seconds and wall seconds."""
    cpu, wall = _child_cpu_s(), time.perf_counter()
    with pinned(core):
        result = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout_s, check=False, cwd=cwd
        )
    if result.returncode != 0:
        raise RuntimeError(f"{argv[0]} exited {result.returncode}: {result.stderr[-400:]}")
    return result.stdout, _child_cpu_s() - cpu, time.perf_counter() - wall


@contextmanager
def pinned_server(
    argv: Sequence[str], core: int, log: Path, port_line: bool, cwd: Path | None = None
) -> Iterator[Served]:
    """A server process pinned to `core` (run in `cwd`); yields its UDP/TCP port (ours print
    it; ngtcp2's is given) and pid."""
    with log.open("w") as err, pinned(core):
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, cwd=cwd)
    with terminated(process):
        deadline = time.monotonic() + START_TIMEOUT_S
        while port_line:
            for line in log.read_text().splitlines():
                if line.startswith("{") and json.loads(line).get("event") == "listening":
                    yield Served(int(json.loads(line)["port"]), process.pid)
                    return
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{argv[2:4]} did not start: {log.read_text()[-400:]}")
            time.sleep(0.05)
        time.sleep(0.5)  # gtlsserver prints nothing when ready: let it bind
        yield Served(int(argv[argv.index("127.0.0.1") + 1]), process.pid)


def gtlsserver(setup: Setup, port: int, log: Path) -> AbstractContextManager[Served]:
    argv = [
        "gtlsserver", "-q", "-d", str(setup.site), *fixed_windows(65535),
        "127.0.0.1", str(port), str(setup.key), str(setup.cert),
    ]  # fmt: skip
    return pinned_server(argv, setup.server_core, log, port_line=False)


def our_server(
    setup: Setup,
    protocol: str,
    log: Path,
    options: Sequence[str] = (),
    tree: Path | None = None,
) -> AbstractContextManager[Served]:
    """`serve --protocol PROTOCOL` with `options`, from this checkout or (`tree`) another one."""
    argv = [
        sys.executable, "-m", "agent.cli", "serve", "--root", str(setup.site), "--port", "0",
        "--protocol", protocol, "--cert", str(setup.cert), "--key", str(setup.key),
        "--trial-log", str(log.with_suffix(".jsonl")), *options,
    ]  # fmt: skip
    return pinned_server(argv, setup.server_core, log, port_line=True, cwd=tree)


def _gtlsclient(setup: Setup, port: int, window: int, run: int) -> Measurement:
    """The anchor at its cheapest: bodies received and dropped (no --download), where our
    client hashes every body and checks it against the manifest."""
    urls = [f"https://127.0.0.1:{port}/{path}" for path in setup.urls]
    drops = rcvbuf_errors() or 0
    cpu = wall = 0.0
    for _ in range(setup.fetches):
        argv = [
            "gtlsclient", "-q", "--exit-on-all-streams-close", *fixed_windows(window),
            "127.0.0.1", str(port), *urls,
        ]  # fmt: skip
        _stdout, cpu_s, wall_s = _timed(argv, setup.client_core)
        cpu, wall = cpu + cpu_s, wall + wall_s
    per = 1e3 / setup.fetches
    udp = ((rcvbuf_errors() or 0) - drops) / setup.fetches
    return Measurement(run, window, "ngtcp2", cpu * per, cpu * per, wall * per, udp)


def _our_client(
    setup: Setup,
    url: str,
    window: int,
    run: int,
    case: str,
    tree: Path | None = None,
    events_dir: Path | None = None,
) -> Measurement:
    """Our client, from this checkout or (`tree`) another one: `python -m` imports the agent
    from its working directory first. With `events_dir`, each fetch's event trace written
    there."""
    h3 = case != "ours-h2-tls"
    drops = rcvbuf_errors() or 0
    argv = [
        sys.executable, "-m", "agent.cli", "fetch", url, "--ca-file", str(setup.ca),
        "--initial-window-size", str(window), "--connection-window", str(window),
        "--manifest", str(setup.site / "manifest.json"), "--repeat", str(setup.fetches), "--json",
        *(["--protocol", "h3"] if h3 else []), *setup.client_options(),
        *([] if events_dir is None else ["--events-dir", str(events_dir)]),
    ]  # fmt: skip
    stdout, cpu_s, wall_s = _timed(argv, setup.client_core, cwd=tree)
    records = [json.loads(line) for line in stdout.splitlines()]
    if not all(record["ok"] for record in records):
        raise RuntimeError(f"{case} at {window}: {[r['error'] for r in records if not r['ok']]}")
    per = 1e3 / setup.fetches
    udp = ((rcvbuf_errors() or 0) - drops) / setup.fetches if h3 else 0.0
    fetch_ms = statistics.median(record["cpu_s"] for record in records) * 1e3
    return Measurement(run, window, case, fetch_ms, cpu_s * per, wall_s * per, udp)


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def summary(measurements: Sequence[Measurement]) -> str:
    """The table: per window, medians over runs of each case and of the paired ratios."""
    lines = [
        "| window B | ngtcp2 client CPU ms/fetch | ours -> gtlsserver (fetch / process) "
        "| ours / ngtcp2 (fetch / process) | ours h3 -> ours | ours h2+TLS -> ours | h3 / h2+TLS "
        "| UDP drops per fetch (ngtcp2 / ours) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for window in sorted({m.window for m in measurements}):
        runs: dict[int, dict[str, Measurement]] = {}
        for m in measurements:
            if m.window == window:
                runs.setdefault(m.run, {})[m.case] = m
        complete = [r for r in runs.values() if set(CASES) <= r.keys()]

        def med(case: str, field: str, rows: list[dict[str, Measurement]] = complete) -> float:
            return _median([getattr(r[case], field) for r in rows])

        def ratio(
            a: str, b: str, field: str, rows: list[dict[str, Measurement]] = complete
        ) -> float:
            return _median([getattr(r[a], field) / r[b].fetch_cpu_ms for r in rows])

        h3_vs_h2 = _median(
            [r["ours-h3"].fetch_cpu_ms / r["ours-h2-tls"].fetch_cpu_ms for r in complete]
        )
        lines.append(
            f"| {window} | {med('ngtcp2', 'fetch_cpu_ms'):.1f} "
            f"| {med('ours-vs-ngtcp2', 'fetch_cpu_ms'):.1f} / "
            f"{med('ours-vs-ngtcp2', 'process_cpu_ms'):.1f} "
            f"| {ratio('ours-vs-ngtcp2', 'ngtcp2', 'fetch_cpu_ms'):.2f} / "
            f"{ratio('ours-vs-ngtcp2', 'ngtcp2', 'process_cpu_ms'):.2f} "
            f"| {med('ours-h3', 'fetch_cpu_ms'):.1f} | {med('ours-h2-tls', 'fetch_cpu_ms'):.1f} "
            f"| {h3_vs_h2:.2f} | {med('ngtcp2', 'udp_drops'):.1f} / "
            f"{med('ours-vs-ngtcp2', 'udp_drops'):.1f} |"
        )
    extra = [
        case
        for case in (BASELINE, TRACED, BASELINE_TRACED)
        if any(m.case == case for m in measurements)
    ]
    if extra:
        lines += ["", *_beside_table(measurements, extra)]
    return "\n".join(lines) + "\n"


def _beside_table(measurements: Sequence[Measurement], extra: Sequence[str]) -> list[str]:
    """Our client's other cases against gtlsserver (a baseline checkout's, ours traced), each
    beside ngtcp2's client and ours in the same run (trial CPU, medians over runs of each and
    of the paired ratios), and each against ours."""
    cases = [*extra, "ours-vs-ngtcp2"]
    head = ["window B", "ngtcp2 client"]
    for case in cases:
        head += [case, f"{case} / ngtcp2"]
    head += [f"{case} / ours-vs-ngtcp2" for case in extra]
    traced_pair = {TRACED, BASELINE_TRACED} <= set(extra)
    if traced_pair:
        head.append(f"{TRACED} / {BASELINE_TRACED}")
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    for window in sorted({m.window for m in measurements}):
        runs: dict[int, dict[str, float]] = {}
        for m in measurements:
            if m.window == window:
                runs.setdefault(m.run, {})[m.case] = m.fetch_cpu_ms
        rows = [r for r in runs.values() if {"ngtcp2", *cases} <= r.keys()]
        cells = [f"{_median([r['ngtcp2'] for r in rows]):.1f}"]
        for case in cases:
            cells += [
                f"{_median([r[case] for r in rows]):.1f}",
                f"{_median([r[case] / r['ngtcp2'] for r in rows]):.2f}",
            ]
        cells += [f"{_median([r[c] / r['ours-vs-ngtcp2'] for r in rows]):.2f}" for c in extra]
        if traced_pair:
            cells.append(f"{_median([r[TRACED] / r[BASELINE_TRACED] for r in rows]):.2f}")
        lines.append(f"| {window} | " + " | ".join(cells) + " |")
    return lines


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fetches", type=int, default=20, help="page fetches per case and run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--windows", default=",".join(map(str, WINDOWS)))
    parser.add_argument("--site", type=Path, default=REPO / "data" / "site")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--server-core", type=int, default=0)
    parser.add_argument("--client-core", type=int, default=1)
    parser.add_argument(
        "--event-loop",
        choices=("asyncio", "uvloop"),
        default="asyncio",
        help="our client's event loop, every case (uvloop: the agent's uvloop extra)",
    )
    parser.add_argument(
        "--verify",
        choices=("sha256", "size"),
        default="sha256",
        help="how our client checks bodies, every case (gtlsclient drops them unchecked)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        help="another checkout of this repository (e.g. a worktree of the previous commit): "
        "its client runs as one more case against gtlsserver, for before/after ratios",
    )
    parser.add_argument(
        "--events",
        action="store_true",
        help="one more case: our client writing each fetch's event trace (--events-dir) "
        "against gtlsserver, for what tracing costs (with --baseline, the baseline's too)",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    for tool in ("gtlsclient", "gtlsserver"):
        if shutil.which(tool) is None:
            print(
                f"h3_vs_ngtcp2: error: {tool} not on PATH (apt install ngtcp2-client ngtcp2-server)"
            )
            return 2
    site = args.site.resolve()
    if not (site / "manifest.json").is_file():
        print(f"building the default site in {site}", file=sys.stderr)
        build_site(site, seed=0, total_bytes=DEFAULT_TOTAL_BYTES)
    manifest = load_manifest(site)
    urls = (manifest.index, *(f.path for f in manifest.files if f.path != manifest.index))
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = args.out or REPO / "data" / "bench" / f"h3-vs-ngtcp2-{stamp}"
    out.mkdir(parents=True, exist_ok=True)
    credentials = run_credentials(out, ["127.0.0.1", "localhost"], stamp)
    setup = Setup(
        site, urls, credentials.ca_cert, credentials.server_cert, credentials.server_key,
        args.fetches, args.server_core, args.client_core, args.event_loop, args.verify,
    )  # fmt: skip
    windows = [int(w) for w in args.windows.split(",")]
    measurements: list[Measurement] = []
    with (
        gtlsserver(setup, free_udp_port(), out / "gtlsserver.log") as (ng_port, _),
        our_server(setup, "h3", out / "our-h3.log") as (h3_port, _),
        our_server(setup, "h2", out / "our-h2.log") as (h2_port, _),
    ):
        for run in range(args.runs):
            for window in windows:
                cases = [
                    lambda w=window, r=run: _gtlsclient(setup, ng_port, w, r),
                    lambda w=window, r=run: _our_client(
                        setup, f"https://127.0.0.1:{ng_port}/", w, r, "ours-vs-ngtcp2"
                    ),
                    lambda w=window, r=run: _our_client(
                        setup, f"https://127.0.0.1:{h3_port}/", w, r, "ours-h3"
                    ),
                    lambda w=window, r=run: _our_client(
                        setup, f"https://127.0.0.1:{h2_port}/", w, r, "ours-h2-tls"
                    ),
                ]
                if args.baseline is not None:
                    cases.insert(
                        2,
                        lambda w=window, r=run: _our_client(
                            setup, f"https://127.0.0.1:{ng_port}/", w, r, BASELINE,
                            args.baseline.resolve(),
                        ),
                    )  # fmt: skip
                if args.events:
                    cases.insert(
                        2,
                        lambda w=window, r=run: _our_client(
                            setup, f"https://127.0.0.1:{ng_port}/", w, r, TRACED,
                            events_dir=out / "events",
                        ),
                    )  # fmt: skip
                if args.events and args.baseline is not None:
                    cases.insert(
                        2,
                        lambda w=window, r=run: _our_client(
                            setup, f"https://127.0.0.1:{ng_port}/", w, r, BASELINE_TRACED,
                            args.baseline.resolve(), events_dir=out / "baseline-events",
                        ),
                    )  # fmt: skip
                for case in cases if run % 2 == 0 else reversed(cases):
                    measurement = case()
                    measurements.append(measurement)
                    print(measurement, flush=True)
                write_csv(out / "measurements.csv", measurements)
    table = summary(measurements)
    (out / "summary.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    sys.exit(main())
