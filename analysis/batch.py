"""What `h2iot report RUN_DIR [RUN_DIR ...]` does, without the command line.

Every run is loaded and checked first, so a malformed folder stops the command before anything
is written. Then each run gets its report; with more than one run, the first is the base and is
compared with each other run in `<first>/report/compare-<other>/`, linked from both reports.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from analysis.compare import check_comparable, comparison_dir, write_comparison
from analysis.errors import ComparisonError
from analysis.load import load_run, require_results
from analysis.points import DEFAULT_TARGET_RELATIVE_HALF_WIDTH, summarize_points
from analysis.report import REPORT_DIR, write_report


def write_reports(
    run_dirs: Sequence[Path],
    target_relative_half_width: float = DEFAULT_TARGET_RELATIVE_HALF_WIDTH,
) -> list[Path]:
    """Writes every report and comparison; returns the HTML files written, reports first."""
    if not 0 < target_relative_half_width < 1:
        raise ComparisonError(
            f"target relative half-width {target_relative_half_width} must be in (0, 1)"
        )
    runs = [load_run(path) for path in run_dirs]
    for run in runs:
        require_results(run)
    base, others = runs[0], runs[1:]
    names: dict[str, Path] = {}
    for other in others:
        check_comparable(base, other)
        if other.name in names:
            raise ComparisonError(
                f"{other.path}: has the same folder name as {names[other.name]}; "
                "comparison folders are named after the run folder"
            )
        names[other.name] = other.path
    summaries = [summarize_points(run, target_relative_half_width) for run in runs]
    links: list[list[tuple[str, str]]] = [[] for _ in runs]
    for index, other in enumerate(others, start=1):
        target = comparison_dir(base, other) / "report.html"
        links[0].append(
            (f"{base.name} vs {other.name}", os.path.relpath(target, base.path / REPORT_DIR))
        )
        links[index].append(
            (f"{base.name} vs {other.name}", os.path.relpath(target, other.path / REPORT_DIR))
        )
    written = [
        write_report(run, target_relative_half_width, links[i], summaries[i]).html
        for i, run in enumerate(runs)
    ]
    for index, other in enumerate(others, start=1):
        written.append(write_comparison(base, summaries[0], other, summaries[index]).html)
    return written
