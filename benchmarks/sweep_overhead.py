"""What a sweep spends between trials, fresh agents against warm ones (`[run] agent`).

    .venv/bin/python benchmarks/sweep_overhead.py [--profiles local,rpi3b] [--repetitions 3]

For each profile and agent mode, one real sweep through the CLI (`h2iot sweep --no-dashboard`):
`local` is configs/local.toml (two local agents, the virtual meter), `rpi3b` its emulated
Raspberry Pi 3B (configs/local-rpi3b.toml: CPU quotas and the FastEthernet link; needs root).
Both in the config's own order (randomized-blocked: a new window, so a new server, nearly every
trial) and in sequential order (one server per window). From each run's trials.csv:

- per-trial overhead = (span of the run's trials - the sum of their fetches) / trials, where
  the span runs from the first trial's start to the last one's end and a fetch is its
  client_response_s: everything a trial costs beyond its workload (agent start-up, the server
  restarted for a new setting, records read and written);
- the client process's CPU per trial (client_process_cpu_s: a fresh process's whole life, a
  warm agent's own account of the trial) and the fetch's (client_cpu_s);
- the study's full sweep (9 windows x 68 fetches = 612 trials) estimated at this pace:
  612 x (mean fetch + overhead).

Writes the table to stdout and `summary.md` with each run under --out (default
data/bench/sweep-overhead-<UTC time>/).
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
H2IOT = str(Path(sys.executable).parent / "h2iot")
CONFIGS = {"local": "configs/local.toml", "rpi3b": "configs/local-rpi3b.toml"}
STUDY_TRIALS = 9 * 68


@dataclass(frozen=True)
class Overhead:
    profile: str
    order: str
    agent: str
    trials: int
    overhead_s: float
    fetch_s: float
    process_cpu_s: float
    fetch_cpu_s: float

    @property
    def study_h(self) -> float:
        return STUDY_TRIALS * (self.fetch_s + self.overhead_s) / 3600


def _sweep(profile: str, order: str, agent: str, repetitions: int, out: Path) -> Path:
    runs = out / f"{profile}-{order}-{agent}"
    argv = [
        H2IOT, "sweep", CONFIGS[profile], "--no-dashboard", "--out", str(runs),
        "--set", f"run.agent={agent}", "--set", f"run.order={order}",
        "--set", f"run.repetitions={repetitions}", "--set", "run.idle_baseline_s=2",
    ]  # fmt: skip
    log = out / f"{profile}-{order}-{agent}.log"
    with log.open("w") as handle:
        status = subprocess.run(
            argv, cwd=REPO, stdout=handle, stderr=subprocess.STDOUT, check=False
        ).returncode
    if status != 0:
        raise SystemExit(f"{' '.join(argv)} exited {status}: see {log}")
    (run,) = runs.iterdir()
    return run


def overhead_of(run: Path, profile: str, order: str, agent: str) -> Overhead:
    with (run / "trials.csv").open() as handle:
        rows = [row for row in csv.DictReader(handle) if row["status"] == "ok"]
    start = min(int(row["t_wall_start_ns"]) for row in rows)
    end = max(int(row["t_wall_end_ns"]) for row in rows)
    fetches = [float(row["client_response_s"]) for row in rows]
    span_s = (end - start) / 1e9
    return Overhead(
        profile=profile,
        order=order,
        agent=agent,
        trials=len(rows),
        overhead_s=(span_s - sum(fetches)) / len(rows),
        fetch_s=statistics.fmean(fetches),
        process_cpu_s=statistics.median(float(row["client_process_cpu_s"]) for row in rows),
        fetch_cpu_s=statistics.median(float(row["client_cpu_s"]) for row in rows),
    )


def table(results: list[Overhead]) -> str:
    lines = [
        "| profile | order | agent | trials | overhead per trial, s | mean fetch, s | "
        "client process CPU per trial, ms | fetch CPU, ms | study's 612 trials, h |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.profile} | {r.order} | {r.agent} | {r.trials} | {r.overhead_s:.3f} | "
            f"{r.fetch_s:.3f} | {r.process_cpu_s * 1e3:.0f} | {r.fetch_cpu_s * 1e3:.0f} | "
            f"{r.study_h:.2f} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", default="local,rpi3b")
    parser.add_argument("--orders", default="randomized-blocked,sequential")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = args.out or REPO / "data" / "bench" / f"sweep-overhead-{stamp}"
    out.mkdir(parents=True, exist_ok=True)
    profiles = args.profiles.split(",")
    if "rpi3b" in profiles and os.geteuid() != 0:
        print("rpi3b: the emulated Pi 3B needs root; skipped", file=sys.stderr)
        profiles.remove("rpi3b")
    results = []
    for profile in profiles:
        for order in args.orders.split(","):
            # Fresh and warm one after the other, per order: the machine's load drifts less
            # between two runs side by side than across the whole benchmark.
            for agent in ("fresh", "warm"):
                run = _sweep(profile, order, agent, args.repetitions, out)
                results.append(overhead_of(run, profile, order, agent))
                print(table(results[-1:]).splitlines()[-1], flush=True)
    summary = table(results)
    (out / "summary.md").write_text(summary + "\n")
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
