"""Workloads end to end over real loopback connections: the blob workload against our server in
both modes (the client's record and the server's trial log), against real peers (nghttp, curl),
with wrong bodies; and the page as `trial --workload page`, the same record as `fetch`."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.site import load_manifest
from agent.trial_header import TRIAL_HEADER
from agent.workloads.bodies import blob_body
from tests.agent.servers import RunningServer, agent_server, run_agent
from tests.conftest import require_tool

STREAM_LIMIT = 3


@pytest.fixture(scope="module")
def blob_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    tmp = tmp_path_factory.mktemp("blob")
    limit = f"max_concurrent_streams={STREAM_LIMIT}"
    with agent_server(None, tmp, "--workload", "blob", "--setting", limit) as running:
        yield running


def _trial(url: str, *args: str) -> tuple[int, dict[str, object]]:
    result = run_agent("trial", url, "--json", *args)
    assert result.stdout, result.stderr
    record: dict[str, object] = json.loads(result.stdout)
    return result.returncode, record


@pytest.mark.parametrize("mode", ["sequential", "concurrent"])
@pytest.mark.parametrize(("size", "requests"), [(100_000, 5), (0, 2), (251 * 3 + 7, 7)])
def test_blob_trial_record_and_server_log(
    blob_server: RunningServer, mode: str, size: int, requests: int
) -> None:
    trial_id = f"blob-{mode}-{size}"
    status, record = _trial(
        blob_server.url,
        "--workload", "blob",
        "--param", f"size_bytes={size}",
        "--param", f"requests={requests}",
        "--param", f"mode={mode}",
        "--setting", "initial_window_size=4096",
        "--trial-id", trial_id,
    )  # fmt: skip
    assert status == 0 and record["ok"] is True, record["error"]
    assert record["workload"] == "blob"
    assert record["engine"] == "builtin"
    assert record["params"] == {
        "size_bytes": size,
        "requests": requests,
        "mode": mode,
        "verify": "sha256",
    }
    metrics = record["metrics"]
    assert isinstance(metrics, dict)
    assert metrics["request_count"] == requests
    assert metrics["body_bytes"] == requests * size
    assert 0 < metrics["latency_mean_s"] <= metrics["latency_max_s"] <= record["response_s"]
    assert record["settings"]["initial_window_size"] == 4096  # type: ignore[index]
    assert record["peer_settings"]["max_concurrent_streams"] == STREAM_LIMIT  # type: ignore[index]
    received = record["received"]
    assert isinstance(received, dict)
    assert received["frames"]["HEADERS"] == requests
    if size:
        # No DATA frame carries more than the 4096-byte window.
        assert received["frames"]["DATA"] >= requests * -(-size // 4096)
        assert received["frame_bytes"]["DATA"] == requests * size + 9 * received["frames"]["DATA"]
    trial = blob_server.wait_for_trials(trial_id)[trial_id]
    assert trial["workload"] == "blob"
    assert trial["ok"] is True
    assert trial["requests"] == trial["responses_completed"] == requests
    assert trial["sent"]["frame_bytes"].get("DATA", 0) == received["frame_bytes"].get("DATA", 0)  # type: ignore[attr-defined]


def test_blob_trials_repeat_with_defaults(blob_server: RunningServer) -> None:
    result = run_agent(
        "trial", blob_server.url, "--workload", "blob", "--repeat", "2", "--trial-id", "rep"
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == ["rep-1", "rep-2"]
    assert "request_count 4, body_bytes 262144" in lines[0]
    trials = blob_server.wait_for_trials("rep-1", "rep-2")
    assert trials["rep-2"]["requests"] == 4


def test_real_peers_get_blobs(blob_server: RunningServer) -> None:
    require_tool("nghttp", "curl")
    url = blob_server.url + "blob/1000"
    got = subprocess.run(
        ["nghttp", "-H", f"{TRIAL_HEADER}: by-nghttp", url],
        capture_output=True,
        timeout=30,
        check=True,
    )
    assert got.stdout == blob_body(1000)
    counted = subprocess.run(
        ["nghttp", "-n", "-s", url], capture_output=True, text=True, timeout=30, check=True
    )
    assert " 200 " in counted.stdout and "1000" in counted.stdout
    curl = ["curl", "-sS", "--http2-prior-knowledge"]
    body = subprocess.run([*curl, url], capture_output=True, timeout=30, check=True).stdout
    assert body == blob_body(1000)
    head = subprocess.run(
        [*curl, "-I", url], capture_output=True, text=True, timeout=30, check=True
    ).stdout
    assert head.startswith("HTTP/2 200")
    assert "content-length: 1000" in head
    assert "content-type: application/octet-stream" in head
    for path, code in (
        ("blob/abc", "404"),
        ("blob/67108865", "404"),
        ("blob/", "404"),
        ("other/1000", "404"),
        ("blob/%31", "404"),
    ):
        answered = subprocess.run(
            [*curl, "-o", "/dev/null", "-w", "%{http_code}", blob_server.url + path],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        assert answered.stdout == code, path
    posted = subprocess.run(
        [*curl, "-X", "POST", "-o", "/dev/null", "-w", "%{http_code}", url],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert posted.stdout == "405"
    trial = blob_server.wait_for_trials("by-nghttp")["by-nghttp"]
    assert trial["workload"] == "blob" and trial["requests"] == 1 and trial["ok"] is True


@pytest.mark.parametrize(
    ("content", "error"),
    [
        (bytes(1000), "GET /blob/1000: sha256 differs from the blob"),
        (blob_body(1000)[:999], "GET /blob/1000: 999 bytes, blob says 1000"),
    ],
)
def test_a_wrong_blob_fails_the_trial(tmp_path: Path, content: bytes, error: str) -> None:
    """A page server whose site has a wrong file where the blob would be."""
    (tmp_path / "site" / "blob").mkdir(parents=True)
    (tmp_path / "site" / "blob" / "1000").write_bytes(content)
    with agent_server(tmp_path / "site", tmp_path) as server:
        status, record = _trial(
            server.url, "--workload", "blob", "--param", "size_bytes=1000", "--param", "requests=2"
        )
    assert status == 1
    assert record["ok"] is False
    assert record["error"] == error
    assert record["metrics"] == {
        "request_count": 0,
        "body_bytes": len(content),
        "latency_mean_s": None,
        "latency_max_s": None,
    }


def test_page_trial_is_the_fetch_record(site: Path, tmp_path: Path) -> None:
    manifest = load_manifest(site)
    with agent_server(site, tmp_path) as server:
        fetched = run_agent("fetch", server.url, "--json", "--trial-id", "by-fetch")
        status, record = _trial(server.url, "--workload", "page", "--trial-id", "by-trial")
        trials = server.wait_for_trials("by-fetch", "by-trial")
    assert fetched.returncode == 0 and status == 0, fetched.stderr
    by_fetch = json.loads(fetched.stdout)
    assert set(record) == set(by_fetch)
    for key in ("workload", "params", "metrics", "settings", "flow_control", "body_bytes"):
        assert record[key] == by_fetch[key], key
    assert record["workload"] == "page"
    assert record["params"] == {
        "site_seed": manifest.seed,
        "total_bytes": manifest.total_bytes,
        "verify": "sha256",
    }
    assert record["metrics"] == {
        "resource_count": len(manifest.files),
        "body_bytes": manifest.total_bytes,
    }
    assert len(record["resources"]) == len(manifest.files)  # type: ignore[arg-type]
    assert record["verification"] == "sha256"
    assert trials["by-fetch"]["workload"] == trials["by-trial"]["workload"] == "page"
