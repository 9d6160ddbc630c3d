"""The api workload against real peers: curl and h2load against our server, our client against
our server and against hypercorn + Starlette (the second stack, in its own `serve` process), and
what a broken database gets: a missing or read-only file refused at start, a locked one answered
503 and counted by the client."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.workloads.api.client import list_paths
from agent.workloads.api.store import build_database
from tests.agent.servers import RunningServer, agent_server, run_agent
from tests.conftest import require_tool

pytest.importorskip("hypercorn", reason="the api extra (hypercorn, starlette) is not installed")

RECORDS = 60
USERS, LOOPS = 4, 3


def _database(tmp: Path) -> Path:
    path = tmp / "api-inventory.sqlite"
    build_database(path, RECORDS)
    return path


@pytest.fixture(scope="module")
def ours(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    tmp = tmp_path_factory.mktemp("api-ours")
    extra = ("--workload", "api", "--param", "body_limit_bytes=1000")
    with agent_server(_database(tmp), tmp, *extra) as server:
        yield server


@pytest.fixture(scope="module")
def hypercorn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    tmp = tmp_path_factory.mktemp("api-hypercorn")
    extra = ("--workload", "api", "--engine", "hypercorn", "--param", "body_limit_bytes=1000")
    with agent_server(_database(tmp), tmp, *extra) as server:
        yield server


def curl(url: str, *args: str, stdin: str | None = None) -> tuple[int, str]:
    require_tool("curl")
    result = subprocess.run(
        [
            "curl",
            "-s",
            "--http2-prior-knowledge",
            "-w",
            "\n%{http_code} %{http_version}",
            *args,
            url,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        input=stdin,
    )
    body, _, status = result.stdout.rpartition("\n")
    code, version = status.split()
    assert version == "2", f"{url}: HTTP/{version}, not HTTP/2"
    return int(code), body


def _order() -> str:
    return json.dumps(
        {
            "tenant": "acme",
            "customer_id": 2,
            "status": "new",
            "total_cents": 5,
            "paid": False,
            "note": "n",
        }
    )


@pytest.fixture(params=["ours", "hypercorn"])
def server(request: pytest.FixtureRequest) -> RunningServer:
    return request.getfixturevalue(request.param)


def test_curl_lists_a_page_and_gets_one_row(server: RunningServer) -> None:
    status, body = curl(f"{server.url}api/products?limit=7&offset=10")
    assert status == 200
    page = json.loads(body)
    assert [row["id"] for row in page["items"]] == list(range(11, 18))
    assert (page["limit"], page["offset"]) == (7, 10)
    status, body = curl(f"{server.url}api/warehouses/5")
    assert status == 200 and json.loads(body)["id"] == 5
    status, body = curl(f"{server.url}api/orders?limit=0")
    assert status == 400 and "limit: 0 is outside 1..1000" in json.loads(body)["error"]


@pytest.mark.parametrize(
    "hostile", ["1%20OR%201=1", "1;DROP%20TABLE%20orders", "0%20UNION%20SELECT%201", "%27--"]
)
def test_sql_in_an_id_has_no_effect(server: RunningServer, hostile: str) -> None:
    status, _ = curl(f"{server.url}api/orders/{hostile}")
    assert status == 404
    status, _ = curl(f"{server.url}api/orders/{hostile}", "-X", "DELETE")
    assert status in (404, 405)
    status, body = curl(f"{server.url}api/orders?limit=1000")
    assert status == 200 and len(json.loads(body)["items"]) >= RECORDS - 1


def test_curl_deletes_a_row_and_it_is_gone(server: RunningServer) -> None:
    status, body = curl(f"{server.url}api/shipments/9", "-X", "DELETE")
    assert (status, body) == (204, "")
    assert curl(f"{server.url}api/shipments/9")[0] == 404
    assert curl(f"{server.url}api/shipments/9", "-X", "DELETE")[0] == 404
    # a customer that orders still reference stays
    assert curl(f"{server.url}api/customers/3", "-X", "DELETE")[0] in (204, 409)


def test_bodies_malformed_json_400_over_the_limit_413_create_201_update_200(
    server: RunningServer,
) -> None:
    status, body = curl(f"{server.url}api/orders", "-X", "POST", "-d", '{"tenant": ')
    assert status == 400 and json.loads(body)["error"].startswith("malformed JSON")
    too_large = {"error": "the body is over the limit of 1000 bytes"}
    status, body = curl(f"{server.url}api/orders", "-X", "POST", "-d", "x" * 5000)
    assert (status, json.loads(body)) == (413, too_large)  # by its content-length, unread
    status, body = curl(f"{server.url}api/orders/1", "-T", "-", stdin="y" * 50_000)
    assert (status, json.loads(body)) == (413, too_large)  # as the running total passes it
    status, body = curl(f"{server.url}api/orders", "-X", "POST", "-d", _order())
    assert status == 201
    created = json.loads(body)
    status, body = curl(
        f"{server.url}api/orders/{created['id']}", "-X", "PUT", "-d", '{"paid": true}'
    )
    assert status == 200 and json.loads(body)["version"] == 2


def test_h2load_gets_the_seven_list_endpoints_from_our_server(ours: RunningServer) -> None:
    require_tool("h2load")
    urls = [f"http://127.0.0.1:{ours.port}{path}" for path in list_paths("/", 10)]
    result = subprocess.run(
        ["h2load", "-n", str(7 * 20), "-c", "1", "-m", "16", *urls],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    codes = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", result.stdout)
    assert codes is not None, result.stdout
    assert codes.groups() == ("140", "0", "0", "0"), result.stdout


def _trial(server: RunningServer, trial_id: str, *params: str) -> dict[str, object]:
    args = ["trial", server.url, "--workload", "api", "--json", "--trial-id", trial_id]
    args += ["--param", f"users={USERS}", "--param", f"loops={LOOPS}"]
    for param in params:
        args += ["--param", param]
    control = server.listening.get("control_port")
    if control is not None:
        args += ["--trial-control", f"127.0.0.1:{control}"]
    result = run_agent(*args)
    record = json.loads(result.stdout)
    assert result.returncode == (0 if record["ok"] else 1), result.stderr
    return dict(record)


@pytest.mark.parametrize("connections", ["1", "per-user"])
def test_our_client_runs_the_plan_against_either_stack(
    server: RunningServer, connections: str
) -> None:
    trial_id = f"plan-{connections}-{server.port}"
    record = _trial(server, trial_id, f"connections={connections}")
    assert record["ok"], record["error"]
    metrics = record["metrics"]
    assert isinstance(metrics, dict)
    assert metrics["requests"] == USERS * LOOPS * 7 and metrics["errors"] == 0
    assert metrics["latency_p50_s"] <= metrics["latency_p99_s"]
    assert record["connections"] == (USERS if connections == "per-user" else 1)
    served = server.wait_for_trials(trial_id)[trial_id]
    assert served["requests"] == served["responses_completed"] == USERS * LOOPS * 7
    assert served["ok"] and served["cpu_peak_pct"] is not None
    assert isinstance(served["conditions"], dict)  # the node's state, from either stack
    assert served.get("engine", "h2") == (
        "hypercorn" if "control_port" in server.listening else "h2"
    )


def test_a_locked_database_is_503_counted_by_the_client(server: RunningServer) -> None:
    root = Path(server.process.args[server.process.args.index("--root") + 1])
    locker = sqlite3.connect(root, isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")
    try:
        record = _trial(server, f"locked-{server.port}", "loops=1")
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    assert record["ok"], record["error"]  # errors are counted, as JMeter counts them
    metrics = record["metrics"]
    assert isinstance(metrics, dict)
    assert metrics["errors"] == USERS * 7
    assert record["errors_by_status"] == {"503": USERS * 7}


@pytest.mark.parametrize("engine", ["builtin", "hypercorn"])
def test_a_missing_or_read_only_database_is_one_line_and_exit_2(
    tmp_path: Path, engine: str
) -> None:
    missing = tmp_path / "absent.sqlite"
    result = run_agent(
        "serve", "--workload", "api", "--engine", engine, "--port", "0", "--root", str(missing)
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"h2iot-agent: error: api database {missing}: no such file "
        f"(build it with `h2iot-agent api-db {missing}`)"
    ]
    read_only = _database(tmp_path)
    read_only.chmod(0o444)
    result = run_agent(
        "serve", "--workload", "api", "--engine", engine, "--port", "0", "--root", str(read_only)
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"h2iot-agent: error: api database {read_only}: read-only (the API writes to it)"
    ]


def test_the_database_builder_is_a_command(tmp_path: Path) -> None:
    path = tmp_path / "built.sqlite"
    first = run_agent("api-db", str(path), "--records", "5")
    again = run_agent("api-db", str(path), "--records", "5")
    assert (first.returncode, again.returncode) == (0, 0)
    assert first.stdout.startswith("wrote") and again.stdout.startswith("kept")
    refused = run_agent("api-db", str(path), "--records", "0")
    assert refused.returncode == 2 and "--records: 0 is outside 1..1000000" in refused.stderr
    assert path.exists()


def test_a_trial_of_more_than_a_thousand_requests_on_hypercorn(hypercorn: RunningServer) -> None:
    # hypercorn's default ends a connection after 1000 requests; the engine lifts that cap
    record = _trial(hypercorn, "long-trial", "loops=40", "page_size=1")
    assert record["ok"], record["error"]
    assert record["metrics"]["requests"] == USERS * 40 * 7
