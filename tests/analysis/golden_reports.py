"""Golden reports: report.md and summary.csv of one recorded run per workload, kept under
tests/analysis/golden/<kind>/, which the report's output must match (report.md byte for byte,
summary.csv to 1e-9 of each row: tests/analysis/test_golden_reports.py says why).

They pin what a reader sees while the report's code moves (issue 26: each workload's blocks
and figures into analysis/workloads/<kind>.py), so a move that changes a number, a sentence
or an order shows as a diff. The runs are fake_run's model with power traces (the energy
sections too), deterministic for their seed. A change meant to alter reports regenerates
them, and the diff goes into the same commit:

    python -m tests.analysis.golden_reports
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from analysis.load import load_run
from analysis.report import write_report
from tests.analysis.conftest import WORKLOAD_RUNS
from tests.analysis.fake_run import record_run

GOLDEN_DIR = Path(__file__).with_name("golden")
KINDS = ("page", *WORKLOAD_RUNS)
COMPARED = ("report.md", "summary.csv")


def report_of(kind: str, root: Path) -> Path:
    """The report folder of kind's golden run, recorded and reported under root."""
    axis, params = WORKLOAD_RUNS.get(kind, (None, None))
    run_dir = record_run(
        root / kind,
        windows=(4096, 65535),
        extra_axis=axis,
        repetitions=3,
        workload=kind,
        workload_params=params,
        name=f"golden-{kind}",
    )
    write_report(load_run(run_dir))
    return run_dir / "report"


def main() -> int:
    with tempfile.TemporaryDirectory() as scratch:
        for kind in KINDS:
            report = report_of(kind, Path(scratch))
            (GOLDEN_DIR / kind).mkdir(parents=True, exist_ok=True)
            for name in COMPARED:
                shutil.copyfile(report / name, GOLDEN_DIR / kind / name)
            print(f"golden report of {kind}: {GOLDEN_DIR / kind}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
