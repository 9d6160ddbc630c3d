"""Benchmark: the stream server's CPU per item, ours against an anchor per transport.

Anchors (benchmarks/stream_anchors.py): hypercorn for SSE and WebSocket over HTTP/2, grpcio (the
C core) for gRPC, each publishing the same items as ours at the same schedule. One client for
all, ours (`h2iot-agent trial --workload stream`), so the servers alone differ. Per run, each
server starts afresh, pinned to core 0 (the client to core 1), and serves every transport and
payload one subscription after the other (after an unmeasured one per transport: the first
pays imports and warm-up); the server order alternates between runs. A
subscription's server CPU is the scheduler's count for the server's process tree across the
client's trial; divided by the items the client received, it is the CPU per item. At the
smallest payload it is the fixed per-item cost (the reference's ~0.2 ms per publication).

    .venv/bin/python benchmarks/stream_cpu.py                    # 3 runs, payloads 1..100000
    .venv/bin/python benchmarks/stream_cpu.py --runs 1 --payloads 1,1000 --duration 2

Writes measurements.csv, summary.csv and summary.md to --out (default
data/bench/stream-cpu-<UTC time>/).
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench_support import free_port, pinned, process_cpu_s, terminated, write_csv

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
START_TIMEOUT_S = 20.0
SERVER_CORE, CLIENT_CORE = 0, 1
ANCHOR_OF = {"sse": "hypercorn", "websocket": "hypercorn", "grpc": "grpcio"}


class BenchError(Exception):
    pass


@dataclass(frozen=True)
class Measurement:
    run: int
    transport: str
    payload_doubles: int
    server: str  # "ours", "hypercorn" or "grpcio"
    rate_hz: float
    items_published: int
    items_received: int
    items_dropped: int
    received_rate_hz: float
    server_cpu_s: float

    @property
    def cpu_per_item_ms(self) -> float:
        return 1000 * self.server_cpu_s / self.items_received if self.items_received else 0.0


def _tree_cpu_s(pid: int) -> float:
    """CPU time of a process and its children (hypercorn may run its worker in a child)."""
    children = Path(f"/proc/{pid}/task/{pid}/children")
    kids = [int(k) for k in children.read_text().split()] if children.exists() else []
    return process_cpu_s(pid) + sum(_tree_cpu_s(kid) for kid in kids)


def _wait_listening(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise BenchError(f"server exited {process.returncode}: {log.read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise BenchError(f"server not listening on {port}: {log.read_text()[-2000:]}")


@contextmanager
def server(kind: str, log: Path) -> Iterator[tuple[int, int]]:
    """(pid, port) of a pinned server: ours, hypercorn or grpcio."""
    pass_fds: tuple[int, ...] = ()
    listener = None
    if kind == "ours":
        port = free_port()
        args = [sys.executable, "-m", "agent.cli", "serve", "--workload", "stream"]
        args += ["--port", str(port), "--trial-log", "/dev/null"]
    elif kind == "hypercorn":
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        port = listener.getsockname()[1]
        pass_fds = (listener.fileno(),)
        args = [sys.executable, "-m", "hypercorn", "--bind", f"fd://{listener.fileno()}"]
        args += ["stream_anchors:app"]
    else:
        port = 0
        args = [sys.executable, str(HERE / "stream_anchors.py"), "grpc"]
    with log.open("w") as err, pinned(SERVER_CORE):
        process = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=err, pass_fds=pass_fds, cwd=HERE
        )
    try:
        with terminated(process):
            if kind == "grpcio":
                assert process.stdout is not None
                port = int(process.stdout.readline())
            _wait_listening(port, process, log)
            yield process.pid, port
    finally:
        if listener is not None:
            listener.close()


def subscribe(port: int, transport: str, payload: int, rate_hz: float, duration_s: float) -> dict:
    args = [sys.executable, "-m", "agent.cli", "trial", f"http://127.0.0.1:{port}/"]
    args += ["--workload", "stream", "--json", "--timeout", str(duration_s * 4 + 30)]
    for param in (
        f"transport={transport}",
        f"payload_doubles={payload}",
        f"rate_hz={rate_hz}",
        f"duration_s={duration_s}",
    ):
        args += ["--param", param]
    with pinned(CLIENT_CORE):
        done = subprocess.run(args, capture_output=True, text=True, check=False, cwd=REPO)
    if not done.stdout:
        raise BenchError(f"client: {done.stderr[-2000:]}")
    record: dict = json.loads(done.stdout)
    if not record.get("ok"):
        raise BenchError(f"{transport} {payload}: {record.get('error')}")
    return record


def measure(args: argparse.Namespace, out: Path) -> list[Measurement]:
    payloads = [int(p) for p in args.payloads.split(",")]
    transports = args.transports.split(",")
    kinds = ["ours", *dict.fromkeys(ANCHOR_OF[t] for t in transports)]
    measurements: list[Measurement] = []
    for run in range(1, args.runs + 1):
        order = kinds if run % 2 else kinds[::-1]
        for kind in order:
            served = [t for t in transports if kind == "ours" or ANCHOR_OF[t] == kind]
            with server(kind, out / f"{kind}-{run}.log") as (pid, port):
                for transport in served:
                    # Unmeasured: a server's first subscription pays its imports and warm-up.
                    subscribe(port, transport, payloads[0], args.rate, 0.2)
                    for payload in payloads:
                        before = _tree_cpu_s(pid)
                        record = subscribe(port, transport, payload, args.rate, args.duration)
                        cpu_s = _tree_cpu_s(pid) - before
                        metrics = record["metrics"]
                        m = Measurement(
                            run, transport, payload, kind, args.rate,
                            int(metrics["items_published"]), int(metrics["items_received"]),
                            int(metrics["items_dropped"]), float(metrics["received_rate_hz"]),
                            cpu_s,
                        )  # fmt: skip
                        measurements.append(m)
                        print(
                            f"run {run} {kind:9} {transport:9} {payload:>7} doubles: "
                            f"{m.items_received}/{m.items_published} items, "
                            f"{m.cpu_per_item_ms:.3f} ms CPU/item",
                            flush=True,
                        )
    return measurements


@dataclass(frozen=True)
class Row:
    transport: str
    payload_doubles: int
    anchor: str
    ours_cpu_per_item_ms: float
    anchor_cpu_per_item_ms: float
    ratio: float  # median over runs of ours / anchor
    ours_received_rate_hz: float
    anchor_received_rate_hz: float


def summarise(measurements: Sequence[Measurement]) -> list[Row]:
    rows = []
    keys = dict.fromkeys((m.transport, m.payload_doubles) for m in measurements)
    for transport, payload in keys:
        anchor = ANCHOR_OF[transport]
        pairs = [
            (ours, theirs)
            for ours in measurements
            for theirs in measurements
            if ours.run == theirs.run
            and (ours.transport, ours.payload_doubles, ours.server) == (transport, payload, "ours")
            and (theirs.transport, theirs.payload_doubles, theirs.server)
            == (transport, payload, anchor)
        ]
        if not pairs:
            continue
        rows.append(
            Row(
                transport,
                payload,
                anchor,
                statistics.median(o.cpu_per_item_ms for o, _ in pairs),
                statistics.median(t.cpu_per_item_ms for _, t in pairs),
                statistics.median(
                    o.cpu_per_item_ms / t.cpu_per_item_ms for o, t in pairs if t.cpu_per_item_ms
                ),
                statistics.median(o.received_rate_hz for o, _ in pairs),
                statistics.median(t.received_rate_hz for _, t in pairs),
            )
        )
    return rows


def markdown(rows: Sequence[Row], args: argparse.Namespace) -> str:
    lines = [
        f"Server CPU per item received, {args.rate:g} Hz x {args.duration:g} s subscriptions, "
        f"median of {args.runs} runs (target ours / anchor <= 1.5):",
        "",
        "| transport | payload doubles | anchor | CPU ms/item ours | anchor | ours / anchor "
        "| received Hz ours | anchor |",
        "|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.transport} | {r.payload_doubles} | {r.anchor} | {r.ours_cpu_per_item_ms:.3f} "
            f"| {r.anchor_cpu_per_item_ms:.3f} | {r.ratio:.2f} | {r.ours_received_rate_hz:.1f} "
            f"| {r.anchor_received_rate_hz:.1f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--payloads", default="1,1000,10000,100000")
    parser.add_argument("--transports", default="sse,websocket,grpc")
    parser.add_argument("--rate", type=float, default=25.0, help="demanded rate, Hz")
    parser.add_argument("--duration", type=float, default=4.0, help="subscription, s")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = args.out or REPO / "data" / "bench" / f"stream-cpu-{stamp}"
    out.mkdir(parents=True, exist_ok=True)
    measurements = measure(args, out)
    write_csv(out / "measurements.csv", measurements)
    rows = summarise(measurements)
    write_csv(out / "summary.csv", rows)
    text = markdown(rows, args)
    (out / "summary.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
