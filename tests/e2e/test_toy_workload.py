"""A workload of one's own, declared once (issue 26): a toy workload written by this test into a
package of its own outside the project, found through the `h2iot.workloads` entry point, runs a
real local sweep, gets its trials.csv columns and its report, with no file of the project
touched (the registries' defaults cover a workload without controller or analysis parts)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]

SPEC = """
from agent.workloads.spec import Field, Param, WorkloadSpec

TOY = WorkloadSpec(
    kind="toy",
    doc="GET /toy `count` times, each answer the word toy",
    params=(Param("count", "int", 3, "", "requests per trial", "client", 1, 100),),
    fields=(Field("answers", "answers received"), Field("latency_mean_s", "mean latency, s")),
    spread_param="count",
    count_field="answers",
)
"""
SERVER = """
from agent.server.handler import NOT_FOUND, SERVER_HEADER, Reply

BODY = memoryview(b"toy")


class ToyHandler:
    def handle(self, request):
        if request.path != "/toy":
            return NOT_FOUND
        return Reply(200, (SERVER_HEADER,), BODY)


def mount(root, params):
    return ToyHandler()
"""
CLIENT = """
import hashlib

from agent.client.run import Prepared
from agent.client.trial import check_body

SHA256 = hashlib.sha256(b"toy").hexdigest()


async def prepare(plan, target):
    count = int(plan.params["count"])
    return Prepared(plan.params, lambda: ToyDriver(count))


class ToyDriver:
    def __init__(self, count):
        self.count = count
        self.responses = []

    async def run(self, session):
        for _ in range(self.count):
            response = await session.request("/toy")
            check_body(response, 3, SHA256, "toy")
            self.responses.append(response)

    def metrics(self):
        latencies = [(r.t_end_ns - r.t_request_ns) / 1e9 for r in self.responses]
        return {
            "answers": len(self.responses),
            "latency_mean_s": sum(latencies) / len(latencies) if latencies else None,
        }

    def extra(self, start_ns):
        return {}
"""


def _plugin(root: Path) -> Path:
    """The toy's package and the metadata that names it: what `pip install` would leave."""
    package = root / "h2iot_toy"
    package.mkdir(parents=True)
    for name, text in (("__init__", ""), ("spec", SPEC), ("server", SERVER), ("client", CLIENT)):
        (package / f"{name}.py").write_text(text)
    info = root / "h2iot_toy-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: h2iot-toy\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[h2iot.workloads]\ntoy = h2iot_toy.spec:TOY\n")
    return root


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", *args],
        capture_output=True, text=True, timeout=300, check=False, env=env, cwd=REPO,
    )  # fmt: skip


def test_a_workload_installed_beside_the_agent_sweeps_and_reports(tmp_path: Path) -> None:
    plugins = _plugin(tmp_path / "site-packages")
    env = {**os.environ, "PYTHONPATH": f"{plugins}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    listing = subprocess.run(
        [sys.executable, "-m", "agent.cli", "workloads"],
        capture_output=True, text=True, timeout=60, check=False, env=env,
    )  # fmt: skip
    assert listing.returncode == 0 and "toy" in listing.stdout, listing.stdout + listing.stderr
    result = _run(
        env, "sweep", "configs/local.toml", "--no-dashboard", "--out", str(tmp_path / "runs"),
        "--set", 'workload.kind="toy"', "--set", "workload.count=2",
        "--set", "sweep={count = [1, 4]}", "--set", "run.repetitions=2",
        "--set", "run.idle_baseline_s=1",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    (run,) = (tmp_path / "runs").iterdir()
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["workload"]["kind"] == "toy"
    assert manifest["workload"]["spread_param"] == "count"
    with (run / "trials.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 4 and all(r["status"] == "ok" for r in rows), rows
    assert sorted(int(r["toy_answers"]) for r in rows) == [1, 1, 4, 4]
    assert all(float(r["toy_latency_mean_s"]) > 0 for r in rows)
    report = _run(env, "report", str(run))
    assert report.returncode == 0, report.stdout + report.stderr
    markdown = (run / "report" / "report.md").read_text()
    assert "What ran: the toy workload over " in markdown
    assert (run / "report" / "figures" / "workload_toy.png").exists()
    # It declared no HTTP/3: a run of it over "h3" is refused at load, in one line.
    refused = _run(
        env, "sweep", "configs/local.toml", "--no-dashboard", "--out", str(tmp_path / "runs"),
        "--set", 'workload.kind="toy"', "--set", 'workload.protocol="h3"',
    )  # fmt: skip
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert refused.stderr.strip().endswith(
        'workload.protocol: the toy workload does not run over "h3" (it runs over h2c, h2)'
    ), refused.stderr
    # Nothing of the project knows the toy: it lives in its own package alone.
    tracked = subprocess.run(
        ["git", "grep", "-lw", "h2iot_toy", "--", ":!tests/e2e/test_toy_workload.py"],
        capture_output=True, text=True, cwd=REPO, check=False,
    )  # fmt: skip
    assert tracked.stdout == ""
