"""Config loading: the shipped files, the layering rule, every kind of error, and properties."""

from __future__ import annotations

import datetime as dt
import json
import re
import tempfile
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from agent.engines import DEFAULT_ENGINE, engine_spec
from agent.workloads import SPECS, Param, WorkloadSpec
from controller.cli.nodes import node_extras
from controller.config import (
    DEFAULT_CONFIG_PATH,
    Config,
    LinkConfig,
    MeterConfig,
    NodeConfig,
    RunConfig,
    SweepConfig,
    WorkloadConfig,
    engine_checks,
    load_config,
)
from controller.config import channels as config_channels
from controller.config.schema import SCHEMA
from controller.errors import ConfigError
from controller.meter.ina226 import RATE_MAX_HZ as INA226_RATE_MAX_HZ

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "configs"
STUDY_WINDOWS = (256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65535)


def write(tmp_path: Path, text: str, name: str = "c.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def error_of(path: Path | None, overrides: tuple[str, ...] = ()) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(path, overrides)
    message = str(info.value)
    assert "\n" not in message
    assert info.value.exit_status == 2
    return message


# ---------------------------------------------------------------- the shipped files


@pytest.mark.parametrize(
    "name", ["local.toml", "study.toml", "study-nghttp2.toml", "nodes.example.toml"]
)
def test_every_shipped_config_loads_and_serialises_to_json(name: str) -> None:
    config = load_config(CONFIGS / name)
    assert config.source == str(CONFIGS / name)
    document = config.to_dict()
    assert json.loads(json.dumps(document)) == document


def test_the_local_default_is_the_built_in_default() -> None:
    assert (REPO / DEFAULT_CONFIG_PATH).is_file()
    assert not DEFAULT_CONFIG_PATH.is_absolute()
    local = load_config(REPO / DEFAULT_CONFIG_PATH)
    assert local == load_config(None) == Config()
    assert load_config(None).source == "<defaults>"
    assert local.client.is_local and local.server.is_local
    assert (local.client.cpu, local.server.cpu) == (0, 1)
    assert local.meter.source == "virtual"
    assert local.sweep.axes == (("initial_window_size", STUDY_WINDOWS),)
    assert local.run.repetitions < 68


def test_the_study_config_is_the_study_grid() -> None:
    study = load_config(CONFIGS / "study.toml")
    assert study.sweep.points() == [(("initial_window_size", w),) for w in STUDY_WINDOWS]
    assert study.run.repetitions == 68
    assert study.run.confidence == 0.90
    assert study.workload.param("total_bytes") == 7_000_000
    for node in (study.client, study.server):
        assert not node.is_local
        assert node.user == "pi"
        assert node.known_hosts is not None and node.known_hosts.is_absolute()
        assert node.key is not None and "~" not in str(node.key)
        assert node.python == "~/h2iot/venv/bin/python"
    assert study.client.address == study.server.host == "server.local"
    assert study.meter == MeterConfig(
        source="serial",
        port="/dev/ttyACM0",
        baud=500_000,
        rate_hz=1000,
        channels=(("client", 0), ("server", 1)),
        sensor="5A",
        supply_v=5.0,
    )
    assert not study.link.is_shaped


def test_the_example_inventory_sets_both_ssh_nodes() -> None:
    config = load_config(CONFIGS / "nodes.example.toml")
    assert (config.client.host, config.server.host) == ("client.local", "server.local")
    assert config.client.cpu == config.server.cpu == 2
    assert config.server.http_port == 8443
    assert config.meter == MeterConfig()  # sections it leaves out keep the defaults


def test_the_readme_documents_every_key() -> None:
    readme = (CONFIGS / "README.md").read_text(encoding="utf-8")
    sections = dict(re.findall(r"^## `\[(.+?)\]`.*?\n(.*?)(?=^## |\Z)", readme, re.M | re.S))
    rows = {name: set(re.findall(r"^\| `(\w+)` \|", body, re.M)) for name, body in sections.items()}
    expected = {
        name: set(rule)
        for name, rule in SCHEMA.items()
        if isinstance(rule, Mapping) and name != "nodes"
    }
    expected["nodes.client"] = set(SCHEMA["nodes"]["server"])  # one table documents both nodes
    assert rows.pop("sweep") == set()
    assert rows == expected


_KIND_WORDS = {"int": "integer", "float": "number", "choice": "one of", "bool": "boolean"}


@pytest.mark.parametrize("kind", sorted(SPECS))
def test_the_readme_documents_each_workloads_keys_as_declared(kind: str) -> None:
    """Type, range, default, unit and where it goes, as agent/workloads/<kind>/spec.py says."""
    readme = (CONFIGS / "README.md").read_text(encoding="utf-8")
    section = readme.split(f'### `kind = "{kind}"`', 1)[1].split("\n#", 1)[0]
    rows = {
        match[0]: [cell.strip() for cell in match[1].split("|")]
        for match in re.findall(r"^\| `(\w+)` \|(.*)\|$", section, re.M)
    }
    spec = SPECS[kind]
    assert list(rows) == list(spec.param_names)
    for param in spec.params:
        kind_text, default, unit, given_to, _meaning = rows[param.name]
        assert kind_text == f"{_KIND_WORDS[param.kind]} {param.range_text()}"
        assert default == f"`{json.dumps(param.default)}`"
        assert unit == param.unit
        assert given_to.startswith(
            {"client": "client", "server": "server", "setup": "set-up"}[param.side]
        )
    for field in spec.fields:
        assert f"`{kind}_{field.name}`" in section


# ---------------------------------------------------------------- model


def test_points_are_the_grid_product_in_axis_order() -> None:
    sweep = SweepConfig(
        axes=(("max_concurrent_streams", (1, 100)), ("initial_window_size", (1, 2, 3)))
    )
    points = sweep.points()
    assert len(points) == sweep.size == 6
    assert points[:3] == [
        (("max_concurrent_streams", 1), ("initial_window_size", 1)),
        (("max_concurrent_streams", 1), ("initial_window_size", 2)),
        (("max_concurrent_streams", 1), ("initial_window_size", 3)),
    ]
    assert sweep.names == ("max_concurrent_streams", "initial_window_size")


def test_provenance_does_not_take_part_in_equality() -> None:
    assert Config(source="a", layers=("a",), origins=(("run.seed", "a"),)) == Config()


def test_node_and_meter_helpers() -> None:
    config = Config()
    assert config.node("server") is config.server
    assert config.meter.channel_of("client") == 0
    assert config.meter.channel_of("server") is None
    assert NodeConfig(role="client", host="pi.local").is_local is False
    assert LinkConfig(rate_mbit=100.0).is_shaped


# ---------------------------------------------------------------- layering


def test_file_over_defaults_and_overrides_over_file(tmp_path: Path) -> None:
    path = write(tmp_path, "[run]\nrepetitions = 10\nseed = 7\n")
    config = load_config(path, ["run.repetitions=3"])
    assert (config.run.repetitions, config.run.seed, config.run.name) == (3, 7, "h2iot")
    assert config.layers == ("<defaults>", str(path), "--set")
    origins = config.to_dict()["origins"]
    assert origins == {"run.repetitions": "--set", "run.seed": str(path)}


def test_a_files_sweep_replaces_the_default_sweep(tmp_path: Path) -> None:
    path = write(tmp_path, "[sweep]\nSETTINGS_MAX_CONCURRENT_STREAMS = [1, 100]\n")
    assert load_config(path).sweep.axes == (("max_concurrent_streams", (1, 100)),)


def test_set_adds_replaces_and_removes_one_axis() -> None:
    added = load_config(None, ["sweep.max-concurrent-streams=[1, 10]"])
    assert added.sweep.names == ("initial_window_size", "max_concurrent_streams")
    # Any spelling the agent accepts names the same axis, which keeps its place.
    replaced = load_config(
        None, ["sweep.max-concurrent-streams=[1, 10]", "sweep.INITIAL_WINDOW_SIZE=[9]"]
    )
    assert replaced.sweep.axes == (
        ("initial_window_size", (9,)),
        ("max_concurrent_streams", (1, 10)),
    )
    removed = load_config(
        None, ["sweep.max_concurrent_streams=[5]", "sweep.initial_window_size=none"]
    )
    assert removed.sweep.axes == (("max_concurrent_streams", (5,)),)
    whole = load_config(None, ["sweep={enable_push = [0, 1]}"])
    assert whole.sweep.axes == (("enable_push", (0, 1)),)


def test_channels_are_replaced_whole_by_a_table_and_per_role_by_a_key(tmp_path: Path) -> None:
    study = CONFIGS / "study.toml"
    assert load_config(study, ["meter.channels={server = 3}"]).meter.channels == (("server", 3),)
    assert load_config(study, ["meter.channels.client=none"]).meter.channels == (("server", 1),)
    path = write(tmp_path, '[meter.channels]\nserver = "a2"\n')
    assert load_config(path).meter.channels == (("server", 2),)
    ina = write(
        tmp_path,
        "[meter]\nrate_hz = 800\nshunt_ohm = 0.5\n"
        '[meter.channels]\nclient = "INA219@0x40"\nserver = "A1"\n',
    )
    meter = load_config(ina).meter
    assert (meter.channels, meter.shunt_ohm) == ((("client", 0x40), ("server", 1)), 0.5)


def test_none_unsets_an_optional_key_and_overrides_are_parsed_as_toml() -> None:
    config = load_config(
        None,
        [
            "nodes.client.cpu=none",
            "meter.port=/dev/ttyUSB0",
            "meter.source = serial",
            "link.rate_mbit=100",
            "nodes.client.address=10.0.0.2",
            'run.name="2024"',
            "workload.connection_window=0x10000",
        ],
    )
    assert config.client.cpu is None
    assert (config.meter.source, config.meter.port) == ("serial", "/dev/ttyUSB0")
    assert config.link.rate_mbit == 100.0 and isinstance(config.link.rate_mbit, float)
    assert config.client.address == "10.0.0.2"
    assert config.run.name == "2024"
    assert config.workload.connection_window == 65536


def test_node_defaults_follow_the_transport() -> None:
    ssh = load_config(
        None,
        [
            "nodes.server.host=192.168.1.5",
            "nodes.server.known_hosts=~/kh",
            "nodes.client.host=pi-client",
            "nodes.client.known_hosts=~/kh",
            "nodes.client.deploy_dir=/opt/h2iot",
        ],
    )
    assert ssh.server.address == "0.0.0.0"
    assert ssh.server.deploy_dir == "~/h2iot"
    assert ssh.server.python == "~/h2iot/venv/bin/python"
    assert ssh.client.python == "/opt/h2iot/venv/bin/python"
    assert ssh.client.address == "192.168.1.5"  # the client reaches the server by its host
    assert ssh.client.cpu is None and ssh.server.cpu is None
    assert ssh.server.known_hosts == Path.home() / "kh"


# ---------------------------------------------------------------- file errors


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.toml"
    assert error_of(path) == f"{path}: no such file"


def test_directory(tmp_path: Path) -> None:
    assert error_of(tmp_path) == f"{tmp_path}: is a directory, not a TOML file"


def test_unreadable_file() -> None:
    # Opens, then fails to read (address 0 is unmapped): a real EIO, even as root.
    path = Path("/proc/self/mem")
    assert error_of(path) == f"{path}: cannot read: Input/output error"


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_bytes(b'[run]\nname = "\xff"\n')
    assert error_of(path) == f"{path}: not UTF-8 text (bad byte at offset 14)"


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("[run]\nrepetitions = \n", "(at line 2, column 15)"),
        ("[run]\nseed = 1\nseed = 2\n", "(at line 3, column 9)"),
        ("[run\n", "(at line 1, column 5)"),
    ],
)
def test_toml_syntax_error_names_line_and_column(tmp_path: Path, text: str, where: str) -> None:
    path = write(tmp_path, text)
    message = error_of(path)
    assert message.startswith(f"{path}: TOML syntax error: ")
    assert message.endswith(where)


