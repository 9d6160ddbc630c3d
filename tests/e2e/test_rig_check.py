"""`h2iot rig check` against real parts: the local default (virtual meter, FIFO marker), the
real firmware in simavr, and an SSH client node on a real sshd on 127.0.0.1 with a board on a
serial port (the virtual meter's pty) and its marker line. Every line is a verdict; what this
machine lacks is UNAVAILABLE, never PASS; any FAIL makes the exit status 1."""

from __future__ import annotations

import os
import re
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from controller.meter.calibration import nominal
from controller.meter.node_power import WatchSpec
from controller.meter.virtual import VirtualMeter, VirtualMeterOptions
from tests._rig import verdicts
from tests.conftest import h2iot, require_tool
from tests.netns.hosts import SshHost

pytest_plugins = ["tests.netns.fixtures"]

LOCAL = Path(__file__).resolve().parents[2] / "configs" / "local.toml"
GOVERNOR = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
THERMAL = Path("/sys/class/thermal")


def _machine_lacks_are_unavailable(found: dict[str, tuple[str, str]], role: str) -> None:
    governor = found[f"{role} CPU governor"][0]
    assert (governor == "UNAVAILABLE") == (not GOVERNOR.exists())
    has_zone = any(THERMAL.glob("thermal_zone*/temp"))
    assert (found[f"{role} temperature"][0] == "UNAVAILABLE") == (not has_zone)
    pi = Path("/sys/devices/platform/soc/soc:firmware/get_throttled").exists()
    assert pi or found[f"{role} throttling"][0] == "UNAVAILABLE"


@pytest.mark.quiet
@pytest.mark.slow
def test_the_local_default() -> None:
    result = h2iot("rig", "check", str(LOCAL))
    assert result.returncode == 0, result.stdout + result.stderr
    found = verdicts(result.stdout)
    assert found["client ssh"][0] == "UNAVAILABLE"  # a local node has no SSH: not a pass
    assert found["board identity"][0] == "UNAVAILABLE"  # nothing was flashed
    assert found["client agent"][0] == "PASS"
    assert found["sample stream"][0] == "PASS"
    assert found["idle power client"][0] == "PASS"
    assert found["marker loop"][0] == "PASS", found["marker loop"]
    assert found["zero offset A0"][0] == "WARN"  # no calibration file in the default
    # What the meter can see, and a Pi 3B's peak far below the ACS712-5A's 5 A.
    for line in ("meter step", "meter noise", "meter range", "meter headroom client"):
        assert found[line][0] == "PASS", found[line]
    assert "client->server UDP" not in found  # no HTTP/3 trials: nothing on UDP to check
    for role in ("client", "server"):
        _machine_lacks_are_unavailable(found, role)


@pytest.fixture(scope="module")
def simavr_buildable() -> None:
    require_tool("make", "gcc", "avr-gcc", "simavr")
    if not Path("/usr/include/simavr/sim_avr.h").exists():
        if os.environ.get("CI"):
            pytest.fail("CI must provide libsimavr-dev")
        pytest.skip("needs libsimavr-dev (the simavr harness)")


@pytest.mark.slow
# Its marker loop times a pulse against the edges the firmware saw, which other tests' load
# stretches past the bound (+31 ms of 20 on a loaded CI run), as for the local default above.
@pytest.mark.quiet
def test_the_real_firmware_in_simavr(simavr_buildable: None) -> None:
    result = h2iot("rig", "check", str(LOCAL), "--set", "meter.source=simavr")
    assert result.returncode == 0, result.stdout + result.stderr
    found = verdicts(result.stdout)
    version = (LOCAL.parents[1] / "firmware" / "VERSION").read_text().strip()
    assert found["board identity"] == ("PASS", f"mega2560, firmware {version}, protocol 2")
    # The simulator paces itself to real time but falls behind on a loaded machine: a slow
    # rate may warn; a gap may not.
    status, detail = found["sample stream"]
    assert status in {"PASS", "WARN"} and " 0 missing" in detail, detail
    assert found["marker loop"][0] == "PASS", found["marker loop"]


@pytest.mark.slow
def test_an_ina226_on_the_simulated_board_answers_and_reads_the_idle_node(
    simavr_buildable: None,
) -> None:
    # The simulator is built with the config's INA226, as a sweep builds it.
    result = h2iot("rig", "check", str(LOCAL.parent / "local-ina226.toml"))
    found = verdicts(result.stdout)
    status, detail = found["I2C part INA226@0x40"]
    assert status == "PASS" and re.fullmatch(r"answered (\d+) of \1 samples, bus 5\.\d\d V", detail)
    assert found["idle power client"][0] == "PASS", found["idle power client"]


