"""What `h2iot report RUN_DIR [RUN_DIR ...]` does, without the command line.

Every run is loaded and checked first, so a malformed folder stops the command before anything
is written. Then each run gets its report; with more than one run, the first is the base and is
compared with each other run in `<first>/report/compare-<other>/`, linked from both reports.
An optimizing search's report also checks what it found against a grid run of its space among
them (analysis.optimize).

Runs that are the benches of one shared study (analysis.benches) are read together instead:
each bench that took trials gets its own report as above, linked to the study's report in
`<first>/report/study-<name>/` (the benches' trials merged, the bench a blocking factor); a
bench that took none has no report of its own, and no comparison is written.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from analysis.benches import Study, shared_study, write_study_report
from analysis.compare import check_comparable, comparison_dir, write_comparison
from analysis.errors import ComparisonError
from analysis.load import Run, load_run, require_results
from analysis.optimize import search_facts
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
    study = shared_study(runs)
    if study is not None:
        return _write_study(study, target_relative_half_width)
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
        write_report(
            run, target_relative_half_width, links[i], summaries[i], grid_of(run, runs)
        ).html
        for i, run in enumerate(runs)
    ]
    for index, other in enumerate(others, start=1):
        written.append(write_comparison(base, summaries[0], other, summaries[index]).html)
    return written


def grid_of(run: Run, runs: Sequence[Run]) -> Run | None:
    """For an optimizing search, the first other run that swept its whole space as a grid."""
    if search_facts(run) is None:
        return None
    sweep = run.config.get("sweep")
    return next(
        (
            other
            for other in runs
            if other is not run
            and other.config.get("search") is None
            and other.config.get("sweep") == sweep
        ),
        None,
    )


def _write_study(study: Study, target_relative_half_width: float) -> list[Path]:
    reported = [(bench, run) for bench, run in study.benches if not run.ok.empty]
    target = study.directory / "report.html"
    written = [
        write_report(
            run,
            target_relative_half_width,
            [(f"study {study.name}, all benches", os.path.relpath(target, run.path / REPORT_DIR))],
        ).html
        for _bench, run in reported
    ]
    links = [
        (
            f"report of bench {bench} ({run.path})",
            os.path.relpath(run.path / REPORT_DIR / "report.html", study.directory),
        )
        for bench, run in reported
    ]
    written.append(write_study_report(study, target_relative_half_width, None, links).html)
    return written