# ---------------------------------------------------------------- key errors

# The params of the workloads added after page and blob, as the known keys list them.
LATER_PARAMS = "".join(
    f", {name}"
    for name in dict.fromkeys(
        p.name for kind, spec in SPECS.items() if kind not in ("page", "blob") for p in spec.params
    )
    if name not in ("site_seed", "total_bytes", "size_bytes", "requests", "mode")
)

KEY_ERRORS = [
    (
        '[workload]\nkind = "mqtt"',
        f"workload.kind: expected one of {', '.join(json.dumps(kind) for kind in SPECS)}, "
        'got a string ("mqtt")',
    ),
    (
        '[workload]\nkind = "blob"\nsite_seed = 3',
        "workload.site_seed: not a parameter of workload 'blob' "
        "(its parameters: size_bytes, requests, mode, verify)",
    ),
    (
        '[workload]\nkind = "blob"\nsize_bytes = 70000000',
        "workload.size_bytes: 70000000 is outside 0..67108864",
    ),
    ("[workload]\nsize_bytes = [1]", "workload.size_bytes: expected a single value, got an array"),
    (
        '[workload]\nkind = "blob"\n[sweep]\nmode = ["sequential", "x"]',
        'sweep.mode[1]: expected one of "sequential", "concurrent", got "x"',
    ),
    (
        '[workload]\nkind = "blob"\n[sweep]\nmode = ["sequential", "sequential"]',
        'sweep.mode[1]: a string ("sequential") repeats an earlier value',
    ),
    (
        "[sweep]\nsize_bytes = [1024, 2048]",
        "sweep.size_bytes: not a parameter of workload 'page' "
        "(its parameters: site_seed, total_bytes, verify)",
    ),
    (
        '[sweep]\nwindow_update_policy = ["half", "sometimes"]',
        'sweep.window_update_policy[1]: expected one of "half", "every-frame", "exhausted", '
        'got a string ("sometimes")',
    ),
    (
        '[workload]\nkind = "blob"\n[nodes.server]\nengine = "nghttp2"',
        "nodes.server.engine: workload 'blob' runs on 'builtin', not 'nghttp2'",
    ),
    (
        '[sweep]\nwindow_update_policy = ["half", "exhausted"]\n[nodes.client]\nengine = "nghttp2"',
        "sweep.window_update_policy: nghttp2 updates windows by 'half' only, "
        'not "exhausted" (nodes.client.engine = "nghttp2")',
    ),
    (
        "colour = 1",
        "colour: unknown key (known: run, sweep, workload, nodes, meter, link, energy, search)",
    ),
    (
        "[run]\nrepetition = 1",
        "run.repetition: unknown key (known: name, seed, repetitions, "
        "confidence, order, idle_baseline_s, retries, trial_timeout_s, agent, event_loop, "
        "server_event_loop, "
        "stop_metric, stop_half_width, stop_min_n, events, events_max_bytes; did you mean "
        "repetitions?)",
    ),
    (
        '[run."a\\nb"]',
        'run."a\\nb": unknown key (known: name, seed, repetitions, confidence, order, '
        "idle_baseline_s, retries, trial_timeout_s, agent, event_loop, server_event_loop, "
        "stop_metric, "
        "stop_half_width, stop_min_n, events, events_max_bytes)",
    ),
    ("run = 5", "run: expected a table, got an integer (5)"),
    ("[nodes.gateway]", "nodes.gateway: unknown key (known: client, server, clients)"),
    (
        "[nodes.client]\nhttp_port = 1",
        "nodes.client.http_port: unknown key (known: host, user, "
        "port, key, known_hosts, python, deploy_dir, cpu, address, data_interface, engine, marker, "
        "device, remote_device; the client connects to nodes.server.http_port)",
    ),
    ('[run]\nrepetitions = "68"', 'run.repetitions: expected an integer, got a string ("68")'),
    ("[run]\nrepetitions = true", "run.repetitions: expected an integer, got a boolean (true)"),
    ("[run]\nrepetitions = 68.0", "run.repetitions: expected an integer, got a float (68.0)"),
    ("[run]\nrepetitions = 0", "run.repetitions: 0 is outside 1..1000000"),
    ("[run]\nconfidence = 1", "run.confidence: 1 is outside (0, 1)"),
    ("[run]\nconfidence = nan", "run.confidence: nan is not a finite number"),
    ("[run]\nidle_baseline_s = -1.5", "run.idle_baseline_s: -1.5 is outside [0, 3600]"),
    (
        "[run]\norder = 'random'",
        'run.order: expected one of "randomized-blocked", "sequential", got a string ("random")',
    ),
    (
        "[run]\nname = 'my run'",
        "run.name: \"my run\" is not a name of letters, digits, '.', '_' or '-' (at most 64)",
    ),
    ("[run]\nseed = 1979-05-27", "run.seed: expected an integer, got a date/time (1979-05-27)"),
    ("[workload]\ntotal_bytes = 1000", "workload.total_bytes: 1000 is outside 65536..1073741824"),
    (
        "[workload]\nwindow_update_policy = 'never'",
        "workload.window_update_policy: expected one "
        'of "half", "every-frame", "exhausted", got a string ("never")',
    ),
    (
        "[sweep]\ninitial_window_size = [256, 512, 2147483648]",
        "sweep.initial_window_size[2]: 2147483648 is outside 0..2147483647",
    ),
    (
        "[sweep]\ninitial_window_size = [256, '512']",
        'sweep.initial_window_size[1]: expected an integer, got a string ("512")',
    ),
    (
        "[sweep]\ninitial_window_size = [256, 256]",
        "sweep.initial_window_size[1]: 256 repeats an earlier value",
    ),
    (
        "[sweep]\ninitial_window_size = []",
        "sweep.initial_window_size: is empty; an axis needs at least one value",
    ),
    (
        "[sweep]\ninitial_window_size = 256",
        "sweep.initial_window_size: expected an array of integers, got an integer (256)",
    ),
    (
        "[sweep]\nwindow = [1]",
        "sweep.window: not an HTTP/2 setting, flow-control key, protocol or workload parameter "
        "(known: header_table_size, enable_push, max_concurrent_streams, initial_window_size, "
        "max_frame_size, max_header_list_size, connection_window, window_update_policy, protocol, "
        "datagram_bytes, ack_eliciting_threshold, max_ack_delay_ms, site_seed, total_bytes, "
        "verify, size_bytes, requests, mode"
        f"{LATER_PARAMS}, server_engine)",
    ),
    (
        "[sweep]\ninitial_window_size = [1]\nSETTINGS_INITIAL_WINDOW_SIZE = [2]",
        "sweep.SETTINGS_INITIAL_WINDOW_SIZE: names the axis initial_window_size a second time",
    ),
    (
        "[sweep]\nmax_frame_size = [1024]",
        "sweep.max_frame_size[0]: 1024 is outside 16384..16777215",
    ),
    (
        "[sweep]",
        "sweep: no axis; give at least one setting or workload parameter with an array of "
        "values, "
        "e.g. initial_window_size = [4096, 65535]",
    ),
    (
        '[nodes.client]\nhost = "pi@client.local"',
        'nodes.client.host: "pi@client.local" is not a '
        "host name or address; put the user name in the node's user key",
    ),
    (
        '[nodes.client]\nhost = "-oProxyCommand=x"',
        'nodes.client.host: "-oProxyCommand=x" is not a host name or address',
    ),
    ("[nodes.client]\nport = 0", "nodes.client.port: 0 is outside 1..65535"),
    ("[nodes.server]\nhttp_port = 70000", "nodes.server.http_port: 70000 is outside 1..65535"),
    ("[nodes.client]\ncpu = -1", "nodes.client.cpu: -1 is outside 0..4095"),
    (
        '[nodes.client]\nkey = ""',
        'nodes.client.key: "" is not a non-empty string without control characters',
    ),
    (
        '[nodes.client]\nhost = "c.local"',
        "nodes.client.known_hosts: required for an SSH node "
        '(host "c.local"): its host key is checked against this file and an unknown or changed key '
        "is refused, never accepted silently",
    ),
    (
        '[nodes.server]\nhost = "s.local"\nknown_hosts = "none"',
        "nodes.server.known_hosts: required for an SSH node "
        '(host "s.local"): its host key is checked against this file and an unknown or changed key '
        "is refused, never accepted silently",
    ),
    (
        '[meter]\nsource = "serial"',
        'meter.port: required when meter.source is "serial": the '
        'board\'s serial device, e.g. "/dev/ttyACM0"',
    ),
    (
        '[meter]\nsource = "usb"',
        'meter.source: expected one of "serial", "virtual", "simavr", "ppk2", got a string ("usb")',
    ),
    (
        "[meter]\nbaud = 9600",
        "meter.baud: expected one of 115200, 250000, 500000, 1000000, got an integer (9600)",
    ),
    (
        "[meter]\nrate_hz = 3000",
        "meter.rate_hz: 3000 Hz does not divide 16 MHz, as the meter's sample timer needs",
    ),
    ("[meter]\nrate_hz = 20000", "meter.rate_hz: 20000 is outside 100..10000"),
    ('[meter.channels]\nclient = "A8"', "meter.channels.client: 8 is outside 0..7 (A0..A7)"),
    (
        "[meter.channels]\nclient = 1.5",
        'meter.channels.client: expected an analog input ("A0".."A7" or 0..7), an INA219 '
        '("INA219@0x40".."0x43") or an INA226 ("INA226@0x40".."0x43"), got a float (1.5)',
    ),
    (
        '[meter.channels]\nclient = "INA219@0x44"',
        "meter.channels.client: INA219 address 0x44 is outside 0x40..0x43 "
        "(A1 = GND, A0 = GND..SCL)",
    ),
    (
        '[meter.channels]\nclient = "INA219@064"',  # not octal: refused in the config's words
        'meter.channels.client: expected an analog input ("A0".."A7" or 0..7), an INA219 '
        '("INA219@0x40".."0x43") or an INA226 ("INA226@0x40".."0x43"), got a string '
        '("INA219@064")',
    ),
    (
        '[meter.channels]\nclient = "INA219@0x40"',
        "meter.rate_hz: 1000 Hz is faster than an INA219 converts (meter.channels.client = "
        "INA219@0x40): at most 939 Hz, e.g. 800",
    ),
    (
        '[meter]\nrate_hz = 800\n[meter.channels]\nclient = "A1"\nserver = "ina219@0x41"',
        "meter.channels.server: INA219@0x41 shares its modelled source with the other node's "
        "channel (An, INA219@0x40+n and INA226@0x40+n follow the same source): use another "
        "input or address",
    ),
    ("[meter]\nshunt_ohm = 0", "meter.shunt_ohm: 0 is outside (0, 100]"),
    (
        "[meter]\nmax_saturated_fraction = 1.5",
        "meter.max_saturated_fraction: 1.5 is outside [0, 1]",
    ),
    ("[meter]\nmax_lost_fraction = -0.1", "meter.max_lost_fraction: -0.1 is outside [0, 1]"),
    (
        "[meter.channels]\nrouter = 1",
        "meter.channels.router: unknown node role (known: client, server)",
    ),
    (
        "[meter.channels]\nclient = 1\nserver = 1",
        "meter.channels.server: A1 is already the client's input",
    ),
    (
        "[meter]\nchannels = {}",
        "meter.channels: no node is metered; map at least one role to an "
        'analog input, e.g. client = "A0"',
    ),
    (
        "[meter]\nsensor = '10A'",
        'meter.sensor: expected one of "5A", "20A", "30A", got a string ("10A")',
    ),
    ("[meter]\nsupply_v = 0", "meter.supply_v: 0 is outside (0, 48]"),
    ("[link]\nloss_pct = 100", "link.loss_pct: 100 is outside [0, 100)"),
    ("[link]\nrate_mbit = 0", "link.rate_mbit: 0 is outside (0, 100000]"),
    ("[link]\ndelay_ms = inf", "link.delay_ms: inf is not a finite number"),
    (
        "[run]\nevent_loop = 'trio'",
        'run.event_loop: expected one of "asyncio", "uvloop", got a string ("trio")',
    ),
    (
        "[run]\nevent_loop = 'uvloop'\n[nodes.client]\nengine = 'nghttp2'",
        'run.event_loop: "uvloop" is the builtin engine\'s event loop; the client node '
        "nodes.client runs nghttp2 (nghttp, no Python loop)",
    ),
    (
        '[workload]\nkind = "periodic"\nprotocol = "h2c"\n[sweep]\nconnection = ["keep", "resume"]',
        'sweep.connection: connection = "resume" does not run over h2c: no TLS, no session to '
        "resume",
    ),
    (
        '[workload]\nkind = "periodic"\nprotocol = "h2"\nconnection = "resume"\n'
        '[nodes.client]\nengine = "nghttp2"',
        'workload.connection: connection = "resume" does not run over h2: the nghttp2 '
        "engine's nghttp fetches and exits, keeping no TLS session for the next run (it has no "
        'session or ticket option) (nodes.client.engine = "nghttp2")',
    ),
    (
        '[workload]\nkind = "periodic"\nprotocol = "h2c"\n[nodes.client]\nengine = "nghttp2"',
        'workload.connection: connection = "keep" does not run over h2c: the nghttp2 engine\'s '
        "nghttp fetches its URLs at once and exits: it cannot idle between exchanges "
        '(nodes.client.engine = "nghttp2")',
    ),
    (
        '[workload]\nkind = "periodic"\nprotocol = "h3"\n[sweep]\nconnection = ["resume", '
        '"keep"]\n[nodes.client]\nengine = "nghttp2"',
        'sweep.connection: connection = "keep" does not run over h3: the nghttp2 engine\'s '
        "gtlsclient fetches its URLs at once and exits: it cannot idle between exchanges "
        '(nodes.client.engine = "nghttp2")',
    ),
    (
        '[workload]\nkind = "periodic"\ncount = 40\ninterval_s = 2.0\njitter_s = 0.5\n'
        "[run]\ntrial_timeout_s = 60",
        "run.trial_timeout_s: 60 s ends a trial while the periodic workload still schedules its "
        "work (up to 78.5 s after its start, by its params); raise it above that",
    ),
    (
        "[run]\nserver_event_loop = 'trio'",
        'run.server_event_loop: expected one of "asyncio", "uvloop", got a string ("trio")',
    ),
    (
        "[run]\nserver_event_loop = 'uvloop'\n[nodes.server]\nengine = 'nghttp2'",
        'run.server_event_loop: "uvloop" is the builtin engine\'s event loop; the server runs '
        "nghttp2 (nodes.server.engine), whose nghttpd does not run on the agent's loop",
    ),
    (
        "[run]\nserver_event_loop = 'uvloop'\n[sweep]\nserver_engine = ['builtin', 'nghttp2']",
        'run.server_event_loop: "uvloop" is the builtin engine\'s event loop; the server runs '
        "nghttp2 (sweep.server_engine[1]), whose nghttpd does not run on the agent's loop",
    ),
]


