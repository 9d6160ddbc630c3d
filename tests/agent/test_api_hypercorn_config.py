"""The hypercorn engine's settings: the three it can announce go to its Config, any other is
refused naming it (never silently ignored), and a trial's 1000th request does not end it."""

from __future__ import annotations

import pytest

pytest.importorskip("hypercorn", reason="the api extra (hypercorn) is not installed")

from agent.engines.hypercorn.server import announced, hypercorn_config
from agent.errors import UsageError


def test_the_settings_hypercorn_announces_reach_its_config() -> None:
    config = hypercorn_config(
        {"max_concurrent_streams": 128, "max_header_list_size": 8192, "max_frame_size": 32768},
        None,
    )
    assert announced(config) == {
        "max_concurrent_streams": 128,
        "max_header_list_size": 8192,
        "max_frame_size": 32768,
    }
    assert config.keep_alive_max_requests > 10**9
    assert config.accesslog is None


@pytest.mark.parametrize("name", ["initial_window_size", "header_table_size", "enable_push"])
def test_a_setting_hypercorn_cannot_announce_is_refused(name: str) -> None:
    with pytest.raises(UsageError, match=f"setting {name}: hypercorn has no option"):
        hypercorn_config({name: 1}, None)
