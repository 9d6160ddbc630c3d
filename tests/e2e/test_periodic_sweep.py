"""The periodic workload end to end (issue 37): configs/periodic.toml scaled down (3 reports
0.1 s apart, 2 repetitions) over h2 and h3 x keep/new/resume on the local nodes, each row's
energy split per exchange, and a report leading with the energy per report by connection
policy, with the battery view.

No assertion here reads the idle baseline measured again after the sweep (tests/e2e/
test_energy_truth.py does), so neither sweep measures it."""

from __future__ import annotations

import math
from pathlib import Path

from tests.agent.servers import free_port
from tests.conftest import h2iot, require_tool, swept_ok

SMALL = (
    "--set", "workload.count=3", "--set", "workload.interval_s=0.1",
    "--set", "run.repetitions=2", "--set", "run.idle_baseline_s=1",
    "--set", "energy.idle_end=false",
)  # fmt: skip


def test_a_periodic_sweep_splits_its_energy_per_report_and_reports_the_battery_view(
    tmp_path: Path,
) -> None:
    port = ("--set", f"nodes.server.http_port={free_port()}")
    run, rows = swept_ok("periodic.toml", tmp_path / "runs", *SMALL, *port)
    assert len(rows) == 2 * 3 * 2
    assert {(row["protocol"], row["connection"]) for row in rows} == {
        (p, c) for p in ("h2", "h3") for c in ("keep", "new", "resume")
    }
    for row in rows:
        assert int(row["periodic_exchanges_ok"]) == 3
        energy, above = float(row["energy_mj"]), float(row["energy_above_idle_mj"])
        assert math.isclose(float(row["periodic_energy_per_report_mj"]), energy / 3, rel_tol=1e-4)
        assert math.isclose(
            float(row["periodic_energy_per_report_above_idle_mj"]), above / 3, abs_tol=1e-5
        )
        # Three tails (the last one's to the window's end), each inside the window.
        tail, tail_mean = (
            float(row["periodic_idle_tail_energy_mj"]),
            float(row["periodic_idle_tail_mean_mj"]),
        )
        assert math.isclose(tail, 3 * tail_mean, rel_tol=1e-4, abs_tol=1e-5)
        # The spans' sum against the window's is the pure core's (tests/controller/
        # test_exchanges.py); here each cell is there, from marks placed as the phases are.
        assert math.isfinite(float(row["periodic_exchange_energy_mean_mj"]))
        opened = int(row["periodic_handshakes_full"]) + int(row["periodic_handshakes_resumed"])
        assert opened == (1 if row["connection"] == "keep" else 3)
        assert row["phase_clock"] in ("marker", "clock_offset")

    report = h2iot("report", str(run))
    assert report.returncode == 0, report.stdout + report.stderr
    figures = run / "report" / "figures"
    for stem in ("periodic_energy_per_report", "periodic_battery"):
        assert (figures / f"{stem}.png").exists(), stem
    text = (run / "report" / "report.md").read_text()
    head = text.split("\n## ", 1)[0]
    assert "figures/periodic_energy_per_report.png" in head
    # The comparison the run was made for opens the findings, before the generic ones.
    sections = [line for line in text.splitlines() if line.startswith("## ")]
    assert sections[0] == "## HTTP/3 against HTTP/2 per periodic report"
    assert "## Battery view: a day of reports" in text
    assert "reports (mAh/day at 5 V)" in text


def test_a_periodic_sweep_on_the_nghttp2_client_runs_nghttp_per_report(tmp_path: Path) -> None:
    require_tool("nghttp")
    nghttp2 = (
        "--set", 'sweep.protocol=["h2c", "h2"]', "--set", 'sweep.connection=["new"]',
        "--set", 'nodes.client.engine="nghttp2"',
        "--set", f"nodes.server.http_port={free_port()}",
    )  # fmt: skip
    _run, rows = swept_ok("periodic.toml", tmp_path / "runs", *SMALL, *nghttp2)
    assert sorted(row["protocol"] for row in rows) == ["h2", "h2", "h2c", "h2c"]
    for row in rows:
        assert (row["periodic_exchanges_ok"], row["periodic_handshakes_full"]) == ("3", "3")
        assert float(row["periodic_energy_per_report_mj"]) > 0
