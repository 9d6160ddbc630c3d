"""The protocol axis end to end: one local sweep over h2c and h2 (TLS) with the run's own
credentials, its rows and report; the nghttp2 engines over TLS from the same config."""

from __future__ import annotations

import csv
import json
import statistics
from pathlib import Path

import pandas as pd

from tests.conftest import h2iot, require_tool

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "configs" / "local.toml"
SMALL_PAGE = ("--set", "workload.total_bytes=300000", "--set", "run.idle_baseline_s=1")


def _rows(run: Path) -> list[dict[str, str]]:
    with (run / "trials.csv").open() as handle:
        return list(csv.DictReader(handle))


def test_h2c_and_h2_sweep_side_by_side_with_the_handshake_recorded(tmp_path: Path) -> None:
    result = h2iot(
        "sweep", str(CONFIG), "--no-dashboard", "--out", str(tmp_path / "runs"), *SMALL_PAGE,
        "--set", 'sweep={initial_window_size = [4096, 65535], protocol = ["h2c", "h2"]}',
        "--set", "run.repetitions=2",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    (run,) = (tmp_path / "runs").iterdir()
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["axes"] == ["initial_window_size", "protocol"]
    assert manifest["tls"]["protocols"] == ["h2c", "h2"]
    assert manifest["tls"]["key"] == "ECDSA P-256" and manifest["tls"]["client_checks_certificate"]
    # The run's credentials: its authority's certificate and the server's, the key private.
    assert (run / "tls" / "server.key").stat().st_mode & 0o777 == 0o600
    server_key = run / "nodes" / "server" / "tls" / "server.key"
    assert server_key.stat().st_mode & 0o777 == 0o600
    rows = _rows(run)
    assert len(rows) == 8 and all(row["status"] == "ok" for row in rows), rows
    by_protocol: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        by_protocol.setdefault(row["protocol"], []).append(row)
    assert sorted(by_protocol) == ["h2", "h2c"] and all(len(r) == 4 for r in by_protocol.values())
    for row in rows:
        assert row["client_tls_version"] == ("TLSv1.3" if row["protocol"] == "h2" else "")
        assert 0 < float(row["client_connect_s"]) < float(row["client_response_s"])
        assert float(row["server_cpu_s"]) > 0 and float(row["energy_mj"]) > 0

    def handshake_cpu_s(protocol: str) -> float:
        return statistics.median(float(r["client_connect_cpu_s"]) for r in by_protocol[protocol])

    # A TLS 1.3 handshake (an ECDHE exchange, an ECDSA signature checked) against a TCP
    # connect: CPU the client spends, not a time the machine's load decides.
    assert handshake_cpu_s("h2") > 2 * handshake_cpu_s("h2c")

    report = h2iot("report", str(run))
    assert report.returncode == 0, report.stdout + report.stderr
    summary = pd.read_csv(run / "report" / "summary.csv")
    assert list(summary.columns[:3]) == ["metric", "initial_window_size", "protocol"]
    connect = summary[summary["metric"] == "client_connect_cpu_s"]
    assert set(connect["protocol"]) == {"h2c", "h2"} and (connect["n"] == 2).all()


def test_the_nghttp2_engines_run_the_same_config_over_tls(tmp_path: Path) -> None:
    require_tool("nghttp", "nghttpd")
    result = h2iot(
        "sweep", str(CONFIG), "--no-dashboard", "--out", str(tmp_path / "runs"), *SMALL_PAGE,
        "--set", "sweep.initial_window_size=[4095, 65535]",
        "--set", 'workload.protocol="h2"',
        "--set", 'nodes.client.engine="nghttp2"',
        "--set", 'nodes.server.engine="nghttp2"',
        "--set", "run.repetitions=1",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    (run,) = (tmp_path / "runs").iterdir()
    rows = _rows(run)
    assert len(rows) == 2 and all(row["status"] == "ok" for row in rows), rows
    for row in rows:
        assert row["client_connect_s"] == ""  # nghttp's HAR cannot time the handshake alone
        assert float(row["client_response_s"]) > 0 and float(row["energy_mj"]) > 0