def test_a_client_on_uvloop_gets_its_extra_deployed() -> None:
    assert "uvloop" not in node_extras(load_config(None))
    config = load_config(None, ('run.event_loop="uvloop"', 'sweep.protocol=["h2", "h3"]'))
    assert node_extras(config) == ("h3", "uvloop")
    assert config.to_dict()["run"]["event_loop"] == "uvloop"  # in the manifest's config


def test_a_server_on_uvloop_gets_its_extra_deployed() -> None:
    config = load_config(None, ('run.server_event_loop="uvloop"',))
    assert node_extras(config) == ("uvloop",)
    assert config.run.event_loop == "asyncio"
    assert config.to_dict()["run"]["server_event_loop"] == "uvloop"  # in the manifest's config
    both = ('run.server_event_loop="uvloop"', 'run.event_loop="uvloop"')
    assert node_extras(load_config(None, both)) == ("uvloop",)


@pytest.mark.parametrize(("text", "expected"), KEY_ERRORS)
def test_each_kind_of_key_error_is_one_line_naming_file_and_key(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = write(tmp_path, text + "\n")
    assert error_of(path) == f"{path}: {expected}"


ZERO_WINDOW = (
    "a window of 0 lets the server send no DATA until the client opens it, and the client's "
    "WINDOW_UPDATE policies open it only after DATA arrives: every trial would hang to "
    "run.trial_timeout_s (configs/README.md); use 1 or more"
)


@pytest.mark.parametrize(
    ("text", "overrides", "expected"),
    [
        ("[sweep]\ninitial_window_size = [256, 0]", (), "{path}: sweep.initial_window_size[1]"),
        ("", ("sweep.initial_window_size=[0]",), "--set: sweep.initial_window_size[0]"),
        (
            "",
            ("sweep.SETTINGS_INITIAL_WINDOW_SIZE=[0, 1]",),
            "--set: sweep.SETTINGS_INITIAL_WINDOW_SIZE[0]",
        ),
        ("[workload]\nconnection_window = 0", (), "{path}: workload.connection_window"),
        ("", ("sweep.connection_window=[65535, 0]",), "--set: sweep.connection_window[1]"),
    ],
)
def test_a_window_of_zero_is_refused_at_load_rather_than_hanging_every_trial(
    tmp_path: Path, text: str, overrides: tuple[str, ...], expected: str
) -> None:
    path = write(tmp_path, text + "\n")
    assert error_of(path, overrides) == f"{expected.format(path=path)}: {ZERO_WINDOW}"


def test_a_window_of_one_byte_and_other_settings_at_zero_still_load() -> None:
    config = load_config(
        None,
        (
            "sweep.initial_window_size=[1]",
            "sweep.header_table_size=[0]",
            "workload.connection_window=1",
        ),
    )
    assert config.sweep.points() == [(("initial_window_size", 1), ("header_table_size", 0))]


def test_a_workload_parameter_is_checked_against_the_kind_set_in_another_layer(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, '[workload]\nkind = "blob"\n')
    assert error_of(path, ("sweep.requests=[0, 2]",)) == (
        "--set: sweep.requests[0]: 0 is outside 1..1000"
    )
    config = load_config(path, ('sweep.mode=["sequential", "concurrent"]',))
    assert config.sweep.points()[-1] == (("initial_window_size", 65535), ("mode", "concurrent"))
    assert config.workload.params == (
        ("size_bytes", 65536),
        ("requests", 4),
        ("mode", "sequential"),
        ("verify", "sha256"),
    )


def test_another_kind_chosen_by_a_later_layer_drops_the_earlier_kinds_keys(
    tmp_path: Path,
) -> None:
    """configs/local.toml sets the page's keys; `--set workload.kind=blob` runs blob with it."""
    config = load_config(CONFIGS / "local.toml", ('workload.kind="blob"',))
    assert config.workload.kind == "blob"
    assert dict(config.workload.params) == {
        "size_bytes": 65536,
        "requests": 4,
        "mode": "sequential",
        "verify": "sha256",
    }
    assert "site_seed" not in config.to_dict()["workload"]
    # The same layer, or a later one, giving another kind's key is still refused.
    path = write(tmp_path, '[workload]\nkind = "blob"\n')
    assert error_of(path, ("workload.total_bytes=100000",)) == (
        "--set: workload.total_bytes: not a parameter of workload 'blob' "
        "(its parameters: size_bytes, requests, mode, verify)"
    )


def test_a_point_is_one_record_from_the_config_to_the_agents() -> None:
    """The settings, flow control and parameters of one grid point, each resolved once."""
    config = load_config(
        None,
        (
            'workload.kind="blob"',
            "workload.requests=2",
            "sweep.initial_window_size=[256]",
            "sweep.max_concurrent_streams=[8]",
            "sweep.size_bytes=[1000]",
        ),
    )
    (axes,) = config.sweep.points()
    point = config.point(axes)
    assert point.settings == (("initial_window_size", 256), ("max_concurrent_streams", 8))
    assert point.connection_window == 256  # unset: the stream window, as the study did
    assert point.window_update_policy == "half"
    assert point.params == (
        ("size_bytes", 1000),
        ("requests", 2),
        ("mode", "sequential"),
        ("verify", "sha256"),
    )
    swept = load_config(
        None, ("sweep.connection_window=[1024]", 'sweep.window_update_policy=["exhausted"]')
    )
    point = swept.point(swept.sweep.points()[0])
    assert (point.settings, point.connection_window) == ((("initial_window_size", 256),), 1024)
    assert point.window_update_policy == "exhausted"


def test_the_protocol_is_a_workload_key_and_an_axis_each_point_carries() -> None:
    config = load_config(None)
    assert (config.workload.protocol, config.protocols) == ("h2c", ("h2c",))
    assert not config.point(config.sweep.points()[0]).tls
    swept = load_config(None, ('sweep.protocol=["h2", "h2c"]', "sweep.initial_window_size=[256]"))
    assert swept.protocols == ("h2c", "h2")
    points = [swept.point(axes) for axes in swept.sweep.points()]
    assert [(p.protocol, p.tls) for p in points] == [("h2", True), ("h2c", False)]
    tls = load_config(None, ('workload.protocol="h2"',))
    assert tls.point(tls.sweep.points()[0]).protocol == "h2"
    assert error_of(None, ('sweep.protocol=["h4"]',)) == (
        '--set: sweep.protocol[0]: expected one of "h2c", "h2", "h3", got a string ("h4")'
    )
    h3 = load_config(None, ('sweep.protocol=["h2", "h3"]', "sweep.initial_window_size=[4096]"))
    assert h3.protocols == ("h2", "h3")
    assert [h3.point(axes).protocol for axes in h3.sweep.points()] == ["h2", "h3"]
    assert all(h3.point(axes).tls for axes in h3.sweep.points())


def test_the_datagram_size_is_http3s_own_axis() -> None:
    config = load_config(
        None,
        (
            "sweep={initial_window_size = [4096], datagram_bytes = [1200, 1452]}",
            'workload.protocol="h3"',
        ),
    )
    assert [config.point(axes).datagram_bytes for axes in config.sweep.points()] == [1200, 1452]
    assert load_config(None).point(load_config(None).sweep.points()[0]).datagram_bytes is None
    assert error_of(None, ("workload.datagram_bytes=1400",)) == (
        "--set: workload.datagram_bytes: HTTP/3's datagram size, in a run whose protocols are "
        'h2c: use it in a run of "h3" alone'
    )
    assert error_of(None, ('workload.protocol="h3"', "workload.datagram_bytes=1100")) == (
        "--set: workload.datagram_bytes: 1100 is outside 1200..65527"
    )


def test_the_clients_ack_policy_is_http3s_own_axis_on_the_builtin_client() -> None:
    config = load_config(
        None,
        (
            "sweep={initial_window_size = [4096], ack_eliciting_threshold = [2, 10]}",
            'workload.protocol="h3"',
            "workload.max_ack_delay_ms=40",
        ),
    )
    points = [config.point(axes) for axes in config.sweep.points()]
    assert [p.ack_eliciting_threshold for p in points] == [2, 10]
    assert {p.max_ack_delay_ms for p in points} == {40}
    default = load_config(None)
    assert default.point(default.sweep.points()[0]).ack_eliciting_threshold is None
    assert error_of(None, ("sweep.ack_eliciting_threshold=[2, 4]",)) == (
        "--set: sweep.ack_eliciting_threshold: HTTP/3's client's ACK policy, in a run whose "
        'protocols are h2c: use it in a run of "h3" alone'
    )
    assert error_of(None, ('workload.protocol="h3"', "workload.ack_eliciting_threshold=1")) == (
        "--set: workload.ack_eliciting_threshold: 1 is outside 2..1000"
    )
    assert error_of(None, ('workload.protocol="h3"', "workload.max_ack_delay_ms=16384")) == (
        "--set: workload.max_ack_delay_ms: 16384 is outside 1..16383"
    )
    assert error_of(
        None,
        (
            'workload.protocol="h3"',
            "workload.max_ack_delay_ms=40",
            'nodes.client.engine="nghttp2"',
            'nodes.server.engine="nghttp2"',
        ),
    ) == (
        '--set: workload.max_ack_delay_ms: the "nghttp2" engine\'s client has no ACK policy '
        '(nodes.client.engine); use engine "builtin"'
    )


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ('sweep={initial_window_size = [4096], protocol = ["h3"], enable_push = [0]}',),
            "--set: sweep.protocol: setting enable_push has no counterpart in HTTP/3",
        ),
        (
            (
                'sweep={initial_window_size = [4096], protocol = ["h3"], '
                "max_concurrent_streams = [8]}",
            ),
            "--set: sweep.protocol: setting max_concurrent_streams (initial_max_streams_bidi (QUIC "
            "transport parameter)) is not one the agent's HTTP/3 engine can announce (it can: "
            "initial_window_size, header_table_size, max_header_list_size)",
        ),
        (
            ('workload.protocol="h3"', 'workload.window_update_policy="exhausted"'),
            '--set: workload.protocol: window_update_policy is HTTP/2\'s; over "h3" the QUIC '
            'stack grants credit its own way: keep "half"',
        ),
        (
            (
                'sweep={initial_window_size = [4096], protocol = ["h3"], header_table_size = [0]}',
                'nodes.client.engine="nghttp2"',
                'nodes.server.engine="nghttp2"',
            ),
            "--set: sweep.protocol: setting header_table_size (SETTINGS_QPACK_MAX_TABLE_CAPACITY "
            "(RFC 9204)) is not one the nghttp2 engine's (ngtcp2) HTTP/3 engine can announce "
            "(it can: initial_window_size)",
        ),
        (
            (
                'workload.protocol="h3"',
                'workload.kind="api"',
                'nodes.server.engine="hypercorn"',
                "sweep={max_header_list_size = [4096]}",
            ),
            '--set: workload.protocol: "h3" runs on engine "builtin" or "nghttp2", not '
            'nodes.server.engine = "hypercorn"',
        ),
    ],
)
def test_what_http3_cannot_run_is_refused_at_load_in_one_line(
    overrides: tuple[str, ...], message: str
) -> None:
    assert error_of(None, overrides) == message


