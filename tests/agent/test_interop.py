"""Interop with real peers at every window of the study's sweep: our server against nghttp,
h2load and curl; our client against nghttpd and against our own server. Bodies verified."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.site import load_manifest
from tests.agent.servers import RunningServer, agent_server, nghttpd, run_agent
from tests.agent.windows import STUDY_WINDOWS, nghttp2_bits, verify_downloads
from tests.conftest import require_tool


@pytest.fixture(scope="module")
def our_server(site: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with agent_server(site, tmp_path_factory.mktemp("our-server")) as server:
        yield server


@pytest.fixture(scope="module")
def their_server(site: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    require_tool("nghttpd")
    with nghttpd(site, tmp_path_factory.mktemp("nghttpd")) as server:
        yield server


def _site_body_bytes(site: Path) -> int:
    return sum(f.size_bytes for f in load_manifest(site).files if f.path != "manifest.json")


@pytest.mark.parametrize("window", STUDY_WINDOWS)
def test_nghttp_fetches_the_page_from_our_server(
    window: int, our_server: RunningServer, site: Path, tmp_path: Path
) -> None:
    require_tool("nghttp")
    bits = str(nghttp2_bits(window))
    har = tmp_path / "page.har"
    page = subprocess.run(
        [
            "nghttp",
            "-nas",
            "--no-push",
            "--no-dep",
            "-w",
            bits,
            "-W",
            bits,
            "-r",
            str(har),
            our_server.url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert page.returncode == 0, page.stderr
    # nghttp interleaves concurrent bodies on stdout, so the page fetch is checked by the exact
    # sizes in its HAR, and one large body is fetched alone and checked byte for byte.
    manifest = load_manifest(site).by_path()
    entries = json.loads(har.read_text())["log"]["entries"]
    sizes = {
        e["request"]["url"].removeprefix(our_server.url) or "index.html": e["response"]["content"]
        for e in entries
    }
    assert {path: c["size"] for path, c in sizes.items()} == {
        path: f.size_bytes for path, f in manifest.items() if path != "manifest.json"
    }
    image = "img/photo-1.jpg"
    body = subprocess.run(
        ["nghttp", "--no-push", "-w", bits, "-W", bits, our_server.url + image],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert body.returncode == 0, body.stderr
    assert hashlib.sha256(body.stdout).hexdigest() == manifest[image].sha256


@pytest.mark.parametrize("window", STUDY_WINDOWS)
def test_h2load_gets_every_resource_from_our_server(
    window: int, our_server: RunningServer, site: Path
) -> None:
    require_tool("h2load")
    files = [f.path for f in load_manifest(site).files if f.path != "manifest.json"]
    urls = [our_server.url + path for path in files]
    bits = str(nghttp2_bits(window))
    result = subprocess.run(
        [
            "h2load",
            "-n",
            str(len(urls)),
            "-c",
            "1",
            "-m",
            str(len(urls)),
            "-w",
            bits,
            "-W",
            bits,
            *urls,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert f"{len(urls)} succeeded, 0 failed, 0 errored" in result.stdout, result.stdout
    assert f"status codes: {len(urls)} 2xx" in result.stdout, result.stdout
    data = re.search(r"traffic: .*, .* headers .*, .*\((\d+)\) data", result.stdout)
    assert data is not None, result.stdout
    assert int(data.group(1)) == _site_body_bytes(site)


def test_curl_fetches_every_resource_from_our_server(
    our_server: RunningServer, site: Path, tmp_path: Path
) -> None:
    require_tool("curl")
    files = [f.path for f in load_manifest(site).files if f.path != "manifest.json"]
    # One URL per curl: Debian 12's curl 7.88 fails a second prior-knowledge transfer on a
    # reused connection ("Error in the HTTP2 framing layer"), against nghttpd as well.
    for path in files:
        result = subprocess.run(
            [
                "curl",
                "--silent",
                "--show-error",
                "--fail",
                "--http2-prior-knowledge",
                "-o",
                str(tmp_path / Path(path).name),
                our_server.url + path,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, result.stderr
    assert len(verify_downloads(site, tmp_path)) == 8
    head = subprocess.run(
        ["curl", "-sS", "-I", "--http2-prior-knowledge", our_server.url + files[4]],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    expected = load_manifest(site).by_path()[files[4]]
    assert head.stdout.startswith("HTTP/2 200")
    assert f"content-length: {expected.size_bytes}" in head.stdout
    assert "content-type: image/jpeg" in head.stdout


def _our_fetch(url: str, window: int, *extra: str) -> dict[str, object]:
    result = run_agent(
        "fetch",
        url,
        "--initial-window-size",
        str(window),
        "--connection-window",
        str(window),
        "--json",
        *extra,
    )
    assert result.returncode == 0, result.stderr + result.stdout
    record: dict[str, object] = json.loads(result.stdout)
    return record


@pytest.mark.parametrize("window", STUDY_WINDOWS)
def test_our_client_fetches_from_nghttpd(window: int, their_server: RunningServer) -> None:
    record = _our_fetch(their_server.url, window)
    assert record["ok"] is True
    assert len(record["resources"]) == 8  # type: ignore[arg-type]
    assert all(r["verified"] for r in record["resources"])  # type: ignore[attr-defined]
    assert record["settings"]["initial_window_size"] == window  # type: ignore[index]


@pytest.mark.parametrize("window", STUDY_WINDOWS)
def test_our_client_fetches_from_our_server_and_the_server_accounts_the_trial(
    window: int, our_server: RunningServer, site: Path
) -> None:
    trial_id = f"interop-{window}"
    record = _our_fetch(our_server.url, window, "--trial-id", trial_id)
    assert record["ok"] is True
    assert record["body_bytes"] == _site_body_bytes(site)
    received = record["received"]["frames"]  # type: ignore[index]
    # Exact windows: no DATA frame can carry more than the window, so small windows need many.
    assert received["DATA"] >= _site_body_bytes(site) // min(window, 16384)
    trial = our_server.wait_for_trials(trial_id)[trial_id]
    assert trial["ok"] is True
    assert trial["requests"] == 8
    assert trial["sent"]["frames"]["DATA"] == received["DATA"]  # type: ignore[index]
    assert trial["cpu_s"] > 0
    assert trial["serve_s"] > 0
