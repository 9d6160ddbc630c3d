"""The sweep over real SSH: two network namespaces each running sshd (tests.netns), the
controller in the root namespace, the agents deployed with `h2iot nodes deploy`, and the data
link between the namespaces shaped to 100 Mbit/s like the study's FastEthernet.

The modelled meters follow local nodes only, so the test runs the virtual meter itself, watching
the client namespace's sshd: every process of the client node is a child of it on this machine.
The sweep reads it as a serial board, so trial windows are cut by the clock mapping through the
measured SSH clock offset, as with real Pis and no marker wire.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from controller.energy import energy_in_window
from controller.link import tcp_goodput_mbit
from controller.meter.node_power import WatchSpec
from controller.meter.truth import Truth
from controller.meter.virtual import VirtualMeter, VirtualMeterOptions
from tests.conftest import h2iot, require_tool
from tests.netns import Testbed

pytest_plugins = ["tests.netns.fixtures"]

WINDOWS = (1024, 65535)
REPETITIONS = 2
SITE_BYTES = 600_000


def write_config(testbed: Testbed, path: Path, known_hosts: Path) -> Path:
    lines = [
        "[run]",
        'name = "ssh"',
        f"repetitions = {REPETITIONS}",
        "idle_baseline_s = 1",
        "[sweep]",
        f"initial_window_size = {list(WINDOWS)}",
        "[workload]",
        f"total_bytes = {SITE_BYTES}",
        "[meter]",
        'source = "serial"',
        'port = "/dev/null"',  # each test passes its own meter's port with --set
        "[link]",
        "rate_mbit = 100",
    ]
    for role, host in (("client", testbed.client), ("server", testbed.server)):
        lines += [
            f"[nodes.{role}]",
            f'host = "{host.address}"',
            f'user = "{host.user}"',
            f'key = "{host.key}"',
            f'known_hosts = "{known_hosts}"',
            # Each node's HOME is its own directory; a deploy of its own, apart from other tests'.
            'deploy_dir = "~/h2iot-sweep"',
            f'address = "{testbed.server.data_address}"',
            f'data_interface = "{testbed.data_interface}"',
        ]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def config(netns_testbed: Testbed, tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_tool("tc")
    directory = tmp_path_factory.mktemp("ssh-sweep")
    known_hosts = directory / "known_hosts"
    known_hosts.write_text(
        f"{netns_testbed.client.known_hosts_line}\n{netns_testbed.server.known_hosts_line}\n"
    )
    path = write_config(netns_testbed, directory / "sweep.toml", known_hosts)
    deployed = h2iot("nodes", "deploy", str(path), "--wheelhouse", str(directory / "wheelhouse"))
    assert deployed.returncode == 0, deployed.stdout + deployed.stderr
    return path


def _rows(run: Path) -> list[dict[str, str]]:
    with (run / "trials.csv").open() as handle:
        return list(csv.DictReader(handle))


def _sweep(config: Path, testbed: Testbed, tmp_path: Path, *overrides: str) -> Path:
    """A sweep with the virtual meter following the client namespace's sshd; its run folder."""
    sshd = testbed.client.pidfile.read_text().split()[0]
    truth_path = tmp_path / "meter-truth.csv"
    meter = VirtualMeter(
        VirtualMeterOptions(watch=(WatchSpec("pid", sshd),), truth_path=truth_path)
    )
    meter.start()
    sets = [word for override in overrides for word in ("--set", override)]
    try:
        result = h2iot(
            "sweep", str(config), "--no-dashboard", "--out", str(tmp_path / "runs"),
            "--set", f"meter.port={meter.port}", *sets,
        )  # fmt: skip
    finally:
        meter.stop()
        meter.close()
    assert result.returncode == 0, result.stdout + result.stderr
    (run,) = (tmp_path / "runs").iterdir()
    return run