def test_a_client_bracketing_its_trials_needs_a_server_taking_control_messages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # gtlsclient sends no trial header: its trials reach the server by control messages, which
    # every built-in server takes; an engine whose server counts by the header alone cannot
    # serve it.
    overrides = ('workload.protocol="h3"', 'nodes.client.engine="nghttp2"')
    assert load_config(None, overrides).client.engine == "nghttp2"
    header_only = replace(engine_spec(DEFAULT_ENGINE), trial_counting=("header",))
    monkeypatch.setattr(
        engine_checks,
        "engine_spec",
        lambda name: header_only if name == DEFAULT_ENGINE else engine_spec(name),
    )
    assert error_of(None, overrides) == (
        '--set: workload.protocol: "h3" on the client\'s "nghttp2" engine (ngtcp2\'s '
        "gtlsclient) brackets its trials by trial-control messages, which nodes.server.engine "
        f'= "{DEFAULT_ENGINE}" does not take'
    )


def test_tls_with_several_client_nodes_is_refused_in_one_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '[workload]\nprotocol = "h2"\n[[nodes.clients]]\nname = "a"\n[[nodes.clients]]\n'
        'name = "b"\n',
    )
    assert error_of(path) == (
        f'{path}: workload.protocol: "h2" (TLS) runs with one client node; nodes.clients lists 2'
    )


