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


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ['nodes.client.engine="nghttp2"'],
            "--set: run.events: the client's engine nghttp2 writes no event trace over h2c yet",
        ),
        (["run.events_max_bytes=100"], "run.events_max_bytes"),
    ],
)
def test_a_trace_that_cannot_be_had_is_refused_in_one_line(
    overrides: list[str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as refused:
        load_config(LOCAL, ["run.events=true", *overrides])
    assert "\n" not in str(refused.value)
