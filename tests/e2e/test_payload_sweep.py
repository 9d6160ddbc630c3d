"""The payload workload end to end: a real local sweep of configs/payload.toml over two
encodings and two matrix sides, its trials.csv, and its report (summary.csv with the
per-message energy and its CIs, the reference's figures)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pandas as pd

from agent.workloads.payload.codecs import ENCODINGS
from agent.workloads.payload.dataset import make_dataset
from tests.agent.servers import free_port
from tests.conftest import h2iot

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "configs" / "payload.toml"
SIDES = (8, 48)
ENCODINGS_SWEPT = ("soap", "dime")


def test_a_payload_sweep_records_reports_and_draws(tmp_path: Path) -> None:
    result = h2iot(
        "sweep", str(CONFIG), "--no-dashboard", "--out", str(tmp_path / "runs"),
        "--set", 'sweep={encoding = ["soap", "dime"], matrix_side = [8, 48]}',
        "--set", "workload.messages=3",
        "--set", "run.repetitions=2",
        "--set", "run.idle_baseline_s=1",
        # Not the config's fixed 8443: other sweeps may run on this machine.
        "--set", f"nodes.server.http_port={free_port()}",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    (run,) = (tmp_path / "runs").iterdir()
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["axes"] == ["encoding", "matrix_side"]
    with (run / "trials.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 8 and all(row["status"] == "ok" for row in rows), rows
    for row in rows:
        side = int(row["matrix_side"])
        body = ENCODINGS[row["encoding"]].encode(make_dataset("matrix", side, 0))[1]
        assert int(row["payload_message_count"]) == 3
        assert int(row["payload_request_body_bytes"]) == len(body)
        assert float(row["payload_server_deserialise_cpu_s"]) > 0
        assert float(row["energy_mj"]) > 0

    report = h2iot("report", str(run))
    assert report.returncode == 0, report.stdout + report.stderr
    figures = run / "report" / "figures"
    for stem in ("payload_latency", "payload_size", "payload_codec_cpu", "payload_energy"):
        assert (figures / f"{stem}.png").exists(), stem
    summary = pd.read_csv(run / "report" / "summary.csv")
    energy = summary[summary["metric"] == "payload_energy_per_message_mj"]
    assert len(energy) == 4 and (energy["n"] == 2).all()
    assert (energy["ci_low"] <= energy["mean"]).all() and (
        energy["mean"] <= energy["ci_high"]
    ).all()
    size = summary[summary["metric"] == "payload_request_body_bytes"].set_index(
        ["encoding", "matrix_side"]
    )["mean"]
    # The reference's size ordering: DIME below plain SOAP, more so as the matrix grows.
    assert size["dime", 8] < size["soap", 8] and size["dime", 48] * 3 < size["soap", 48]