def test_errors_in_overrides_name_set() -> None:
    assert (
        error_of(None, ("run.repetitions=0",)) == "--set: run.repetitions: 0 is outside 1..1000000"
    )
    assert error_of(None, ("sweep.initial-window-size=[1, -1]",)) == (
        "--set: sweep.initial-window-size[1]: -1 is outside 0..2147483647"
    )
    assert error_of(None, ("run.repetitions.x=1",)) == (
        "--set: run.repetitions: expected an integer, got a table"
    )
    assert error_of(None, ("meter.source=serial",)).startswith("--set: meter.port: required")


def test_override_syntax_errors() -> None:
    assert error_of(None, ("run.repetitions",)) == (
        '--set: "run.repetitions" must look like KEY=VALUE, e.g. run.repetitions=10'
    )
    assert error_of(None, ("run..seed=1",)) == (
        '--set: "run..seed" is not a dotted key like run.repetitions'
    )
    # A newline cannot smuggle a second key in: the whole text is then a (wrong) string.
    assert error_of(None, ("run.seed=1\nrepetitions = 2",)) == (
        '--set: run.seed: expected an integer, got a string ("1\\nrepetitions = 2")'
    )


def test_a_cross_key_error_blames_the_layer_that_decided(tmp_path: Path) -> None:
    study = CONFIGS / "study.toml"
    assert error_of(study, ("meter.port=none",)).startswith("--set: meter.port: required")
    assert error_of(study, ("meter.channels.server=0",)) == (
        "--set: meter.channels.server: A0 is already the client's input"
    )
    assert error_of(study, ("meter.channels.client=1",)) == (
        "--set: meter.channels.client: A1 is already the server's input"
    )
    path = write(tmp_path, '[nodes.client]\nhost = "pi"\n')
    assert error_of(path, ("run.seed=3",)).startswith(f"{path}: nodes.client.known_hosts:")
    assert error_of(None, ("nodes.client.host=pi",)).startswith("--set: nodes.client.known_hosts:")