def test_the_sweep_runs_over_ssh_on_a_fastethernet_link(
    config: Path, netns_testbed: Testbed, tmp_path: Path
) -> None:
    run = _sweep(config, netns_testbed, tmp_path)
    truth_path = tmp_path / "meter-truth.csv"
    rows = _rows(run)
    assert len(rows) == len(WINDOWS) * REPETITIONS
    assert all(row["status"] == "ok" for row in rows), rows
    planned = {(str(w), str(r)) for w in WINDOWS for r in range(1, REPETITIONS + 1)}
    assert {(row["initial_window_size"], row["repetition"]) for row in rows} == planned

    manifest = json.loads((run / "manifest.json").read_text())
    link = manifest["link"]
    assert link["shaped"] and link["rate_mbit"] == 100
    for role in ("client", "server"):
        end = link["nodes"][role]
        assert end["interface"] == "data0" and end["gso_max_segs"] == 1
        (root,) = [q for q in end["qdiscs"] if q.get("root")]
        assert root["kind"] == "tbf" and root["stab"]["overhead"] == 24
        assert end["tcp_goodput_bound_mbit"] == pytest.approx(tcp_goodput_mbit(100, 1500))
        clock = manifest["nodes"][role]["clock"]
        # Same machine, same clock: the measured offset is zero within its uncertainty.
        assert clock["samples"] > 0 and 0 < clock["uncertainty_ns"] < 50_000_000
        assert abs(clock["wall_offset_ns"]) <= clock["uncertainty_ns"]
    # The link is restored once the sweep is over.
    qdiscs = netns_testbed.exec_in("client", ["tc", "-j", "qdisc", "show", "dev", "data0"])
    assert [q["kind"] for q in json.loads(qdiscs)] == ["noqueue"]

    idle_mw = manifest["idle_baseline_mw"]
    assert 1000 < idle_mw < 1500  # a Pi 3B idles near 1.2 W
    rate = manifest["meter"]["sample_rate_hz"]
    truth = Truth.load(truth_path).per_sample(0)
    times = np.arange(len(truth)) / rate
    measured_total = exact_total = 0.0
    for row in rows:
        assert row["window_source"] == "clock"
        assert int(row["samples_lost"]) == 0
        assert float(row["server_cpu_s"]) > 0
        # The page crossed the shaped link: no faster than its 100 Mbit/s, give or take the
        # bucket's first 31 kB burst (the bare veth carries it at about 480 Mbit/s at 65535).
        page_mbit = SITE_BYTES * 8 / float(row["client_response_s"]) / 1e6
        assert page_mbit < 105, row["trial_id"]
        window_s = float(row["window_s"])
        start = float(row["window_start_s"])
        energy = float(row["energy_mj"])
        # Plausible for a Pi 3B: between idle and all four cores busy (about 3.7 W).
        assert idle_mw * window_s * 0.9 < energy < 4000 * window_s, row
        exact = energy_in_window(times, truth, start, start + window_s).energy_mj
        measured_total += energy
        exact_total += exact
        print(f"{row['trial_id']}: {window_s * 1000:.1f} ms, {energy:.1f} mJ, truth {exact:.1f} mJ")
        # Trials of 600 kB at 100 Mbit/s last about 60 ms: 60 samples, whose sensor noise
        # (one 10-bit LSB is 132 mW) averages to about 1 %.
        assert energy == pytest.approx(exact, rel=0.05), row["trial_id"]
    assert measured_total == pytest.approx(exact_total, rel=0.02)


def test_a_stream_sweep_over_tls_maps_its_latencies_through_the_measured_clock_offset(
    config: Path, netns_testbed: Testbed, tmp_path: Path
) -> None:
    # The nodes get the stream workload's extra (wsproto, ...) and uvloop, the client's loop
    # here, on top of the module's deploy.
    deployed = h2iot(
        "nodes", "deploy", str(config), "--set", "workload.kind=stream",
        "--set", 'run.event_loop="uvloop"',
        "--wheelhouse", str(config.parent / "wheelhouse"),
    )  # fmt: skip
    assert deployed.returncode == 0, deployed.stdout + deployed.stderr
    run = _sweep(
        config, netns_testbed, tmp_path,
        "workload.kind=stream", "workload.duration_s=0.5", "workload.rate_hz=20",
        "workload.payload_doubles=8", "sweep.initial_window_size=[65535]", "run.repetitions=1",
        "workload.protocol=h2", 'run.event_loop="uvloop"',
    )  # fmt: skip
    manifest = json.loads((run / "manifest.json").read_text())
    nodes = manifest["nodes"]
    # Over TLS: the run's credentials went to the SSH nodes and the client checked the chain.
    assert manifest["tls"]["protocols"] == ["h2"]
    server, client = nodes["server"]["clock"], nodes["client"]["clock"]
    # Two SSH nodes at two addresses: the offset between them is measured, not assumed.
    assert nodes["peer_clock"] == {
        "offset_ns": server["wall_offset_ns"] - client["wall_offset_ns"],
        "uncertainty_ns": server["uncertainty_ns"] + client["uncertainty_ns"],
    }
    # One machine underneath: the true offset is 0, so the measured one is 0 within its bound.
    assert abs(nodes["peer_clock"]["offset_ns"]) <= nodes["peer_clock"]["uncertainty_ns"]
    (row,) = _rows(run)
    assert row["status"] == "ok" and row["workload"] == "stream", row
    assert row["client_tls_version"] == "TLSv1.3"
    assert row["client_event_loop"] == "uvloop"  # the extra deployed, the node's agent on it
    assert int(row["stream_items_received"]) == 10
    # The corrected latencies are true ones within the bound (tens of us to a few ms here).
    bound_s = nodes["peer_clock"]["uncertainty_ns"] / 1e9
    print(f"peer clock {nodes['peer_clock']}, latency p50 {row['stream_latency_p50_s']} s")
    assert -bound_s < float(row["stream_latency_p50_s"]) < 1.0


