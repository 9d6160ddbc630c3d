"""The report opens with what the run found (issue 26): what ran in one sentence, the warnings,
the headline figure and the findings within the first 40 lines of report.md for every
workload; the run's facts, manifest and conditions at the end, folded in report.html; times
as ISO 8601 in the run's zone; no clock offsets that are zero by construction."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from analysis.facts import other_manifest_facts, time_facts
from analysis.load import Run, load_run
from analysis.opening import MAX_CAVEATS, agents_text, caveat_blocks
from analysis.report import write_report
from analysis.times import iso, zone_of
from tests.analysis.report_text import FIRST_SCREEN_LINES, assert_results_first

CREATED_NS = 1_796_308_616_766_722_139  # 2026-12-03T14:36:56.77 UTC


def _sections(markdown: str) -> list[str]:
    return [line[3:] for line in markdown.splitlines() if line.startswith("## ")]


def test_the_study_report_opens_with_figure_1_and_the_verdicts(
    reported: tuple[Path, Path],
) -> None:
    study, _slow = reported
    markdown = (study / "report" / "report.md").read_text()
    html = (study / "report" / "report.html").read_text()
    assert_results_first(markdown, "figure1_client")
    lines = markdown.splitlines()
    assert lines[2].startswith(
        "What ran: the page workload over initial_window_size 256 .. 65535 (9 values); client "
        "and server on this machine's own cores, unthrottled; the virtual meter at 250 Hz; "
        "n = 5 ok trials per point at 9 points, 90 % CIs; started "
    )
    assert "(UTC; the manifest records no time zone)." in lines[2]
    head = "\n".join(lines[:FIRST_SCREEN_LINES])
    assert "## Against the study's findings\n\n| finding | study | this run | verdict |" in head
    sections = _sections(markdown)
    assert sections[0] == "Against the study's findings"
    facts = ("The run", "Trials", "Manifest (besides the config)", "Sample size")
    for section in (*facts, "Outliers and missing values"):
        assert sections.index(section) > sections.index("Tables") > sections.index("Figures")
        assert f"<details><summary><h2>{section}</h2></summary>" in html
    assert "<details><summary><h2>Tables" not in html  # results stay open
    assert html.count('<figure class="lead">') == 1
    assert "created_wall_ns" not in markdown and "1795976747" not in markdown
    created = iso(1_795_976_747_824_612_307, zone_of({}, "study"))
    assert f"| created | {created} |" in markdown and created.endswith("+00:00")


@pytest.mark.parametrize(
    ("workload", "stem", "findings"),
    [
        ("api", "headline", ("The reference's table",)),
        # A category axis swept: its series compared first (issue 36).
        ("payload", "payload_latency", ("dime against soap (encoding)", "Main result")),
        ("stream", "stream_received_rate", ("Main result",)),
        ("blob", "headline", ("concurrent against sequential (mode)", "Main result")),
    ],
)
def test_each_workloads_report_opens_with_its_own_result(
    workload_reports: dict[str, Path], workload: str, stem: str, findings: tuple[str, ...]
) -> None:
    report = workload_reports[workload] / "report"
    markdown = (report / "report.md").read_text()
    assert_results_first(markdown, stem)
    assert (report / "figures" / f"{stem}.png").exists()
    assert markdown.splitlines()[2].startswith(f"What ran: the {workload} workload over ")
    sections = _sections(markdown)
    assert tuple(sections[: len(findings)]) == findings
    # The study comparison says why it is not made, after the findings.
    assert sections[len(findings)] == "Against the study's findings"
    assert "Not compared: the study measured the page workload" in markdown
    # The missing traces are a warning on the first screen, detailed under Trials.
    assert "12 of 12 ok rows have no power trace" in markdown.split("## ", 1)[0]
    assert "| ok rows without their power trace | 12 (" in markdown


def test_warnings_open_the_report_and_name_their_section(run_copy: Path) -> None:
    manifest_path = run_copy / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    noisy = {"quiet": False, "spread_mw": 80.0, "drift_mw": -70.0, "bound_mw": 60.0}
    manifest |= {"idle_baseline": noisy, "idle_baseline_end": {**noisy, "change_mw": 90.0}}
    manifest_path.write_text(json.dumps(manifest))
    (run_copy / "power" / "t0001.npy").unlink()
    markdown = write_report(load_run(run_copy)).markdown.read_text()
    first = markdown.split("## ", 1)[0]
    assert (
        "- Idle baseline not quiet before and after the sweep (spread 80 mW, drift -70 mW; 60 mW "
        "allowed): energy above idle is as uncertain (Idle baseline)."
    ) in first
    assert "- Idle power moved +90 mW over the sweep (60 mW allowed)" in first
    assert "- 1 of 45 ok rows have no power trace (t0001)" in first
    assert_results_first(markdown, "figure1_client")


def test_at_most_a_few_warnings_stand_on_the_first_screen() -> None:
    many = [f"warning {i}" for i in range(MAX_CAVEATS + 3)]
    (_lead, bullets) = caveat_blocks(many)
    assert bullets.items[-1] == "... and 3 more in the sections below."  # type: ignore[union-attr]
    assert len(bullets.items) == MAX_CAVEATS + 1  # type: ignore[union-attr]
    assert caveat_blocks([]) == []


def _run(manifest: dict[str, Any], name: str = "h2iot-20261203T153656") -> Run:
    ok = pd.DataFrame({"t_wall_start_ns": [CREATED_NS + 5e9], "t_wall_end_ns": [CREATED_NS + 65e9]})
    return Run(Path("/nowhere") / name, manifest, ("initial_window_size",), ok, 1, pd.DataFrame())


def test_times_are_in_the_manifests_zone_else_the_run_ids_else_utc() -> None:
    berlin = zone_of({"time_zone": "Europe/Berlin", "created_wall_ns": CREATED_NS}, "x")
    assert iso(CREATED_NS, berlin) == "2026-12-03T15:36:56+01:00"
    assert berlin.describe() == "Europe/Berlin; the manifest's time_zone"
    assert iso(CREATED_NS, zone_of({"time_zone": "-05:30"}, "x")) == "2026-12-03T09:06:56-05:30"
    # The folder was named at 15:36:56 local time, the manifest written then: UTC+01:00.
    from_id = zone_of({"created_wall_ns": CREATED_NS}, "h2iot-20261203T153656")
    assert from_id.name == "UTC+01:00" and "read from the run id" in from_id.note
    assert "the manifest records no time zone" in from_id.note
    assert zone_of(
        {"created_wall_ns": CREATED_NS, "run_id": "h2iot-20261203T153652"}, "x"
    ).name == ("UTC+01:00")
    plain = zone_of({"created_wall_ns": CREATED_NS}, "my-run")
    assert (plain.name, plain.note) == ("UTC", "the manifest records no time zone")
    unknown = zone_of({"time_zone": "Mars/Olympus", "created_wall_ns": CREATED_NS}, "my-run")
    assert unknown.name == "UTC" and "'Mars/Olympus' is not a zone known here" in unknown.note

    facts = dict(time_facts(_run({"created_wall_ns": CREATED_NS})))
    assert facts["created"] == "2026-12-03T15:36:56+01:00"
    assert facts["trials ran"] == (
        "2026-12-03T15:37:01+01:00 to 2026-12-03T15:38:01+01:00 (1 min 0 s)"
    )


def test_a_local_nodes_zero_clock_is_not_a_fact_a_remote_ones_is() -> None:
    zero = {"wall_offset_ns": 0, "monotonic_offset_ns": 0, "uncertainty_ns": 0, "samples": 0}
    manifest = {
        "created_wall_ns": CREATED_NS,
        "config": {"nodes": {"client": {"host": "local"}, "server": {"host": "pi-b"}}},
        "nodes": {
            "client": {"label": "client (local)", "cpu_model": "x", "clock": zero},
            "server": {"label": "server (pi-b)", "clock": {**zero, "wall_offset_ns": 1200}},
            "peer_clock": {"offset_ns": 0, "uncertainty_ns": 0},
        },
        "started_wall_ns": CREATED_NS,
    }
    facts = dict(other_manifest_facts(_run(manifest)))
    assert "nodes.client.cpu_model" in facts
    assert not any(key.startswith("nodes.client.clock") for key in facts)
    assert facts["nodes.server.clock.wall_offset_ns"] == "1200"
    assert facts["nodes.peer_clock.offset_ns"] == "0"  # measured between two hosts
    assert "created_wall_ns" not in facts  # the run's facts say "created"
    assert facts["started_wall_ns"] == "2026-12-03T15:36:56+01:00"

    manifest["config"]["nodes"]["server"]["host"] = "local"  # type: ignore[index]
    manifest["nodes"]["server"]["clock"] = zero  # type: ignore[index]
    facts = dict(other_manifest_facts(_run(manifest)))
    assert not any(".clock" in key or "peer_clock" in key for key in facts)


@pytest.mark.parametrize(
    ("config", "text"),
    [
        ({}, ""),  # a run from before the keys: the defaults, nothing to say
        ({"run": {"event_loop": "asyncio"}, "workload": {"verify": "sha256"}}, ""),
        ({"run": {"event_loop": "uvloop"}}, "; the client on uvloop"),
        ({"run": {"server_event_loop": "uvloop"}}, "; the server on uvloop"),
        (
            {"run": {"event_loop": "uvloop", "server_event_loop": "uvloop"}},
            "; the client on uvloop; the server on uvloop",
        ),
        ({"workload": {"verify": "size"}}, "; bodies checked by size alone (no sha256)"),
        (
            {"run": {"event_loop": "uvloop"}, "workload": {"verify": "size"}},
            "; the client on uvloop; bodies checked by size alone (no sha256)",
        ),
    ],
)
def test_what_ran_says_how_the_agents_ran_when_not_by_default(
    config: dict[str, Any], text: str
) -> None:
    """Each changes what the agents' CPU figures hold (benchmarks/README.md: 9-13 % for the
    client's loop, 4.5 ms per 7 MB for sha256, the server table for the server's loop)."""
    assert agents_text({"config": config}) == text