# ---------------------------------------------------------------- properties


def toml_value(value: Any) -> str:
    """Encode the JSON-able values of Config.to_dict as TOML (None as the "none" spelling)."""
    if value is None:
        return '"none"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, dt.date):
        return value.isoformat()
    raise TypeError(value)


def as_overrides(document: dict[str, Any]) -> list[str]:
    overrides = [f"sweep={toml_value(document['sweep'])}"]
    for section in ("run", "workload", "meter", "link"):
        overrides += [f"{section}.{k}={toml_value(v)}" for k, v in document[section].items()]
    for role, node in document["nodes"].items():
        overrides += [f"nodes.{role}.{k}={toml_value(v)}" for k, v in node.items()]
    return overrides


def as_toml(document: dict[str, Any]) -> str:
    tables = {name: document[name] for name in ("run", "sweep", "workload", "meter", "link")}
    tables |= {f"nodes.{role}": node for role, node in document["nodes"].items()}
    return "".join(
        f"[{name}]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in values.items())
        for name, values in tables.items()
    )


SAFE = st.text("abcdefghijklmnopqrstuvwxyz0123456789._-", min_size=1, max_size=12).filter(
    lambda s: s[0] not in ".-" and s != "none"
)
PATHS = st.builds(lambda parts: Path("/", *parts), st.lists(SAFE, min_size=1, max_size=3))
FINITE = {"allow_nan": False, "allow_infinity": False}


