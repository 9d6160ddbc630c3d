"""Benchmark: the stream workload's breakdown table on this machine and on two emulated Pi 3B,
beside the reference's (issue 14: client and server on one i7-6700HQ).

Each profile is one breakdown search, `h2iot sweep configs/stream-breakdown.toml` (per transport
and demanded rate, the payload at which the received rate falls below 75 % of the demand), with
the profile's `--set` options on top: `local` as the file says, `rpi3b` on two nodes emulating a
Pi 3B each (configs/local-rpi3b.toml's device profile and link; needs root). The searches run
one after the other; each writes its run folder under `--out`, and the script puts every
profile's table beside the reference's in `summary.md`.

    .venv/bin/python benchmarks/stream_breakdown.py                       # both profiles
    .venv/bin/python benchmarks/stream_breakdown.py --profiles local --quick
    .venv/bin/python benchmarks/stream_breakdown.py --summarise data/bench/stream-breakdown-X
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from bench_support import PROFILES

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "configs" / "stream-breakdown.toml"

# Fewer trials: 2 per round, at most 4 per probe, a bracket within 1.6x, 1 s subscriptions.
QUICK = (
    "search.repetitions=2",
    "search.max_repetitions=4",
    "search.resolution=1.6",
    "workload.duration_s=1.0",
)

# Issue 14's table (doubles per item at breakdown), for the side-by-side.
REFERENCE = {
    "grpc": {25.0: "~400k", 10.0: "~400k", 4.0: "~1M"},
    "websocket": {25.0: "~65k", 10.0: "~160k", 4.0: "~400k"},
    "sse": {25.0: "~55k", 10.0: "~140k", 4.0: "~350k"},
}


def _compact(text: str) -> str:
    """A number of doubles as the reference writes it (3 significant digits, k or M)."""
    if not text:
        return "-"
    value = float(text)
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


def run_profile(profile: str, out: Path, extra: Sequence[str]) -> Path:
    """One breakdown search under the profile; its run folder."""
    runs = out / profile
    sets = [*PROFILES[profile], f"run.name=stream-breakdown-{profile}", *extra]
    command = [sys.executable, "-m", "controller.cli", "sweep", str(CONFIG), "--no-dashboard"]
    command += ["--out", str(runs)]
    for text in sets:
        command += ["--set", text]
    print(f"{profile}: {' '.join(command[3:])}", flush=True)
    started = time.monotonic()
    with (out / f"{profile}.log").open("w") as log:
        done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=False, cwd=REPO)
    print(f"{profile}: exit {done.returncode} after {time.monotonic() - started:.0f} s", flush=True)
    (run,) = runs.iterdir()
    return run


def _rows(run: Path) -> list[dict[str, str]]:
    path = run / "breakdown.csv"
    if not path.exists():
        return []
    with path.open() as handle:
        return list(csv.DictReader(handle))


def cell(row: dict[str, str] | None) -> str:
    if row is None:
        return "-"
    status = row["status"]
    if status != "found":
        return {"below_low": "< low", "above_high": "> high"}.get(status, status)
    bracket = f"{_compact(row['passing'])}..{_compact(row['failing'])}"
    mb_s = f", {float(row['mb_s']):.3g} MB/s" if row.get("mb_s") else ""
    forced = "*" if row.get("forced_probes", "0") not in ("", "0") else ""
    return f"~{_compact(row['breakdown'])} ({bracket}){mb_s}{forced}"


def summary(results: dict[str, Path]) -> str:
    """Markdown: per transport, the reference's and each profile's breakdown per rate."""
    rates = (25.0, 10.0, 4.0)
    tables: dict[str, dict[tuple[str, float], dict[str, str]]] = {
        profile: {(r["transport"], float(r["rate_hz"])): r for r in _rows(run)}
        for profile, run in results.items()
    }
    transports = ("grpc", "websocket", "sse", "poll")
    header = ["transport", "source", *(f"{rate:g} Hz" for rate in rates)]
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for transport in transports:
        if transport in REFERENCE:
            cells = [REFERENCE[transport][rate] for rate in rates]
            lines.append(
                f"| {transport} | reference (i7-6700HQ, Java) | " + " | ".join(cells) + " |"
            )
        for profile, table in tables.items():
            cells = [cell(table.get((transport, rate))) for rate in rates]
            lines.append(f"| {transport} | {profile} | " + " | ".join(cells) + " |")
    runs = "\n".join(f"- {profile}: `{run}`" for profile, run in results.items())
    return (
        "Breakdown payload (doubles per item) per transport and demanded rate: "
        "~the bracket's geometric middle (last passing..first failing payload), and the offered "
        "load there (payload x 8 B x rate); * a probe decided by its mean at the repetition "
        "bound.\n\n" + "\n".join(lines) + "\n\nRuns:\n" + runs + "\n"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profiles", default="local,rpi3b", help="comma-separated: local,rpi3b")
    parser.add_argument("--out", type=Path, help="default data/bench/stream-breakdown-<UTC>")
    parser.add_argument("--quick", action="store_true", help="fewer, shorter trials")
    parser.add_argument("--set", action="append", default=[], help="more config overrides")
    parser.add_argument("--summarise", type=Path, metavar="OUT", help="only the tables of OUT")
    args = parser.parse_args(argv)
    if args.summarise is not None:
        out = args.summarise
        results = {p.name: next(p.iterdir()) for p in sorted(out.iterdir()) if p.is_dir()}
    else:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        out = args.out or REPO / "data" / "bench" / f"stream-breakdown-{stamp}"
        out.mkdir(parents=True, exist_ok=True)
        extra = [*(QUICK if args.quick else ()), *args.set]
        results = {
            profile: run_profile(profile, out, extra) for profile in args.profiles.split(",")
        }
    text = summary(results)
    (out / "summary.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
