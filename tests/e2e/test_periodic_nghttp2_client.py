"""The periodic workload on the nghttp2 engine's client in a sweep over HTTP/3: gtlsclient a
process per report against the agent's own server, which counts each trial by the client's
trial-control messages (gtlsclient sends no trial header). `new` makes a full handshake per
report; `resume` resumes every one after the first and sends its GET as 0-RTT early data. The
rows carry the server's side and, from the records' phases, each report's idle tail."""

from __future__ import annotations

import json
import math
from pathlib import Path

from tests.agent.servers import free_port
from tests.conftest import require_tool, swept_ok

_REPORTS = 3


def test_gtlsclient_reports_over_h3_against_our_server_in_a_sweep(tmp_path: Path) -> None:
    require_tool("gtlsclient")
    overrides = (
        "--set", f"workload.count={_REPORTS}", "--set", "workload.interval_s=0.2",
        "--set", "run.repetitions=1", "--set", "run.idle_baseline_s=1",
        "--set", 'sweep.protocol=["h3"]', "--set", 'sweep.connection=["new", "resume"]',
        "--set", 'nodes.client.engine="nghttp2"',
        "--set", f"nodes.server.http_port={free_port()}",
    )  # fmt: skip
    run, rows = swept_ok("periodic.toml", tmp_path / "runs", *overrides)
    by_policy = {row["connection"]: row for row in rows}
    assert sorted(by_policy) == ["new", "resume"] and len(rows) == 2
    handshakes = {
        policy: tuple(
            int(row[f"periodic_{name}"])
            for name in ("exchanges_ok", "handshakes_full", "handshakes_resumed", "handshakes_0rtt")
        )
        for policy, row in by_policy.items()
    }
    assert handshakes == {
        "new": (_REPORTS, _REPORTS, 0, 0),
        "resume": (_REPORTS, 1, _REPORTS - 1, _REPORTS - 1),
    }
    # The server's records: one per trial, counted by control messages across its connections.
    (log,) = (run / "nodes" / "server").glob("trials-*.jsonl")
    served = {
        (record := json.loads(line))["trial_id"]: record for line in log.read_text().splitlines()
    }
    assert {
        row["connection"]: tuple(
            served[row["trial_id"]][name]
            for name in (
                "requests",
                "responses_completed",
                "handshakes_resumed",
                "early_data_accepted",
            )
        )
        for row in rows
    } == {
        "new": (_REPORTS, _REPORTS, 0, 0),
        "resume": (_REPORTS, _REPORTS, _REPORTS - 1, _REPORTS - 1),
    }
    for row in rows:
        assert row["phase_clock"] in ("marker", "clock_offset")
        tail, tail_mean = (
            float(row["periodic_idle_tail_energy_mj"]),
            float(row["periodic_idle_tail_mean_mj"]),
        )
        assert math.isclose(tail, _REPORTS * tail_mean, rel_tol=1e-4, abs_tol=1e-5)
        assert float(row["periodic_response_mean_s"]) >= 0