@st.composite
def nodes(draw: st.DrawFn, role: str, server_host: str | None = None) -> NodeConfig:
    local = draw(st.booleans())
    host = "local" if local else draw(SAFE.filter(lambda s: s != "local"))
    fields: dict[str, Any] = {
        "role": role,
        "host": host,
        "user": draw(st.none() | SAFE.filter(lambda s: s[0].isalpha())),
        "port": draw(st.integers(1, 65535)),
        "key": draw(st.none() | PATHS),
        "known_hosts": draw(PATHS if not local else st.none() | PATHS),
        "python": draw(SAFE),
        "deploy_dir": draw(SAFE),
        "cpu": draw(st.none() | st.integers(0, 4095)),
        "address": draw(SAFE),
    }
    if role == "server":
        fields["http_port"] = draw(st.integers(1, 65535))
    return NodeConfig(**fields)


def param_values(param: Param, spec: WorkloadSpec | None = None) -> st.SearchStrategy[Any]:
    """Every value a workload parameter's declaration accepts; with its workload's `spec`, but
    those it refuses over the default protocol (agent.workloads.Refusal)."""
    if spec is not None and spec.refusals:
        protocol = WorkloadConfig().protocol
        refused = {
            r.value for r in spec.refusals if r.param == param.name and protocol in r.protocols
        }
        return param_values(param).filter(lambda value: value not in refused)
    if param.kind == "int":
        return st.integers(int(param.minimum or 0), int(param.maximum or 2**31))
    if param.kind == "float":
        return st.floats(param.minimum, param.maximum, **FINITE)
    if param.kind == "bool":
        return st.booleans()
    return st.sampled_from(param.choices)


@st.composite
def configs(draw: st.DrawFn) -> Config:
    spec = SPECS[draw(st.sampled_from(sorted(SPECS)))]
    swept_params = draw(st.lists(st.sampled_from(spec.params), max_size=2, unique=True))
    names = draw(
        st.lists(
            st.sampled_from(
                [
                    "initial_window_size",
                    "max_concurrent_streams",
                    "header_table_size",
                    "enable_push",
                ]
            ),
            min_size=1,
            max_size=3,
            unique=True,
        )
    )
    axes = tuple(
        (
            name,
            tuple(
                draw(
                    st.lists(
                        # A window of 0 is refused at load (it would stall every trial).
                        st.integers(
                            int(name == "initial_window_size"),
                            1 if name == "enable_push" else 2**31 - 1,
                        ),
                        min_size=1,
                        max_size=4,
                        unique=True,
                    )
                )
            ),
        )
        for name in names
    ) + tuple(
        (
            param.name,
            tuple(draw(st.lists(param_values(param, spec), min_size=1, max_size=3, unique=True))),
        )
        for param in swept_params
    )
    roles = draw(
        st.lists(st.sampled_from(["client", "server"]), min_size=1, max_size=2, unique=True)
    )
    inputs = draw(
        st.lists(st.integers(0, 7), min_size=len(roles), max_size=len(roles), unique=True)
    )
    source = draw(st.sampled_from(["serial", "virtual", "simavr"]))
    meter = MeterConfig(
        source=source,
        port=draw(SAFE) if source == "serial" else draw(st.none() | SAFE),
        baud=draw(st.sampled_from([115200, 250000, 500000, 1000000])),
        rate_hz=draw(st.sampled_from([100, 125, 1000, 3200, 10000])),
        channels=tuple(
            (role, channel) for role, channel in sorted(zip(roles, inputs, strict=True))
        ),
        sensor=draw(st.sampled_from(["5A", "20A", "30A"])),
        supply_v=draw(st.floats(0, 48, exclude_min=True, **FINITE)),
        calibration=draw(st.none() | PATHS),
    )
    config = Config(
        run=RunConfig(
            name=draw(SAFE.filter(lambda s: s[0].isalnum())),
            seed=draw(st.integers(0, 2**63 - 1)),
            repetitions=draw(st.integers(1, 1_000_000)),
            confidence=draw(st.floats(0, 1, exclude_min=True, exclude_max=True, **FINITE)),
            order=draw(st.sampled_from(["randomized-blocked", "sequential"])),
            idle_baseline_s=draw(st.floats(0.1, 3600, **FINITE)),  # 10 samples at 100 Hz
            retries=draw(st.integers(0, 100)),
            trial_timeout_s=draw(st.floats(0, 86400, exclude_min=True, **FINITE)),
        ),
        sweep=SweepConfig(axes=axes),
        workload=WorkloadConfig(
            kind=spec.kind,
            params=tuple((param.name, draw(param_values(param, spec))) for param in spec.params),
            connection_window=draw(st.none() | st.integers(1, 2**31 - 1)),
            window_update_policy=draw(st.sampled_from(["half", "every-frame", "exhausted"])),
        ),
        client=draw(nodes("client")),
        server=draw(nodes("server")),
        meter=meter,
        link=LinkConfig(
            rate_mbit=draw(st.none() | st.floats(0, 100_000, exclude_min=True, **FINITE)),
            loss_pct=draw(st.floats(0, 100, exclude_max=True, **FINITE)),
            delay_ms=draw(st.floats(0, 60_000, **FINITE)),
        ),
    )
    if spec.schedule is None:
        return config
    # A trial timeout the workload's own schedule outlasts is refused at load.
    longest_s = max(spec.schedule_s(dict(config.point(p).params)) for p in config.sweep.points())
    assume(longest_s + 1 <= 86400)
    timeout_s = max(config.run.trial_timeout_s, longest_s + 1)
    return replace(config, run=replace(config.run, trial_timeout_s=timeout_s))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs())
def test_to_dict_round_trips_through_overrides_and_through_a_file(config: Config) -> None:
    document = config.to_dict()
    assert json.loads(json.dumps(document)) == document
    assert load_config(None, as_overrides(document)) == config
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory, "c.toml")
        path.write_text(as_toml(document), encoding="utf-8")
        assert load_config(path) == config


KINDS: dict[str, st.SearchStrategy[Any]] = {
    "bool": st.booleans(),
    "int": st.integers(-(2**63), 2**63 - 1),
    "float": st.floats(allow_nan=False),
    # Printable ASCII: json.dumps then writes a valid TOML basic string.
    "str": st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=10).filter(
        lambda s: s != "none"
    ),
    "array": st.lists(st.integers(0, 9), max_size=3),
    "table": st.dictionaries(
        st.text("abxyz_", min_size=1, max_size=4), st.integers(0, 9), max_size=2
    ),
    "date": st.dates(),
}
NUMBER = {"int", "float"}
# Each leaf key and the TOML kinds it accepts; anything else must be refused, naming the key.
ACCEPTS: dict[str, set[str]] = {
    "run.name": {"str"},
    "run.seed": {"int"},
    "run.repetitions": {"int"},
    "run.confidence": NUMBER,
    "run.order": {"str"},
    "run.idle_baseline_s": NUMBER,
    "run.retries": {"int"},
    "run.trial_timeout_s": NUMBER,
    "run.agent": {"str"},
    "sweep": {"table"},
    "sweep.initial_window_size": {"array"},
    "workload.site_seed": {"int"},
    "workload.total_bytes": {"int"},
    "workload.connection_window": {"int"},
    "workload.window_update_policy": {"str"},
    "workload.unrepresentable_window": {"str"},
    "meter.source": {"str"},
    "meter.port": {"str"},
    "meter.baud": {"int"},
    "meter.rate_hz": {"int"},
    "meter.channels": {"table"},
    "meter.channels.client": {"int", "str"},
    "meter.sensor": {"str"},
    "meter.supply_v": NUMBER,
    "meter.calibration": {"str"},
    "link.rate_mbit": NUMBER,
    "link.loss_pct": NUMBER,
    "link.delay_ms": NUMBER,
    **{
        f"nodes.{role}.{key}": {"str"}
        for role in ("client", "server")
        for key in (
            "host",
            "user",
            "key",
            "known_hosts",
            "python",
            "deploy_dir",
            "address",
            "engine",
        )
    },
    **{f"nodes.{role}.{key}": {"int"} for role in ("client", "server") for key in ("port", "cpu")},
    "nodes.server.http_port": {"int"},
}