def _node_cgroups() -> list[Path]:
    """Cgroups a node-side device made (the namespaces' sshd share this machine's cgroups)."""
    return [p for p in Path("/sys/fs/cgroup").glob("*/**/h2iot-node-*") if p.is_dir()]


@pytest.mark.quiet
def test_an_ssh_node_emulates_its_device_when_the_config_asks(
    config: Path, netns_testbed: Testbed, tmp_path: Path
) -> None:
    before = _node_cgroups()
    run = _sweep(
        config, netns_testbed, tmp_path,
        "nodes.server.device=rpi3b", "nodes.server.remote_device=true",
    )  # fmt: skip
    device = json.loads((run / "manifest.json").read_text())["device"]
    assert device["emulated"] and device["link"] is None  # the SSH nodes' own link
    assert device["host_probe_units_per_cpu_s"] is None  # nothing emulated on the controller
    assert list(device["nodes"]) == ["server"]
    server = device["nodes"]["server"]
    assert server["host"] == netns_testbed.server.address and server["profile"] == "rpi3b"
    assert server["cgroup"].startswith("h2iot-node-server-")
    calibration = server["calibration"]
    assert calibration["reference_fraction"] == 0.08
    quota = server["cpu_quota"]
    assert quota == calibration["quota"] and 0.04 < quota < 0.2
    assert 0.04 < server["measured_speed_fraction"] < 0.16
    rows = _rows(run)
    assert rows and all(row["status"] == "ok" for row in rows), rows
    for row in rows:
        # The server agent lives in the node's cgroup: its CPU share stays near the quota (one
        # 20 ms period's burst over a trial of hundreds of ms), where unthrottled it is several
        # times that.
        share = float(row["server_cpu_s"]) / float(row["server_serve_s"])
        print(f"{row['trial_id']}: server CPU share {share:.3f} under quota {quota:.3f}")
        assert share < 1.5 * quota, row["trial_id"]
    assert _node_cgroups() == before  # removed at the end of the sweep


@pytest.mark.quiet
def test_nodes_calibrate_measures_an_ssh_nodes_quota_on_its_host(
    config: Path, netns_testbed: Testbed
) -> None:
    result = h2iot(
        "nodes", "calibrate", str(config), "--seconds", "0.3",
        "--set", "nodes.server.device=rpi3b", "--set", "nodes.server.remote_device=true",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    server = netns_testbed.server
    assert f"nodes.server (rpi3b) on server (root@{server.address}:22)" in result.stdout
    assert "nodes.client" not in result.stdout  # no device there
    (line,) = [x for x in result.stdout.splitlines() if x.strip().startswith("device = ")]
    quota = float(line.split("cpu_quota = ")[1].rstrip("}"))
    assert 0.04 < quota < 0.2


def test_a_changed_host_key_is_refused_before_anything_runs(config: Path, tmp_path: Path) -> None:
    known_hosts = Path(config.parent / "known_hosts").read_text().splitlines()
    client_name = known_hosts[0].split()[0]
    server_key = " ".join(known_hosts[1].split()[1:])
    swapped = tmp_path / "known_hosts"
    swapped.write_text(f"{client_name} {server_key}\n{known_hosts[1]}\n")
    changed = tmp_path / "sweep.toml"
    changed.write_text(config.read_text().replace(str(config.parent / "known_hosts"), str(swapped)))
    result = h2iot(
        "sweep", str(changed), "--no-dashboard", "--out", str(tmp_path / "runs"),
        "--accept-new-host-key",
    )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    (error,) = result.stderr.strip().splitlines()
    assert error.startswith(f"h2iot: error: client (root@{client_name}:22): host key of ")
    assert "refusing to connect" in error
    runs = list((tmp_path / "runs").glob("*/trials.csv")) if (tmp_path / "runs").exists() else []
    assert all(_rows(run.parent) == [] for run in runs)
    assert swapped.read_text().splitlines()[0] == f"{client_name} {server_key}"
