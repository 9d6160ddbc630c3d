"""Several client nodes, the pure parts: the config form (`nodes.clients`) and what it refuses,
the load spread over the nodes, and the merge of the nodes' records (exact where it says so:
checked against the statistics of the pooled samples)."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.config import load_config
from controller.config.clients import node_params, spread
from controller.errors import ConfigError
from controller.sweep.merge import (
    SIDE_COLUMNS,
    NodeRun,
    merge,
    merge_server,
    pooled_sd,
    requests_sent,
    rule_of,
    side_header,
    side_row,
)

BASE = """
[workload]
kind = "blob"
requests = 7
[nodes.client]
user = "pi"
known_hosts = "/tmp/known_hosts"
deploy_dir = "~/h2iot-multi"
[[nodes.clients]]
host = "10.0.0.11"
[[nodes.clients]]
host = "10.0.0.12"
name = "bench"
port = 2222
[[nodes.clients]]
host = "10.0.0.13"
[nodes.server]
host = "10.0.0.2"
known_hosts = "/tmp/known_hosts"
[meter]
source = "serial"
port = "/dev/null"
"""


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    path = tmp_path / "multi.toml"
    path.write_text(BASE)
    return path


def test_each_entry_takes_nodes_client_s_keys_and_its_own(config_path: Path) -> None:
    config = load_config(config_path)
    names = [node.name for node in config.client_nodes]
    assert names == ["client1", "bench", "client3"]
    assert [node.host for node in config.clients] == ["10.0.0.11", "10.0.0.12", "10.0.0.13"]
    assert config.clients[1].port == 2222 and config.clients[0].port == 22
    assert {node.user for node in config.clients} == {"pi"}
    assert {node.deploy_dir for node in config.clients} == {"~/h2iot-multi"}
    assert {node.address for node in config.clients} == {"10.0.0.2"}  # the server's host
    assert config.client == config.clients[0]  # the metered one
    nodes = config.to_dict()["nodes"]
    assert [entry["name"] for entry in nodes["clients"]] == names
    assert "name" not in nodes["client"]


def test_one_client_keeps_the_old_form_and_manifest() -> None:
    config = load_config(None)
    assert config.clients == () and config.client_nodes == (config.client,)
    assert "clients" not in config.to_dict()["nodes"]


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            'nodes.clients=[{host="local"}, {host="a"}]',
            "--set: nodes.clients[0].host: several client nodes must be SSH nodes",
        ),
        (
            'nodes.clients=[{host="a", name="x"}, {host="b", name="x"}]',
            "--set: nodes.clients[1].name: 'x' names an earlier node too",
        ),
        ('nodes.clients=[{hots="a"}]', "--set: nodes.clients[0].hots: unknown key ("),
        ("nodes.clients=[]", "--set: nodes.clients: has 0 client nodes; give 1..64"),
        ('nodes.clients={host="a"}', "--set: nodes.clients: expected an array of tables"),
        ("nodes.clients=[1]", "--set: nodes.clients[0]: expected a table, got an integer (1)"),
        ('nodes.clients=[{host="a", port=0}]', "--set: nodes.clients[0].port: 0 is outside"),
        (
            'nodes.clients=[{host="a", device="rpi3b", remote_device=true}, {host="b"}]',
            "--set: nodes.clients[0].device: device emulation is for one client node",
        ),
        ("link.rate_mbit=100", "--set: link: [link] shapes one client-server link; with 3"),
        (
            "workload.requests=2",
            "--set: workload.requests: 2 requests cannot be spread over 3 client nodes",
        ),
        (
            "sweep.requests=[3, 2]",
            "--set: sweep.requests[1]: 2 requests cannot be spread over 3 client nodes",
        ),
        (
            'nodes.server.engine="nghttp2"',
            "--set: nodes.server.engine: workload 'blob' runs on 'builtin', not 'nghttp2'",
        ),
    ],
)
def test_a_bad_client_list_is_one_line_naming_the_entry(
    config_path: Path, override: str, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(config_path, [override])
    assert str(caught.value).startswith(message), caught.value
    assert "\n" not in str(caught.value)


def test_a_file_s_entry_without_known_hosts_is_named(tmp_path: Path) -> None:
    path = tmp_path / "bare.toml"
    path.write_text('[[nodes.clients]]\nhost = "a"\n[[nodes.clients]]\nhost = "b"\n')
    with pytest.raises(ConfigError, match=r"bare.toml: nodes.clients\[0\].known_hosts: required"):
        load_config(path)


def test_a_later_layer_removes_the_list(config_path: Path) -> None:
    config = load_config(config_path, ["nodes.clients=none", 'nodes.client.host="10.0.0.11"'])
    assert config.clients == () and config.client.host == "10.0.0.11"


@given(st.integers(0, 10_000), st.integers(1, 64))
def test_spread_adds_up_and_differs_by_at_most_one(total: int, nodes: int) -> None:
    shares = spread(total, nodes)
    assert len(shares) == nodes and sum(shares) == total
    assert max(shares) - min(shares) <= 1
    assert list(shares) == sorted(shares, reverse=True)  # the remainder goes to the first


def test_node_params_divide_the_declared_parameter_only() -> None:
    blob = (("size_bytes", 10), ("requests", 7), ("mode", "sequential"))
    assert [dict(p)["requests"] for p in node_params("blob", blob, 3)] == [3, 2, 2]
    assert {dict(p)["size_bytes"] for p in node_params("blob", blob, 3)} == {10}
    page = (("site_seed", 0), ("total_bytes", 65536))
    assert node_params("page", page, 2) == (page, page)  # one unit: each node runs it whole


groups = st.lists(
    st.lists(st.floats(0.001, 10, allow_nan=False), min_size=2, max_size=20), min_size=1, max_size=6
)


@given(groups)
def test_pooled_mean_and_sd_are_those_of_the_union(samples: list[list[float]]) -> None:
    metrics = [
        {
            "request_count": len(group),
            "latency_mean_s": statistics.fmean(group),
            "latency_sd_s": statistics.stdev(group),
        }
        for group in samples
    ]
    union = [value for group in samples for value in group]
    counts = [float(len(group)) for group in samples]
    means = [m["latency_mean_s"] for m in metrics]
    sds = [m["latency_sd_s"] for m in metrics]
    assert pooled_sd(counts, means, sds) == pytest.approx(statistics.stdev(union), rel=1e-6)


@pytest.mark.parametrize(
    ("name", "rule"),
    [
        ("request_count", "sum"),
        ("body_bytes", "sum"),
        ("errors", "sum"),
        ("latency_mean_s", "mean"),
        ("latency_max_s", "max"),
        ("latency_min_s", "min"),
        ("latency_sd_s", "sd"),
        ("latency_p99_s", "percentile"),
        ("latency_p50_s", "percentile"),
        ("throughput_req_per_s", "rate"),
        ("server_engine", "none"),
    ],
)
def test_each_field_name_has_its_rule(name: str, rule: str) -> None:
    assert rule_of(name) == rule


def _record(
    start_ns: int, end_ns: int, latencies: list[float], **extra: object
) -> dict[str, object]:
    return {
        "ok": True,
        "trial_id": "t001",
        "workload": "blob",
        "t_wall_start_ns": start_ns,
        "t_wall_end_ns": end_ns,
        "response_s": (end_ns - start_ns) / 1e9,
        "ttfb_s": 0.01,
        "cpu_s": 0.5,
        "rss_peak_bytes": 1000,
        "received": {"bytes": 100, "frames": {"DATA": 3, "HEADERS": 1}},
        "sent": {"bytes": 10, "frames": {"WINDOW_UPDATE": 2}},
        "metrics": {
            "request_count": len(latencies),
            "body_bytes": 90,
            "latency_mean_s": statistics.fmean(latencies),
            "latency_max_s": max(latencies),
        },
        **extra,
    }


def _run(
    name: str, offset_ns: int, record: dict[str, object] | None, error: str | None = None
) -> NodeRun:
    return NodeRun(
        name, f"{name} (pi@{name}:22)", (("requests", 1),), offset_ns, 1000, record, error
    )


def test_merge_sums_counts_and_spans_on_the_controller_clock() -> None:
    # Node b's clock runs 5 s ahead: its times mean 5 s less on the controller's clock.
    a = _run("a", 0, _record(10_000_000_000, 10_200_000_000, [0.1, 0.2], conditions={"temp_c": 40}))
    b = _run(
        "b",
        5_000_000_000,
        _record(15_050_000_000, 15_300_000_000, [0.3], rss_peak_bytes=7, conditions={"temp_c": 9}),
    )
    merged = merge("blob", [a, b])
    # trials.csv's client_* condition columns describe the metered node, not the last one.
    assert merged["conditions"] == {"temp_c": 40}
    assert merged["ok"] is True and merged["client_nodes"] == 2
    assert merged["response_s"] == pytest.approx(0.3)  # 10.0 s to 10.3 s
    assert merged["t_wall_start_ns"] == 10_000_000_000  # the metered node's own
    assert merged["cpu_s"] == 1.0 and merged["rss_peak_bytes"] == 1000
    assert merged["received"] == {"bytes": 200, "frames": {"DATA": 6, "HEADERS": 2}}
    assert merged["sent"] == {"bytes": 20, "frames": {"WINDOW_UPDATE": 4}}
    metrics = merged["metrics"]
    assert metrics["request_count"] == 3 and metrics["body_bytes"] == 180
    assert metrics["latency_mean_s"] == pytest.approx(0.2)  # of 0.1, 0.2, 0.3: weighted
    assert metrics["latency_max_s"] == 0.3


def test_a_failed_node_is_named_and_its_row_kept() -> None:
    ok = _run("a", 0, _record(1_000, 2_000, [0.1]))
    lost = _run("b", 0, None, error="b (pi@b:22): connection lost: EOF")
    refused = _run("c", 0, {**_record(1_000, 2_000, [0.1]), "ok": False, "error": "refused"})
    assert not lost.ok and lost.failure() == "b (pi@b:22): connection lost: EOF"
    assert refused.failure() == "c (pi@c:22): refused"
    with pytest.raises(AssertionError):
        merge("blob", [ok, lost])
    row = side_row(
        "t001", 1, ok, kind="blob", metered=True, start_at_ns=500, spread_param="requests"
    )
    assert list(row) == side_header("blob")
    assert row["status"] == "ok" and row["start_lag_s"] == pytest.approx(500 / 1e9)
    assert row["blob_request_count"] == 1 and row["metered"] == 1
    failed = side_row("t001", 1, lost, kind="blob", metered=False, start_at_ns=0, spread_param=None)
    assert failed["status"] == "failed" and str(failed["error"]).startswith("b (pi@b:22)")
    assert failed["start_lag_s"] is None and failed["share"] == ""
    assert row["response_s"] == pytest.approx(1e-6)


def test_every_side_table_column_is_documented() -> None:
    text = (Path(__file__).resolve().parents[2] / "data" / "README.md").read_text()
    for name, meaning in SIDE_COLUMNS:
        assert f"| `{name}` | {meaning} |" in text, name


def _server_part(start_ns: int, end_ns: int, requests: int, cpu_s: float) -> dict[str, object]:
    counts = {"bytes": 100 * requests, "frames": {"DATA": requests}, "frame_bytes": {"DATA": 90}}
    return {
        "trial_id": "t001",
        "ok": True,
        "requests": requests,
        "responses_completed": requests,
        "streams_reset": 0,
        "serve_s": (end_ns - start_ns) / 1e9,
        "cpu_user_s": cpu_s,
        "cpu_sys_s": 0.0,
        "cpu_s": cpu_s,
        "rss_peak_bytes": 10 * requests,
        "rss_peak_is_trial": True,
        "sent": counts,
        "received": counts,
        "t_wall_start_ns": start_ns,
        "t_wall_end_ns": end_ns,
        "t_mono_start_ns": start_ns,
        "t_mono_end_ns": end_ns,
        "overlapping_trials": [],
    }


def test_a_trial_the_server_saw_in_parts_adds_up() -> None:
    first = _server_part(0, 100_000_000, 4, 0.02)
    second = _server_part(150_000_000, 200_000_000, 3, 0.01)
    merged = merge_server([first, second])
    assert merged["parts"] == 2 and merged["ok"] is True
    assert merged["requests"] == 7 and merged["cpu_s"] == pytest.approx(0.03)
    assert merged["serve_s"] == pytest.approx(0.2)  # first start to last end
    assert merged["cpu_pct"] == pytest.approx(15.0)
    assert merged["sent"] == {"bytes": 700, "frames": {"DATA": 7}, "frame_bytes": {"DATA": 180}}
    assert merged["rss_peak_bytes"] == 40
    assert merge_server([first]) == first
    assert merge_server([first, {**second, "ok": False}])["ok"] is False


def test_the_requests_sent_are_the_nodes_headers_frames() -> None:
    a = _run("a", 0, {**_record(0, 1, [0.1]), "sent": {"bytes": 1, "frames": {"HEADERS": 3}}})
    b = _run("b", 0, {**_record(0, 1, [0.1]), "sent": {"bytes": 1, "frames": {"HEADERS": 2}}})
    assert requests_sent([a, b]) == 5
    assert requests_sent([a, _run("c", 0, _record(0, 1, [0.1]))]) is None  # c counts none