@st.composite
def wrong_values(draw: st.DrawFn) -> tuple[str, str]:
    key = draw(st.sampled_from(sorted(ACCEPTS)))
    kind = draw(st.sampled_from(sorted(set(KINDS) - ACCEPTS[key])))
    return key, toml_value(draw(KINDS[kind]))


@settings(max_examples=150, deadline=None)
@given(wrong_values())
def test_a_value_of_the_wrong_kind_is_refused_naming_its_key(case: tuple[str, str]) -> None:
    key, literal = case
    message = error_of(None, (f"{key}={literal}",))
    assert message.startswith(f"--set: {key}")
    table, _, leaf = key.rpartition(".")
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory, "c.toml")
        path.write_text(f"[{table}]\n{leaf} = {literal}\n" if table else f"{key} = {literal}\n")
        assert error_of(path).startswith(f"{path}: {key}")


def test_the_client_marker_is_a_gpio_line_and_the_clients_only() -> None:
    assert load_config(None, ["nodes.client.marker=gpio:gpiochip0:17"]).client.marker == (
        "gpio:gpiochip0:17"
    )
    assert load_config(None, []).client.marker is None
    for override, words in (
        ("nodes.client.marker=gpio17", "is not gpio:CHIP:LINE"),
        ("nodes.server.marker=gpio:gpiochip0:17", "the marker is the client's"),
    ):
        with pytest.raises(ConfigError) as raised:
            load_config(None, [override])
        assert words in str(raised.value)


# ---------------------------------------------------------------- INA226 channels (issue 24)


def test_an_ina226_channel_is_its_address_with_the_ina226_bit_and_round_trips() -> None:
    m = config_channels
    config = load_config(CONFIGS / "local-ina226.toml")
    assert config.meter.source == "simavr" and config.meter.shunt_ohm == 0.02
    ((role, channel),) = config.meter.channels
    assert (role, channel) == ("client", m.INA226_CHANNEL | 0x40)
    assert (m.is_i2c(channel), m.is_ina226(channel), m.is_ina219(channel)) == (True, True, False)
    assert (m.channel_kind(channel), m.i2c_address(channel), m.channel_source(channel)) == (
        "ina226",
        0x40,
        0,
    )
    for label in ("A3", "INA219@0x41", "INA226@0x43"):
        path = Path(tempfile.mkdtemp()) / "c.toml"
        path.write_text(f'[meter]\nrate_hz = 800\n[meter.channels]\nclient = "{label}"\n')
        assert m.channel_label(dict(load_config(path).meter.channels)["client"]) == label
    assert load_config(None, ['meter.channels.client="ina226@65"']).meter.channels == (
        ("client", m.INA226_CHANNEL | 0x41),
    )
    # the firmware's SET_I2C_CHANNELS mask: chips in bits 0..3, INA226s also in bits 4..7
    assert m.i2c_mask([0, 0x41, m.INA226_CHANNEL | 0x42]) == 0b0100_0110
    json.dumps(config.to_dict())  # the manifest's copy


def test_the_ina226_rate_limit_comes_from_its_fastest_conversion() -> None:
    channel = ['meter.channels.client="INA226@0x40"']
    assert load_config(None, [*channel, "meter.rate_hz=2500"]).meter.rate_hz == 2500
    assert load_config(None, channel).meter.rate_hz == 1000  # faster than an INA219 allows
    # 3200 Hz has a configuration (2 x 140 us); the board's I2C budget refuses it (its ACK)
    assert load_config(None, [*channel, "meter.rate_hz=3200"]).meter.rate_hz == 3200
    assert config_channels.INA226_RATE_MAX_HZ == INA226_RATE_MAX_HZ  # the numpy-free copy


INA226_KEY_ERRORS = [
    (
        '[meter.channels]\nclient = "INA226@0x44"',
        "meter.channels.client: INA226 address 0x44 is outside 0x40..0x43 "
        "(A1 = GND, A0 = GND..SCL)",
    ),
    (
        '[meter]\nrate_hz = 4000\n[meter.channels]\nclient = "INA226@0x40"',
        "meter.rate_hz: 4000 Hz is faster than an INA226 converts (meter.channels.client = "
        "INA226@0x40): at most 3214 Hz, e.g. 2500",
    ),
    (
        '[meter.channels]\nclient = "INA226@0x40"\nserver = "INA219@0x40"',
        "meter.channels.server: INA219@0x40 shares its modelled source with the other node's "
        "channel (An, INA219@0x40+n and INA226@0x40+n follow the same source): use another "
        "input or address",
    ),
    (
        '[meter]\nrate_hz = 800\n[meter.channels]\nclient = "INA226@0x41"\nserver = "A1"',
        "meter.channels.server: A1 shares its modelled source with the other node's "
        "channel (An, INA219@0x40+n and INA226@0x40+n follow the same source): use another "
        "input or address",
    ),
]


@pytest.mark.parametrize(("text", "expected"), INA226_KEY_ERRORS)
def test_ina226_channel_errors_are_one_line_naming_file_and_key(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = write(tmp_path, text + "\n")
    assert error_of(path) == f"{path}: {expected}"


# ---------------------------------------------------------------- run.agent, the idle baseline


def test_a_warm_agent_loads_and_fresh_is_the_default() -> None:
    assert load_config(None).run.agent == "fresh"
    assert load_config(None, ("run.agent=warm",)).run.agent == "warm"


@pytest.mark.parametrize(
    ("text", "overrides", "expected"),
    [
        (
            '[run]\nagent = "warm"\n[energy]\nwindow = "process"',
            (),
            '{path}: run.agent: "warm" keeps one agent process for the sweep, so energy.window = '
            '"process" (each trial process\'s whole life) would measure no process: use "fresh" '
            'with it, or energy.window = "fetch"',
        ),
        (
            "[run]\nidle_baseline_s = 0.005",
            (),
            "{path}: run.idle_baseline_s: 0.005 s at meter.rate_hz = 1000 is 5 samples; the idle "
            "baseline needs 10 at least (0.01 s)",
        ),
        (
            "",
            ("run.idle_baseline_s=0",),
            "--set: run.idle_baseline_s: 0 s at meter.rate_hz = 1000 is 0 samples; the idle "
            "baseline needs 10 at least (0.01 s)",
        ),
    ],
)
def test_what_a_warm_agent_or_a_short_baseline_cannot_measure_is_one_line(
    tmp_path: Path, text: str, overrides: tuple[str, ...], expected: str
) -> None:
    path = write(tmp_path, text + "\n")
    assert error_of(path, overrides) == expected.format(path=path)
