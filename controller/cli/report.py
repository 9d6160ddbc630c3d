"""`h2iot report RUN_DIR [RUN_DIR ...]`: turn recorded runs into what researchers publish.

For each run folder, writes `report/` inside it: report.md, report.html (figures embedded),
summary.csv (one row per swept point and metric) and figures/ (PNG and SVG). With several runs
the first is compared with each other one in `<first>/report/compare-<other>/`, unless they are
the benches of one shared study (`h2iot sweep --study URL --bench NAME`): then they are read as
one study in `<first>/report/study-<name>/`, the benches' trials pooled and the bench a blocking
factor (each bench's mean and its difference from the others, per point), beside each bench's
own report.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from controller.cli import COMMANDS
from controller.cli._help import FORMATTER, example
from controller.errors import ControllerError


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "report",
        help=COMMANDS["report"],
        description=__doc__,
        epilog=example("h2iot report data/runs/h2iot-20261129T185148"),
        formatter_class=FORMATTER,
    )
    parser.add_argument(
        "run_dirs",
        nargs="+",
        type=Path,
        metavar="RUN_DIR",
        help="a run folder (several: compared with the first, or one study's benches)",
    )
    parser.add_argument(
        "--target-half-width",
        type=float,
        default=0.05,
        metavar="FRACTION",
        help="CI half-width, relative to the mean, for the repetitions-needed column "
        "(default 0.05: ±5 %%)",
    )
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    # Imported here: every `h2iot` command builds this parser, and only `report` needs pandas and
    # matplotlib (the analysis extra).
    try:
        from analysis.batch import write_reports  # noqa: PLC0415
        from analysis.errors import AnalysisError  # noqa: PLC0415
    except ImportError as exc:
        print(
            f"h2iot: error: report needs the analysis extra ({exc.name} is missing): "
            "pip install 'h2iot[analysis]'",
            file=sys.stderr,
        )
        return 1
    try:
        written = write_reports(args.run_dirs, args.target_half_width)
    except (AnalysisError, ControllerError) as exc:
        print(f"h2iot: error: {exc}", file=sys.stderr)
        return exc.exit_status
    for path in written:
        print(path)
    return 0