def _ssh_config(
    tmp_path: Path, host: SshHost, port: str, known_hosts: Path, calibration: Path | None
) -> Path:
    lines = [
        "[nodes.client]",
        f'host = "{host.address}"',
        f"port = {host.port}",
        f'user = "{host.user}"',
        f'key = "{host.key}"',
        f'known_hosts = "{known_hosts}"',
        # The node is this machine: the agent is this installation's.
        f'python = "{sys.executable}"',
        "[nodes.server]",
        'host = "local"',
        "[meter]",
        'source = "serial"',
        f'port = "{port}"',
    ]
    if calibration is not None:
        lines.append(f'calibration = "{calibration}"')
    path = tmp_path / "rig.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def board(tmp_path: Path) -> tuple[str, Path]:
    """A board on a serial port with its marker line: the virtual meter's pty and FIFO."""
    fifo = tmp_path / "rig-marker.fifo"
    meter = VirtualMeter(
        VirtualMeterOptions(watch=(WatchSpec("pid", str(os.getpid())),), marker_fifo=fifo)
    )
    meter.start()
    yield meter.port, fifo
    meter.stop()
    meter.close()


@pytest.mark.slow
def test_an_ssh_client_and_a_serial_board(
    loopback_host: SshHost, board: tuple[str, Path], tmp_path: Path
) -> None:
    port, fifo = board
    config = _ssh_config(tmp_path, loopback_host, port, loopback_host.known_hosts, None)
    result = h2iot("rig", "check", str(config), "--marker", f"fifo:{fifo}")
    found = verdicts(result.stdout)
    assert found["client ssh"][0] == "PASS"
    assert found["client agent"][0] == "PASS"
    assert found["client clock"][0] in {"PASS", "WARN"}
    assert found["client clock"][1].startswith("offset ")
    assert found["board identity"][0] == "PASS"  # the modelled board reports this build
    assert found["marker loop"][0] == "PASS", found["marker loop"]
    assert result.returncode == 0, result.stdout + result.stderr

    # No marker wire named for an SSH client: the loop is unavailable, not passed.
    unwired = h2iot("rig", "check", str(config))
    assert verdicts(unwired.stdout)["marker loop"][0] == "UNAVAILABLE"

    # The node drives a line the board does not listen to: a wire that is not connected.
    loose = tmp_path / "not-wired"
    loose.write_text("")
    broken = h2iot("rig", "check", str(config), "--marker", f"fifo:{loose}")
    assert broken.returncode == 1, broken.stdout + broken.stderr
    status, detail = verdicts(broken.stdout)["marker loop"]
    assert status == "FAIL"
    assert "no rising and falling edge within 2 s" in detail
    # The node did pulse: a rising then a falling edge, each with its instant.
    assert [line.split()[0] for line in loose.read_text().splitlines()] == ["1", "0"]


@pytest.mark.slow
def test_failures_exit_1_with_their_fix(
    loopback_host: SshHost, board: tuple[str, Path], tmp_path: Path
) -> None:
    port, _fifo = board
    # A calibration made with a load on the sensor, and a node whose host key is unknown.
    loaded = nominal((0,))
    channel = replace(loaded.channels[0], zero_code=560.0)
    calibration = tmp_path / "calibration.json"
    replace(loaded, channels=(channel,)).save(calibration)
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    config = _ssh_config(tmp_path, loopback_host, port, empty, calibration)
    result = h2iot("rig", "check", str(config), "--marker", f"fifo:{tmp_path}/x")
    assert result.returncode == 1, result.stdout + result.stderr
    found = verdicts(result.stdout)
    assert found["client ssh"][0] == "FAIL"
    assert found["marker loop"][0] == "UNAVAILABLE"  # the client was not reached
    assert "--accept-new-host-key" in result.stdout
    assert found["zero offset A0"][0] == "FAIL"
    assert "+48.5 from mid-scale" in found["zero offset A0"][1]
    assert "h2iot meter calibrate" in found["zero offset A0"][1]


def test_a_missing_port_fails_and_names_it(tmp_path: Path) -> None:
    result = h2iot(
        "rig", "check", str(LOCAL), "--set", "meter.source=serial",
        "--set", f"meter.port={tmp_path}/ttyACM9",
    )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    found = verdicts(result.stdout)
    status, detail = found["meter port"]
    assert status == "FAIL" and f"{tmp_path}/ttyACM9: no such device" in detail
    assert "sample stream" not in found  # nothing measured on a port that is not there


@pytest.mark.slow
def test_http3_checks_the_udp_path_to_the_servers_port() -> None:
    h3 = ("--set", "workload.protocol=h3", "--seconds", "0.5")
    result = h2iot("rig", "check", str(LOCAL), *h3)
    status, detail = verdicts(result.stdout)["client->server UDP"]
    assert status == "PASS", result.stdout + result.stderr
    assert re.fullmatch(r"UDP 127\.0\.0\.1:\d+: a 1200-byte datagram echoed in [\d.]+ ms", detail)

    # The client sends to 127.0.0.2 (this host too), the server listens on 127.0.0.1 only.
    wrong = h2iot("rig", "check", str(LOCAL), *h3, "--set", "nodes.client.address=127.0.0.2")
    assert wrong.returncode == 1, wrong.stdout + wrong.stderr
    (line,) = [line for line in wrong.stdout.splitlines() if "client->server UDP" in line]
    assert re.fullmatch(
        r"FAIL +client->server UDP +refused: UDP 127\.0\.0\.2:(\d+): ICMP port unreachable, "
        r"nothing listens there \(the server's listener is on 127\.0\.0\.1:\1\)  -> set "
        r"nodes\.client\.address to an address the server listens on \(nodes\.server\.address "
        r"127\.0\.0\.1\)",
        line,
    ), line
