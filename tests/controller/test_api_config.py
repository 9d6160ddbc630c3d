"""The api workload in the controller: configs/api.toml loads, `server_engine` is a sweep axis
(a server stack per trial, refused where the workload cannot run it), hypercorn only serves,
and the set-up builds one database per `records` on the server node."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest

from controller.config.load import load_config
from controller.errors import ConfigError
from controller.nodes.agent import AgentNode, ServerMount, ServerProcess
from controller.nodes.node import Node
from controller.nodes.records import BackgroundProcess
from controller.nodes.transport import LocalTransport
from controller.sweep.agent_pair import AgentPair
from controller.workloads import Served, preparer

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def test_the_api_config_sweeps_users_stacks_and_data_layers() -> None:
    config = load_config(CONFIGS / "api.toml")
    axes = dict(config.sweep.axes)
    assert axes["users"] == (16, 32, 64, 128)
    assert axes["server_engine"] == ("builtin", "hypercorn")
    assert axes["data_layer"] == ("sql", "orm")
    points = [config.point(axes) for axes in config.sweep.points()]
    assert {(p.server_engine, p.param("data_layer")) for p in points} == {
        ("builtin", "sql"),
        ("builtin", "orm"),
        ("hypercorn", "sql"),
        ("hypercorn", "orm"),
    }


def test_without_the_axis_a_trial_runs_the_nodes_engine(tmp_path: Path) -> None:
    config = load_config(
        CONFIGS / "api.toml", ["sweep.server_engine=none", 'nodes.server.engine="hypercorn"']
    )
    assert config.server.engine == "hypercorn"
    assert {config.point(a).server_engine for a in config.sweep.points()} == {None}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            [
                'workload.kind="page"',
                "sweep.users=none",
                "sweep.data_layer=none",
                'sweep.server_engine=["builtin", "hypercorn"]',
            ],
            "sweep.server_engine[1]: workload 'page' runs on 'builtin' or 'nghttp2', "
            "not 'hypercorn'",
        ),
        (
            ['nodes.client.engine="hypercorn"'],
            'nodes.client.engine: \'hypercorn\' only serves; a client runs "builtin" or "nghttp2"',
        ),
        (
            ['sweep.server_engine=["builtin", "tomcat"]'],
            "sweep.server_engine[1]: expected one of",
        ),
    ],
)
def test_an_engine_that_cannot_run_is_refused_naming_the_key(
    overrides: list[str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_config(CONFIGS / "api.toml", overrides)


def test_the_set_up_builds_one_database_per_records(tmp_path: Path) -> None:
    server = AgentNode(Node(LocalTransport("server")), sys.executable, str(tmp_path / "state"))
    prepare = preparer("api", server, str(tmp_path / "state"), client_shares_host=True)
    small, again, large = prepare({"records": 3}), prepare({"records": 3}), prepare({"records": 9})
    assert small is again and small.root != large.root
    for served, records in ((small, 3), (large, 9)):
        assert served.root is not None
        connection = sqlite3.connect(served.root)
        assert connection.execute("SELECT count(*) FROM orders").fetchone() == (records,)
        connection.close()


class EngineRecordingNode:
    """The parts of `AgentNode` a pair's server calls, recording each start's engine."""

    def __init__(self) -> None:
        self.engines: list[str | None] = []
        self.running = False

    def stop_server(self, grace_s: float = 0) -> str:
        self.running = False
        return "terminated"

    def server_pid(self) -> int | None:
        return 7 if self.running else None

    def start_server(
        self, *, mount: ServerMount, engine: str | None = None, **_: object
    ) -> ServerProcess:
        self.engines.append(engine)
        self.running = True
        return ServerProcess(BackgroundProcess(7, "server.pid", "server.log"), 8443, mount)


def test_a_swept_server_engine_restarts_the_server_on_that_engine() -> None:
    config = load_config(CONFIGS / "api.toml")
    server = EngineRecordingNode()
    pair = AgentPair(
        config,
        EngineRecordingNode(),
        server,
        prepare=lambda _setup: Served(root="/srv/inventory.sqlite"),
        marker=None,
        client_offset_ns=0,
        facts={},
    )
    base = {"users": 16, "data_layer": "sql", "max_concurrent_streams": 128}
    for engine in ("builtin", "builtin", "hypercorn", "hypercorn", "builtin"):
        pair.ensure_server(config.point((*base.items(), ("server_engine", engine))))
    assert server.engines == ["builtin", "hypercorn", "builtin"]


def test_a_setting_hypercorn_cannot_announce_is_refused_at_load() -> None:
    with pytest.raises(ConfigError, match=r"sweep.initial_window_size: hypercorn has no option"):
        load_config(CONFIGS / "api.toml", ["sweep.initial_window_size=[4096, 65535]"])
    swept_h2_only = ['sweep.server_engine=["builtin"]', "sweep.initial_window_size=[4096, 65535]"]
    assert load_config(CONFIGS / "api.toml", swept_h2_only).sweep.names[-1] == (
        "initial_window_size"
    )
