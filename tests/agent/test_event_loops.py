"""The client on uvloop (`--event-loop uvloop`) runs every workload over every protocol the
agent speaks, against our real server, with the same results as on asyncio; the record says
which loop ran. And `verify = "size"` (page, blob): a body of the right length passes unhashed,
a wrong length still fails, and the record says how bodies were checked."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from agent.errors import UsageError
from agent.event_loop import check_event_loop
from agent.site import load_manifest
from tests.agent.h3_peers import Credentials
from tests.agent.servers import RunningServer, agent_server, run_agent

# What each workload's trial is asked, small enough to be quick, large enough to take many
# round trips under the 4096-byte window every trial announces.
WORKLOAD_PARAMS: dict[str, tuple[str, ...]] = {
    "page": (),
    "blob": ("size_bytes=200000", "requests=3", "mode=concurrent"),
    "payload": ("encoding=cbor", "matrix_side=60", "messages=2"),
    "api": ("users=2", "loops=2"),
    "stream": ("transport=websocket", "rate_hz=50", "duration_s=0.3", "payload_doubles=50"),
    "periodic": ("count=3", "interval_s=0.05", "connection=new", "method=POST"),
}
PROTOCOLS = ("h2c", "h2", "h3")


@pytest.fixture(scope="module")
def servers(
    site: Path, credentials: Credentials, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[tuple[str, str], RunningServer]]:
    """One server per workload and protocol, up for the module."""
    tmp = tmp_path_factory.mktemp("loops")
    database = tmp / "api.sqlite"
    assert run_agent("api-db", str(database), "--records", "50").returncode == 0
    roots: dict[str, Path | None] = {"page": site, "api": database}
    tls = ["--cert", str(credentials.cert), "--key", str(credentials.key)]
    with ExitStack() as stack:
        running = {}
        for workload in WORKLOAD_PARAMS:
            for protocol in PROTOCOLS:
                extra = ["--workload", workload, "--setting", "initial_window_size=4096"]
                if protocol != "h2c":
                    extra += ["--protocol", protocol, *tls]
                running[workload, protocol] = stack.enter_context(
                    agent_server(roots.get(workload), tmp, *extra)
                )
        yield running


def _trial(
    server: RunningServer,
    credentials: Credentials,
    protocol: str,
    workload: str,
    *args: str,
) -> dict[str, object]:
    scheme = "http" if protocol == "h2c" else "https"
    result = run_agent(
        "trial",
        f"{scheme}://127.0.0.1:{server.port}/",
        "--protocol", protocol,
        "--ca-file", str(credentials.ca),
        "--workload", workload,
        "--setting", "initial_window_size=4096",
        "--json",
        "--timeout", "60",
        *(arg for p in WORKLOAD_PARAMS[workload] for arg in ("--param", p)),
        *args,
    )  # fmt: skip
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(lines) == 1, result.stdout + result.stderr
    record: dict[str, object] = lines[0]
    record["exit"] = result.returncode
    return record


# The workload's own figures that do not depend on timing: the same on either loop.
STEADY_METRICS = {
    "page": ("resource_count", "body_bytes"),
    "blob": ("request_count", "body_bytes"),
    "payload": ("message_count", "request_body_bytes"),
    "api": ("requests", "errors"),
    "stream": (),
    "periodic": ("exchanges_ok", "handshakes_full"),
}


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("workload", list(WORKLOAD_PARAMS))
def test_every_workload_runs_on_uvloop_as_on_asyncio(
    workload: str,
    protocol: str,
    servers: dict[tuple[str, str], RunningServer],
    credentials: Credentials,
) -> None:
    server = servers[workload, protocol]
    records = {
        loop: _trial(server, credentials, protocol, workload, "--event-loop", loop)
        for loop in ("uvloop", "asyncio")
    }
    for loop, record in records.items():
        assert record["exit"] == 0 and record["ok"], (loop, record["error"])
        assert record["event_loop"] == loop
        assert record["tls"] is (protocol != "h2c")
        assert record["cpu_s"] > 0  # type: ignore[operator]
    metrics = {loop: record["metrics"] for loop, record in records.items()}
    for name in STEADY_METRICS[workload]:
        assert metrics["uvloop"][name] == metrics["asyncio"][name], name  # type: ignore[index]
    if workload == "stream":
        assert metrics["uvloop"]["items_received"] > 0  # type: ignore[index]
        assert metrics["uvloop"]["items_lost"] == 0  # type: ignore[index]


def test_an_event_loop_that_is_not_installed_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    with pytest.raises(UsageError) as raised:
        check_event_loop("uvloop")
    assert str(raised.value) == (
        "--event-loop uvloop needs the agent's uvloop extra: pip install 'h2iot[uvloop]'"
    )


@pytest.fixture
def swapped_site(site: Path, tmp_path: Path) -> tuple[Path, str, int]:
    """A copy of the test site with one subresource's bytes changed, its length kept: the
    manifest's sha256 no longer matches it, its size still does."""
    copy = tmp_path / "site"
    manifest = load_manifest(site)
    for entry in manifest.files:
        target = copy / entry.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((site / entry.path).read_bytes())
    (copy / "manifest.json").write_bytes((site / "manifest.json").read_bytes())
    victim = next(e for e in manifest.files if e.path != manifest.index)
    body = bytearray((copy / victim.path).read_bytes())
    body[len(body) // 2] ^= 0xFF
    (copy / victim.path).write_bytes(bytes(body))
    return copy, victim.path, victim.size_bytes


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_verify_size_checks_lengths_not_bytes(
    loop: str, swapped_site: tuple[Path, str, int], tmp_path: Path
) -> None:
    root, changed, _size = swapped_site
    with agent_server(root, tmp_path) as server:
        url = f"http://127.0.0.1:{server.port}/"
        manifest = ("--manifest", str(root / "manifest.json"), "--event-loop", loop)
        results = {
            check: run_agent(
                "trial",
                url,
                "--workload",
                "page",
                "--json",
                *manifest,
                "--param",
                f"verify={check}",
            )
            for check in ("sha256", "size")
        }
    hashed, sized = (json.loads(results[c].stdout) for c in ("sha256", "size"))
    assert results["sha256"].returncode == 1 and hashed["ok"] is False
    assert hashed["error"] == f"GET /{changed}: sha256 differs from the manifest"
    assert results["size"].returncode == 0 and sized["ok"] is True, sized["error"]
    assert sized["verification"] == "size" and hashed["verification"] == "sha256"
    assert sized["params"]["verify"] == "size"  # type: ignore[index]


def test_verify_size_still_fails_a_wrong_length(tmp_path: Path) -> None:
    (tmp_path / "site" / "blob").mkdir(parents=True)
    (tmp_path / "site" / "blob" / "1000").write_bytes(bytes(999))
    with agent_server(tmp_path / "site", tmp_path) as server:
        result = run_agent(
            "trial", f"http://127.0.0.1:{server.port}/", "--workload", "blob", "--json",
            "--param", "size_bytes=1000", "--param", "verify=size",
        )  # fmt: skip
    record = json.loads(result.stdout)
    assert result.returncode == 1
    assert record["error"] == "GET /blob/1000: 999 bytes, blob says 1000"
