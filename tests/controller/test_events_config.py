"""`[run] events` and `events_max_bytes`: off by default, refused where no trace can be had."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.qlog import DEFAULT_MAX_BYTES
from controller.config import load_config
from controller.errors import ConfigError

LOCAL = Path(__file__).resolve().parents[2] / "configs" / "local.toml"


def test_traces_are_off_unless_asked() -> None:
    config = load_config(LOCAL)
    assert (config.run.events, config.run.events_max_bytes) == (False, DEFAULT_MAX_BYTES)
    asked = load_config(LOCAL, ["run.events=true", "run.events_max_bytes=100000"])
    assert (asked.run.events, asked.run.events_max_bytes) == (True, 100_000)


def test_a_limit_below_the_minimum_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError, match=r"run\.events_max_bytes") as refused:
        load_config(LOCAL, ["run.events=true", "run.events_max_bytes=100"])
    assert "\n" not in str(refused.value)


def test_several_client_nodes_are_refused(tmp_path: Path) -> None:
    config = tmp_path / "clients.toml"
    config.write_text(
        "[run]\nevents = true\n"
        '[[nodes.clients]]\nhost = "local"\n[[nodes.clients]]\nhost = "local"\n'
    )
    with pytest.raises(ConfigError, match=r"run\.events: traces come from one client node"):
        load_config(config)
