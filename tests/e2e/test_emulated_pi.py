"""Raspberry Pi OS nodes, emulated: a Debian bookworm armhf root (32-bit Raspberry Pi OS, what
most Pi 3B run and the study ran) and an arm64 root (64-bit), each under qemu-user with its own
sshd in a network namespace (tests.emulated), reached as the ordinary user `pi`.

`h2iot nodes deploy` installs the agent with no package index on the nodes (the agent needs no
psutil, which has no armv7l wheel), `h2iot nodes check` reports them, then short sweeps run with
each node as the client and as the server, the virtual meter following the client node's sshd.

Marked `emulated`, so `make test-emulated` runs them rather than `make test`: the roots are
built once per machine and cached (`python -m tests.emulated.rootfs`, which that target runs
first and .ci/run starts beside the rest of the suite; 3 to 15 minutes cold), and everything
on the nodes runs under instruction-set emulation.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent import __version__
from controller.meter.node_power import WatchSpec
from controller.meter.virtual import VirtualMeter, VirtualMeterOptions
from tests._rig import verdicts
from tests.conftest import h2iot, require_tool
from tests.emulated.node import EmulatedNodes
from tests.emulated.rootfs import ARCHES, ensure_roots
from tests.netns import SshHost, SshKey, Testbed, require_root

pytest_plugins = ["tests.netns.fixtures"]
# A safety net against hangs: the first test builds the roots when the cache is cold (34 min
# for both on a loaded 2-core machine; .ci/run builds them before the tests), and emulated
# Python is slow (deploying both nodes took 6 to 8 min there).
pytestmark = [pytest.mark.slow, pytest.mark.root, pytest.mark.emulated, pytest.mark.timeout(5400)]

SITE_BYTES = 100_000
# Which root each namespace of the testbed holds.
NODE_ARCH = {"client": "armhf", "server": "arm64"}


@dataclass(frozen=True)
class Emulated:
    testbed: Testbed
    directory: Path
    known_hosts: Path
    wheelhouse: Path


@pytest.fixture(scope="module")
def emulated(tmp_path_factory: pytest.TempPathFactory, ssh_key: SshKey) -> Iterator[Emulated]:
    require_root()
    require_tool("debootstrap", "chroot", "update-binfmts", "nsenter")
    roots = ensure_roots()
    nodes = EmulatedNodes({role: roots[arch] for role, arch in NODE_ARCH.items()})
    directory = tmp_path_factory.mktemp("emulated-pi")
    # Interface names hold 15 characters: "deploy" + 5 digits + "c0x".
    testbed = Testbed(
        directory / "nodes", tag=f"deploy{os.getpid() % 100_000}", start_host=nodes.start
    )
    try:
        testbed.create(ssh_key)
        known_hosts = directory / "known_hosts"
        known_hosts.write_text(
            f"{testbed.client.known_hosts_line}\n{testbed.server.known_hosts_line}\n"
        )
        yield Emulated(testbed, directory, known_hosts, directory / "wheelhouse")
    finally:
        testbed.destroy()
        nodes.release(list(testbed.hosts.values()))


def write_config(
    emulated: Emulated, path: Path, roles: dict[str, SshHost], protocol: str = "h2c"
) -> Path:
    """A short sweep with roles[role] as that node (and its data address the server's)."""
    lines = [
        "[run]",
        'name = "emulated-pi"',
        "repetitions = 1",  # a trial per window: every assertion holds per trial
        "idle_baseline_s = 1",
        "[sweep]",
        "initial_window_size = [4095, 65535]",
        "[workload]",
        f"total_bytes = {SITE_BYTES}",
        f'protocol = "{protocol}"',
        "[meter]",
        'source = "serial"',
        'port = "/dev/null"',  # the test's virtual meter's port comes with --set
    ]
    for role, host in roles.items():
        lines += [
            f"[nodes.{role}]",
            f'host = "{host.address}"',
            f'user = "{host.user}"',
            f'key = "{host.key}"',
            f'known_hosts = "{emulated.known_hosts}"',
            'deploy_dir = "~/h2iot"',
            f'address = "{roles["server"].data_address}"',
        ]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def deployed(emulated: Emulated) -> Path:
    testbed = emulated.testbed
    # An HTTP/3 config: the deploy installs the agent's h3 extra (qh3, a compiled wheel per
    # platform) beside its core; the HTTP/2 sweeps below need only the core.
    config = write_config(
        emulated,
        emulated.directory / "sweep.toml",
        {"client": testbed.client, "server": testbed.server},
        protocol="h3",
    )
    result = h2iot("nodes", "deploy", str(config), "--wheelhouse", str(emulated.wheelhouse))
    print(result.stdout, result.stderr)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("created") == 2
    return config


def test_deploy_and_check_on_32_and_64_bit_raspberry_pi_os(
    deployed: Path, emulated: Emulated
) -> None:
    for role, arch in NODE_ARCH.items():
        machine = ARCHES[arch].machine
        # Wheels for each node's own platform, none of them compiled for another.
        platform_dir = [d for d in emulated.wheelhouse.iterdir() if machine in d.name]
        assert len(platform_dir) == 1, list(emulated.wheelhouse.iterdir())
        wheels = {w.name.split("-")[0].lower(): w.name for w in platform_dir[0].glob("*.whl")}
        assert {"h2", "hpack", "hyperframe", "qh3"} <= set(wheels), wheels
        assert "psutil" not in wheels
        # Pure Python but qh3, whose wheel is the node's own machine's.
        assert all(name.endswith("-none-any.whl") for w, name in wheels.items() if w != "qh3")
        assert machine in wheels["qh3"], wheels["qh3"]
        del role
    check = h2iot("nodes", "check", str(deployed), "--clock-samples", "20")
    print(check.stdout, check.stderr)
    assert check.returncode == 0, check.stdout + check.stderr
    lines = check.stdout.splitlines()
    rows = [line for line in lines if line.count("pi@") == 1]
    assert len(rows) == 2 and all(__version__ in row for row in rows), check.stdout
    assert all("3.11" in row for row in rows)
    # The config has HTTP/3 trials: the client's datagrams reach the server's UDP port.
    (udp,) = [line for line in lines if line.count("pi@") == 2]
    assert "echo: UDP " in udp and ":8443: a 1200-byte datagram echoed" in udp, check.stdout


def _sweep(
    config: Path, emulated: Emulated, client: SshHost, tmp_path: Path
) -> list[dict[str, str]]:
    """The sweep with the virtual meter following the client node's sshd; its trials."""
    sshd = client.pidfile.read_text().split()[0]
    meter = VirtualMeter(VirtualMeterOptions(watch=(WatchSpec("pid", sshd),)))
    meter.start()
    try:
        result = h2iot(
            "sweep", str(config), "--no-dashboard", "--out", str(tmp_path / "runs"),
            "--set", f"meter.port={meter.port}",
        )  # fmt: skip
    finally:
        meter.stop()
        meter.close()
    print(result.stdout[-3000:], result.stderr)
    assert result.returncode == 0, result.stdout + result.stderr
    (run,) = (tmp_path / "runs").iterdir()
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["idle_baseline_mw"] > 0
    with (run / "trials.csv").open() as handle:
        return list(csv.DictReader(handle))


@pytest.mark.parametrize(
    "client_role",
    ["client", "server"],
    ids=["armhf-client-arm64-server", "arm64-client-armhf-server"],
)
def test_a_short_sweep_with_emulated_nodes(
    deployed: Path, emulated: Emulated, client_role: str, tmp_path: Path
) -> None:
    testbed = emulated.testbed
    server_role = "server" if client_role == "client" else "client"
    roles = {"client": testbed.hosts[client_role], "server": testbed.hosts[server_role]}
    config = write_config(emulated, tmp_path / "sweep.toml", roles)
    rows = _sweep(config, emulated, roles["client"], tmp_path)
    assert len(rows) == 2 and all(row["status"] == "ok" for row in rows), rows
    for row in rows:
        assert float(row["client_cpu_s"]) > 0 and float(row["server_cpu_s"]) > 0
        # The meter followed the emulated client: its energy covers at least the idle power.
        assert float(row["energy_mj"]) > 0 and int(row["samples"]) > 0, row


def test_an_http3_sweep_between_32_and_64_bit_nodes(
    deployed: Path, emulated: Emulated, tmp_path: Path
) -> None:
    """qh3 as deployed (armv7l on the client, aarch64 on the server), the page over HTTP/3."""
    testbed = emulated.testbed
    roles = {"client": testbed.client, "server": testbed.server}
    config = write_config(emulated, tmp_path / "sweep.toml", roles, protocol="h3")
    rows = _sweep(config, emulated, roles["client"], tmp_path)
    assert len(rows) == 2 and all(row["status"] == "ok" for row in rows), rows
    for row in rows:
        assert row["client_tls_version"] == "TLSv1.3" and int(row["client_datagrams_received"]) > 0
        window = int(row["initial_window_size"])
        if window < SITE_BYTES // 8:  # a window a resource outgrows: the client grants more
            assert 0 < int(row["server_stream_credit_ahead_bytes"]) <= window


def test_a_node_without_python3_venv_is_told_which_package_to_install(
    deployed: Path, emulated: Emulated, tmp_path: Path
) -> None:
    """Debian ships venv's pip bootstrap (ensurepip) in python3-venv: without it, a deploy
    names the package in one line."""
    host = emulated.testbed.server
    root = host.home.parents[1]  # the node's merged root: <root>/home/pi
    ensurepip = root / "usr/lib/python3.11/ensurepip"
    kept = tmp_path / "ensurepip"
    shutil.copytree(ensurepip, kept, symlinks=True)
    shutil.rmtree(ensurepip)  # in the node's overlay; the cached root keeps it
    try:
        config = write_config(emulated, tmp_path / "nodes.toml", {"client": host, "server": host})
        result = h2iot(
            "nodes", "deploy", str(config), "--set", 'nodes.client.deploy_dir="~/h2iot-novenv"',
            "--set", 'nodes.server.deploy_dir="~/h2iot-novenv"',
            "--wheelhouse", str(emulated.wheelhouse),
        )  # fmt: skip
    finally:
        shutil.copytree(kept, ensurepip, symlinks=True)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stderr == (
        f"h2iot: error: client (pi@{host.address}:22): /usr/bin/python3 cannot create a venv "
        "without ensurepip: install the Debian package python3-venv (apt install python3-venv)\n"
    )


def test_nodes_without_the_engines_debian_packages_are_told_which_to_install(
    deployed: Path, emulated: Emulated
) -> None:
    """The nghttp2 engine over HTTP/3 runs ngtcp2's tools, Debian packages the emulated Raspberry
    Pi OS roots do not have: a deploy fails before installing anything, and check says so too,
    one line per node naming its package."""
    engines = ("--set", 'nodes.client.engine="nghttp2"', "--set", 'nodes.server.engine="nghttp2"')
    deploy = h2iot(
        "nodes", "deploy", str(deployed), *engines, "--wheelhouse", str(emulated.wheelhouse)
    )  # fmt: skip
    check = h2iot("nodes", "check", str(deployed), *engines, "--clock-samples", "5")
    for result in (deploy, check):
        assert result.returncode == 1, result.stdout + result.stderr
        errors = sorted(line for line in result.stderr.splitlines() if "Debian package" in line)
        assert len(errors) == 2, result.stderr
        for line, (role, package) in zip(
            errors, (("client", "ngtcp2-client"), ("server", "ngtcp2-server")), strict=True
        ):
            assert line.startswith("h2iot: error: ") and f"apt install {package})" in line
            assert line.endswith(f'(nodes.{role}.engine = "nghttp2")'), line
    assert "deployed" not in deploy.stdout  # nothing was installed


def test_rig_check_against_the_emulated_nodes(
    deployed: Path, emulated: Emulated, tmp_path: Path
) -> None:
    """`h2iot rig check` on the sweep's config: both nodes reached over SSH, their agents and
    clocks checked, the marker loop from the armhf client to the board through a FIFO in the
    client's root. A qemu-user node has no /sys: its governor, temperature and throttling are
    UNAVAILABLE, never PASS."""
    client = emulated.testbed.client
    fifo = client.home.parents[1] / "tmp" / "h2iot-rig-marker.fifo"  # /tmp on the node
    os.mkfifo(fifo)
    fifo.chmod(0o666)  # the node's agent writes it as pi
    sshd = client.pidfile.read_text().split()[0]
    meter = VirtualMeter(VirtualMeterOptions(watch=(WatchSpec("pid", sshd),), marker_fifo=fifo))
    meter.start()
    try:
        result = h2iot(
            "rig", "check", str(deployed), "--set", f"meter.port={meter.port}",
            "--marker", "fifo:/tmp/h2iot-rig-marker.fifo",
        )  # fmt: skip
    finally:
        meter.stop()
        meter.close()
        fifo.unlink()
    print(result.stdout, result.stderr)
    found = verdicts(result.stdout)
    for role in ("client", "server"):
        assert found[f"{role} ssh"][0] == "PASS", found[f"{role} ssh"]
        assert found[f"{role} agent"] == ("PASS", found[f"{role} agent"][1])
        assert __version__ in found[f"{role} agent"][1]
        assert found[f"{role} clock"][0] in {"PASS", "WARN"}
        for lacking in ("CPU governor", "temperature", "throttling"):
            assert found[f"{role} {lacking}"][0] == "UNAVAILABLE", found[f"{role} {lacking}"]
    assert found["sample stream"][0] == "PASS", found["sample stream"]
    assert found["marker loop"][0] == "PASS", found["marker loop"]
    assert result.returncode == 0, result.stdout + result.stderr
