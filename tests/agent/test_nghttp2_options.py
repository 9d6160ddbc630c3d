"""Command lines and announced SETTINGS of nghttp and nghttpd, from the agent's options."""

from __future__ import annotations

import pytest

from agent.engines.nghttp2.options import NghttpdOptions, NghttpOptions
from agent.errors import UsageError


def test_the_study_command_with_the_trial_header_and_har() -> None:
    options = NghttpOptions.create({"initial_window_size": 4096}, 4096, "map")
    argv = options.argv("/usr/bin/nghttp", "http://s:8443/", "t3", "/tmp/x.har")
    assert argv == [
        "/usr/bin/nghttp", "-n", "-a", "-s", "--no-dep", "--no-push", "-w", "12", "-W", "12",
        "-H", "h2iot-trial-id: t3", "-r", "/tmp/x.har", "http://s:8443/",
    ]  # fmt: skip
    assert options.announced() == {
        "max_concurrent_streams": 100,
        "initial_window_size": 4095,
        "enable_push": 0,
    }
    flow = options.flow_control()
    assert flow["initial_window_size"] == 4095
    assert flow["initial_window_size_requested"] == 4096
    assert flow["connection_window_on_wire"] == 4095
    assert flow["mapped"] is True
    assert flow["window_update_policy"] == "half"


def test_other_settings_nghttp_can_announce() -> None:
    options = NghttpOptions.create(
        {"header_table_size": 0, "max_concurrent_streams": 8, "enable_push": 1}, 2**20 - 1, "reject"
    )
    argv = options.argv("nghttp", "http://s/", "t", "h")
    assert "--no-push" not in argv
    assert argv[argv.index("-c") + 1] == "0"
    assert argv[argv.index("--max-concurrent-streams") + 1] == "8"
    assert argv[argv.index("-W") + 1] == "20"
    assert options.announced() == {
        "max_concurrent_streams": 8,
        "initial_window_size": 65535,
        "header_table_size": 0,
    }
    assert options.flow_control()["mapped"] is False


@pytest.mark.parametrize("name", ["max_frame_size", "max_header_list_size"])
def test_settings_nghttp_cannot_announce_are_refused(name: str) -> None:
    with pytest.raises(UsageError, match=f"setting {name}: nghttp has no option"):
        NghttpOptions.create({name: 16384}, 65535, "map")


def test_reject_names_the_option() -> None:
    with pytest.raises(UsageError, match="--connection-window 1000 is not"):
        NghttpOptions.create({}, 1000, "reject")


def test_nghttpd_command_and_settings() -> None:
    options = NghttpdOptions.create(
        {"initial_window_size": 256, "max_concurrent_streams": 4, "header_table_size": 4096}, "map"
    )
    assert options.argv("nghttpd", "/site", "0.0.0.0", 8443, None) == [
        "nghttpd", "-a", "0.0.0.0", "-d", "/site", "-w", "8", "-m", "4", "-c", "4096",
        "--no-tls", "8443",
    ]  # fmt: skip
    assert options.argv("nghttpd", "/site", "::", 0, ("c.pem", "k.pem"))[-3:] == [
        "0",
        "k.pem",
        "c.pem",
    ]
    assert options.announced() == {
        "max_concurrent_streams": 4,
        "header_table_size": 4096,
        "initial_window_size": 255,
    }
    assert NghttpdOptions.create({}, "map").announced() == {"max_concurrent_streams": 100}


@pytest.mark.parametrize("name", ["max_frame_size", "max_header_list_size", "enable_push"])
def test_settings_nghttpd_cannot_announce_are_refused(name: str) -> None:
    with pytest.raises(UsageError, match=f"setting {name}: nghttpd has no option"):
        NghttpdOptions.create({name: 16384}, "map")
